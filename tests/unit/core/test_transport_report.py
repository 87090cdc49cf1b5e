# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The transport verdict (src/nccl_preflight/core/transport_report.py through nccl_junit): a
`transport` testcase per rank, a line per host in summary.md, from the ranks' NCCL logs
(tests/fixtures/nccl_logs, quoted from public issues) and plan.json's expect_net."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from nccl_preflight.core import junit as nccl_junit
from nccl_preflight.core.judged_run import judge_run
from nccl_preflight.core.run_data import read_nccl_logs
from nccl_preflight.core.summary import summarize
from nccl_preflight.core.transport_report import analyze_run
from tests.jenkins_schema import validate_report_junit
from tests.report_build import build_report

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_logs"
IB = {"network": "ib", "reason": "active RDMA port(s) mlx5_10:1 on the fabric"}


def rank_doc(host: str, rank: int, backend: str = "nccl", debug: str = "INFO") -> dict:
    return {
        "schema": 1,
        "host": host,
        "global_rank": rank,
        "local_rank": 0,
        "node_rank": rank,
        "world_size": 2,
        "backend": backend,
        "env": {"NCCL_DEBUG": debug},
        "status": "passed",
        "finished_at": "2026-11-23T01:00:00+00:00",
        "started_at": "2026-11-23T01:00:00+00:00",
        "tests": [{"name": "init", "status": "passed", "duration_s": 0.1, "message": ""}],
    }


def make_run(
    tmp_path: Path, logs: dict[str, str | None], expect_net=IB, preflight=None, **kw
) -> Path:
    """reports/r1/ with one rank per host; logs: host -> fixture name (None: no NCCL log)."""
    run_dir = tmp_path / "r1"
    hosts = list(logs)
    plan = {
        "run_id": "r1",
        "backend": kw.get("backend", "nccl"),
        "world_size": len(hosts),
        "hosts": [
            {
                "host": h,
                "node_rank": i,
                "nproc_per_node": 1,
                "rank_offset": i,
                "expect_net": expect_net,
            }
            for i, h in enumerate(hosts)
        ],
    }
    run_dir.mkdir(parents=True)
    (run_dir / "plan.json").write_text(json.dumps(plan))
    for i, (host, fixture) in enumerate(logs.items()):
        (run_dir / host).mkdir()
        doc = rank_doc(host, i, kw.get("backend", "nccl"), kw.get("debug", "INFO"))
        (run_dir / host / f"rank-{i}.json").write_text(json.dumps(doc))
        if fixture:
            (run_dir / host / f"nccl-rank-{i}.log").write_text((LOGS / fixture).read_text())
    for host, results in (preflight or {}).items():
        (run_dir / "preflight").mkdir(exist_ok=True)
        (run_dir / "preflight" / f"{host}.json").write_text(
            json.dumps({"host": host, "results": results})
        )
    return run_dir


def report(run_dir: Path) -> dict:
    summary = build_report(run_dir)
    validate_report_junit(run_dir)
    return summary


def transport(run_dir: Path, rank: int) -> ET.Element:
    root = ET.parse(run_dir / "junit" / f"rank-{rank}.xml").getroot()
    [case] = [c for c in root.iter("testcase") if c.get("name") == "transport"]
    return case


def test_socket_where_ib_was_expected_fails_with_the_line_and_the_cause(tmp_path):
    cause = {
        "check": "nccl_config",
        "host": "node2",
        "status": "failed",
        "message": "node2: NCCL configuration outside the inventory: NCCL_IB_DISABLE=1 ...",
        "hint": "",
    }
    run_dir = make_run(
        tmp_path,
        {"node1": "roce-dgxh100.log", "node2": "socket-lo-ib-disabled.log"},
        preflight={"node2": [cause]},
    )
    summary = report(run_dir)
    assert summary["verdict"] == "failed"
    ok = transport(run_dir, 0)
    assert ok.find("failure") is None and ok.find("skipped") is None
    bad = transport(run_dir, 1).find("failure")
    message = bad.get("message")
    assert message.startswith(
        "rank 1 on node2 used Socket where IB was expected (active RDMA port(s) mlx5_10:1 on the "
        "fabric): axa:3048391:3048566 [0] NCCL INFO Using network Socket"
    )
    assert "Likely cause: pre-flight check nccl_config: node2: NCCL configuration" in message
    assert "NCCL says NCCL_IB_DISABLE is set to 1" in message
    assert "The nodes used different networks (node1 IB; node2 Socket)" in message
    md = (run_dir / "summary.md").read_text()
    assert "- node1: network IB chosen, no channel crossed the network" in md
    assert "- node2: network Socket chosen" in md
    assert [h["net"] for h in summary["transport"]] == ["IB", "Socket"]


def test_ib_with_gdrdma_passes_and_says_what_was_used(tmp_path):
    run_dir = make_run(
        tmp_path, {"node1": "ib-gdrdma-p2p-cumem-h20.log", "node2": "ib-gdrdma-a100.log"}
    )
    summary = report(run_dir)
    assert summary["verdict"] == "passed"
    out = transport(run_dir, 0).find("system-out").text
    assert out == "rank 0 on node1: NET/IB #2, #3 with GDRDMA; inside the node P2P/CUMEM"
    assert "- node1: NET/IB #2, #3 with GDRDMA; inside the node P2P/CUMEM" in (
        (run_dir / "summary.md").read_text()
    )


