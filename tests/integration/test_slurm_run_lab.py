# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""`bin/nccl-preflight slurm` on the lab's real Slurm (tests/lab/slurm.py): what a user sees (exit
code, output, JUnit, verdict.json) and that nothing is left on any node or in Slurm afterwards.

Tests marked `lab` need root, the node Python (NCCL_LAB_NODE_PYTHON) and Debian's Slurm packages.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import prom_text
from tests.builders.lab_runs import CHECK_ARGS as PAIRWISE_CHECK_ARGS
from tests.builders.lab_runs import FAST as PAIRWISE_FAST
from tests.builders.lab_runs import HANGING_SWEEP, LONG_SWEEP, assert_only_cause, pairwise_cases
from tests.builders.lab_runs import links as pairwise_links
from tests.builders.lab_slurm import (
    assert_nothing_left,
    launch_records,
    rank_doc,
    slurm_argv,
    slurm_command,
)
from tests.lab.fixtures import LabFactory, require_slurm
from tests.lab.harness import Lab
from tests.lab.runs import (
    PHASE_WAIT_S,
    body_ended,
    during,
    finished_epoch,
    new_run_id,
    paused_before_barrier,
    rank_suites,
    validate,
)
from tests.polling import wait_or_fail

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def slurm3(lab_factory: LabFactory) -> Lab:
    require_slurm()
    return lab_factory(3, slurm=True)


