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
import tempfile
import time
import types
from pathlib import Path
from typing import Any

from bench.common import lab_session, log, median
from bench.under_slurm import QUICK, slope, slurm_command, stage_totals
from nccl_preflight.slurm import launch
from tests.lab.harness import Lab

SIZES = (2, 4, 8, 16, 32)
# The lab's hosts share this machine's 2 cores: 32 torch imports at once under other sessions'
# load take minutes, not the role's 60 s (preflight_python_timeout), and the run its time; a
# 32-rank all_to_all step there outlasts the 30 s stall bound (nccl_stall_timeout) now and then.
EXTRA = {
    "nccl_pairwise": "always",
    "preflight_python_timeout": 600,
    "nccl_run_timeout": 900,
    "nccl_stall_timeout": 300,
}


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
    launch_cpu = stage_totals(timer, "cpu_s").get("launch (in the run step)", 0.0)
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
        # and outside the launch too: what grows with the nodes, not with the run's length
        "cpu_per_node_work_s": run["rusage_cpu_s"] - (report_cpu or 0.0) - launch_cpu,
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
    """Every size, ``repeats`` runs each (a fresh lab each run); -> medians, slopes, rows, and
    the launch watch's cost beyond the lab's sizes (watch_cost)."""
    rows = [measure(workdir / "slurm-scale", n, i, profile) for n in sizes for i in range(repeats)]
    result = summarize(rows, sizes)
    result["watch_cost"] = {str(n): watch_cost(n) for n in WATCH_SIZES}
    return result


WATCH_SIZES = (32, 128, 512, 1024)
WATCH_SECONDS = 5  # simulated seconds of a run per measurement


def watch_cost(n: int) -> dict[str, float]:
    """The launch watch (slurm/launch.py Watch) at n nodes without Slurm: one progress record per
    node per simulated second (as node_step sends them, each rank moving through the sizes of
    three tests), judged as Watch.run judges (once a second); its clock is simulated, its CPU
    real. -> CPU seconds per second of run with every node running, and with half of them ended
    (a failed_states pass over ended states, the other half still sending)."""
    clock = [1000.0]
    real = launch.time
    launch.time = types.SimpleNamespace(monotonic=lambda: clock[0], time=lambda: 1.7e9 + clock[0])  # type: ignore[assignment]
    nodes = [f"node{i:04d}" for i in range(n)]
    hosts = [{"host": node, "ranks": [i], "ifname": "ib0", "probes": [], "address": "10.0.0.1"}
             for i, node in enumerate(nodes)]  # fmt: skip
    try:
        with tempfile.TemporaryDirectory() as tmp:
            watch = launch.Watch(None, Path(tmp), hosts, 300.0, lambda line: None)  # type: ignore[arg-type]
            second(watch, nodes, 0, clock)
            started = time.process_time()
            for k in range(1, WATCH_SECONDS + 1):
                second(watch, nodes, k, clock)
            running = (time.process_time() - started) / WATCH_SECONDS
            for node in nodes[: n // 2]:
                watch.states[node].update(ended={"rc": 0, "rank_exits": []}, running=False)
            started = time.process_time()
            for k in range(1, WATCH_SECONDS + 1):
                second(watch, nodes[n // 2 :], k, clock)
            half = (time.process_time() - started) / WATCH_SECONDS
    finally:
        launch.time = real  # type: ignore[assignment]
    log(f"slurm_scale: the launch watch at {n} nodes: {running:.3f} CPU s per second of run")
    return {"running_cpu_s_per_s": running, "half_ended_cpu_s_per_s": half}


def second(watch: launch.Watch, nodes: list[str], k: int, clock: list[float]) -> None:
    """One simulated second: a progress record from each node, then the watch's judgement."""
    test = ("all_reduce", "all_gather", "broadcast")[(k // 11) % 3]
    for i, node in enumerate(nodes):
        clock[0] += 1.0 / len(nodes)
        place = {"rank": i, "status": "running", "test": test, "size": 1024 << (k % 11),
                 "index": 5, "count": 9, "age_s": 0.0}  # fmt: skip
        interface = {"ifname": "ib0", "state": "up", "carrier": True}
        watch.note(node, {"kind": "progress", "node": node, "progress": [place],
                          "interface": interface})  # fmt: skip
    watch.judge()


KEYS = (
    "wall_s", "cpu_s", "cgroup_cpu_s", "cpu_command_s", "cpu_main_thread_s",
    "cpu_other_threads_s", "cpu_children_s", "cpu_report_s", "cpu_outside_report_s",
    "cpu_per_node_work_s",
    "maxrss_command_mib", "link_tx_bytes", "link_rx_bytes",
)  # fmt: skip


def summarize(rows: list[dict[str, Any]], sizes: tuple[int, ...]) -> dict[str, Any]:
    """Medians per size (keys: the size as text), the CPU slopes over all sizes, over 2-8 and
    over 8-32, and the launch's CPU per progress record (what the watch's records cost)."""
    by_size: dict[str, dict[str, Any]] = {}
    for n in sizes:
        mine = [r for r in rows if r["nodes"] == n]
        if not mine:
            continue
        entry: dict[str, Any] = {key: median([r[key] for r in mine]) for key in KEYS}
        stages = {s for r in mine for s in r["stages"]}
        entry["stages"] = {s: median([r["stages"].get(s, 0.0) for r in mine]) for s in stages}
        entry["stages_cpu"] = {
            s: median([(r.get("stages_cpu") or {}).get(s, 0.0) for r in mine]) for s in stages
        }
        entry["rc"] = [r["rc"] for r in mine]
        entry["class"] = [r["class"] for r in mine]
        entry["load"] = [r["load_after"][0] for r in mine]
        entry["records"] = mine[0]["records"]
        entry["steps"] = mine[0]["steps"]
        entry["pairwise"] = mine[0]["pairwise"]
        # the launch's CPU (the watch: reading, judging, writing each record) per progress record
        launch_cpu = entry["stages_cpu"].get("launch (in the run step)") or 0.0
        records = entry["records"].get("progress") or 0
        entry["launch_cpu_per_record_ms"] = 1000 * launch_cpu / records if records else None
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
        "cpu_per_node_work_s": fit("cpu_per_node_work_s", 0, 10**6),
        "cpu_main_thread_s": fit("cpu_main_thread_s", 0, 10**6),
        "link_tx_bytes": fit("link_tx_bytes", 0, 10**6),
        "link_rx_bytes": fit("link_rx_bytes", 0, 10**6),
        "wall_s": fit("wall_s", 0, 10**6),
    }
    per_record = [e["launch_cpu_per_record_ms"] for e in by_size.values()]
    return {
        "name": "slurm_scale",
        "launch_cpu_per_record_ms": median([v for v in per_record if v is not None]),
        "goal": "measure the slurm command at 16 and 32 nodes against 2/4/8 (no goal of its own: "
        "section 7's model takes the measured slopes)",
        "met": None,
        "sizes": measured,
        "by_size": by_size,
        "slopes": slopes,
        "rows": rows,
        "repeats": max((r["repeat"] for r in rows), default=-1) + 1,
    }
