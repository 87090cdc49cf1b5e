# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The expected busbw from the RDMA port rate x the NICs NCCL used (src/nccl_preflight/
core/rdma_expect.py, core/preflight/fabric_checks.py nccl_rdma_plan), on the transcribed sysfs
trees and NCCL logs of tests/fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core import bandwidth_expectation as nccl_expect
from nccl_preflight.core import junit as nccl_junit
from nccl_preflight.core import rdma_expect as nccl_rdma_expect
from nccl_preflight.core.preflight import fabric_checks as fc
from nccl_preflight.core.rdma_expect import cluster_figure, nics_used, rdma_figure
from nccl_preflight.core.transport import parse_nccl_log
from nccl_preflight.node.fabric_facts import read_rdma

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
MIB = 1024 * 1024


def facts(tree: str) -> dict[str, Any]:
    rdma, reason = read_rdma(str(FIXTURES / "sysfs" / tree / "sys"))
    return {"fabric": {"rdma": rdma, "rdma_reason": reason, "nccl_config": {"effective": {}}}}


def log(name: str) -> dict[str, Any]:
    path = FIXTURES / "nccl_logs" / name
    return parse_nccl_log(path.read_text(encoding="utf-8"), name)


# Written from NCCL's format string (src/transport/net_ib/init.cc "NET/IB : Using%s; OOB %s"),
# with the devices, OOB interface and address of the DGX Spark source of sysfs/spark/ (its PR
# says NCCL used rocep1s0f1 and roceP2p1s0f1); no excerpt of that log is transcribed.
SPARK_LINE = (
    "spark-1:2310:2310 [0] NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE "
    "[1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:10.100.216.2<0>"
)


def test_the_nics_used_come_from_the_using_line_or_the_channels() -> None:
    assert nics_used([log("roce-dgxh100.log")]) == (["mlx5_10", "mlx5_11"], [])
    assert nics_used([log("ib-no-gdrdma-peermem-missing.log")]) == (["mlx5_0"], [])
    # Channel lines only: device indexes, no names.
    assert nics_used([log("ib-gdrdma-a100.log")]) == ([], [0, 2, 4, 5])
    # Sockets: no NET/IB device at all.
    assert nics_used([log("socket-channels-shm.log")]) == ([], [])
    assert nics_used([parse_nccl_log(SPARK_LINE, "spark")]) == (["rocep1s0f1", "roceP2p1s0f1"], [])


def test_the_plan_keeps_the_active_ports_and_what_nccl_ib_hca_selects() -> None:
    assert fc.nccl_rdma_plan(facts("ib-ndr")) == {
        "ports": [
            {
                "device": "mlx5_5",
                "port": 1,
                "rate_gbps": 400.0,
                "link_layer": "InfiniBand",
                "selected": True,
            }
        ],
        "selected_by": "every active RDMA port",
    }
    spark = fc.nccl_rdma_plan(facts("spark"), {"NCCL_IB_HCA": "=rocep1s0f1"})
    assert [(p["device"], p["rate_gbps"], p["selected"]) for p in spark["ports"]] == [
        ("rocep1s0f1", 200.0, True),
        ("roceP2p1s0f1", 200.0, False),
    ]
    assert spark["selected_by"] == (
        "the active RDMA ports NCCL_IB_HCA==rocep1s0f1 (nccl_extra_env) selects"
    )
    excluded = fc.nccl_rdma_plan(facts("spark"), {"NCCL_IB_HCA": "^roceP2"})
    assert [p["selected"] for p in excluded["ports"]] == [True, False]
    assert fc.nccl_rdma_plan({"fabric": {"rdma": [], "rdma_reason": "none"}}) is None


def test_rate_times_the_nics_the_log_names() -> None:
    plan = fc.nccl_rdma_plan(facts("spark"))
    used = nics_used([parse_nccl_log(SPARK_LINE, "spark")])
    assert rdma_figure(plan, used) == (
        400.0,
        "2 x 200 Gb/s rocep1s0f1, roceP2p1s0f1 (RDMA ports in use)",
        2,
    )


def test_without_a_log_the_selected_ports_count_and_the_source_says_so() -> None:
    plan = fc.nccl_rdma_plan(facts("spark"), {"NCCL_IB_HCA": "rocep1"})
    gbps, source, nics = rdma_figure(plan, ([], []))
    assert (gbps, nics) == (200.0, 1)
    assert source == (
        "1 x 200 Gb/s rocep1s0f1 (the active RDMA ports NCCL_IB_HCA=rocep1 (nccl_extra_env) "
        "selects; no NCCL log names the NICs used)"
    )


def test_a_log_naming_devices_the_facts_lack_falls_back_and_names_them() -> None:
    plan = fc.nccl_rdma_plan(facts("ib-ndr"))  # mlx5_5 active; the log's mlx5_0 is another box
    gbps, source, _ = rdma_figure(plan, nics_used([log("ib-no-gdrdma-peermem-missing.log")]))
    assert gbps == 400.0
    assert "the NCCL log names mlx5_0, which the facts lack" in source


