# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/transport.py on NCCL logs quoted in public issues (fixtures README)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nccl_preflight.core.transport import (
    compress_names,
    describe,
    net_kind,
    parse_nccl_log,
)

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT / "tests" / "fixtures" / "nccl_logs"


def parse(name: str) -> dict:
    return parse_nccl_log((LOGS / name).read_text(encoding="utf-8"), name)


def test_ib_with_gdrdma_every_channel():
    out = parse("ib-gdrdma-a100.log")
    assert out["net"] == "IB" and out["net_kind"] == "ib"
    assert out["gdrdma"] is True
    assert out["net_channels"] == 12 == out["gdrdma_channels"]
    assert out["transports"] == ["NET/IB"]
    first = out["channels"][0]
    assert (first["channel"], first["src"], first["dst"], first["direction"]) == (
        1,
        2,
        0,
        "receive",
    )
    assert first["device"] == 5 and first["via"] == "NET/IB/5/GDRDMA"
    assert out["hosts"] == ["10-90-43-152"] and out["pids"] == [120890]


def test_ib_gdrdma_and_p2p_cumem_inside_the_node():
    out = parse("ib-gdrdma-p2p-cumem-h20.log")
    assert out["transports"] == ["NET/IB", "P2P/CUMEM"]
    assert out["gdrdma"] is True
    assert describe(out) == "NET/IB #2, #3 with GDRDMA; inside the node P2P/CUMEM"


def test_one_side_without_gdrdma_is_not_gdrdma():
    # NVIDIA/nccl#897: nvidia-peermem missing on one node only.
    out = parse("ib-one-node-without-gdrdma.log")
    assert out["gdrdma"] is False
    assert (out["net_channels"], out["gdrdma_channels"]) == (2, 1)
    assert "with GDRDMA on 1 of 2 channels" in describe(out)


def test_old_nccl_without_using_network_line_is_ib_from_its_devices():
    out = parse("ib-no-gdrdma-peermem-missing.log")
    assert out["nccl_version"] == "2.5.6+cuda10.0"
    assert out["net"] == "IB"
    assert out["ib_devices"] == [{"index": 0, "name": "mlx5_0", "port": 1, "link_layer": "IB"}]
    assert out["bootstrap_interface"] == "ib0"
    assert out["env"] == {"NCCL_IB_DISABLE": "0"}


def test_socket_fallback_with_ib_disabled_by_environment():
    out = parse("socket-lo-ib-disabled.log")
    assert out["net"] == "Socket" and out["net_kind"] == "socket"
    assert out["socket_devices"] == [{"index": 0, "ifname": "lo", "address": "127.0.0.1"}]
    assert out["bootstrap_interface"] == "lo"  # no Bootstrap line: NET/Socket's interface
    assert out["env"]["NCCL_IB_DISABLE"] == "1"
    assert out["gdrdma"] is False


def test_socket_when_ib_finds_no_device():
    out = parse("socket-no-ib-device.log")
    assert out["nccl_version"] == "2.18.5+cuda11.8"
    assert out["ib_no_device"] is True
    assert out["bootstrap"] == {"ifname": "eno1", "address": "192.168.223.11"}
    assert "NET/IB found no device" in describe(out)


def test_socket_channels_and_shm():
    out = parse("socket-channels-shm.log")
    assert out["transports"] == ["NET/Socket", "SHM"]
    assert out["net"] == "Socket"
    assert out["nvls_channels"] == 0
    shm = [c for c in out["channels"] if c["transport"] == "SHM"]
    assert len(shm) == 2 and shm[0]["conn"] is None and shm[0]["channel"] == 0


def test_roce_devices_and_bootstrap():
    out = parse("roce-dgxh100.log")
    assert out["nccl_version"] == "2.19.3+cuda12.3"
    assert out["net"] == "IB"
    assert [(d["name"], d["port"], d["link_layer"]) for d in out["ib_devices"]] == [
        ("mlx5_10", 1, "RoCE"),
        ("mlx5_11", 1, "RoCE"),
    ]
    assert out["bootstrap_interface"] == "enp220s0np0"
    assert out["oob"] == {"ifname": "enp220s0np0", "address": "11.1.128.136"}


def test_net_plugin_ibext_with_prefix_stripped():
    out = parse("plugin-ibext-sharp.log")
    assert out["nccl_version"] == "2.24.3+cuda12.2"
    assert out["net"] == "IBext_v8" and out["net_kind"] == "ib"
    assert out["net_plugin"] == "NCCL RDMA Plugin v8"
    assert len(out["ib_devices"]) == 8 and out["ib_devices"][7]["name"] == "ibp7"
    assert out["bootstrap_interface"] == "eth0"
    assert out["nvls_available"] is True
    assert out["ranks"] == [0]


