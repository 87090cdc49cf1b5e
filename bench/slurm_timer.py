# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""`bin/nccl-preflight slurm ...` with a clock on its stages: what bench/callbacks/bench_timer.py
is to validate.yml.

    python -m bench.slurm_timer OUT.json [--profile OUT.prof | --cpu-profile OUT.prof]
                                slurm -N n --config FILE ...

Runs nccl_preflight.slurm.cli.main (what bin/nccl-preflight runs for `slurm`) with the stages
below wrapped: each call's start and end (monotonic seconds from this process's start, the
imports included) and the process's CPU during it go into OUT.json, with the process's own CPU
(getrusage self and children) at the end. What each step is sent is counted too (`sent`: per
step its stdin's start, the bundle and the settings' line, and every message said to it, each
with the step's node count: srun copies its stdin to every task), and the records read back by
kind (`records`). With --profile, cProfile of the whole command (wall clock, the main thread)
too; with --cpu-profile, cProfile on the main thread's CPU clock (time.thread_time: what the
main thread burns, not what it waits).
Nothing in the command changes: the wrappers only time and count the calls.
"""

from __future__ import annotations

import contextlib
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
sent: list[dict[str, Any]] = []  # {"step", "nodes", "what": "start" | "message", "bytes"}
records: dict[str, int] = {}  # kind -> how many the steps read back


def timed(stage: str, func: Any) -> Any:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start, cpu = time.monotonic(), time.process_time()
        try:
            return func(*args, **kwargs)
        finally:
            events.append(
                {
                    "stage": stage,
                    "start": start - STARTED,
                    "end": time.monotonic() - STARTED,
                    # the process's CPU meanwhile (every thread: the steps' readers too)
                    "cpu_s": time.process_time() - cpu,
                }
            )

    return wrapper


def count_step_input(step_input: Any) -> Any:
    """step.step_input, remembering how long the step's stdin start was (Step.__init__ sends it)."""

    @functools.wraps(step_input)
    def wrapper(bundle: bytes, settings: dict[str, Any]) -> bytes:
        data = step_input(bundle, settings)
        sent.append({"what": "start", "bytes": len(data), "bundle": len(bundle)})
        return data

    return wrapper


def count_steps(step_module: Any) -> None:
    """Count what every Step is sent (its stdin's start, each message) and the records it reads:
    -> ``sent`` and ``records``."""
    step_module.step_input = count_step_input(step_module.step_input)
    cls = step_module.Step
    init, say, next_record = cls.__init__, cls.say, cls.next_record

    @functools.wraps(init)
    def counted_init(self: Any, job_id: str, nodes: list[str], python: str, run_id: str,
                     what: str, *args: Any, **kwargs: Any) -> None:  # fmt: skip
        mark = len(sent)
        init(self, job_id, nodes, python, run_id, what, *args, **kwargs)
        for entry in sent[mark:]:
            entry.update(step=what, nodes=len(nodes))
        self.bench_what = what

    @functools.wraps(say)
    def counted_say(self: Any, message: dict[str, Any]) -> None:
        sent.append({"step": getattr(self, "bench_what", "?"), "nodes": len(self.nodes),
                     "what": "message", "bytes": len(json.dumps(message)) + 1})  # fmt: skip
        say(self, message)

    @functools.wraps(next_record)
    def counted_next(self: Any, timeout: float | None) -> Any:
        record = next_record(self, timeout)
        kind = "end" if record is None else str(record.get("kind"))
        records[kind] = records.get(kind, 0) + 1
        return record

    cls.__init__, cls.say, cls.next_record = counted_init, counted_say, counted_next


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
    with contextlib.suppress(ImportError):
        count_steps(importlib.import_module("nccl_preflight.slurm.step"))


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    rest = argv[1:]
    profile_out, profiler = None, None
    if rest[:1] == ["--profile"]:
        profile_out, rest = Path(rest[1]), rest[2:]
        profiler = cProfile.Profile()
    elif rest[:1] == ["--cpu-profile"]:
        profile_out, rest = Path(rest[1]), rest[2:]
        profiler = cProfile.Profile(time.thread_time)
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
        main_thread_cpu = time.thread_time()
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.write_text(
            json.dumps(
                {
                    "events": events,
                    "total": time.monotonic() - STARTED,
                    "cpu_self_s": own.ru_utime + own.ru_stime,
                    "cpu_children_s": children.ru_utime + children.ru_stime,
                    "cpu_main_thread_s": main_thread_cpu,
                    "maxrss_self_kib": own.ru_maxrss,
                    "maxrss_children_kib": children.ru_maxrss,
                    "sent": sent,
                    "records": records,
                },
                indent=1,
            )
        )
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