def test_per_node_values_apply_to_the_nodes_their_hostlist_names(
    slurm3: Lab, tmp_path: Path
) -> None:
    """nccl_node_vars: the run's nccl_socket_ifname names no interface; a Slurm hostlist gives
    the first two nodes the lab's fabric interface. The third, left out, is named alone by the
    environment stage; given its own entry (and 2 ranks), the run passes with 4 ranks."""
    names, ifname = slurm3.slurm_nodes, slurm3.hosts[0].fabric_ifname
    assert names[0][:-1] == names[1][:-1]  # lab1-node01, lab1-node02: one hostlist for both
    first_two = f"{names[0][:-1]}[{names[0][-1]}-{names[1][-1]}]"
    node_vars = {first_two: {"nccl_socket_ifname": ifname}}
    run_id = new_run_id()
    textfile = tmp_path / "textfile"  # node_exporter's directory: the run's metrics, both runs
    textfile.mkdir()
    metrics = ("--textfile", str(textfile))
    done = slurm_command(
        slurm3, tmp_path, run_id, *metrics, nccl_socket_ifname="nosuch0", nccl_node_vars=node_vars
    )
    assert done.returncode != 0, done.stdout + done.stderr
    found = prom_text.parse((textfile / "nccl_preflight_run.prom").read_text())
    assert found["nccl_preflight_verdict"].value(**{"class": "preflight_failed"}) == 1
    assert "nccl_preflight_run_last_success_timestamp_seconds" not in found  # never passed
    preflight = tmp_path / "reports" / run_id / "preflight"

    def environment(i: int) -> dict[str, Any]:
        (result,) = json.loads((preflight / f"{names[i]}.json").read_text())["results"]
        return result

    for i in (0, 1):  # fine themselves: not checked, because of the third
        assert environment(i)["status"] == "skipped", environment(i)
        assert f"because of {names[2]}" in environment(i)["message"]
    result = environment(2)
    assert result["status"] == "error" and "nosuch0" in result["message"], result
    # its interfaces as the facts read them (the fabric one with its address), as on Ansible
    assert f"{ifname} {slurm3.hosts[2].fabric_addr}/" in result["message"], result

    node_vars[names[2]] = {"nccl_socket_ifname": ifname, "nccl_nproc_per_node": 2}
    run_id = new_run_id()
    before = time.time()
    done = slurm_command(
        slurm3, tmp_path, run_id, *metrics, nccl_socket_ifname="nosuch0", nccl_node_vars=node_vars
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = prom_text.parse((textfile / "nccl_preflight_run.prom").read_text())
    assert found["nccl_preflight_verdict"].by("class")["passed"] == 1
    success = found["nccl_preflight_run_last_success_timestamp_seconds"].value()
    assert before < success <= time.time()
    assert 0 < found["nccl_preflight_run_duration_seconds"].value() < time.time() - before
    busbw = found["nccl_preflight_busbw_bytes_per_second"].by("collective")
    assert "all_reduce" in busbw and all(value > 0 for value in busbw.values()), busbw
    report = tmp_path / "reports" / run_id
    plan = json.loads((report / "plan.json").read_text())
    assert plan["world_size"] == 4
    assert [h["nproc_per_node"] for h in plan["hosts"]] == [1, 1, 2]
    assert len(rank_suites(report / "junit.xml")) == 4
    assert_nothing_left(slurm3, run_id, done.stdout)


def dropped_port_run(
    lab: Lab, tmp_path: Path, run_id: str, host: int, port: int, **config: Any
) -> tuple[subprocess.CompletedProcess[str], Callable[[int, str], dict[str, Any]]]:
    """The command run while lab host ``host`` drops TCP ``port``; it must fail its pre-flight
    (exit 10). -> (the run, result(node index, check): that node's pre-flight result)."""
    undo = lab.firewall_drop(lab.hosts[host], port)
    try:
        done = slurm_command(lab, tmp_path, run_id, **config)
    finally:
        undo()
    assert done.returncode == 10, done.stdout + done.stderr
    report = tmp_path / "reports" / run_id

    def result(i: int, check: str) -> dict[str, Any]:
        doc = json.loads((report / "preflight" / f"{lab.slurm_nodes[i]}.json").read_text())
        return next(r for r in doc["results"] if r["check"] == check)

    return done, result


# The master dropping MASTER_PORT under Slurm: test_frontends_agree_lab's MASTER_DROP, whose Slurm
# run is asserted as this file asserted its own (one Slurm run fewer).


def test_with_backend_hccl_a_node_whose_firewall_drops_hccls_port_is_named(
    slurm3: Lab, tmp_path: Path
) -> None:
    """nccl_backend hccl (no NPU here, so the NPU checks fail too): every node listens on
    HCCL_IF_BASE_PORT, as on the Ansible path; the third node drops it, and its ring peer's
    probe and its own firewall read name it with the port (test_backends_lab.py's Ansible
    twin)."""
    run_id = new_run_id()
    port = 60123
    done, result = dropped_port_run(
        slurm3, tmp_path, run_id, 2, port, nccl_backend="hccl",
        nccl_extra_env={"HCCL_IF_BASE_PORT": str(port)},
    )  # fmt: skip
    dropped = result(1, "tcp_hccl_port")  # node 2 probes its ring peer node 3
    assert dropped["status"] == "failed", dropped
    assert f"{slurm3.hosts[2].fabric_addr}:{port} (HCCL's host port" in dropped["message"]
    assert result(0, "tcp_hccl_port")["status"] == "passed"
    fw = result(2, "firewall")
    assert fw["status"] == "failed" and f"tcp/{port}" in fw["message"], fw
    assert "HCCL_IF_BASE_PORT" in fw["message"]
    assert_nothing_left(slurm3, run_id, done.stdout)


def test_a_node_whose_task_ends_before_it_started_is_named_unreachable(
    slurm3: Lab, tmp_path: Path
) -> None:
    """One node's Python fails at once (a wrapper that exits 1 there): srun says its task
    ended, the command stops waiting for that node's "started" record and names it; the run
    goes on as the Ansible path does with an unreachable host (no launch, class unreachable)."""
    bad = slurm3.slurm_nodes[2]
    wrapper = tmp_path / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ "$SLURMD_NODENAME" = "{bad}" ]; then echo "no python on this node" >&2; exit 1; fi\n'
        f'exec "{slurm3.python}" "$@"\n'
    )
    wrapper.chmod(0o755)
    run_id = new_run_id()
    done = slurm_command(slurm3, tmp_path, run_id, nccl_python=str(wrapper))
    out = done.stdout + done.stderr
    assert f"{bad}: unreachable: its task ended before it started" in out, out
    assert "Exited with exit code 1" in out, out
    verdict = json.loads((tmp_path / "reports" / run_id / "verdict.json").read_text())
    assert verdict["class"] == "unreachable", verdict
    assert done.returncode == verdict["exit_code"] != 0, out
    # the cause: that node; every rank that never started is its consequence
    causes = [f for f in verdict["findings"] if not f["consequence"]]
    assert [(f["class"], f["host"]) for f in causes] == [("unreachable", bad)], causes
    assert_nothing_left(slurm3, run_id, done.stdout)


