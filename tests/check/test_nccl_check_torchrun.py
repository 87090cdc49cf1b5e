# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""files/nccl_check.py under real torchrun processes (CPU, gloo, loopback)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.builders.report import RunDir, build, suites
from tests.check.support import (
    FAST,
    RUN_LIMIT_S,
    SCRIPT,
    TIMEOUT_S,
    by_name,
    current_test,
    kill,
    load_part,
    load_script,
    records,
    start_rank,
    torchrun,
    torchrun_argv,
)
from tests.jenkins_schema import validate_report_junit
from tests.polling import wait_or_fail
from tests.ports import free_port

nc = load_script()
tables = load_part("nccl_check_tables")
EXAMPLES = Path(__file__).with_name("examples_worker.py")
pytestmark = pytest.mark.torchrun


def output(proc: subprocess.CompletedProcess[str]) -> str:
    return f"rc={proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


# Two ranks (a pair) and three (odd: a ring with no partner for one rank in a pairwise round);
# four added nothing three does not run, at five more imports of torch.
# Their output is then given to the report step, as the launch brings it back (a node's directory
# of a planned run): the report agrees with the exit status and its JUnit is valid.
@pytest.mark.parametrize("nproc", [2, 3])
def test_every_test_passes_on_every_rank(
    tmp_path: Path, nproc: int, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1"], nproc=nproc).plan()
    out = run.host_dir("node1")
    proc = torchrun(nproc, "--out-dir", str(out), "--timeout", str(TIMEOUT_S), *FAST)

    assert proc.returncode == 0, output(proc)
    recs = records(out)
    assert sorted(recs) == list(range(nproc))
    for rank, rec in recs.items():
        assert rec["schema"] == 1
        assert (rec["global_rank"], rec["world_size"], rec["backend"]) == (rank, nproc, "gloo")
        assert rec["status"] == "passed" and rec["current_test"] is None
        assert rec["finished_at"] and rec["missing_ranks"] == []
        statuses = {t["name"]: t["status"] for t in rec["tests"]}
        assert list(statuses) == ["checkin", "init", *tables.ALL_TESTS]
        assert set(statuses.values()) == {"passed"}, statuses
        rows = by_name(rec)["bandwidth_all_reduce"]["bandwidth"]
        assert [r["size_bytes"] for r in rows] == [1024, 4096]
        assert all(r["wrong"] == 0 and r["redop"] == "sum" and r["type"] == "float" for r in rows)
    # rank 0 prints the nccl-tests table; the other ranks stay quiet
    assert "#wrong" in proc.stdout and "# Avg bus bandwidth" in proc.stdout
    assert f"PASSED - {nproc} of {nproc} ranks passed" in proc.stdout
    assert proc.stdout.count("nccl_check: PASSED") == 1

    (out / "torchrun.log").write_text(proc.stdout + proc.stderr)
    (out / "launch.json").write_text(json.dumps({"rc": 0, "timed_out": False, "killed_pids": []}))
    result = build(run, capsys)
    validate_report_junit(run.dir)
    merged = suites(run.dir / "junit.xml")
    assert sorted(merged) == [f"nccl.node1.rank{r}" for r in range(nproc)]
    assert result["verdict"] == "passed", result["problems"]
    names = {c.get("name") for c in merged["nccl.node1.rank0"].iter("testcase")}
    assert {"all_reduce_sum", "bandwidth_all_reduce"} <= names
    assert "bandwidth_all_reduce" in {row["collective"] for row in result["bandwidth"]}


# The documented examples, each on the world it is written for: a case is "<collective>/<ranks>".
EXAMPLE_VALUES = {
    # with 6 ranks, all_reduce of [2, 3] + 2 * rank gives [42, 48]
    "all_reduce/6": {r: [42, 48] for r in range(6)},
    # with 4 ranks, reduce of [rank] to dst 0 gives [6], all_reduce gives 6 everywhere
    "reduce/4": {0: [6]},
    "all_reduce/4": {r: [6] for r in range(4)},
    # with 2 ranks, reduce_scatter of [2r+1, 2r+2] gives 4 and 6;
    # scatter of [ones, fives] gives [1, 1] and [5, 5]
    "reduce_scatter/2": {0: [4], 1: [6]},
    "scatter/2": {0: [1, 1], 1: [5, 5]},
}


def test_documented_examples_hold_on_real_collectives(tmp_path: Path) -> None:
    """One launch of 6 ranks: the 6-rank examples, then the first 4 ranks and the first 2 meet
    again as worlds of their own (examples_worker.py): one import of torch a rank, not one a rank
    and world."""
    proc = torchrun(6, str(tmp_path), script=EXAMPLES)

    assert proc.returncode == 0, output(proc)
    got = {r: json.loads((tmp_path / f"example-{r}.json").read_text()) for r in range(6)}
    for case, per_rank in EXAMPLE_VALUES.items():
        for rank, values in per_rank.items():
            assert got[rank][case]["status"] == "passed", got[rank][case]
            assert got[rank][case]["got_head"] == values, (case, rank, got[rank][case])
    # Each rank ran the examples of every world it belongs to, and no other.
    worlds = {r: sorted({int(c.split("/")[1]) for c in got[r]}) for r in range(6)}
    assert worlds == {0: [2, 4, 6], 1: [2, 4, 6], 2: [4, 6], 3: [4, 6], 4: [6], 5: [6]}


def test_min_busbw_fails_the_slow_collective_and_names_it(tmp_path: Path) -> None:
    proc = torchrun(
        2,
        "--out-dir", str(tmp_path),
        "--timeout", str(TIMEOUT_S),
        "--tests", "bandwidth_all_reduce,bandwidth_broadcast",
        "--min-busbw", "1000000",  # 1 PB/s: no loopback reaches it
        "--min-busbw-for", "broadcast=0.000000001",  # per collective: wins over --min-busbw
        *FAST,
    )  # fmt: skip

    assert proc.returncode == 1, output(proc)
    for rec in records(tmp_path).values():
        assert rec["status"] == "failed"
        tests = by_name(rec)
        slow = tests["bandwidth_all_reduce"]
        assert slow["status"] == "failed"
        assert "all_reduce" in slow["message"] and "at 4096 B" in slow["message"]
        assert "below the required 1e+06 GB/s" in slow["message"]
        assert slow["bandwidth"], "the measured rows stay in the record of a failed test"
        assert tests["bandwidth_broadcast"]["status"] == "passed"
    assert "bandwidth_all_reduce: failed" in proc.stderr


def test_a_missing_rank_is_named_on_its_node_of_the_planned_layout_and_nobody_hangs(
    tmp_path: Path,
) -> None:
    """Hosts with different slots= (1 and 3 ranks), rank 3 never starts: the ranks that did end
    in error within their --timeout, each naming rank 3 on node 1 (not node 3). The default
    layout's placement is a unit test (test_nccl_check_functions)."""
    timeout = 5
    url = f"tcp://127.0.0.1:{free_port()}"
    common = ["--out-dir", str(tmp_path), "--timeout", str(timeout), "--ranks-per-node", "1,3"]
    started = time.monotonic()
    procs = [start_rank(url, r, 4, *common) for r in (0, 1, 2)]
    for proc in procs:
        proc.wait(timeout=RUN_LIMIT_S)
    elapsed = time.monotonic() - started

    # start-up (importing torch) + timeout + grace; generous for a loaded CI machine
    assert elapsed < timeout + nc.GRACE_S + 60
    assert [p.returncode for p in procs] == [1, 1, 1], [p.stdout.read() for p in procs]  # type: ignore[union-attr]
    recs = records(tmp_path)
    assert sorted(recs) == [0, 1, 2]
    assert [recs[r]["node_rank"] for r in (0, 1, 2)] == [0, 1, 1]
    for rec in recs.values():
        assert rec["status"] == "error"
        assert rec["missing_ranks"] == [{"rank": 3, "node_rank": 1, "host": recs[1]["host"]}]
        checkin = by_name(rec)["checkin"]
        assert checkin["status"] == "error"
        assert f"rank(s) 3 (node 1, {recs[1]['host']})" in checkin["message"]
        assert "did not check in" in checkin["message"]


def test_watchdog_ends_a_stuck_test_and_records_it(tmp_path: Path) -> None:
    timeout = 4
    url = f"tcp://127.0.0.1:{free_port()}"
    common = ["--out-dir", str(tmp_path), "--timeout", str(timeout), "--tests", "correctness"]
    procs = [start_rank(url, r, 2, *common, "--pause-before", "all_reduce_min@0") for r in (0, 1)]
    for proc in procs:
        proc.wait(timeout=RUN_LIMIT_S)

    recs = records(tmp_path)
    # rank 0 sleeps in all_reduce_min: its watchdog records that and exits 124
    assert procs[0].returncode == nc.EXIT_TIMEOUT
    assert recs[0]["status"] == "error" and recs[0]["current_test"] == "all_reduce_min"
    stuck = by_name(recs[0])["all_reduce_min"]
    assert stuck["status"] == "error" and f"within {timeout} s" in stuck["message"]
    assert stuck["details"]["peers_running"]["1"] == "all_reduce_min"
    # rank 1 waits for rank 0 inside the collective: it ends in error too, never hangs
    assert procs[1].returncode != 0
    assert recs[1]["status"] == "error"
    assert by_name(recs[1])["all_reduce_min"]["status"] == "error"


def test_killed_rank_leaves_an_error_in_the_other_ranks_records(tmp_path: Path) -> None:
    argv = torchrun_argv(
        3, SCRIPT, "--out-dir", str(tmp_path), "--timeout", str(TIMEOUT_S),
        "--tests", "correctness", "--pause-before", "send_recv@1",
    )  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        victim = tmp_path / "rank-1.json"
        wait_or_fail(
            lambda: current_test(victim) == "send_recv", timeout=RUN_LIMIT_S, what="rank 1 to pause"
        )
        kill(json.loads(victim.read_text())["pid"])
        _, stderr = proc.communicate(timeout=RUN_LIMIT_S)
    finally:
        proc.kill()

    assert proc.returncode != 0
    recs = records(tmp_path)
    # what the launcher finds of the killed rank: everything up to the test it died in
    assert recs[1]["status"] == "running" and recs[1]["current_test"] == "send_recv"
    assert by_name(recs[1])["all_to_all"]["status"] == "passed"
    for rank in (0, 2):
        rec = recs[rank]
        assert rec["status"] == "error", (rank, rec["tests"][-1], stderr)
        # gloo reports the lost peer, or torchrun's SIGTERM is recorded in the running test
        assert by_name(rec)["send_recv"]["status"] == "error", rec["tests"][-1]
        assert by_name(rec)["all_to_all"]["status"] == "passed"


def test_corrupt_arguments_give_a_clear_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """The script as a program: exit 2 with its usage and no traceback (one process: importing
    torch is slow); the other rejections are its parser's, called here and in unit tests."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--rank", "0", "--world-size", "1", "--dtype", "float7"],
        capture_output=True,
        text=True,
        timeout=RUN_LIMIT_S,
        check=False,
    )

    assert proc.returncode == 2, output(proc)
    assert "usage: nccl_check.py" in proc.stderr
    assert "'float7' is not one of float32" in proc.stderr
    assert "Traceback" not in proc.stderr
    with pytest.raises(SystemExit) as exited:
        nc.parse_args(["--rank", "0", "--world-size", "1", "--init-method", "tcp://host"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "usage: nccl_check.py" in err and "is not tcp://HOST:PORT" in err, err


def test_sigterm_is_recorded_in_the_running_test(tmp_path: Path) -> None:
    url = f"tcp://127.0.0.1:{free_port()}"
    proc = start_rank(
        url, 0, 1, "--out-dir", str(tmp_path), "--timeout", str(TIMEOUT_S),
        "--tests", "all_reduce_sum,barrier", "--pause-before", "barrier",
    )  # fmt: skip
    try:
        path = tmp_path / "rank-0.json"
        wait_or_fail(
            lambda: current_test(path) == "barrier",
            timeout=RUN_LIMIT_S,
            what="the pause in barrier",
        )
        proc.terminate()
        proc.wait(timeout=RUN_LIMIT_S)
    finally:
        proc.kill()

    assert proc.returncode == 128 + 15
    rec = records(tmp_path)[0]
    assert rec["status"] == "error" and rec["current_test"] == "barrier"
    assert by_name(rec)["all_reduce_sum"]["status"] == "passed"
    assert "stopped by SIGTERM" in by_name(rec)["barrier"]["message"]
