# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Waiting for the run's own allocation (src/nccl_preflight/slurm/pending.py, allocation.py)
against a double of salloc/squeue/scancel/scontrol (tests/unit/slurm/slurm_double.py): the job id
and Slurm's reason said while it pends, the wait bounded, the job cancelled and checked gone on
every way out (the bound, a signal, a signal before salloc said the id). The real Slurm:
tests/integration/test_slurm_allocation_lab.py."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from nccl_preflight.slurm.allocation import Allocation, Interrupted
from nccl_preflight.slurm.pending import NotGranted, SallocRun, reason_text
from nccl_preflight.slurm.salloc_options import SallocRequest
from tests.polling import wait_for

DOUBLE = Path(__file__).with_name("slurm_double.py")


class Slurm:
    """The double's directory: the job's state, the calls made, the environment to use."""

    def __init__(self, root: Path) -> None:
        self.dir = root
        bin_dir = root / "bin"
        bin_dir.mkdir()
        for name in ("salloc", "squeue", "scancel", "scontrol"):
            script = bin_dir / name
            script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{DOUBLE}" {name} "$@"\n')
            script.chmod(0o755)
        self.env = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "SLURM_DOUBLE_DIR": str(root),
        }

    def job(self) -> dict[str, str]:
        try:
            return json.loads((self.dir / "job.json").read_text())
        except (OSError, ValueError):
            return {}

    def set(self, **values: str) -> None:
        tmp = self.dir / "job.tmp"
        tmp.write_text(json.dumps({**self.job(), **values}))
        tmp.replace(self.dir / "job.json")

    def calls(self, name: str) -> list[str]:
        log = self.dir / "calls.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [line for line in lines if line.split()[0] == name]


@pytest.fixture
def slurm(tmp_path: Path) -> Iterator[Slurm]:
    double = Slurm(tmp_path)
    yield double
    if double.job().get("state") in ("PENDING", "RUNNING"):
        double.set(state="CANCELLED")  # let a left salloc double end


def salloc_run(slurm: Slurm, said: list[str], wait_s: float, **env: str) -> SallocRun:
    run = SallocRun(
        SallocRequest(2).argv(), {**slurm.env, **env}, wait_s, said.append, poll_s=0.2,
        repeat_s=1.0,
    )  # fmt: skip
    run.start()
    return run


def test_a_pending_job_is_named_with_its_reason_and_cancelled_after_the_wait(
    slurm: Slurm,
) -> None:
    said: list[str] = []
    run = salloc_run(slurm, said, wait_s=5)
    assert wait_for(lambda: slurm.job().get("state") == "PENDING", 30)
    slurm.set(reason="ReqNodeNotAvail, UnavailableNodes:node3")
    with pytest.raises(NotGranted) as exc:
        run.granted()
    message = str(exc.value)
    assert exc.value.timed_out and not exc.value.refused
    assert message.startswith("job 42 still pending after ")
    assert (
        "(--wait-allocation 5): ReqNodeNotAvail, UnavailableNodes:node3 (a node it needs" in message
    )
    assert "job 42 cancelled (squeue no longer lists it); no node was tested" in message
    assert slurm.job()["state"] == "CANCELLED"
    assert slurm.calls("scancel") == ["scancel 42"]
    # said while it pended: the job id, the bound, the reason; and again (repeat_s 1 s)
    assert said[0].startswith("nccl-preflight slurm: job 42 is pending (ReqNodeNotAvail, ")
    assert "; waiting up to 5 s for its nodes (--wait-allocation; 0 waits for ever)" in said[0]
    assert "Ctrl-C cancels it" in said[0]
    assert any("UnavailableNodes:node3" in line for line in said)
    assert len([line for line in said if "still pending" in line]) >= 1
    assert run.done and run.cancel() == "job 42 was already given back"