# ------------------------------------------------------------------------------------------------
# Faults while the ranks run: as tests/integration/test_run_faults_lab.py injects them into the
# Ansible path, and named as it names them.
# ------------------------------------------------------------------------------------------------


def test_a_sigkilled_rank_ends_the_run_on_every_node_and_is_named(
    slurm3: Lab, tmp_path: Path
) -> None:
    """As test_run_faults_lab's SIGKILL test: rank 3 (local rank 1 of the second node, 2 ranks
    per node) is killed while it waits in barrier for rank 0, which pauses before it, so the
    other nodes cannot end by themselves: the watch ends them, naming the death."""
    run_id = new_run_id()
    names, victim = slurm3.slurm_nodes, slurm3.hosts[1]
    killed: dict[str, Any] = {}

    def kill() -> None:
        wait_or_fail(
            lambda: rank_doc(run_id, 3).get("current_test") == "barrier",
            timeout=PHASE_WAIT_S,
            give_up=body_ended,
        )
        killed["pid"] = int(rank_doc(run_id, 3)["pid"])
        killed["at"] = time.time()
        slurm3.kill(victim, killed["pid"])

    with during(kill):
        done = slurm_command(
            slurm3,
            tmp_path,
            run_id,
            nccl_nproc_per_node=2,
            # Long on purpose: the end must come from the death, not from a timeout.
            nccl_run_timeout=240,
            nccl_check_args=paused_before_barrier(),
        )
    out = done.stdout + done.stderr
    assert "at" in killed, out[-3000:]
    assert done.returncode == 4, out[-3000:]  # rank_lost, as the Ansible path's verdict
    report = tmp_path / "reports" / run_id
    assert json.loads((report / "verdict.json").read_text())["class"] == "rank_lost"
    launches = launch_records(report, names)
    for node, record in launches.items():
        assert record["timed_out"] is False, (node, record)
        # Far below nccl_run_timeout (240 s); the goal (10 s) is bench/'s, not this test's.
        took = finished_epoch(record) - killed["at"]
        assert took <= 60 + 1, f"{node} ended {took:.1f} s after the kill: {record}"
    exits = launches[names[1]]["rank_exits"]
    root = next(e for e in exits if e["root_cause"])
    assert root["rank"] == 3 and root["pid"] == killed["pid"], exits
    assert root["signal"] == "SIGKILL" and root["exitcode"] == -9, root
    assert root["oom"] is None
    assert "SIGKILL" in root["text"] and ("OOM" in root["text"] or "dmesg" in root["text"])
    # Node 0 (rank 0 paused before barrier, rank 1 waiting on it) cannot end by itself: the
    # watch ends it, naming the death.
    first = launches[names[0]]
    assert f"rank 3 on {names[1]} killed by SIGKILL" in (first["stopped_by"] or ""), first
    assert first["stop"]["kind"] == "failure_elsewhere", first
    # Node 2's ranks (4, 5) exchange with rank 3 in gloo's barrier: when rank 3 dies before it
    # sent them its part (a loaded machine), they fail by themselves and their torchrun ends
    # before the watch's stop comes (fresh-clone CI, 2026-11-27: stopped_by None, nothing
    # killed). Either way the node ended failed; stopped by the watch, it names the death.
    last = launches[names[2]]
    assert last["rc"] != 0, (names[2], last)
    if last["stopped_by"] is None:
        assert last["killed_pids"] == [] and last["rank_exits"], (names[2], last)
        assert all(e["exitcode"] != 0 for e in last["rank_exits"]), (names[2], last)
    else:
        assert f"rank 3 on {names[1]} killed by SIGKILL" in last["stopped_by"], (names[2], last)
        assert last["stop"]["kind"] == "failure_elsewhere", (names[2], last)
    assert "killed by SIGKILL" in done.stdout
    suite = rank_suites(report / "junit.xml")[f"nccl.{names[1].replace('.', '_')}.rank3"]
    errors = [e.get("message", "") for e in suite.iter("error")]
    assert any("It was killed by SIGKILL" in m for m in errors), errors
    # The killed rank alone is the cause, first and in the headline; every other rank's error
    # (ended by the watch, or its gloo peer gone) is folded under it (core/run_cause.py).
    assert_only_cause(report, names[1], rank=3)
    validate(report)
    assert_nothing_left(slurm3, run_id, done.stdout)


