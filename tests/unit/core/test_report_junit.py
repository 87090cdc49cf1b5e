# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/junit.py and library/nccl_report.py: JUnit and summary from
reports/<run-id>/.

Every written XML file is validated against the Jenkins xunit schema."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nccl_preflight.core import junit_cases
from tests.builders.report import (
    RunDir,
    build,
    case,
    module_result,
    preflight_doc,
    rank_doc,
    suites,
)
from tests.jenkins_schema import validate_report_junit
from tests.verdict_schema import validate_verdict

# --- builders of reports/<run-id>/, per the contracts in docs/design.md --------------------------


# --- helpers -------------------------------------------------------------------------------------


# --- all passed -------------------------------------------------------------------------------


def test_all_passed_gives_one_suite_per_rank_and_per_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=3).all_passed()
    result = build(run, capsys)
    assert result["verdict"] == "passed"
    validate_report_junit(run.dir)
    merged = suites(run.dir / "junit.xml")
    assert sorted(merged) == sorted(
        [f"nccl.node{1 + r // 3}.rank{r}" for r in range(6)]
        + ["preflight.node1", "preflight.node2"]
    )
    rank4 = merged["nccl.node2.rank4"]
    assert {c.get("classname") for c in rank4.iter("testcase")} == {"nccl.node2.rank4"}
    assert [c.get("name") for c in rank4.iter("testcase")] == [
        "checkin",
        "init",
        "all_reduce_sum",
        "broadcast",
        "all_gather",
        "reduce_scatter",
        "bandwidth_all_reduce",
        "bandwidth_all_gather",
        "transport",  # src/nccl_preflight/core/transport_report.py: NCCL is not used with gloo
    ]
    assert case(rank4, "transport").find("skipped").get("message") == (
        "rank 4 on node2 ran the gloo backend: NCCL is not used"
    )
    props = {p.get("name"): p.get("value") for p in rank4.iter("property")}
    assert props["version.torch"] == "2.13.0+cpu" and props["backend"] == "gloo"
    # The merged file is lean (issue 37): a rank's bandwidth rows and what a passed check saw
    # are in its own file under junit/ only.
    assert not any(name.startswith("bandwidth.") for name in props)
    own = suites(run.dir / "junit" / "rank-4.xml")["nccl.node2.rank4"]
    own_props = {p.get("name"): p.get("value") for p in own.iter("property")}
    assert own_props["version.torch"] == "2.13.0+cpu"
    # It names the rank's own result and log (the run directory's), not a copy of its rows.
    assert not any(name.startswith("bandwidth.") for name in own_props)
    assert own_props["file.result"] == "node2/rank-4.json"
    assert own_props["file.log"] == "node2/rank-4.log"
    rows = json.loads((run.dir / own_props["file.result"]).read_text())["tests"]
    sweep = next(t for t in rows if t["name"] == "bandwidth_all_reduce")["bandwidth"]
    assert [round(row["busbw_gbps"], 3) for row in sweep if row["size_bytes"] == 65536] == [1.667]
    pre = merged["preflight.node1"]
    assert case(pre, "fabric_interface").find("system-out") is None
    own_pre = suites(run.dir / "junit" / "preflight-node1.xml")["preflight.node1"]
    assert case(own_pre, "fabric_interface").find("system-out").text == "fab0 up"
    assert case(pre, "gpu_present").find("skipped").get("message") == "backend gloo needs no GPU"
    # junit-xml writes times with 6 decimals and disabled="0": neither survives.
    root = ET.parse(run.dir / "junit.xml").getroot()
    assert set(root.attrib) <= {"name", "time", "tests", "failures", "errors"}
    assert root.get("tests") == str(6 * 9 + 2 * 2) and root.get("failures") == "0"
    for suite in root.iter("testsuite"):
        assert "disabled" not in suite.attrib
        assert len(suite.get("time").split(".")[1]) <= 3
    # One file per rank and per host, each a valid document of its own.
    assert sorted(p.name for p in (run.dir / "junit").glob("*.xml")) == sorted(
        [f"rank-{r}.xml" for r in range(6)] + ["preflight-node1.xml", "preflight-node2.xml"]
    )
    assert os.readlink(run.root / "latest") == run.run_id
    summary = (run.dir / "summary.md").read_text()
    assert (
        "PASSED" in summary and "| node2 | 1 | 1 passed, 0 failed, 1 skipped | 3 | 0 |" in summary
    )
    assert "| bandwidth_all_reduce | 64 KiB | 6 |" in summary