def test_net_plugin_ibext_channels_without_gdrdma():
    out = parse("plugin-ibext-no-gdrdma.log")
    assert out["transports"] == ["NET/IBext_v8"]
    assert out["gdrdma"] is False
    assert "without GDRDMA" in describe(out)


def test_aws_ofi_plugin_from_channels():
    out = parse("plugin-aws-ofi.log")
    assert out["net"] == "AWS Libfabric" and out["net_kind"] == "plugin"
    assert out["gdrdma"] is True
    assert out["transports"] == ["NET/AWS Libfabric", "P2P/IPC"]


def test_aws_ofi_shared_proxy_channels():
    out = parse("plugin-aws-ofi-shared.log")
    assert out["net_plugin"] == "aws-ofi-nccl"
    assert [c["device"] for c in out["channels"]] == [1, 1]
    assert out["gdrdma"] is True


def test_intra_node_p2p_cumem_and_nvls_support():
    out = parse("intra-p2p-cumem-nvls.log")
    assert out["transports"] == ["P2P/CUMEM"]
    assert out["nvls_available"] is True
    assert out["net"] is None


def test_intra_node_shm_and_ranks():
    out = parse("intra-shm-no-nvls.log")
    assert out["transports"] == ["SHM"]
    assert out["nvls_available"] is False
    assert out["ranks"] == [4, 5]


def test_intra_node_p2p_ipc_beside_socket():
    out = parse("intra-p2p-ipc-socket-warn.log")
    assert out["transports"] == ["NET/Socket", "P2P/IPC"]
    assert out["net"] == "Socket"


def test_p2p_direct_pointer_and_zero_nvls_channels():
    out = parse("intra-p2p-direct-nvls-zero.log")
    assert out["transports"] == ["P2P/direct"]
    assert out["nvls_channels"] == 0 and "NVLS" not in out["transports"]


def test_nvls_channels_count_adds_nvls():
    out = parse_nccl_log(
        "h:1:2 [0] NCCL INFO 32 coll channels, 32 collnet channels, 16 nvls channels, "
        "32 p2p channels, 32 p2p channels per peer\n"
    )
    assert out["nvls_channels"] == 16 and out["transports"] == ["NVLS"]


def test_warn_lines_are_kept_whole():
    out = parse("warn-ibv-create-cq-enomem.log")
    assert len(out["warnings"]) == 4
    assert out["warnings"][0] == (
        "msm-h200-2:4016:4653 [7] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_cq failed "
        "with error Cannot allocate memory"
    )
    assert "Failed to execute operation Connect from rank 10" in out["warnings"][3]


def test_warn_from_a_net_plugin():
    out = parse("warn-ofi-register-memory.log")
    assert out["warnings"] and "NET/OFI Unable to register memory" in out["warnings"][0]
    assert out["hosts"] == ["ip-10-0-87-143"]


def test_empty_log():
    out = parse_nccl_log("", "x")
    assert out["net"] is None and out["transports"] == [] and out["gdrdma"] is False
    assert describe(out) == "no NCCL transport line in the log"


@pytest.mark.parametrize(
    ("names", "text"),
    [
        (["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"], "mlx5_0..3"),
        (["mlx5_0", "mlx5_2"], "mlx5_0, mlx5_2"),
        (["mlx5_0", "mlx5_1", "mlx5_3"], "mlx5_0, mlx5_1, mlx5_3"),
    ],
)
def test_compress_names(names, text):
    assert compress_names(names) == text


def test_device_names_from_the_net_ib_line():
    text = (
        "n1:5:6 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB "
        "[3]mlx5_3:1/IB [RO]; OOB ib0:10.0.0.1<0>\n"
        + "".join(
            f"n1:5:6 [0] NCCL INFO Channel 0{d}/0 : 0[0] -> 8[0] [send] via NET/IB/{d}/GDRDMA\n"
            for d in range(4)
        )
        + "n1:5:6 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
    )
    assert describe(parse_nccl_log(text)) == (
        "NET/IB mlx5_0..3 with GDRDMA; inside the node P2P/CUMEM"
    )


def test_net_kind():
    assert [net_kind(n) for n in ("IB", "IBext_v8", "Socket", "AWS Libfabric", None)] == [
        "ib",
        "ib",
        "socket",
        "plugin",
        None,
    ]


def test_command_prints_one_json_object_per_file():
    files = [LOGS / "roce-dgxh100.log", LOGS / "socket-lo-ib-disabled.log"]
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "src" / "nccl_preflight" / "core" / "transport.py"),
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    docs = [json.loads(line) for line in run.stdout.splitlines()]
    assert [d["net"] for d in docs] == ["IB", "Socket"]
    for doc in docs:
        assert {"nccl_version", "net", "ib_devices", "gdrdma", "transports", "warnings"} <= set(doc)


def test_command_reports_an_unreadable_file(tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "src" / "nccl_preflight" / "core" / "transport.py"),
            str(tmp_path / "no"),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1
    assert "error" in json.loads(run.stdout)