def test_a_link_cut_mid_run_is_named_by_node_interface_test_and_size(
    slurm3: Lab, tmp_path: Path
) -> None:
    """As test_run_faults_lab's link-cut tests: the second node's fabric link goes down while the
    ranks time a collective; the run ends long before nccl_run_timeout, every node's run stopped
    with the stall's words (that node's interface is down, where the ranks waited), and the
    verdict, the report and every rank's JUnit name it."""
    run_id = new_run_id()
    names, victim = slurm3.slurm_nodes, slurm3.hosts[1]
    report = tmp_path / "reports" / run_id
    cut: dict[str, float] = {}
    undo: list[Callable[[], None]] = []

    def watched_bandwidth() -> bool:
        """Rank 0 times a bandwidth size and the watch saw every node in a bandwidth test."""
        doc = rank_doc(run_id, 0)
        if not str(doc.get("current_test") or "").startswith("bandwidth_"):
            return False
        for node in names:
            try:
                state = json.loads((report / node / "progress.json").read_text())
            except (OSError, ValueError):
                return False
            tests = [str(p.get("test") or "") for p in state.get("progress") or []]
            if not any(t.startswith("bandwidth_") for t in tests):
                return False
        return True

    def cut_link() -> None:
        wait_or_fail(watched_bandwidth, timeout=PHASE_WAIT_S, give_up=body_ended)
        undo.append(slurm3.link_down(victim))
        cut["at"] = time.time()

    with during(cut_link, undo):
        done = slurm_command(
            slurm3, tmp_path, run_id, nccl_run_timeout=300, nccl_check_args=LONG_SWEEP
        )
    out = done.stdout + done.stderr
    assert "at" in cut, out[-3000:]
    assert done.returncode == 4, out[-3000:]  # rank_lost, as the Ansible path's verdict
    named = f"{names[1]}: {victim.fabric_ifname} is DOWN (was UP at the pre-flight)"
    line = next((x for x in done.stdout.splitlines() if "stalled:" in x), "")
    assert named in line, out[-4000:]
    assert re.search(r"waited on rank \d+ in bandwidth_\w+ at [\d.]+ [KMG]?i?B", line), line
    for node, record in launch_records(report, names).items():
        assert (record["stopped_by"] or "").startswith(f"stalled: {named}"), (node, record)
        assert record["timed_out"] is False
        stop = record["stop"]
        assert stop["kind"] == "stall" and names[1] in stop["culprits"], stop
        assert stop["cause_named"] is True, stop
        assert stop["test"].startswith("bandwidth_") and isinstance(stop["size_bytes"], int)
        took = finished_epoch(record) - cut["at"]
        assert took <= 90, f"{node} ended {took:.0f} s after the cut"
    verdict = json.loads((report / "verdict.json").read_text())
    assert verdict["class"] == "rank_lost"
    assert any(named in json.dumps(f) for f in verdict["findings"]), verdict["findings"]
    assert named in (report / "report.html").read_text()
    # the node with the link down alone is the cause; no pairwise relaunch after it
    cause = assert_only_cause(report, names[1], rank=1)
    assert named in cause["what"] and victim.fabric_ifname in cause["fix"], cause
    assert "running only the pairwise rounds" not in out
    suites = rank_suites(report / "junit.xml")
    assert set(suites) == {f"nccl.{n.replace('.', '_')}.rank{i}" for i, n in enumerate(names)}
    for suite_name, suite in suites.items():
        errors = [e.get("message", "") for e in suite.iter("error")]
        assert any(named in m for m in errors), (suite_name, errors)
    validate(report)
    assert_nothing_left(slurm3, run_id, done.stdout)