def test_ib_without_gdrdma_passes_with_a_warning(tmp_path):
    run_dir = make_run(
        tmp_path, {"node1": "plugin-ibext-no-gdrdma.log", "node2": "plugin-ibext-no-gdrdma.log"}
    )
    report(run_dir)
    assert "warning: no GDRDMA" in transport(run_dir, 1).find("system-out").text


def test_gloo_is_skipped_with_the_reason(tmp_path):
    run_dir = make_run(tmp_path, {"node1": None, "node2": None}, backend="gloo")
    summary = report(run_dir)
    skipped = transport(run_dir, 0).find("skipped").get("message")
    assert skipped == "rank 0 on node1 ran the gloo backend: NCCL is not used"
    assert summary["transport"][0]["line"] == (
        "node1: rank 0 on node1 ran the gloo backend: NCCL is not used"
    )


def test_nccl_debug_warn_is_skipped_saying_how_to_get_the_log(tmp_path):
    run_dir = make_run(tmp_path, {"node1": None, "node2": None}, debug="WARN")
    report(run_dir)
    skipped = transport(run_dir, 1).find("skipped").get("message")
    assert "NCCL_DEBUG=WARN" in skipped and "nccl_debug: INFO" in skipped


def test_expect_any_accepts_socket_and_one_node_needs_no_network(tmp_path):
    run_dir = make_run(
        tmp_path,
        {"node1": "socket-channels-shm.log", "node2": "socket-channels-shm.log"},
        expect_net={"network": "any", "reason": "nccl_expect_net is any"},
    )
    assert report(run_dir)["verdict"] == "passed"
    single = make_run(tmp_path / "one", {"node1": "intra-shm-no-nvls.log"})
    report(single)
    assert "a single node" in transport(single, 0).find("system-out").text


def test_warn_lines_go_to_the_output(tmp_path):
    run_dir = make_run(
        tmp_path,
        {"node1": "warn-ibv-create-cq-enomem.log", "node2": "roce-dgxh100.log"},
    )
    run = nccl_junit.read_run(run_dir)
    verdicts = analyze_run(run)["ranks"]
    # the WARN log says nothing about the network chosen: no verdict on it, the lines are kept
    assert verdicts[0]["status"] == "skipped"
    assert verdicts[1]["status"] == "passed"


def test_read_nccl_logs_by_rank_and_pid(tmp_path):
    (tmp_path / "nccl-rank-3.log").write_text("a")
    (tmp_path / "nccl-pid-77.log").write_text("b")
    (tmp_path / "rank-3.log").write_text("c")
    assert read_nccl_logs(tmp_path) == {3: "a", "pid-77": "b"}


def test_a_preflight_only_run_has_no_transport_section(tmp_path):
    run_dir = tmp_path / "r1"
    (run_dir / "preflight").mkdir(parents=True)
    (run_dir / "preflight" / "node1.json").write_text(
        json.dumps({"host": "node1", "results": [{"check": "mtu", "status": "passed"}]})
    )
    judged = judge_run(nccl_junit.read_run(run_dir), ranks_launched=False)
    summary = summarize(judged)
    assert summary["transport"] == [] and "Transport" not in summary["markdown"]


def test_a_rank_that_never_ran_gets_no_transport_testcase(tmp_path):
    run_dir = make_run(tmp_path, {"node1": "roce-dgxh100.log", "node2": None})
    (run_dir / "node2" / "rank-1.json").unlink()
    report(run_dir)
    root = ET.parse(run_dir / "junit" / "rank-1.xml").getroot()
    assert "transport" not in [c.get("name") for c in root.iter("testcase")]
    assert transport(run_dir, 0) is not None


def test_nccl_2_4_logs_are_judged_like_new_ones(tmp_path):
    # NCCL 2.4 prints no "Using network" line and Ring lines without bus ids (issue 25 item 8):
    # node1's ring crossed NET/IB, node2 fell back to Socket without libibverbs.
    run_dir = make_run(
        tmp_path,
        {"node1": "ring-2.4.7-ib-no-gdrdma.log", "node2": "socket-2.4.8-no-libibverbs-warn.log"},
    )
    summary = report(run_dir)
    assert summary["verdict"] == "failed"
    out = transport(run_dir, 0).find("system-out").text
    assert out == (
        "rank 0 on node1: NET/IB #0 without GDRDMA; inside the node P2P/IPC (warning: no GDRDMA: "
        "see the pre-flight check gpudirect)"
    )
    message = transport(run_dir, 1).find("failure").get("message")
    assert message.startswith(
        "rank 1 on node2 used Socket where IB was expected (active RDMA port(s) mlx5_10:1 on the "
        "fabric): aliyun:82174:82321 [0] NCCL INFO NET/Socket : Using [0]eth0:192.168.0.172<0>"
    )
    assert "Likely cause: NCCL WARN: Failed to open libibverbs.so[.1]" in message
