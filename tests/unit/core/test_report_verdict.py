# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""verdict.json, the fixes of rank failures and report.html, built by library/nccl_report.py.

The run directories have the shape of the contracts in docs/design.md (builders shared with
test_report_junit.py); the failing tests' details have the fields files/nccl_check.py writes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core import exit_classes as nccl_exit_classes
from tests.builders.report import RunDir, case, page, report, suites
from tests.jenkins_schema import validate_report_junit
from tests.playbook_run import ROOT

FIXTURES = ROOT / "tests" / "fixtures"


def wrong_sum(source: str) -> dict[str, Any]:
    """A correctness failure as nccl_check records it (verify() -> Fail(details))."""
    return {
        "name": "all_reduce_sum",
        "status": "failed",
        "duration_s": 0.01,
        "message": f"1 of 1024 elements wrong; first at index 3: expected 6, got 7 ({source})",
        "details": {
            "wrong": 1,
            "elements": 1024,
            "first_wrong_index": 3,
            "expected": 6.0,
            "got": 7.0,
            "source": source,
        },
        "bandwidth": [],
    }


def with_test(run: RunDir, host: str, local_rank: int, test: dict[str, Any]) -> dict[str, Any]:
    node = run.hosts.index(host)
    rank = node * run.nproc + local_rank
    path = run.dir / host / f"rank-{rank}.json"
    doc = json.loads(path.read_text())
    doc["tests"] = [t if t["name"] != test["name"] else test for t in doc["tests"]]
    doc["status"] = "failed"
    path.write_text(json.dumps(doc))
    return doc


def test_a_passing_run_is_class_passed_with_plots_and_links(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=2).all_passed()
    verdict = report(run, capsys)
    assert verdict["class"] == "passed" and verdict["exit_code"] == 0
    assert verdict["findings"] == [] and verdict["check_mode"] is False
    assert verdict["exit_codes"] == nccl_exit_classes.code_table()
    text = page(run)
    body = " ".join(text.text)
    assert "PASSED" in body and "Failures" not in body
    # One SVG per bandwidth collective, drawn inline; no external resource at all.
    html = (run.dir / "report.html").read_text()
    assert html.count("<svg") == 2 and "<?xml" not in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    # Relative links to every rank's log and JSON, and to the host files that exist.
    for rank, host in [(0, "node1"), (1, "node1"), (2, "node2"), (3, "node2")]:
        assert f"{host}/rank-{rank}.log" in text.links and f"{host}/rank-{rank}.json" in text.links
    assert "node1/torchrun.log" in text.links and "junit.xml" in text.links
    for link in text.links:
        assert (run.dir / link).is_file(), link


def test_wrong_data_seen_by_one_rank_names_it_and_its_host_as_suspect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).all_passed()
    with_test(run, "node2", 0, wrong_sum("off by 1: not one rank's contribution"))
    verdict = report(run, capsys)
    assert verdict["class"] == "wrong_data" and verdict["exit_code"] == 7
    (finding,) = verdict["findings"]
    assert (finding["host"], finding["rank"], finding["test"]) == ("node2", 1, "all_reduce_sum")
    assert "Suspect: rank 1 on node2" in finding["fix"]
    assert "--tests', 'all_reduce_sum'" in finding["fix"]
    # The JUnit failure carries the same fix.
    failure = case(suites(run.dir / "junit.xml")["nccl.node2.rank1"], "all_reduce_sum")
    assert "Hint: Suspect: rank 1 on node2" in failure.find("failure").get("message")
    validate_report_junit(run.dir)


def test_wrong_data_every_rank_saw_names_the_rank_the_sums_point_at(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=2).all_passed()
    for host in run.hosts:
        for local in range(2):
            with_test(run, host, local, wrong_sum("the contribution of rank 2 is missing"))
    verdict = report(run, capsys)
    assert verdict["class"] == "wrong_data"
    assert len(verdict["findings"]) == 4
    assert all("Suspect: rank 2 on node2" in f["fix"] for f in verdict["findings"])


