# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Time to detect: faults while the ranks run, and how soon the play ends after a named cause.

1. Link cut: validate.yml runs on a 3-host lab (1 rank per host, nccl_pairwise=auto: 3 hosts is
   the least the pairwise relaunch runs on) with a long sweep, once with the shipped
   nccl_run_timeout (300 s) and once with 60 s. Once rank 0 times a bandwidth test (its
   rank-<R>.json has a current_size), host 2's fabric link is set down. Measured: seconds from
   the cut until the play's output names it (the watch's "ending the run: stalled: <host>: <if>
   is DOWN" line, read from the log as it is written), and until ansible-playbook exited; whether
   a pairwise relaunch ran (a reports/<run-id>/<host>/pairwise/ directory). Goals: named <= 30 s
   after the cut, and the play exited <= 30 s after the cut whatever nccl_run_timeout (issue 25
   item 2: no wait after a named cause).
2. Killed rank: 2 hosts x 2 ranks; rank 0 sleeps before `barrier` (so node 1 cannot end by
   itself), rank 3 waits in `barrier` and is SIGKILLed. Measured: seconds from the kill until the
   last node's run ended (launch.json's finished_at, whole seconds) and until the output names
   the signal. Goal: every node's run ended <= 10 s after the kill.
"""

from __future__ import annotations

import contextlib
import glob
import json
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common import PHASES, finish_playbook, lab_session, log, median, start_playbook

RUN_TIMEOUT = 300
# The link cut runs with each: the play's end after a named cause must not depend on it.
CUT_RUN_TIMEOUTS = (RUN_TIMEOUT, 60)
CUT_HOSTS = 3
CUT_GOAL_S = 30.0
CUT_PLAY_END_GOAL_S = 30.0
KILL_GOAL_S = 10.0
# Enough work that the ranks are still inside the collectives when the link goes down.
CUT_CHECK_ARGS = ["--max-bytes", "4M", "--iters", "40", "--warmup", "1"]
KILL_RANK = 3
KILL_CHECK_ARGS = ["--max-bytes", "16K", "--iters", "2", "--warmup", "1", "--tests",
                   "correctness", "--pause-before", "barrier@0"]  # fmt: skip


def run(workdir: Path, repeats: int) -> dict[str, Any]:
    cut_by_timeout = {
        str(t): [_one_cut(workdir, i, t) for i in range(repeats)] for t in CUT_RUN_TIMEOUTS
    }
    cuts = [r for runs in cut_by_timeout.values() for r in runs]
    kills = [_one_kill(workdir, i) for i in range(repeats)]
    named = median([r["named_s"] for r in cuts])
    ended = median([r["ended_s"] for r in kills])
    return {
        "name": "detect",
        "goal": (
            f"a link cut named <= {CUT_GOAL_S:g} s after the cut and the play exited <= "
            f"{CUT_PLAY_END_GOAL_S:g} s after it (3 hosts, nccl_pairwise auto, nccl_run_timeout "
            f"{' and '.join(map(str, CUT_RUN_TIMEOUTS))}); a SIGKILLed rank ends every node's "
            f"run <= {KILL_GOAL_S:g} s after the kill (nccl_run_timeout {RUN_TIMEOUT})"
        ),
        "met": named is not None
        and ended is not None
        and all(r["named_s"] is not None and r["named_s"] <= CUT_GOAL_S for r in cuts)
        and all(
            r["play_end_s"] is not None and r["play_end_s"] <= CUT_PLAY_END_GOAL_S for r in cuts
        )
        and all(r["ended_s"] is not None and r["ended_s"] <= KILL_GOAL_S for r in kills),
        "run_timeout": RUN_TIMEOUT,
        "cut_hosts": CUT_HOSTS,
        "check_args": CUT_CHECK_ARGS,
        "named_s": named,
        "cut_play_end_s": median([r["play_end_s"] for r in cuts]),
        "cut_play_end_by_timeout": {
            t: median([r["play_end_s"] for r in runs]) for t, runs in cut_by_timeout.items()
        },
        "cut_play_end_max_s": max((r["play_end_s"] or 0.0 for r in cuts), default=None),
        "relaunched": any(r["relaunched"] for r in cuts),
        "kill_ended_s": ended,
        "kill_named_s": median([r["named_s"] for r in kills]),
        "wall_s": median([r["wall_s"] for r in cuts]),
        "phases": {p: median([r["phases"].get(p, 0.0) for r in cuts]) for p in PHASES},
        "reported_failure": all(r["rc"] != 0 for r in cuts + kills),
        "runs": cuts,
        "kill_runs": kills,
        "repeats": repeats,
    }


def _one_cut(workdir: Path, i: int, run_timeout: int) -> dict[str, Any]:
    log(f"detect: link cut, nccl_run_timeout {run_timeout}, repeat {i + 1}")
    label = f"cut{run_timeout}-{i}"
    run_root = workdir / "detect" / f"runroot-{label}"
    run_root.mkdir(parents=True, exist_ok=True)
    with lab_session(CUT_HOSTS, slots=1) as (lab, cpu):
        victim = lab.hosts[1]
        rank0 = str(run_root / "nccl-preflight-*" / "results" / "rank-0.json")
        needle = f"stalled: {victim.inventory_name}: {victim.fabric_ifname} is DOWN"

        def cut() -> None:
            lab.link_down(victim)

        result = _timed_fault(lab, cpu, workdir, label, run_root, CUT_CHECK_ARGS,
                              lambda: _at_bandwidth(rank0), cut, needle,
                              run_timeout, {"nccl_pairwise": "auto"})  # fmt: skip
        result["run_timeout"] = run_timeout
        return result


def _one_kill(workdir: Path, i: int) -> dict[str, Any]:
    log(f"detect: SIGKILLed rank, repeat {i + 1}")
    run_root = workdir / "detect" / f"runroot-kill{i}"
    run_root.mkdir(parents=True, exist_ok=True)
    with lab_session(2, slots=2) as (lab, cpu):
        victim = lab.hosts[1]
        record = str(run_root / "nccl-preflight-*" / "results" / f"rank-{KILL_RANK}.json")
        needle = f"rank {KILL_RANK} on {victim.inventory_name} killed by SIGKILL"

        def kill() -> None:
            for path in glob.glob(record):
                lab.kill(victim, int(json.loads(Path(path).read_text())["pid"]))

        return _timed_fault(lab, cpu, workdir, f"kill{i}", run_root, KILL_CHECK_ARGS,
                            lambda: _at_test(record, "barrier"), kill, needle,
                            RUN_TIMEOUT, {})  # fmt: skip


def _timed_fault(
    lab: Any,
    cpu: Any,
    workdir: Path,
    label: str,
    run_root: Path,
    check_args: list[str],
    ready: Callable[[], bool],
    fault: Callable[[], None],
    needle: str,
    run_timeout: int,
    extra: dict[str, Any],
) -> dict[str, Any]:
    before = cpu.usage_s()
    variables = {"nccl_run_timeout": run_timeout, "nccl_run_root": str(run_root),
                 "launch_progress": "log", "nccl_check_args": check_args, **extra}  # fmt: skip
    proc, ctx = start_playbook(lab, workdir / "detect", label, ["-e", json.dumps(variables)])
    fault_at = fault_epoch = named_at = None
    while proc.poll() is None:
        if fault_at is None and ready():
            fault()
            fault_at, fault_epoch = time.monotonic(), time.time()
        if fault_at is not None and named_at is None and needle in _read(ctx["log_path"]):
            named_at = time.monotonic()
        time.sleep(0.1)
    if fault_at is not None and named_at is None and needle in _read(ctx["log_path"]):
        named_at = time.monotonic()  # written just before the play ended
    pb = finish_playbook(proc, ctx, cpu, before, timeout=run_timeout + 600)
    ends = [_finished_epoch(p) for p in Path(pb.report_dir).glob("*/*/launch.json")]
    result = {
        "fault_after_start_s": None if fault_at is None else fault_at - pb.started,
        "named_s": None if named_at is None or fault_at is None else named_at - fault_at,
        "play_end_s": None if fault_at is None else pb.ended - fault_at,
        "ended_s": None
        if fault_epoch is None or not ends or None in ends
        else max(ends) - fault_epoch,  # type: ignore[operator]
        "wall_s": pb.wall_s,
        "rc": pb.rc,
        "phases": pb.phases,
        "log": pb.log_path,
        "stopped_by": _stopped_by(Path(pb.report_dir)),
        # The pairwise-only relaunch left its results under <host>/pairwise/.
        "relaunched": bool(list(Path(pb.report_dir).glob("*/*/pairwise"))),
    }
    log(f"detect {label}: named {result['named_s']} s, nodes ended {result['ended_s']} s, "
        f"play ended {result['play_end_s']} s after the fault; rc {pb.rc}")  # fmt: skip
    return result


def _read(path: Path) -> str:
    with contextlib.suppress(OSError):
        return Path(path).read_text(errors="replace")
    return ""


def _load(pattern: str) -> dict[str, Any]:
    for path in glob.glob(pattern):
        with contextlib.suppress(OSError, ValueError):
            return json.loads(Path(path).read_text())
    return {}


def _at_bandwidth(pattern: str) -> bool:
    doc = _load(pattern)
    return str(doc.get("current_test") or "").startswith("bandwidth_") and isinstance(
        doc.get("current_size"), int
    )


def _at_test(pattern: str, test: str) -> bool:
    return _load(pattern).get("current_test") == test


def _finished_epoch(path: Path) -> float | None:
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        return datetime.fromisoformat(json.loads(path.read_text())["finished_at"]).timestamp()
    return None


def _stopped_by(report_root: Path) -> list[str]:
    """What each node's launch.json says ended its run."""
    found = []
    for path in sorted(report_root.glob("*/*/launch.json")):
        with contextlib.suppress(OSError, ValueError):
            found.append(f"{path.parent.name}: {json.loads(path.read_text()).get('stopped_by')}")
    return found