# --- failures and errors ----------------------------------------------------------------------


def test_a_failed_collective_is_a_failure_with_its_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).plan()
    for host in run.hosts:
        run.preflight(host).launch(host, rc=1)
    run.rank("node1", 0)
    run.rank("node2", 0, failed={"all_reduce_sum": "rank 1 got 5.0 at index 3, expected 6.0"})
    result = build(run, capsys)
    assert result["verdict"] == "failed"
    assert result["totals"]["failures"] == 1 and result["totals"]["errors"] == 0
    validate_report_junit(run.dir)
    failure = case(suites(run.dir / "junit.xml")["nccl.node2.rank1"], "all_reduce_sum").find(
        "failure"
    )
    assert failure.get("message") == (
        "rank 1 got 5.0 at index 3, expected 6.0 Hint: check the fabric MTU"
    )
    assert json.loads(failure.text)["expected"] == 6.0
    assert any("nccl.node2.rank1 all_reduce_sum" in p for p in result["problems"])


def test_a_rank_without_result_is_an_error_with_the_tail_of_its_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=2).plan()
    for host in run.hosts:
        run.launch(host, rc=1)
    run.rank("node1", 0).rank("node1", 1).rank("node2", 0)
    log = "".join(f"line {i}\n" for i in range(100)) + "Traceback: Segmentation fault\n"
    run.rank("node2", 1, doc={}, log=log)  # rank 3 wrote no JSON, only its log
    result = build(run, capsys)
    assert result["verdict"] == "failed"
    validate_report_junit(run.dir)
    merged = suites(run.dir / "junit.xml")
    assert len([n for n in merged if n.startswith("nccl.")]) == 4
    error = case(merged["nccl.node2.rank3"], "result").find("error")
    assert error.get("type") == "crashed"
    assert "rank 3 on node2 crashed" in error.get("message")
    assert "Segmentation fault" in error.text and "line 99" in error.text
    assert "line 10\n" not in error.text  # only the tail
    # The other ranks are all there and passed.
    assert all(
        merged[f"nccl.{h}.rank{r}"].get("errors") == "0"
        for h, r in (("node1", 0), ("node1", 1), ("node2", 2))
    )


def test_hung_and_never_started_ranks_say_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=2).plan()
    run.launch("node1", rc=-15, timed_out=True)
    # rank 0 hung inside broadcast: its last record says so
    run.rank("node1", 0, stop_after="all_reduce_sum", current_test="broadcast")
    run.rank("node1", 1, doc={}, log="waiting for the store\n")  # no JSON, killed at timeout
    # node2: torchrun ran but started no worker (no rank logs)
    (run.host_dir("node2") / "launch.json").write_text(
        json.dumps({"rc": 1, "timed_out": False, "killed_pids": []})
    )
    (run.host_dir("node2") / "torchrun.log").write_text("RendezvousConnectionError: refused\n")
    build(run, capsys)
    validate_report_junit(run.dir)
    merged = suites(run.dir / "junit.xml")
    hung = case(merged["nccl.node1.rank0"], "broadcast").find("error")
    assert hung.get("type") == "hung" and "hung in broadcast" in hung.get("message")
    assert case(merged["nccl.node1.rank0"], "all_reduce_sum").find("error") is None
    killed = case(merged["nccl.node1.rank1"], "result").find("error")
    assert killed.get("type") == "hung" and "after 60 s" in killed.get("message")
    never = case(merged["nccl.node2.rank2"], "result").find("error")
    assert never.get("type") == "never started"
    assert "RendezvousConnectionError" in never.text  # torchrun's log when the rank has none


