# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A control machine that goes away: how long a lab's nodes take to be clean (issue 36 item 5:
goal <= 10 s after the control process ended), and the gaps between two node calls of a run
that a per-call lease would have to outlast.

    .venv/bin/python -m bench.interrupt [--repeat N] [--ways sigint,...] [--compare-with DIR]

On a 2-host lab: for each way of tests/lab/interrupt.py (WAYS) during the pre-flight (every
host's listener and warm torch probe up), and for Ctrl-C, SIGKILL and a cut connection while the
ranks run, ``--repeat`` times: seconds from the event to ansible-playbook's end, from the event to
nothing of the run on any host, and from ansible-playbook's end to nothing of the run anywhere
(processes, run and BOOT directories, the run lock). Then one healthy run with forks 50 and one
with forks 1, timed by bench/callbacks/bench_timer.py: per host, the longest time between the end
of one node call and the start of its next. ``--compare-with`` a checkout without the warden
(/work/main): the facts task and the whole run of both, alternately, on the same lab. Writes
bench/interrupt_results.json; BENCHMARKS.md's section is rendered from it (:func:`section`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import Row, met_text
from tests.lab.harness import Lab
from tests.lab.interrupt import QUICK, WAYS, end_mid_run
from tests.lab.runs import new_run_id

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "interrupt_results.json"
GOAL_S = 10.0
LAUNCH_WAYS = ("sigint_group", "sigkill_all", "connection_cut")
NODE_ACTIONS = ("nccl_facts", "nccl_preflight_observe", "nccl_torchrun", "ansible.builtin.file")


def recorded() -> dict[str, Any] | None:
    """The last results (bench/interrupt_results.json), None before the first."""
    return json.loads(RESULTS.read_text()) if RESULTS.is_file() else None


def load() -> float:
    return os.getloadavg()[0]


def timed_way(lab: Lab, work: Path, way: str, phase: str) -> dict[str, Any]:
    times = end_mid_run(lab, new_run_id(), work, way, phase)
    times.pop("output")
    times["load"] = round(load(), 1)
    print(json.dumps(times), flush=True)
    return times


def node_call_gaps(events: list[dict[str, Any]]) -> dict[str, float]:
    """Per host: the longest time from the end of one node call to the start of its next."""
    started: dict[str, float] = {}
    last_end: dict[str, float] = {}
    gaps: dict[str, float] = {}
    task_start = 0.0
    for event in events:
        action = str(event.get("action") or "").rsplit(".", 1)[-1]
        node_task = any(action == a.rsplit(".", 1)[-1] for a in NODE_ACTIONS)
        if event["kind"] == "task_start":
            task_start = event["t"]
        elif node_task and event.get("host") and event["kind"] in ("ok", "failed", "unreachable"):
            host = event["host"]
            if host in last_end:
                gap = task_start - last_end[host]
                gaps[host] = max(gaps.get(host, 0.0), gap)
            started[host] = task_start
            last_end[host] = event["t"]
    return {h: round(g, 2) for h, g in sorted(gaps.items())}


def healthy_run(lab: Lab, work: Path, root: Path, *args: str) -> dict[str, Any]:
    """validate.yml from ``root`` (a checkout), timed by bench_timer."""
    run_id = new_run_id()
    timer = work / f"{run_id}.timer.json"
    variables = {"nccl_run_id": run_id, "nccl_report_root": str(work), "nccl_slots": 1}
    variables["nccl_check_args"] = QUICK
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(root / "ansible.cfg"),
        "ANSIBLE_CALLBACK_PLUGINS": f"{ROOT / 'bench' / 'callbacks'}:{root / 'plugins/callback'}",
        "ANSIBLE_CALLBACKS_ENABLED": "bench_timer",
        "BENCH_TIMER_OUT": str(timer),
        "PYTHONPATH": str(root / "src"),
    }
    exe = Path(sys.executable).parent / "ansible-playbook"
    argv = [str(exe), "-i", str(lab.inventory_dir), "playbooks/validate.yml"]
    began = time.monotonic()
    done = subprocess.run(
        [*argv, "-e", json.dumps(variables), *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    wall = time.monotonic() - began
    events = json.loads(timer.read_text())["events"]
    facts = [e["t"] for e in events if e.get("action", "").endswith("nccl_facts")]
    return {
        "rc": done.returncode,
        "wall_s": round(wall, 2),
        "facts_task_s": round(max(facts) - min(facts), 2) if facts else None,
        "gaps_s": node_call_gaps(events),
        "load": round(load(), 1),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="nccl-bench-interrupt-"))
    out: dict[str, Any] = {"measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    out["load_before"] = round(load(), 1)
    lab = Lab(n_hosts=2, name="bench-intr")
    try:
        lab.up()
        out["preflight"] = [
            timed_way(lab, work, way, "preflight") for way in args.ways for _ in range(args.repeat)
        ]
        out["launch"] = [timed_way(lab, work, way, "launch") for way in LAUNCH_WAYS]
        out["gaps"] = {
            "forks 50": healthy_run(lab, work, ROOT),
            "forks 1": healthy_run(lab, work, ROOT, "-f", "1"),
        }
        if args.compare_with:
            pairs = [
                (healthy_run(lab, work, Path(args.compare_with)), healthy_run(lab, work, ROOT))
                for _ in range(args.repeat)
            ]
            out["compare"] = {"without": [p[0] for p in pairs], "with": [p[1] for p in pairs]}
    finally:
        lab.down()
    out["load_after"] = round(load(), 1)
    return out


def _median(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{statistics.median(known):.1f}" if known else "-"


def _max(values: list[float | None]) -> str:
    if any(v is None for v in values):
        return "not within 60 s"
    return f"{max(values):.1f}" if values else "-"


def table(rows: list[dict[str, Any]]) -> list[str]:
    by_way: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_way.setdefault(row["way"], []).append(row)
    lines = [
        "| way | runs | ansible-playbook ended (s after) | nodes clean (s after) | "
        "all clean after ansible-playbook ended: median (max) s | left |",
        "|---|---|---|---|---|---|",
    ]
    for way, runs in by_way.items():
        clean = [r["clean_s"] for r in runs]
        nodes = [r["node_clean_s"] for r in runs]
        left = sum(len(r["remains"]) for r in runs)
        lines.append(
            f"| {way} | {len(runs)} | {_median([r['control_end_s'] for r in runs])} | "
            f"{_median(nodes)} (max {_max(nodes)}) | {_median(clean)} ({_max(clean)}) | {left} |"
        )
    return lines


def worst(results: dict[str, Any]) -> float | None:
    """The slowest clean-up after the control process ended (for the summary)."""
    rows = results["preflight"] + results["launch"]
    values = [r["clean_s"] for r in rows] + [
        r["node_clean_s"] for r in rows if r["way"] in ("ssh_killed", "connection_cut")
    ]
    return None if any(v is None for v in values) else max(values)


def summary_row(results: dict[str, Any]) -> Row:
    slowest = worst(results)
    return Row(
        "interrupt",
        f"nothing of a run on any node <= {GOAL_S:.0f} s after the control process ended "
        "(Ctrl-C, SIGTERM, SSH killed or cut, SIGKILL)",
        f"slowest {'-' if slowest is None else f'{slowest:.1f}'} s over "
        f"{len(results['preflight']) + len(results['launch'])} runs",
        met_text(slowest is not None and slowest <= GOAL_S),
    )


def section(results: dict[str, Any]) -> list[str]:
    gaps = results.get("gaps", {})
    lines = [
        "## Warden: a run's nodes after its control machine went away",
        "",
        f"Measured {results['measured_at']} by `.venv/bin/python -m bench.interrupt` (raw "
        f"numbers: `bench/interrupt_results.json`); machine load {results['load_before']} before, "
        f"{results['load_after']} after (1-min load average, 2 cores, other engineers' jobs "
        "running). A 2-host lab; seconds from the event (the signal, the kill, the cut) and from "
        "ansible-playbook's end until no process of the run (node or control side), no run or "
        "BOOT directory and no run lock was left (tests/lab/interrupt.py).",
        "",
        "During the pre-flight (every host's listener and warm torch probe up):",
        "",
        *table(results["preflight"]),
        "",
        "While the ranks run (rank 0 paused before barrier):",
        "",
        *table(results["launch"]),
        "",
        "The longest time between two node calls of one host in a healthy run (what a lease "
        "renewed by the calls would have to outlast; bench/callbacks/bench_timer.py):",
        "",
        "| run | wall s | facts task s | longest gap per host s |",
        "|---|---|---|---|",
    ]
    for name, r in gaps.items():
        per_host = ", ".join(f"{h} {g}" for h, g in r["gaps_s"].items())
        lines.append(
            f"| {name}, load {r['load']} | {r['wall_s']} | {r['facts_task_s']} | {per_host} |"
        )
    compare = results.get("compare")
    if compare:
        lines += [
            "",
            "The warden's cost (its session opened before the facts call), same lab, alternately: "
            f"facts task median {_median([r['facts_task_s'] for r in compare['without']])} s "
            f"without, {_median([r['facts_task_s'] for r in compare['with']])} s with; whole run "
            f"{_median([r['wall_s'] for r in compare['without']])} s without, "
            f"{_median([r['wall_s'] for r in compare['with']])} s with.",
        ]
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.interrupt", description=__doc__)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--compare-with", default="")
    args = parser.parse_args(argv)
    args.ways = [w for w in args.ways.split(",") if w]
    results = run(args)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print("\n".join(section(results)))
    print(summary_row(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