# ------------------------------------------------------------------------------------------------
# Ending it from outside: Ctrl-C of the command, scancel of its job
# ------------------------------------------------------------------------------------------------


def interrupted_mid_run(
    lab: Lab, tmp_path: Path, run_id: str, interrupt: Callable[[subprocess.Popen[str]], None]
) -> tuple[int, str, str]:
    """The command started with ranks that wait in barrier for rank 0 (paused before it), so
    nothing ends by itself; once rank 1 waits there, interrupt(command); -> (exit code, its
    stdout, its stderr)."""
    argv, env = slurm_argv(
        lab, tmp_path, run_id, nccl_run_timeout=240, nccl_check_args=paused_before_barrier()
    )
    # Its own process group, as a shell gives a foreground command (Ctrl-C reaches the group).
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + PHASE_WAIT_S
        while rank_doc(run_id, 1).get("current_test") != "barrier":
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "rank 1 never reached barrier"
            time.sleep(0.2)
        interrupt(proc)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    return proc.returncode, out, err


def assert_cut_short_report(lab: Lab, tmp_path: Path, run_id: str, why: str) -> None:
    """The report of a run cut short (slurm/run.py cut_short): class no_verdict, the
    interruption its first finding and a testcase of its own, every planned rank in the JUnit
    as an error that no rank finding headlines, every file valid."""
    report = tmp_path / "reports" / run_id
    verdict = json.loads((report / "verdict.json").read_text())
    assert (verdict["class"], verdict["exit_code"]) == ("no_verdict", 1), verdict["findings"]
    head = verdict["findings"][0]
    assert head["id"] == "run/interrupted" and why in head["what"], head
    heads = [f for f in verdict["findings"] if not f["consequence"]]
    assert not [f for f in heads if f["rank"] is not None], heads
    suites = rank_suites(report / "junit.xml")
    run_suite = suites.pop("nccl.run")
    assert [case.get("name") for case in run_suite.iter("testcase")] == ["interrupted"]
    assert len(suites) == len(lab.hosts), sorted(suites)
    assert all(s.get("errors") == "1" for s in suites.values()), sorted(suites)
    validate(report)


def test_ctrl_c_of_the_command_leaves_nothing_on_any_node(slurm3: Lab, tmp_path: Path) -> None:
    run_id = new_run_id()

    def ctrl_c(proc: subprocess.Popen[str]) -> None:
        os.killpg(proc.pid, signal.SIGINT)

    code, out, err = interrupted_mid_run(slurm3, tmp_path, run_id, ctrl_c)
    assert code == 1, out[-3000:] + err[-3000:]  # no_verdict, as bin/nccl-preflight's Ctrl-C
    assert "interrupted by SIGINT; the allocation was given back" in err, err[-3000:]
    assert_nothing_left(slurm3, run_id, out)
    assert_cut_short_report(slurm3, tmp_path, run_id, "interrupted by SIGINT")


