# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""ansible-playbook with its CPU taken apart: what bench/slurm_timer.py is to the slurm command.

    python -m bench.ansible_timer OUT.json [--profile DIR] ANSIBLE-PLAYBOOK-ARGS...

Runs ansible-playbook's own entry point (ansible.cli.playbook) in this process, so that:

- every worker (Ansible forks one process per task and host: multiprocessing's fork context)
  appends one line to OUT.json's side file OUT.workers.jsonl when it ends: the task's name,
  action, role and host, the worker's own CPU (user + sys: Ansible's task executor, templating,
  our action plugin and filters) and its children's (the ssh client of a module call, any local
  command), and its wall seconds;
- at the end OUT.json holds the main process's own CPU (the strategy's loop, variables for every
  task and host, the result loop, the callbacks) and all its children's (the workers and their
  ssh clients; ControlPersist's masters daemonize and are not counted here), its peak RSS and
  private memory; each worker's line has its private memory too (what one fork costs: forks x
  that is what the forks setting holds at once);
- with --profile DIR, every worker and the main process are profiled on their thread's CPU clock
  (cProfile with time.thread_time), one file each in DIR, to be merged with pstats.

Nothing in the run changes but the wrappers; the profile costs CPU of its own (read its shares,
not its totals).
"""

from __future__ import annotations

import cProfile
import functools
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def private_mib() -> float | None:
    """This process's private memory (what a fork costs beyond the pages it shares with its
    parent): Private_Clean + Private_Dirty of /proc/self/smaps_rollup, MiB."""
    try:
        lines = Path("/proc/self/smaps_rollup").read_text().splitlines()
    except OSError:
        return None
    kib = sum(int(line.split()[1]) for line in lines if line.startswith("Private_"))
    return kib / 1024


def install(side_file: Path, profile_dir: Path | None) -> None:
    """Wrap WorkerProcess._run: its CPU (and profile) per task and host."""
    from ansible.executor.process.worker import WorkerProcess

    original = WorkerProcess._run

    @functools.wraps(original)
    def measured(self: Any) -> Any:
        started, profiler = time.monotonic(), None
        if profile_dir is not None:
            profiler = cProfile.Profile(time.thread_time)
            profiler.enable()
        try:
            return original(self)
        finally:
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(str(profile_dir / f"worker-{os.getpid()}.prof"))
            task = self._task
            role = getattr(task, "_role", None)
            line = {
                "task": task.get_name(),
                "action": task.action,
                "role": role.get_name() if role is not None else "",
                "host": self._host.name,
                "cpu_self_s": _cpu(resource.RUSAGE_SELF),
                "cpu_children_s": _cpu(resource.RUSAGE_CHILDREN),
                "wall_s": time.monotonic() - started,
                "private_mib": private_mib(),
            }
            fd = os.open(side_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, (json.dumps(line) + "\n").encode())
            finally:
                os.close(fd)

    WorkerProcess._run = measured  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    rest = argv[1:]
    profile_dir = None
    if rest[:1] == ["--profile"]:
        profile_dir, rest = Path(rest[1]), rest[2:]
        profile_dir.mkdir(parents=True, exist_ok=True)
    side_file = out.with_suffix(".workers.jsonl")
    side_file.unlink(missing_ok=True)
    started = time.monotonic()
    from ansible.cli.playbook import main as playbook_main  # ansible's own start first

    install(side_file, profile_dir)
    profiler = cProfile.Profile(time.thread_time) if profile_dir is not None else None
    if profiler is not None:
        profiler.enable()
    sys.argv = [str(Path(sys.executable).parent / "ansible-playbook"), *rest]
    code = 0
    try:
        playbook_main(sys.argv)
    except SystemExit as end:
        code = end.code if isinstance(end.code, int) else 1
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(str(profile_dir / "main.prof"))  # type: ignore[operator]
        out.write_text(
            json.dumps(
                {
                    "rc": code,
                    "wall_s": time.monotonic() - started,
                    "cpu_main_s": _cpu(resource.RUSAGE_SELF),
                    "cpu_children_s": _cpu(resource.RUSAGE_CHILDREN),
                    "maxrss_main_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                    "private_main_mib": private_mib(),
                    "workers": str(side_file),
                },
                indent=1,
            )
        )
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
