# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""`bin/nccl-preflight slurm ...` with a clock on its stages: what bench/callbacks/bench_timer.py
is to validate.yml.

    python -m bench.slurm_timer OUT.json [--profile OUT.prof] slurm -N n --config FILE ...

Runs nccl_preflight.slurm.cli.main (what bin/nccl-preflight runs for `slurm`) with the stages
below wrapped: each call's start and end (monotonic seconds from this process's start, the
imports included) go into OUT.json, with the process's own CPU (getrusage self and children) at
the end. With --profile, cProfile of the whole command (wall clock, the main thread) too.
Nothing in the command changes: the wrappers only time the calls.
"""

from __future__ import annotations

import cProfile
import functools
import importlib
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

STARTED = time.monotonic()

# (module, attribute path, stage name): every call of each is one event.
STAGES = (
    ("nccl_preflight.slurm.allocation", "Allocation._salloc", "salloc"),
    ("nccl_preflight.slurm.allocation", "hostnames", "scontrol hostnames"),
    ("nccl_preflight.slurm.allocation", "job_nodelist", "scontrol show job"),
    ("nccl_preflight.slurm.allocation", "Allocation.release", "scancel"),
    ("nccl_preflight.slurm.run", "build_node_bundle", "bundle build"),
    ("nccl_preflight.slurm.run", "observe_on", "observe (run step)"),
    ("nccl_preflight.slurm.observe", "collect", "observe: wait for records"),
    ("nccl_preflight.slurm.step", "Step.__init__", "srun start + bundle sent"),
    ("nccl_preflight.slurm.step", "Step.end", "step end (stdin closed, srun exit)"),
    ("nccl_preflight.slurm.run", "SlurmRun.environment", "environment (core)"),
    ("nccl_preflight.slurm.run", "SlurmRun.preflight", "pre-flight judgement (core)"),
    ("nccl_preflight.slurm.run", "SlurmRun.launch", "launch (in the run step)"),
    ("nccl_preflight.slurm.run", "SlurmRun.report", "report build"),
)

events: list[dict[str, Any]] = []


def timed(stage: str, func: Any) -> Any:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.monotonic()
        try:
            return func(*args, **kwargs)
        finally:
            events.append(
                {"stage": stage, "start": start - STARTED, "end": time.monotonic() - STARTED}
            )

    return wrapper


def install() -> None:
    for module_name, path, stage in STAGES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        owner: Any = module
        *parents, name = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent, None)
        if owner is not None and hasattr(owner, name):
            setattr(owner, name, timed(stage, getattr(owner, name)))


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    rest = argv[1:]
    profile_out = None
    if rest[:1] == ["--profile"]:
        profile_out, rest = Path(rest[1]), rest[2:]
    profiler = cProfile.Profile() if profile_out else None
    if profiler:
        profiler.enable()
    imported = time.monotonic()
    from nccl_preflight.slurm.cli import main as slurm_main

    install()
    events.append(
        {"stage": "imports", "start": imported - STARTED, "end": time.monotonic() - STARTED}
    )
    try:
        code = slurm_main(rest)
    finally:
        if profiler:
            profiler.disable()
            profiler.dump_stats(str(profile_out))
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.write_text(
            json.dumps(
                {
                    "events": events,
                    "total": time.monotonic() - STARTED,
                    "cpu_self_s": own.ru_utime + own.ru_stime,
                    "cpu_children_s": children.ru_utime + children.ru_stime,
                },
                indent=1,
            )
        )
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