def test_a_new_reason_is_said_at_once_and_a_grant_ends_the_wait(slurm: Slurm) -> None:
    said: list[str] = []
    run = salloc_run(slurm, said, wait_s=0)  # 0: for ever

    def move_on() -> None:
        assert wait_for(lambda: any("is pending" in line for line in said), 30)
        slurm.set(reason="Priority")
        assert wait_for(lambda: any("Priority" in line for line in said), 30)
        slurm.set(state="RUNNING")

    helper = threading.Thread(target=move_on)
    helper.start()
    assert run.granted() == "42"
    helper.join()
    assert "waiting for its nodes for ever (--wait-allocation 0)" in said[0]
    assert any(line.endswith("Priority (jobs of higher priority are queued ahead of it)")
               for line in said)  # fmt: skip
    assert said[-1].startswith("nccl-preflight slurm: job 42 granted after ")
    assert slurm.calls("scancel") == []


def test_a_request_slurm_refuses_is_bad_input_and_leaves_no_job(slurm: Slurm) -> None:
    run = salloc_run(slurm, [], wait_s=5, SLURM_DOUBLE_SALLOC="refused")
    with pytest.raises(NotGranted) as exc:
        run.granted()
    assert exc.value.refused and "Invalid partition name specified" in str(exc.value)
    assert slurm.calls("scancel") == []


def interrupt_when(predicate: object, signum: int) -> threading.Thread:
    """Send ``signum`` to this process once ``predicate()`` holds (from a helper thread)."""

    def send() -> None:
        assert wait_for(predicate, 30)  # type: ignore[arg-type]
        os.kill(os.getpid(), signum)

    thread = threading.Thread(target=send)
    thread.start()
    return thread


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_pending_cancels_the_job_and_says_so_truly(
    slurm: Slurm, signum: int
) -> None:
    said: list[str] = []
    alloc = Allocation(2, SallocRequest(2, wait_s=0), environ=slurm.env, say=said.append)
    helper = interrupt_when(lambda: any("is pending" in line for line in said), signum)
    with pytest.raises(Interrupted), alloc:
        pytest.fail("the allocation was granted")
    helper.join()
    assert alloc.released == "job 42 cancelled (squeue no longer lists it)"
    assert slurm.job()["state"] == "CANCELLED"
    assert said[0] == ("nccl-preflight slurm: salloc -N 2 --no-shell --job-name=nccl-preflight")
    assert signal.getsignal(signum) is not None  # the previous handler is back


def test_a_signal_before_salloc_said_the_job_id_still_cancels_it(slurm: Slurm) -> None:
    """The job exists before salloc names it (the double says its id 3 s late): SIGINT to
    salloc makes it give the job up, its last words name it, and the cancel is checked."""
    said: list[str] = []
    env = {**slurm.env, "SLURM_DOUBLE_SALLOC": "late"}
    alloc = Allocation(2, SallocRequest(2, wait_s=0), environ=env, say=said.append)
    helper = interrupt_when(lambda: slurm.job().get("state") == "PENDING", signal.SIGINT)
    with pytest.raises(Interrupted), alloc:
        pytest.fail("the allocation was granted")
    helper.join()
    assert alloc.released == "job 42 cancelled (squeue no longer lists it)"
    assert slurm.job()["state"] == "CANCELLED"


def test_a_granted_allocation_is_given_back_when_the_run_ends(slurm: Slurm) -> None:
    said: list[str] = []
    request = SallocRequest(2, options=["--exclusive"], wait_s=30)
    alloc = Allocation(2, request, environ=slurm.env, say=said.append)
    granter = threading.Thread(
        target=lambda: (
            wait_for(lambda: slurm.job().get("state") == "PENDING", 30)
            and slurm.set(state="RUNNING")
        )
    )
    granter.start()
    with alloc:
        assert (alloc.job_id, alloc.nodes, alloc.own) == ("42", ["node1", "node2"], True)
    granter.join()
    assert alloc.released == "the allocation was given back (scancel 42)"
    assert slurm.job()["argv"].endswith("--job-name=nccl-preflight --exclusive")


def test_reason_hints_name_where_to_look() -> None:
    assert "sinfo -R" in reason_text("ReqNodeNotAvail, UnavailableNodes:n3")
    assert reason_text("BeginTime") == "BeginTime"
