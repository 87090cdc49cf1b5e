# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Every NCCL log format, 2.3 to 2.29 (issue 25 item 8): each real log in tests/fixtures/nccl_logs
(transcribed from public issues, tests/fixtures/README.md) yields what its row of
tests/fixtures/nccl_logs/expected.json says: net, devices, GDRDMA, channels crossing the network,
warnings and the rest."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core.transport import describe, net_devices_used, parse_nccl_log

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT / "tests" / "fixtures" / "nccl_logs"
TABLE = json.loads((LOGS / "expected.json").read_text(encoding="utf-8"))
README = (ROOT / "tests" / "fixtures" / "README.md").read_text(encoding="utf-8")
# What the issue asks the fixture set to cover (the names used in expected.json's "covers").
CATEGORIES = {
    "ring-2.4": "Ring lines without bus ids (NCCL 2.4)",
    "ring-2.5": "Ring lines with bus ids (2.5)",
    "channel-2.6": "Channel lines without a connection index (2.6-2.11)",
    "channel": "Channel NN/C lines (2.12+)",
    "net-ib": "NET/IB",
    "net-socket": "NET/Socket",
    "gdrdma": "GDRDMA on the NET channels",
    "pxn-proxy": "PXN's proxy rank on a NET channel",
    "ibext": "the IBext plugin (NET/IBext, IBext_v6, IBext_v8)",
    "aws-ofi": "the AWS OFI plugin (NET/AWS Libfabric, NET/OFI)",
    "roce": "RoCE devices",
    "shm": "SHM",
    "p2p": "P2P",
    "cumem": "P2P/CUMEM",
    "nvls": "NVLS",
    "collnet": "a CollNet plugin",
    "assigned-plugin": "Assigned NET plugin",
    "gin": "a GIN plugin",
    "interleaved": "interleaved multi-rank logs",
    "warn": "WARN lines",
}
OPTIONAL = (
    "log_ranks",
    "ranks",
    "nvls_channels",
    "nvls_available",
    "net_plugin",
    "collnet_plugin",
    "assigned_plugins",
    "net_failed",
    "ib_no_device",
)


def parse(name: str) -> dict[str, Any]:
    return parse_nccl_log((LOGS / name).read_text(encoding="utf-8"), name)


def yields(parsed: dict[str, Any]) -> dict[str, Any]:
    """A parse in the table's terms: the devices NCCL listed (IB, else its sockets)."""
    devices = [d["name"] for d in parsed["ib_devices"]] or [
        d["ifname"] for d in parsed["socket_devices"]
    ]
    out = {
        "nccl_version": parsed["nccl_version"],
        "net": parsed["net"],
        "net_kind": parsed["net_kind"],
        "devices": devices,
        "devices_used": net_devices_used(parsed),
        "gdrdma": parsed["gdrdma"],
        "net_channels": parsed["net_channels"],
        "gdrdma_channels": parsed["gdrdma_channels"],
        "transports": parsed["transports"],
        "warnings": len(parsed["warnings"]),
    }
    for key in OPTIONAL:
        if parsed[key] or (key.startswith("nvls") and parsed[key] is not None):
            out[key] = parsed[key]
    return out


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.log")))
def test_every_log_yields_its_row(name: str) -> None:
    assert name in TABLE, f"{name} has no row in tests/fixtures/nccl_logs/expected.json"
    assert yields(parse(name)) == TABLE[name]["yields"]


@pytest.mark.parametrize("name", sorted(TABLE))
def test_every_row_is_sourced(name: str) -> None:
    row = TABLE[name]
    assert (LOGS / name).is_file()
    if row["status"] == "recorded":  # on a GPU machine: the machine, the script and the date
        assert name.startswith("recorded-")
        assert re.search(r"tests/device/record_(gpu|h100)\.sh", row["source"])
        assert re.search(r"\b20\d\d-\d\d-\d\d\b", row["source"])
    else:
        assert row["status"] == "transcribed"
        assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+", row["source"])
    assert row["nccl"] and set(row["covers"]) <= set(CATEGORIES)
    assert f"`{name}`" in README, f"tests/fixtures/README.md does not list {name}"
    if row["yields"]["nccl_version"]:
        assert row["yields"]["nccl_version"] in row["nccl"]


