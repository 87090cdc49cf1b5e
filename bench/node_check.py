# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""node-check's wall time on a lab node (issue 27 item 6: goal <= 10 s).

    .venv/bin/python -m bench.node_check [--repeat N]

Builds the node bundle (bin/nccl-preflight bundle), starts a 1-host lab (no Slurm: the check
does not need it) and runs, inside the host (its network namespace, hostname and /etc/hosts),
with the lab hosts' Python (NCCL_LAB_NODE_PYTHON: torch and the standard library only):

- ``node-check``: `python nccl-preflight.pyz node-check --config C` (fabric fab0, backend auto:
  no GPU here, so gloo), the whole command as a HealthCheckProgram wrapper runs it;
- ``torch probe``: the torch probe alone (`python -c PYTHON_PROBE`: the torch import), the part
  node-check overlaps with its other reads;
- ``without torch``: node-check with nccl_python pointing at a program that prints a recorded
  probe answer at once: everything but the torch import.

Each N times (median, min, max, wall-clock seconds, time.monotonic around the subprocess). The
machine's 1-minute load average before and after is printed: every lab host shares this
machine's cores. Prints a JSON document; BENCHMARKS.md's section is written from it by hand.
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

from tests.lab.base import node_python
from tests.lab.harness import Lab

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 10.0
PROBE = ROOT / "tests" / "fixtures" / "torch" / "probe-cpu-lab-node.json"


def timed(lab: Lab, argv: list[str]) -> tuple[float, int, str]:
    start = time.monotonic()
    done = lab.run(0, argv, check=False, timeout=120)
    return time.monotonic() - start, done.returncode, done.stdout[-300:] + done.stderr[-300:]


def series(lab: Lab, argv: list[str], repeat: int) -> dict:
    runs = [timed(lab, argv) for _ in range(repeat)]
    walls = [wall for wall, _, _ in runs]
    return {
        "median_s": round(statistics.median(walls), 2),
        "min_s": round(min(walls), 2),
        "max_s": round(max(walls), 2),
        "exit": sorted({rc for _, rc, _ in runs}),
        "last_output": runs[-1][2],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    python = node_python()
    where = Path(tempfile.mkdtemp(prefix="bench-node-check-"))
    pyz = where / "nccl-preflight.pyz"
    subprocess.run(
        [sys.executable, str(ROOT / "bin" / "nccl-preflight"), "bundle", "-o", str(pyz)],
        check=True,
        capture_output=True,
    )
    config, fast = where / "node.yml", where / "fast.yml"
    # the lab has no GPU: a CPU node, said so (under the defaults node-check fails it: gpu)
    config.write_text("nccl_socket_ifname: fab0\nnccl_require_gpu: false\n")
    recorded = where / "python-recorded"
    recorded.write_text(f"#!/bin/sh\ncat {PROBE}\n")
    recorded.chmod(0o755)
    fast.write_text(f"nccl_socket_ifname: fab0\nnccl_require_gpu: false\nnccl_python: {recorded}\n")
    probe = "from nccl_preflight.node.parse import PYTHON_PROBE; exec(PYTHON_PROBE)"
    load_before = os.getloadavg()[0]
    lab = Lab(1)
    try:
        lab.up()
        result = {
            "node-check": series(
                lab, [python, str(pyz), "node-check", "--config", str(config)], args.repeat
            ),
            "torch probe": series(
                lab, ["env", f"PYTHONPATH={pyz}", python, "-c", probe], args.repeat
            ),
            "without torch": series(
                lab, [python, str(pyz), "node-check", "--config", str(fast)], args.repeat
            ),
        }
    finally:
        lab.down()
    doc = {
        "measured": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "python": python,
        "repeat": args.repeat,
        "load_1min_before": round(load_before, 2),
        "load_1min_after": round(os.getloadavg()[0], 2),
        "goal_s": GOAL_S,
        "goal_met": result["node-check"]["median_s"] <= GOAL_S,
        "results": result,
    }
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