def test_bandwidth_below_threshold_names_threshold_figure_and_link_speed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).all_passed()
    for host in (
        run.hosts
    ):  # the interface check as src/nccl_preflight/core/preflight/host_checks.py words it
        path = run.dir / "preflight" / f"{host}.json"
        doc = json.loads(path.read_text())
        speed = 10000 if host == "node1" else 25000
        doc["results"].append(
            {
                "check": "interface",
                "host": host,
                "status": "passed",
                "message": f"{host}: fab0 is up, address 10.0.0.1, MTU 9000, speed {speed} Mb/s",
                "hint": "",
            }
        )
        path.write_text(json.dumps(doc))
    doc = json.loads((run.dir / "node1" / "rank-0.json").read_text())
    slow = next(t for t in doc["tests"] if t["name"] == "bandwidth_all_reduce")
    slow = {**slow, "status": "failed", "message": "below the required 50 GB/s"}
    slow["details"] = {"threshold_gbps": 50.0, "avg_busbw_gbps": 0.5}
    with_test(run, "node1", 0, slow)
    verdict = report(run, capsys)
    assert verdict["class"] == "bandwidth" and verdict["exit_code"] == 8
    (finding,) = verdict["findings"]
    figure = slow["bandwidth"][-1]["busbw_gbps"]
    assert f"busbw {figure} GB/s at 65536 B on node1" in finding["fix"]
    assert "required 50.0 GB/s" in finding["fix"]
    assert "node1's at 10000 Mb/s = 1.25 GB/s" in finding["fix"]
    assert "no link here can pass it" in finding["fix"]
    # The plot draws the link speed and the threshold.
    html = (run.dir / "report.html").read_text()
    assert "link 1.25 GB/s" in html and "required 50" in html


def test_hang_names_the_test_the_size_and_the_ranks_still_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).plan()
    for host in run.hosts:
        run.preflight(host).launch(host, rc=None, timed_out=True)
    run.rank("node1", 0)  # finished and passed
    doc = json.loads((run.dir / "node1" / "rank-0.json").read_text())
    doc.update(
        host="node2",
        global_rank=1,
        node_rank=1,
        status="running",
        finished_at=None,
        current_test="bandwidth_all_gather",
    )
    doc["tests"] = [t for t in doc["tests"] if t["name"] != "bandwidth_all_gather"]
    doc["tests"].append(
        {
            "name": "bandwidth_all_gather at 4096 B",
            "status": "error",
            "duration_s": 60,
            "message": "bandwidth_all_gather at 4096 B did not finish within 60 s on rank 1",
            "details": {},
            "bandwidth": [],
        }
    )
    doc["finished_at"] = None
    run.rank("node2", 0, doc=doc)
    verdict = report(run, capsys)
    assert verdict["class"] == "rank_lost" and verdict["exit_code"] == 4
    fixes = " ".join(f["fix"] for f in verdict["findings"])
    assert "rank 1 on node2 stopped in bandwidth_all_gather at 4096 B" in fixes
    assert "No final result (killed, or still running when the run ended): rank 1 on node2" in fixes


def test_preflight_failure_wins_and_the_skipped_ranks_are_consequences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1)
    run.plan(launch_skipped="the pre-flight failed on node1: fix those checks first")
    run.preflight("node1", failed=True).preflight("node2")
    verdict = report(run, capsys)
    assert verdict["class"] == "preflight_failed" and verdict["exit_code"] == 10
    cause, *rest = verdict["findings"]
    assert (cause["host"], cause["test"], cause["consequence"]) == (
        "node1",
        "firewall_master_port",
        False,
    )
    assert cause["fix"] == "iptables -D INPUT -p tcp --dport 29500 -j DROP"
    assert rest and all(f["consequence"] and f["class"] == "preflight_failed" for f in rest)
    text = " ".join(page(run).text)
    assert "Failing: node1" in text and "node2" not in text.split("Failing:")[1].split("run ")[0]


def test_unreachable_outranks_everything_after_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1)
    run.plan(unreachable=("node2",), launch_skipped="static rendezvous needs all 2 nodes, but ...")
    run.preflight("node1", failed=True)
    verdict = report(run, capsys)
    assert verdict["class"] == "unreachable" and verdict["exit_code"] == 11
    assert verdict["classes"] == ["unreachable", "preflight_failed"]
    assert verdict["findings"][0]["host"] == "node2"


def test_every_class_has_its_own_code_and_severity_picks_one() -> None:
    table = nccl_exit_classes.code_table()
    assert len(set(table.values())) == len(table)
    assert table["passed"] == 0 and table["rank_lost"] == 4 and table["wrong_data"] == 7
    assert nccl_exit_classes.most_severe({"bandwidth", "wrong_data"}).name == "wrong_data"
    assert nccl_exit_classes.most_severe(set()).name == "passed"