def test_a_launch_that_could_not_start_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).plan()
    busy = "node1: MASTER_PORT 29500 on 10.0.0.1 is still in use after 30 s"
    (run.host_dir("node1") / "launch.json").write_text(
        json.dumps({"rc": None, "timed_out": False, "killed_pids": [], "error": busy})
    )
    stopped = "torchrun did not start on node1, so the rendezvous could not complete"
    (run.host_dir("node2") / "launch.json").write_text(
        json.dumps({"rc": -15, "timed_out": False, "killed_pids": [5], "stopped_by": stopped})
    )
    build(run, capsys)
    validate_report_junit(run.dir)
    merged = suites(run.dir / "junit.xml")
    master = case(merged["nccl.node1.rank0"], "result").find("error")
    assert master.get("type") == "never started" and busy in master.get("message")
    other = case(merged["nccl.node2.rank1"], "result").find("error")
    assert other.get("type") == "never started" and stopped in other.get("message")


def test_an_unreachable_host_is_an_error_for_that_host_and_its_ranks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).plan(
        unreachable=("node2",), launch_skipped="node2 dropped out before launch"
    )
    run.preflight("node1")
    result = build(run, capsys)
    assert result["verdict"] == "failed"
    validate_report_junit(run.dir)
    merged = suites(run.dir / "junit.xml")
    host_error = case(merged["preflight.node2"], "host reachable").find("error")
    assert "node2 was unreachable" in host_error.get("message")
    assert "ansible node2 -m ansible.builtin.ping" in host_error.get("message")
    for name in ("nccl.node1.rank0", "nccl.node2.rank1"):
        assert case(merged[name], "result").find("error").get("type") == "never started"
    assert "UNREACHABLE" in (run.dir / "summary.md").read_text()


def test_preflight_failures_carry_the_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).all_passed().preflight("node2", failed=True)
    result = build(run, capsys)
    assert result["verdict"] == "failed" and result["totals"]["failures"] == 1
    validate_report_junit(run.dir)
    failure = case(suites(run.dir / "junit.xml")["preflight.node2"], "firewall_master_port")
    message = failure.find("failure").get("message")
    assert message == ("node2 drops TCP 29500 Hint: iptables -D INPUT -p tcp --dport 29500 -j DROP")
    assert "| node2 | 1 | 1 passed, 1 failed, 1 skipped |" in result["summary"]


def test_every_finding_of_a_host_is_a_problem_not_only_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).all_passed()
    doc = preflight_doc("node2", failed=True)
    doc["results"].append(
        {
            "check": "mtu",
            "host": "node2",
            "status": "failed",
            "message": "node2: MTU 1400 on fab0 differs from the other hosts (1500)",
            "hint": "ip link set dev fab0 mtu 1500",
        }
    )
    (run.dir / "preflight" / "node2.json").write_text(json.dumps(doc))
    result = build(run, capsys)
    assert result["totals"]["failures"] == 2
    named = [p for p in result["problems"] if p.startswith("preflight.node2 ")]
    assert [p.split(":")[0] for p in named] == [
        "preflight.node2 firewall_master_port",
        "preflight.node2 mtu",
    ]


def test_a_truncated_rank_file_is_an_error_not_a_crash_of_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1"], nproc=1).plan().launch("node1", rc=-9)
    (run.host_dir("node1") / "rank-0.json").write_text('{"schema": 1, "tests": [')
    (run.host_dir("node1") / "rank-0.log").write_text("\x1b[31mred\x1b[0m killed\n")
    build(run, capsys)
    validate_report_junit(run.dir)
    error = case(suites(run.dir / "junit.xml")["nccl.node1.rank0"], "result").find("error")
    assert "not valid JSON" in error.get("message")
    assert "\x1b" not in error.text and "killed" in error.text


def test_host_names_with_dots_keep_the_jenkins_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["10.0.0.1"], nproc=1).all_passed()
    build(run, capsys)
    validate_report_junit(run.dir)
    names = suites(run.dir / "junit.xml")
    assert set(names) == {"nccl.10_0_0_1.rank0", "preflight.10_0_0_1"}
    assert (run.dir / "junit" / "preflight-10.0.0.1.xml").is_file()


