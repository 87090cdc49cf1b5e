# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Overhead: validate.yml on a 2-host lab (2 ranks per host) against the floor.

The floor is the same nccl_check run started by hand: torchrun in both hosts at once, static
rendezvous on host 0's fabric address, GLOO_SOCKET_IFNAME set, the same arguments roles/launch
gives (--out-dir, --timeout, nccl_check_args). The ratio playbook / floor is the overhead.
Goal: <= 1.3x (issue 26; issue 16 asked 1.2x). Each measurement gets a fresh lab (a one-shot
validation pays for its SSH connections too).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.common import (
    PHASES,
    check_timeout_for,
    lab_session,
    log,
    median,
    run_by_hand,
    run_playbook,
)

GOAL = 1.3
NPROC = 2
RUN_TIMEOUT = 300  # nccl_run_timeout: the project default
# What the check runs: the project default (every test, bandwidth 1K..1M on CPU, 20 iterations).
CHECK_ARGS: list[str] = []


def run(workdir: Path, repeats: int) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    for i in range(repeats):
        log(f"overhead: repeat {i + 1}/{repeats}: floor (torchrun by hand)")
        with lab_session(2, slots=NPROC) as (lab, _cpu):
            hand = run_by_hand(
                lab, workdir / "overhead", f"r{i}", nproc=NPROC, check_args=CHECK_ARGS,
                check_timeout=check_timeout_for(RUN_TIMEOUT),
            )  # fmt: skip
        log(f"overhead: floor {hand.wall_s:.1f}s rcs {hand.rcs}; playbook")
        with lab_session(2, slots=NPROC) as (lab, cpu):
            pb = run_playbook(
                lab, cpu, workdir / "overhead", f"r{i}",
                ["-e", f"nccl_run_timeout={RUN_TIMEOUT}",
                 "-e", json.dumps({"nccl_check_args": CHECK_ARGS})],
            )  # fmt: skip
        log(f"overhead: playbook {pb.wall_s:.1f}s rc {pb.rc} ({pb.log_path})")
        runs.append(
            {
                "floor_s": hand.wall_s,
                "floor_rcs": hand.rcs,
                "floor_cpu_s": hand.cpu_s,
                "playbook_s": pb.wall_s,
                "playbook_rc": pb.rc,
                "playbook_log": pb.log_path,
                "control_cpu_s": pb.control_cpu_s,
                "node_cpu_s": pb.node_cpu_s,
                "ratio": pb.wall_s / hand.wall_s,
                "phases": pb.phases,
                "tasks": pb.tasks,
            }
        )
    return summarize(runs)


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The medians of ``runs`` (each a floor and a playbook run); also used by bench/same_load.py
    on runs that other `bench.run` calls made."""
    floor = median([r["floor_s"] for r in runs])
    playbook = median([r["playbook_s"] for r in runs])
    ratio = median([r["ratio"] for r in runs])
    phases = {p: median([r["phases"].get(p, 0.0) for r in runs]) for p in PHASES}
    # The task-level medians: which tasks the time goes to.
    names = [t["task"] for t in runs[0]["tasks"]] if runs else []
    tasks = []
    for name in dict.fromkeys(names):
        secs = [sum(t["seconds"] for t in r["tasks"] if t["task"] == name) for r in runs]
        phase = next(t["phase"] for t in runs[0]["tasks"] if t["task"] == name)
        tasks.append({"task": name, "phase": phase, "seconds": median(secs)})
    tasks.sort(key=lambda t: -(t["seconds"] or 0))
    return {
        "name": "overhead",
        "goal": f"validate.yml wall time <= {GOAL}x torchrun by hand",
        "met": ratio is not None and ratio <= GOAL,
        "nproc_per_node": NPROC,
        "run_timeout": RUN_TIMEOUT,
        "check_args": CHECK_ARGS,
        "floor_s": floor,
        "playbook_s": playbook,
        "ratio": ratio,
        "overhead_s": None if floor is None or playbook is None else playbook - floor,
        "phases": phases,
        "top_tasks": tasks[:12],
        "control_cpu_s": median([r["control_cpu_s"] for r in runs]),
        "node_cpu_s": median([r["node_cpu_s"] for r in runs]),
        "floor_cpu_s": median([r["floor_cpu_s"] for r in runs]),
        "all_passed": all(r["playbook_rc"] == 0 and not any(r["floor_rcs"]) for r in runs),
        "runs": runs,
        "repeats": len(runs),
    }
