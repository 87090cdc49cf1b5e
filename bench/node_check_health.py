# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""node-check as slurmd's HealthCheckProgram on the Slurm lab (issue 36 item 6): no pile-up, no
drain of a healthy node, at HealthCheckInterval 5, 30 and 300 s.

    .venv/bin/python -m bench.node_check_health [--cases 5:60,5:0,30:60,300:60]
                                                [--windows 5=120,30=180,300=660]

A 3-host lab with Slurm (tests/lab/slurm.py: real slurmctld, slurmd, munge), every host healthy;
the node bundle run by each slurmd through the wrapper docs/slurm.md shows
(tests/lab/health_check.py), with ``--drain``, except that the wrapper waits for node-check
instead of exec-ing it, to note its CPU seconds (sh's ``times``: node-check and all it started).
Each case ``INTERVAL:TORCH_MAX_AGE`` sets HealthCheckProgram, HealthCheckInterval=INTERVAL and
HealthCheckNodeState=ANY (`scontrol reconfigure`), runs node-check with ``--torch-max-age
TORCH_MAX_AGE`` for the interval's window, then takes the program away and waits for the last
node-check to end. Meanwhile a thread samples every 0.5 s the node-checks running per node
(/proc: ``checking`` is one that took the node's lock, ``processes`` every one slurmd started,
one exiting at once included), every 2 s sinfo's states and the 1-min load average. The 300 s
window holds two cycles (slurmctld starts the first up to 300 s after the switch).

Prints a JSON document (bench/node_check_health_results.json keeps the one BENCHMARKS.md shows);
``section()`` renders it for bench/report.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.lab.harness import Lab
from tests.lab.health_check import HealthCheckSetup, Watch, node_checks

RESULTS = Path(__file__).resolve().parent / "node_check_health_results.json"
DEFAULT_CASES = "5:60,5:0,30:60,300:60"
DEFAULT_WINDOWS = "5=120,30=180,300=660"
GOAL = (
    "node-check as HealthCheckProgram at HealthCheckInterval 5, 30 and 300 s on 3 healthy lab "
    "nodes: at most one node-check checking per node at any sample, no node drained"
)


def _stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "max": None}
    return {"median": round(statistics.median(values), 2), "max": round(max(values), 2)}


def _durations(lines: list[str]) -> list[float]:
    """The seconds each finished node-check took, from its verdict line '... (21 checks, X s'."""
    found = []
    for line in lines:
        if " checks, " in line:
            with_unit = line.rsplit(" checks, ", 1)[1].split(" s", 1)[0]
            found.append(float(with_unit))
    return found


def wait_ended(pyz: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while node_checks(pyz) and time.monotonic() < deadline:
        time.sleep(0.5)


def run_case(lab: Lab, setup: HealthCheckSetup, interval: int, max_age: float, window: float):
    """One case; -> its figures."""
    setup.args = ("--drain", "--torch-max-age", f"{max_age:g}")
    setup.write(lab)
    setup.clear(lab.slurm_nodes)
    load_before = os.getloadavg()[0]
    watch = Watch(lab, setup.pyz).start()
    lab.slurm_reconfigure(setup.slurm_lines(interval))
    time.sleep(window)
    lab.slurm_reconfigure()
    wait_ended(setup.pyz)
    watch.stop()
    nodes: dict[str, Any] = {}
    for node in lab.slurm_nodes:
        lines = setup.verdicts(node)
        checked = [line for line in lines if "another node-check is running" not in line]
        cpu = setup.cpu_seconds(node)
        nodes[node] = {
            "started": len(lines),
            "checked": len(checked),
            "exited_at_once": len(lines) - len(checked),
            "healthy": sum(": healthy (" in line for line in checked),
            "failed": sum(
                " check(s) failed (" in line and "unfinished" not in line for line in checked
            ),
            "unfinished": sum(": unfinished: " in line for line in checked),
            "drained_lines": sum("drained" in line and "not drained" not in line for line in lines),
            "most_checking": watch.most_checking.get(node, 0),
            "most_processes": watch.most_processes.get(node, 0),
            "check_s": _stats(_durations(checked)),
            "cpu_s_per_run": _stats(cpu),
            "cpu_s_per_minute": round(sum(cpu) * 60 / window, 2) if cpu else None,
        }
    return {
        "interval_s": interval,
        "torch_max_age_s": max_age,
        "window_s": window,
        "samples": watch.samples,
        "load_before": round(load_before, 2),
        "load_1min": _stats(watch.loads),
        "bad_states": watch.bad_states,
        "states_after": lab.slurm_node_states(),
        "nodes": nodes,
        "met": not watch.bad_states
        and all(n["most_checking"] <= 1 and not n["drained_lines"] for n in nodes.values()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default=DEFAULT_CASES)
    parser.add_argument("--windows", default=DEFAULT_WINDOWS)
    parser.add_argument("--keep", action="store_true", help="write node_check_health_results.json")
    args = parser.parse_args(argv)
    windows = {int(k): float(v) for k, v in (w.split("=") for w in args.windows.split(","))}
    cases = [(int(i), float(a)) for i, a in (c.split(":") for c in args.cases.split(","))]
    setup = HealthCheckSetup(Path(tempfile.mkdtemp(prefix="bench-node-check-health-")), cpu=True)
    lab = Lab(3, slurm=True)
    started = time.time()
    results = []
    try:
        lab.up()
        for interval, max_age in cases:
            print(f"[bench] HealthCheckInterval={interval} --torch-max-age {max_age:g}", flush=True)
            results.append(run_case(lab, setup, interval, max_age, windows[interval]))
    finally:
        lab.down()
    doc = {
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "took_s": round(time.time() - started),
        "cpus": os.cpu_count(),
        "goal": GOAL,
        "met": all(r["met"] for r in results),
        "cases": results,
    }
    text = json.dumps(doc, indent=1)
    print(text)
    if args.keep:
        RESULTS.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
