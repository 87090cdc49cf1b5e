# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The slurm command at 2 to 32 nodes on the lab's real Slurm (issue 37 item 6): what BENCHMARKS.md
section 7 modelled from 2-8 nodes, measured where the lab can.

At each size a fresh lab with Slurm (`Lab(n, slots=1, slurm=True)`: slurmctld, munged, one slurmd
and one sshd per host, each host a network namespace of this machine), one run of
`bin/nccl-preflight slurm -N n --config FILE` through bench/slurm_timer.py: 1 rank per node, the
QUICK check (`--max-bytes 16K --iters 2 --warmup 1`) and `nccl_pairwise: always`, so the run
plays the pairwise rounds too (min(n - 1, nccl_pair_rounds) first-pass rounds). From each run:

- the control machine's CPU: os.wait4's rusage of the command and every descendant it waited for
  (salloc, scontrol, srun, scancel; the tasks on the nodes run under slurmd, not here), split
  into the command's main thread (time.thread_time), its other threads (the steps' readers) and
  its children; this CPU is the primary figure: on 2 shared cores wall time moves with the load;
- peak memory: the command's own maxrss and its largest child's (srun);
- what each step is sent (slurm_timer's count: the stdin's start, bundle and settings' line, and
  every message; srun copies its stdin to every task, so the bytes out of the control machine are
  that times the nodes) and what actually crossed the lab's one root link (the control machine's
  link to the management bridge: srun to each slurmd and back, slurmctld's RPCs);
- the records read back by kind (a node sends "progress" every second while its ranks run);
- the pairwise rounds from rank 0's record: first pass, second pass, seconds, seconds per round;
- wall time, with the 1-minute load average before and after.

    .venv/bin/python -m bench.run --only slurm_scale [--sizes 2,4,8,16,32] [--repeats 1]
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from bench.common import lab_session, log, median
from bench.under_slurm import QUICK, slope, slurm_command, stage_totals
from tests.lab.harness import Lab

SIZES = (2, 4, 8, 16, 32)
# The lab's hosts share this machine's 2 cores: 32 torch imports at once under other sessions'
# load take minutes, not the role's 60 s (preflight_python_timeout), and the run its time.
EXTRA = {"nccl_pairwise": "always", "preflight_python_timeout": 600, "nccl_run_timeout": 900}
STEP_STAGES = ("srun start + bundle sent", "observe: wait for records", "launch (in the run step)")


def link_bytes(lab: Lab) -> dict[str, int]:
    """Bytes the control machine sent to (tx) and got from (rx) the lab over its one root link."""
    stats = Path("/sys/class/net") / lab.root_link / "statistics"
    out = {}
    for key in ("tx_bytes", "rx_bytes"):
        with contextlib.suppress(OSError, ValueError):
            out[key] = int((stats / key).read_text())
    return out


def pairwise_of(reports: Path) -> dict[str, Any]:
    """Rank 0's pairwise test (rounds, second pass, seconds) and the slowest rank's check (the
    sum of its other tests) from the run's rank records."""
    check, pairwise, rounds, second = [], [], None, None
    runs = [d for d in reports.glob("*/verdict.json") if d.parent.name != "latest"]
    newest = max(runs, key=lambda d: d.stat().st_mtime).parent if runs else reports / "-"
    for path in sorted(newest.glob("*/rank-*.json")):
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(path.read_text())
            tests = record.get("tests") or []
            check.append(sum(t["duration_s"] for t in tests if t["name"] != "pairwise"))
            for test in tests:
                if test["name"] == "pairwise":
                    pairwise.append(test["duration_s"])
                    if record.get("global_rank") == 0:
                        details = test.get("details") or {}
                        rounds = len(details.get("rounds") or [])
                        second = len(details.get("second_pass") or [])
    seconds = max(pairwise) if pairwise else None
    played = (rounds or 0) + (second or 0)
    return {
        "check_s": max(check) if check else None,
        "pairwise_s": seconds,
        "rounds": rounds,
        "second_pass": second,
        "round_s": seconds / played if seconds is not None and played else None,
        "ranks": len(check),
    }