def test_scancel_of_the_job_leaves_nothing_on_any_node(slurm3: Lab, tmp_path: Path) -> None:
    run_id = new_run_id()
    cancelled: list[str] = []

    def scancel(_: subprocess.Popen[str]) -> None:
        jobs = slurm3.slurm_cmd("squeue", "-h", "-o", "%i").stdout.split()
        assert len(jobs) == 1, jobs
        slurm3.slurm_cmd("scancel", jobs[0])
        cancelled.append(jobs[0])

    code, out, err = interrupted_mid_run(slurm3, tmp_path, run_id, scancel)
    assert code == 1, out[-3000:] + err[-3000:]  # no_verdict: the ranks were ended from outside
    assert f"job {cancelled[0]} ended (CANCELLED) while the ranks ran" in err, err[-3000:]
    assert_nothing_left(slurm3, run_id, out)
    assert_cut_short_report(slurm3, tmp_path, run_id, f"job {cancelled[0]} ended (CANCELLED)")


# ------------------------------------------------------------------------------------------------
# --drain
# ------------------------------------------------------------------------------------------------


def drain_reasons(lab: Lab) -> dict[str, str]:
    """{node: reason} of every drained node, the reason whole (`sinfo -R -o '%n %E'`)."""
    out = lab.slurm_cmd("sinfo", "-h", "-R", "-o", "%n %E").stdout
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def test_drain_drains_only_the_node_a_finding_names_with_its_reason(
    slurm3: Lab, tmp_path: Path
) -> None:
    """The second node's fabric MTU differs from the two others': the pre-flight names it (mtu),
    and --drain drains it alone, with `nccl-preflight: mtu: <value>`; the others stay idle."""
    run_id = new_run_id()
    names = slurm3.slurm_nodes
    undo = slurm3.set_mtu(slurm3.hosts[1], 1400)
    try:
        done = slurm_command(slurm3, tmp_path, run_id, "--drain")
        reasons = drain_reasons(slurm3)
        states = slurm3.slurm_node_states()
    finally:
        undo()
        slurm3.scontrol("update", f"nodename={names[1]}", "state=resume", check=False)
        slurm3.slurm_wait_idle()
    out = done.stdout + done.stderr
    assert done.returncode == 10, out[-3000:]  # preflight_failed
    reason = f"nccl-preflight: mtu: MTU 1400 on {slurm3.hosts[1].fabric_ifname} differs from"
    assert list(reasons) == [names[1]], reasons
    assert reasons[names[1]].startswith(reason), reasons
    assert f"--drain: drained {names[1]}: {reason}" in done.stdout, out[-3000:]
    assert states[names[1]].startswith("drain"), states
    assert not [n for n in (names[0], names[2]) if states[n].startswith("drain")], states
    assert_nothing_left(slurm3, run_id, done.stdout)


# ------------------------------------------------------------------------------------------------
# Pairwise rounds: test_pairwise_lab's two-rail case, through the Slurm front-end
# ------------------------------------------------------------------------------------------------