# --- the module's options -----------------------------------------------------------------------


def test_report_only_rebuilds_latest_when_the_run_id_is_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1"], nproc=1).all_passed()
    build(run, capsys)
    (run.dir / "junit.xml").unlink()
    result = module_result(
        {
            "report_root": str(tmp_path),
            "run_id": "20990101T000000-ffffff",
            "fallback_to_latest": True,
        },
        capsys,
    )
    assert result["run_id"] == run.run_id and (run.dir / "junit.xml").is_file()
    missing = module_result(
        {"report_root": str(tmp_path), "run_id": "20990101T000000-ffffff"}, capsys
    )
    assert missing["failed"] is True
    assert "no collected files for run 20990101T000000-ffffff" in missing["msg"]
    assert "-e nccl_run_id=" in missing["msg"]


def test_check_mode_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = RunDir(tmp_path, ["node1"], nproc=1).all_passed()
    result = build(run, capsys, _ansible_check_mode=True)
    assert result["changed"] is False and result["verdict"] == "passed"
    assert not (run.dir / "junit.xml").exists() and not (tmp_path / "latest").exists()


def test_preflight_only_run_is_judged_on_preflight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1"], nproc=1).preflight("node1")
    assert build(run, capsys, ranks_launched=False)["verdict"] == "passed"
    validate_report_junit(run.dir)
    result = build(run, capsys, ranks_launched=True)
    assert result["verdict"] == "failed"
    assert "launch stage did not run" in result["problems"][0]


def test_suite_xml_refuses_an_empty_suite() -> None:
    with pytest.raises(ValueError, match="empty suites are not allowed"):
        junit_cases.document([junit_cases.Suite("nccl.x.rank0", [])])


def test_a_rank_ended_at_the_timeout_is_hung_in_its_running_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """nccl_check records the running test as an error when SIGTERM ends it; the timeout says
    that the rank hung there."""
    run = RunDir(tmp_path, ["node1"], nproc=1).plan().launch("node1", rc=1, timed_out=True)
    doc = rank_doc("node1", 0, 0, 0, 1, 1, status="error", current_test="broadcast")
    doc["tests"] = doc["tests"][:4]
    doc["tests"][-1].update(status="error", message="rank 0 on node1 was stopped by SIGTERM")
    run.rank("node1", 0, doc=doc)
    build(run, capsys)
    validate_report_junit(run.dir)
    error = case(suites(run.dir / "junit.xml")["nccl.node1.rank0"], "broadcast").find("error")
    assert error.get("type") == "hung"
    assert error.get("message").startswith(
        "rank 0 on node1 hung in broadcast: nccl_run_timeout ran out after 60 s"
    )
    said = "The rank said: rank 0 on node1 was stopped by SIGTERM Hint: rank 0 on node1 stopped in"
    assert said in error.get("message")  # nccl_hints adds the fix: where it stopped, what to read


def test_under_slurm_an_unreachable_host_is_explained_in_slurms_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """plan.json's front_end "slurm" (the slurm command writes it): no Ansible ping advice."""
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).plan(
        unreachable=("node2",), launch_skipped="node2 dropped out before launch"
    )
    plan = json.loads((run.dir / "plan.json").read_text())
    (run.dir / "plan.json").write_text(json.dumps({**plan, "front_end": "slurm"}))
    run.preflight("node1")
    build(run, capsys)
    validate_report_junit(run.dir)
    message = case(suites(run.dir / "junit.xml")["preflight.node2"], "host reachable")
    text = message.find("error").get("message")
    assert "srun -w node2 -N 1" in text and "sinfo -n node2" in text and "ansible" not in text
    verdict = validate_verdict(json.loads((run.dir / "verdict.json").read_text()))
    (finding,) = [f for f in verdict["findings"] if f["test"] == "host reachable"]
    assert finding["host"] == "node2" and finding["fix"].startswith("sinfo -n node2")
    assert "ansible" not in finding["fix"]