def sent_by_step(timer: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per step: its stdin's start (bundle + settings' line), its messages (bytes and count) and
    the nodes it ran on; out = (start + messages) x nodes, what srun sends out."""
    steps: dict[str, dict[str, int]] = {}
    for entry in timer.get("sent") or []:
        step = steps.setdefault(
            str(entry.get("step")),
            {"nodes": 0, "start": 0, "bundle": 0, "messages": 0, "message_count": 0, "out": 0},
        )
        step["nodes"] = int(entry.get("nodes") or 0)
        if entry["what"] == "start":
            step["start"] += entry["bytes"]
            step["bundle"] += entry.get("bundle", 0)
        else:
            step["messages"] += entry["bytes"]
            step["message_count"] += 1
        step["out"] += entry["bytes"] * step["nodes"]
    return steps


def measure(workdir: Path, n: int, repeat: int, profile: bool | str = False) -> dict[str, Any]:
    """One run of the slurm command on a fresh n-node lab."""
    label = f"scale-{n}-r{repeat}"
    with lab_session(n, slots=1, slurm=True) as (lab, _cpu):
        load_before = os.getloadavg()
        before = link_bytes(lab)
        run = slurm_command(lab, workdir, label, 1, QUICK, profile=profile, extra=EXTRA)
        after = link_bytes(lab)
        load_after = os.getloadavg()
    timer = run.pop("stages") or {}
    stages = stage_totals(timer)
    report_cpu = stage_totals(timer, "cpu_s").get("report build")
    main_thread = timer.get("cpu_main_thread_s")
    own = timer.get("cpu_self_s")
    row = {
        "nodes": n,
        "repeat": repeat,
        "profiled": bool(profile),
        "rc": run["rc"],
        "class": run["class"],
        "wall_s": run["wall_s"],
        "load_before": load_before,
        "load_after": load_after,
        "cpu_s": run["rusage_cpu_s"],
        "cgroup_cpu_s": run["cgroup_cpu_s"],
        "cpu_command_s": own,
        "cpu_main_thread_s": main_thread,
        "cpu_other_threads_s": own - main_thread if own is not None and main_thread else None,
        "cpu_children_s": timer.get("cpu_children_s"),
        # the report step (another benchmark's, bench/report_scale) and everything else
        "cpu_report_s": report_cpu,
        "cpu_outside_report_s": run["rusage_cpu_s"] - (report_cpu or 0.0),
        # the command's own peak (a child's maxrss counts the pages it shared with the command
        # between fork and exec, so it says nothing of srun's own)
        "maxrss_command_mib": (timer.get("maxrss_self_kib") or 0) / 1024,
        "stages": stages,
        "stages_cpu": stage_totals(timer, "cpu_s"),
        "steps": sent_by_step(timer),
        "records": timer.get("records") or {},
        "link_tx_bytes": after.get("tx_bytes", 0) - before.get("tx_bytes", 0),
        "link_rx_bytes": after.get("rx_bytes", 0) - before.get("rx_bytes", 0),
        "pairwise": pairwise_of(Path(run["reports"])),
        "log": run["log"],
    }
    log(
        f"slurm_scale: {n} nodes: {row['wall_s']:.1f} s (load {load_after[0]:.1f}), CPU "
        f"{row['cpu_s']:.2f} s (main thread {main_thread or 0:.2f}), rc {row['rc']} "
        f"{row['class']}, tx {row['link_tx_bytes'] / 1e6:.1f} MB, records {row['records']}"
    )
    return row


def run(
    workdir: Path, repeats: int = 1, sizes: tuple[int, ...] = SIZES, profile: bool | str = False
) -> dict[str, Any]:
    """Every size, ``repeats`` runs each (a fresh lab each run); -> medians, slopes, rows."""
    rows = [measure(workdir / "slurm-scale", n, i, profile) for n in sizes for i in range(repeats)]
    return summarize(rows, sizes)


KEYS = (
    "wall_s", "cpu_s", "cgroup_cpu_s", "cpu_command_s", "cpu_main_thread_s",
    "cpu_other_threads_s", "cpu_children_s", "cpu_report_s", "cpu_outside_report_s",
    "maxrss_command_mib", "link_tx_bytes", "link_rx_bytes",
)  # fmt: skip


def summarize(rows: list[dict[str, Any]], sizes: tuple[int, ...]) -> dict[str, Any]:
    """Medians per size (keys: the size as text), the CPU slopes over all sizes, over 2-8 and
    over 8-32, and the CPU per node-second of the launch (what the watch's records cost)."""
    by_size: dict[str, dict[str, Any]] = {}
    for n in sizes:
        mine = [r for r in rows if r["nodes"] == n]
        if not mine:
            continue
        entry: dict[str, Any] = {key: median([r[key] for r in mine]) for key in KEYS}
        entry["stages"] = {s: median([r["stages"].get(s, 0.0) for r in mine]) for s in STEP_STAGES}
        entry["rc"] = [r["rc"] for r in mine]
        entry["class"] = [r["class"] for r in mine]
        entry["load"] = [r["load_after"][0] for r in mine]
        entry["records"] = mine[0]["records"]
        entry["steps"] = mine[0]["steps"]
        entry["pairwise"] = mine[0]["pairwise"]
        by_size[str(n)] = entry
    measured = [n for n in sizes if str(n) in by_size]

    def fit(key: str, low: int, high: int) -> float | None:
        return slope([(n, by_size[str(n)][key]) for n in measured if low <= n <= high])

    slopes = {
        "cpu_s": fit("cpu_s", 0, 10**6),
        "cpu_s_2_8": fit("cpu_s", 2, 8),
        "cpu_s_8_32": fit("cpu_s", 8, 32),
        "cpu_outside_report_s": fit("cpu_outside_report_s", 0, 10**6),
        "cpu_outside_report_s_2_8": fit("cpu_outside_report_s", 2, 8),
        "cpu_outside_report_s_8_32": fit("cpu_outside_report_s", 8, 32),
        "cpu_main_thread_s": fit("cpu_main_thread_s", 0, 10**6),
        "link_tx_bytes": fit("link_tx_bytes", 0, 10**6),
        "link_rx_bytes": fit("link_rx_bytes", 0, 10**6),
        "wall_s": fit("wall_s", 0, 10**6),
    }
    return {
        "name": "slurm_scale",
        "goal": "measure the slurm command at 16 and 32 nodes against 2/4/8 (no goal of its own: "
        "section 7's model takes the measured slopes)",
        "met": None,
        "sizes": measured,
        "by_size": by_size,
        "slopes": slopes,
        "rows": rows,
        "repeats": max((r["repeat"] for r in rows), default=-1) + 1,
    }