def test_the_set_covers_every_format_the_issue_names() -> None:
    assert len(TABLE) >= 30
    covered = {c for row in TABLE.values() for c in row["covers"]}
    assert set(CATEGORIES) - covered == set()
    versions = {row["yields"]["nccl_version"] for row in TABLE.values()} - {None}
    assert {v.split("+")[0] for v in versions} >= {"2.3.7", "2.4.7", "2.4.8", "2.29.2"}


def test_2_4_ring_lines_without_bus_ids_cross_the_network() -> None:
    # The issue's case: "Ring 00 : 6 -> 2 [receive] via NET/IB/0" was read as "no channel
    # crossed the network".
    out = parse("ring-2.4.7-ib-no-gdrdma.log")
    first = next(c for c in out["channels"] if c["transport"] == "NET/IB")
    assert (first["channel"], first["src"], first["dst"], first["direction"]) == (
        0,
        6,
        2,
        "receive",
    )
    assert describe(out) == "NET/IB #0 without GDRDMA; inside the node P2P/IPC"


def test_old_logs_name_the_line_their_network_comes_from() -> None:
    out = parse("socket-2.4.8-no-libibverbs-warn.log")
    assert (out["net"], out["net_failed"]) == ("Socket", ["IB"])
    assert out["net_line"] == (
        "aliyun:82174:82321 [0] NCCL INFO NET/Socket : Using [0]eth0:192.168.0.172<0>"
    )
    ib = parse("init-2.4.7-ib-and-socket-two-hosts.log")
    assert ib["net"] == "IB" and "NET/IB : Using [0]mlx5_0:1/IB" in ib["net_line"]


def test_entries_joined_in_one_line_are_read_one_by_one() -> None:
    text = (LOGS / "pre-2.4-interleaved-mangled-lines.log").read_text(encoding="utf-8")
    [joined] = [line for line in text.splitlines() if line.count("NCCL INFO") == 2]
    out = parse_nccl_log(joined)
    assert out["pids"] == [40507, 40515] and out["info_lines"] == 2
    assert out["net_line"] == "learnfair062:40515:40515 [6] NCCL INFO Using internal Network IB"
    assert parse("plugin-ibext-gdrdma-joined-lines.log")["channels"][1]["line"] == (
        "VM-17-82-centos:11980:12549 [2] NCCL INFO Channel 03/0 : 2[2] -> 10[2] [send] via "
        "NET/IBext/2/GDRDMA"
    )


def test_srun_label_prefix_gives_the_ranks() -> None:
    # Derived: srun -l's "R: " put before each line of a real log (no public srun -l NCCL log
    # was found); the parse is the same, and the launcher's ranks are read.
    text = (LOGS / "ring-2.4.7-ib-no-gdrdma.log").read_text(encoding="utf-8")
    labelled = "".join(f"{i % 8}: {line}\n" for i, line in enumerate(text.splitlines()))
    out = parse_nccl_log(labelled)
    assert out["log_ranks"] == list(range(8))
    assert yields(out) == {
        **TABLE["ring-2.4.7-ib-no-gdrdma.log"]["yields"],
        "log_ranks": out["log_ranks"],
    }


def test_collnet_channels_from_nccls_format_string() -> None:
    # No public log with CollNet channel lines was found: these lines are written from
    # src/transport/coll_net.cc's "CollNet %02d/%1d : %d [send] via COLLNET/%s/%d%s%s" (and
    # 2.6's "Coll %02d : %d [send] via COLLNET/%s/%d%s").
    out = parse_nccl_log(
        "h:1:2 [0] NCCL INFO CollNet 00/1 : 0 [send] via COLLNET/SHARP/0/GDRDMA\n"
        "h:1:2 [0] NCCL INFO Coll 01 : 0 [receive] via COLLNET/SHARP/1\n"
    )
    assert out["collnet_channels"] == 2 and out["net_channels"] == 0
    assert [c["device"] for c in out["channels"]] == [0, 1]
    assert describe(out) == "CollNet COLLNET/SHARP on 2 channels"
