# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The whole validate.yml on the lent H100 VM, validating itself over Ansible's local connection
with nccl_backend auto (recorded by tests/device/validate_gpu.sh on 2026-11-27;
tests/fixtures/README.md, "validate.yml on the H100"): the report directory it collected, judged
again here, says what it said there; and the run before the hostname fix stopped at the
pre-flight, naming the fix."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from nccl_preflight.core.transport import describe, parse_nccl_log
from tests.jenkins_schema import validate_report_junit
from tests.recorded_gpu import FIXTURES, LONE_HEALTHY_GPU, text
from tests.report_build import build_report, build_verdict

REC = "validate_gpu/h100-vm-"
RUN = FIXTURES / "validate_gpu" / "h100-vm-run"


def results() -> dict[str, dict[str, str]]:
    doc = json.loads((RUN / "preflight" / "localhost.json").read_text())
    return {r["check"]: r for r in doc["results"]}


def test_auto_chose_nccl_and_one_rank_from_the_one_gpu() -> None:
    plan = json.loads((RUN / "plan.json").read_text())
    assert (plan["backend"], plan["world_size"], plan["launch_skipped"]) == ("nccl", 1, "")
    [host] = plan["hosts"]
    assert (host["nproc_per_node"], host["ifname"], host["address"]) == (1, "eth0", "192.0.2.2")
    assert host["backend_choice"]["reason"].startswith("1 NVIDIA GPU(s)")
    env = (RUN / "localhost" / "nccl.env").read_text()
    assert "NCCL_SOCKET_IFNAME=eth0\n" in env and "GLOO_SOCKET_IFNAME=eth0\n" in env


def test_every_pre_flight_check_passed_or_said_why_it_did_not_apply() -> None:
    by_check = results()
    assert {r["status"] for r in by_check.values()} == {"passed", "skipped"}
    assert {c: by_check[c]["status"] for c in LONE_HEALTHY_GPU} == LONE_HEALTHY_GPU
    assert by_check["versions"]["message"] == (
        "localhost: python 3.12.3, torch 2.11.0+cu130, cuda 13.0, nccl 2.28.9, driver 580.159.04"
    )
    assert by_check["hostname"]["message"] == "localhost: hostname vm resolves to 192.0.2.2"
    assert by_check["tcp_master_port"]["status"] == "passed"


def test_the_warm_launch_ran_the_rank_with_nccl_on_the_gpu() -> None:
    launch = json.loads((RUN / "localhost" / "launch.json").read_text())
    assert (launch["warm_start"], launch["rc"], launch["timed_out"]) == (True, 0, False)
    rank = json.loads((RUN / "localhost" / "rank-0.json").read_text())
    assert (rank["backend"], rank["device"], rank["status"]) == ("nccl", "cuda:0", "passed")
    cold = json.loads(text("rank_json/h100-nccl-one-rank/rank-0.json"))
    assert [(t["name"], t["status"]) for t in rank["tests"]] == [
        (t["name"], t["status"]) for t in cold["tests"]
    ]
    parsed = parse_nccl_log((RUN / "localhost" / "nccl-rank-0.log").read_text(), "nccl-rank-0.log")
    assert (parsed["net"], parsed["env"]["NCCL_SOCKET_IFNAME"]) == ("Socket", "eth0")
    assert describe(parsed).startswith("network Socket chosen")


def cells(row: str) -> list[str]:
    """A markdown table row's cells, stripped."""
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def test_the_report_judged_here_again_says_what_it_said_there(tmp_path: Path) -> None:
    validate_report_junit(RUN)
    there = json.loads((RUN / "verdict.json").read_text())
    assert (there["class"], there["exit_code"], there["findings"]) == ("passed", 0, [])
    again = tmp_path / RUN.name
    shutil.copytree(RUN, again)
    for written in ("junit.xml", "junit", "summary.md", "verdict.json"):
        target = again / written
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    summary = build_report(again)
    assert summary["verdict"] == "passed"
    assert build_verdict(again) == there
    # The summary's layout moved on since the recording (healthy hosts folded, failing first):
    # every line it said there is said here, each table row as the same cells.
    here = (again / "summary.md").read_text().splitlines()
    here_rows = [cells(line) for line in here if line.startswith("|")]
    for line in (RUN / "summary.md").read_text().splitlines():
        if line.startswith("|"):
            assert cells(line) in here_rows, line
        else:
            assert line in here, line
    assert {p.name for p in validate_report_junit(again)} == {
        p.name for p in validate_report_junit(RUN)
    }


def test_the_run_before_the_hosts_fix_stopped_at_the_pre_flight_naming_it() -> None:
    verdict = json.loads(text(REC + "as-is-verdict.json"))
    assert (verdict["class"], verdict["exit_code"]) == ("preflight_failed", 10)
    [cause] = [f for f in verdict["findings"] if not f["consequence"]]
    assert (cause["host"], cause["test"]) == ("localhost", "hostname")
    summary = text(REC + "as-is-summary.md")
    assert "map vm to its fabric address 192.0.2.2 in /etc/hosts instead of 127.0.0.1" in summary
    assert "rank 0 on localhost never started: the run stopped at the pre-flight" in summary


def test_alone_on_the_vm_the_loopback_hostname_now_only_warns() -> None:
    """The third call: the VM as it comes validated itself to the end."""
    doc = json.loads(text(REC + "alone-preflight.json"))
    [hostname] = [r for r in doc["results"] if r["check"] == "hostname"]
    assert hostname["status"] == "passed"
    assert hostname["message"].startswith(
        "localhost: warning: its hostname vm resolves to loopback"
    )
    assert "192.0.2.2 in /etc/hosts instead of 127.0.0.1" in hostname["hint"]
    assert {r["status"] for r in doc["results"]} == {"passed", "skipped"}
    verdict = json.loads(text(REC + "alone-verdict.json"))
    assert (verdict["class"], verdict["exit_code"], verdict["findings"]) == ("passed", 0, [])


def test_the_times_of_the_device_calls() -> None:
    """Five turns of torchrun by hand and validate.yml, alternating; the GPU node's 16 cores run
    the control machine too (the local connection)."""
    turns = re.findall(
        r"turn (\S+) (by hand|validate.yml) rc=(\d+) (\d+) ms", text(REC + "times.txt")
    )
    as_is = [int(ms) for turn, what, rc, ms in turns if turn == "as-is" and rc == "2"]
    # The third call's as-is run, after the single-host change: it passed (rc 0).
    assert [rc for turn, what, rc, ms in turns if turn == "as-is"] == ["2", "2", "0"]
    hand = [int(ms) for turn, what, rc, ms in turns if what == "by hand" and rc == "0"]
    playbook = [
        int(ms)
        for turn, what, rc, ms in turns
        if turn != "as-is" and what != "by hand" and rc == "0"
    ]
    assert (len(as_is), len(hand), len(playbook)) == (2, 5, 5)
    ratios = sorted(p / h for p, h in zip(playbook, hand, strict=True))
    assert 1.0 < ratios[2] < 2.0  # the median turn: 1.35x (BENCHMARKS.md, README)


def test_every_recording_here_is_listed_in_the_fixture_readme() -> None:
    readme = text("README.md")
    for path in sorted((FIXTURES / "validate_gpu").iterdir()):
        assert f"`{path.name}`" in readme, path.name