def test_device_indexes_without_names_count_at_the_lowest_rate() -> None:
    plan = fc.nccl_rdma_plan(facts("spark"))
    gbps, source, nics = rdma_figure(plan, nics_used([log("ib-gdrdma-a100.log")]))
    assert (gbps, nics) == (800.0, 4)
    assert source.startswith("4 x 200 Gb/s (NET/IB devices 0, 2, 4, 5 in use;")


def plan_of(**hosts: dict[str, Any]) -> dict[str, Any]:
    return {"hosts": [{"host": name, **row} for name, row in hosts.items()]}


def test_the_slowest_host_sets_the_figure_rdma_or_interface() -> None:
    spark = fc.nccl_rdma_plan(facts("spark"))
    degraded = fc.nccl_rdma_plan(facts("ib-ndr-degraded"))  # mlx5_5 trained down to 200
    used = {"a": nics_used([parse_nccl_log(SPARK_LINE, "spark")])}
    plan = plan_of(
        a={"rdma": spark, "link_speed_mbps": 10000},
        b={"rdma": None, "link_speed_mbps": 100000},
    )
    assert cluster_figure(plan, used, 0.9) == (
        100 / 8 * 0.9,
        "b's fabric link 100000 Mb/s x 0.9",
    )
    plan = plan_of(a={"rdma": spark}, b={"rdma": degraded, "link_speed_mbps": 100000})
    gbps, source = cluster_figure(plan, used, 0.9)
    assert gbps == pytest.approx(200 / 8 * 0.9)
    assert source == (
        "b's 1 x 200 Gb/s mlx5_5 (every active RDMA port; no NCCL log names the NICs used) x 0.9"
    )
    # The pairwise rounds: each of two rails gets one of the two NICs.
    gbps, source = cluster_figure(plan_of(a={"rdma": spark}), used, 0.9, rails=2)
    assert gbps == pytest.approx(200 / 8 * 0.9)
    assert source.endswith("/ 2 (one rail's share) x 0.9")
    assert cluster_figure(plan_of(a={}, b={"rdma": spark}), used, 0.9) == (
        None,
        "link speed unknown on a",
    )


def rank_doc(busbw: float) -> dict[str, Any]:
    rows = [{"size_bytes": 64 * MIB, "busbw_gbps": busbw}]
    return {"tests": [{"name": "bandwidth_all_reduce", "bandwidth": rows}]}


def test_the_judgement_names_the_rdma_source() -> None:
    spark = fc.nccl_rdma_plan(facts("spark"))
    plan = plan_of(a={"rdma": spark}, b={"rdma": spark})
    used = {h: nics_used([parse_nccl_log(SPARK_LINE, "spark")]) for h in ("a", "b")}
    result = nccl_expect.judge_expectations(plan, [rank_doc(20.0)], used)
    row = result["collectives"][0]
    assert row["expected_gbps"] == pytest.approx(45.0)
    assert row["source"] == ("a's 2 x 200 Gb/s rocep1s0f1, roceP2p1s0f1 (RDMA ports in use) x 0.9")
    assert (row["verdict"], row["percent"]) == ("crit", 44.4)


def test_a_run_reads_the_nics_from_its_hosts_nccl_logs(tmp_path: Path) -> None:
    """Through nccl_junit.read_run: the NCCL log of a host with RDMA ports names the NICs; a
    host without RDMA ports is judged on its link speed, its logs left unread."""
    spark = fc.nccl_rdma_plan(facts("spark"))
    hosts = [
        {"host": "a", "node_rank": 0, "nproc_per_node": 1, "rank_offset": 0, "rdma": spark},
        {"host": "b", "node_rank": 1, "nproc_per_node": 1, "rank_offset": 1, "rdma": spark},
    ]
    plan = {"run_id": "r", "hosts": hosts, "backend": "nccl", "bandwidth": {}}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    for i, host in enumerate(("a", "b")):
        (tmp_path / host).mkdir()
        (tmp_path / host / f"rank-{i}.json").write_text(json.dumps(rank_doc(40.0)))
        (tmp_path / host / f"nccl-rank-{i}.log").write_text(SPARK_LINE + "\n")
    run = nccl_junit.read_run(tmp_path)
    row = nccl_expect.evaluate(run, None)["collectives"][0]
    assert row["source"] == "a's 2 x 200 Gb/s rocep1s0f1, roceP2p1s0f1 (RDMA ports in use) x 0.9"
    assert (row["verdict"], row["percent"]) == ("ok", 88.9)
    hosts[1] = {**hosts[1], "rdma": None, "link_speed_mbps": 100000}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    run = nccl_junit.read_run(tmp_path)
    assert set(nccl_rdma_expect.used_by_host(run)) == {"a"}
    assert nccl_expect.evaluate(run, None)["collectives"][0]["source"] == (
        "b's fabric link 100000 Mb/s x 0.9"
    )