def test_pairwise_always_on_three_nodes_names_the_slow_node_and_drain_drains_it(
    slurm3: Lab, tmp_path: Path
) -> None:
    """As test_pairwise_lab's three hosts with two rails: the third node's fabric link is a
    quarter of the others'; nccl_pairwise=always names it and it alone (console, summary.md, the
    JUnit, pairwise.json), and --drain drains it with the pairwise reason. Three nodes, the
    module's own lab: the fewest that can tell which node of a slow pair is slow."""
    run_id = new_run_id()
    names, bad = slurm3.slurm_nodes, slurm3.hosts[2]
    try:
        with pairwise_links(slurm3, bad):
            done = slurm_command(
                slurm3,
                tmp_path,
                run_id,
                "--drain",
                nccl_run_timeout=240,
                nccl_pairwise="always",
                nccl_pair_rounds=3,  # the whole tournament of 3, as the default would
                nccl_nproc_per_node=2,
                nccl_check_args=PAIRWISE_CHECK_ARGS,
            )
        reasons = drain_reasons(slurm3)
    finally:
        slurm3.scontrol("update", f"nodename={names[2]}", "state=resume", check=False)
        slurm3.slurm_wait_idle()
    out = done.stdout + done.stderr
    assert done.returncode == 8, out[-4000:]  # bandwidth: the slow node's class
    report = tmp_path / "reports" / run_id
    assert f"{names[2]} is SLOW" in done.stdout, out[-4000:]
    summary = (report / "summary.md").read_text()
    slow_lines = [line for line in summary.splitlines() if line.startswith("- slow:")]
    assert len(slow_lines) == 1 and names[2] in slow_lines[0], summary
    cases = pairwise_cases(report)
    assert sorted(cases) == sorted(f"pairwise.{n}" for n in names)
    failed = [c for c, case in cases.items() if case.find("failure") is not None]
    assert failed == [f"pairwise.{names[2]}"]
    doc = json.loads((report / "pairwise.json").read_text())
    assert {v["host"]: v["status"] for v in doc["verdicts"]} == {
        n: "slow" if n == names[2] else "ok" for n in names
    }
    assert doc["rails"] == 2
    # nccl_pair_rounds from --config FILE reached the ranks (the default is 16)
    assert (doc["pair_rounds"], doc["first_pass_rounds"], doc["every_pair"]) == (3, 3, True)
    assert list(reasons) == [names[2]], reasons
    assert reasons[names[2]].startswith(f"nccl-preflight: pairwise: {names[2]} is SLOW"), reasons
    validate(report)
    assert_nothing_left(slurm3, run_id, done.stdout)


def test_a_collective_that_hangs_then_the_pairwise_relaunch_names_the_node(
    slurm3: Lab, tmp_path: Path
) -> None:
    """As test_pairwise_lab's relaunch test: the third node's link at 300 kbit/s, one all_reduce
    of 4M cannot finish; the run is ended as a stall (10 s, as the Ansible twin's) with no named
    cause, so the pairwise rounds run again alone (a small payload) and name that node."""
    run_id = new_run_id()
    names, bad = slurm3.slurm_nodes, slurm3.hosts[2]
    undo = [slurm3.rate_limit(h, "300kbit" if h is bad else PAIRWISE_FAST) for h in slurm3.hosts]
    try:
        done = slurm_command(
            slurm3,
            tmp_path,
            run_id,
            nccl_run_timeout=150,
            nccl_pairwise="auto",
            nccl_stall_timeout=10,
            nccl_check_args=HANGING_SWEEP,
        )
    finally:
        for step in undo:
            step()
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-4000:]
    assert "running only the pairwise rounds to name the node" in done.stdout, out[-4000:]
    report = tmp_path / "reports" / run_id
    first = json.loads((report / names[0] / "rank-0.json").read_text())
    assert not [t for t in first["tests"] if t["name"] == "pairwise"]
    assert sorted(p.parent.parent.name for p in report.glob("*/pairwise/rank-*.json")) == names
    doc = json.loads((report / "pairwise.json").read_text())
    assert doc["relaunched"] is True and "second launch" in doc["why"], doc["why"]
    assert {v["host"]: v["status"] for v in doc["verdicts"]} == {
        n: "slow" if n == names[2] else "ok" for n in names
    }
    verdict = json.loads((report / "verdict.json").read_text())
    named = [f for f in verdict["findings"] if f["test"] == "pairwise"]
    assert [f["host"] for f in named] == [names[2]], verdict["findings"]
    validate(report)
    assert_nothing_left(slurm3, run_id, done.stdout)