def test_inventory_and_node_text_is_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = "<img src=x onerror=alert(1)>"
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).all_passed()
    path = run.dir / "preflight" / "node1.json"
    doc = json.loads(path.read_text())
    doc["results"].append(
        {"check": "hostname", "host": "node1", "status": "failed", "message": evil, "hint": evil}
    )
    path.write_text(json.dumps(doc))
    report(run, capsys)
    html = (run.dir / "report.html").read_text()
    assert evil not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "img" not in page(run).tags


def test_transport_is_drawn_only_when_present(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).all_passed()
    report(run, capsys)
    html = (run.dir / "report.html").read_text()
    assert 'id="pairwise"' not in html and 'id="transport"' not in html

    # The transport comes from the ranks' NCCL INFO logs (a log quoted in NVIDIA/nccl#1189).
    plan = json.loads((run.dir / "plan.json").read_text())
    plan["backend"] = "nccl"
    (run.dir / "plan.json").write_text(json.dumps(plan))
    for host, rank in (("node1", 0), ("node2", 1)):
        doc = json.loads((run.dir / host / f"rank-{rank}.json").read_text())
        doc["backend"] = "nccl"
        doc["env"] = {**doc.get("env", {}), "NCCL_DEBUG": "INFO"}
        (run.dir / host / f"rank-{rank}.json").write_text(json.dumps(doc))
    log = FIXTURES / "nccl_logs" / "ib-gdrdma-p2p-cumem-h20.log"
    (run.dir / "node2" / "nccl-rank-1.log").write_text(log.read_text())
    report(run, capsys)
    html = (run.dir / "report.html").read_text()
    assert 'id="pairwise"' not in html
    transport = html.split('id="transport"')[1].split("</section>")[0]
    assert "NET/IB #2, #3 with GDRDMA; inside the node P2P/CUMEM" in transport
    assert "<td>node2</td><td>IB</td>" in transport
    assert "node1" in transport and "no NCCL log" in transport


def test_run_check_mode_is_marked_in_verdict_and_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1"], nproc=1).all_passed()
    copy = tmp_path / "copy" / "verdict.json"
    copy.parent.mkdir()
    verdict = report(run, capsys, run_check_mode=True, verdict_copy=str(copy))
    assert verdict["check_mode"] is True
    assert json.loads(copy.read_text()) == verdict
    assert "Check mode (--check)" in (run.dir / "report.html").read_text()


def test_junit_stays_valid_with_the_hints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).all_passed()
    with_test(run, "node1", 0, wrong_sum("the contribution of rank 1 is missing"))
    report(run, capsys)
    validate_report_junit(run.dir)
    root = ET.parse(run.dir / "junit.xml").getroot()
    assert root.get("failures") == "1"


# --- bin/nccl-preflight without a lab: what it does when no report play ran ---------------------


def wrapper(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / "bin" / "nccl-preflight"), *args],
        cwd=cwd,
        env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_bad_hostfile_exits_12_before_anything_is_touched(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory"
    inventory.mkdir()
    (inventory / "hostfile").write_text("node1 slots=two\n")
    reports = tmp_path / "reports"
    proc = wrapper("-i", str(inventory), "-e", f"nccl_report_root={reports}")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 12, output
    assert f"{inventory / 'hostfile'}" in output and "bad_input (exit 12)" in output
    assert not reports.exists()


def test_a_refused_variable_exits_12_naming_it(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    proc = wrapper(
        "-i", "inventory/local", "-e", f"nccl_report_root={reports}", "-e", "nccl_master_port=80"
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 12, output
    assert "nccl_master_port" in output and "bad_input (exit 12)" in output
    assert not reports.exists()


def test_a_run_that_judges_nothing_exits_0_and_help_lists_every_code() -> None:
    proc = wrapper("-i", "inventory/local", "--syntax-check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no verdict (the report stage did not run)" in proc.stderr
    helped = wrapper("--help")
    assert helped.returncode == 0
    for name, code in nccl_exit_classes.code_table().items():
        assert re.search(rf"^\s+{code}\s+{name}\s", helped.stdout, re.M), name
