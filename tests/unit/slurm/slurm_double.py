# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A test double of Slurm's salloc, squeue, scancel and scontrol for the allocation's unit tests
(tests/unit/slurm/test_slurm_pending.py); the real Slurm's behaviour is tested on the lab
(tests/integration/test_slurm_allocation_lab.py). Never shipped, never installed.

Each command's name is a two-line script on PATH that runs this file with its name first
(``tests/unit/slurm/test_slurm_pending.py`` writes them); the job's state lives in
$SLURM_DOUBLE_DIR/job.json ({"id", "state", "reason"}), which a test may change (the reason, or
RUNNING to grant it). salloc says what Slurm 22.05's salloc says on stderr ("Pending job
allocation N", "job N queued and waiting for resources", "Granted job allocation N", "Job
allocation N has been revoked."), and on SIGINT/SIGTERM while it waits it gives its job up, as
the real one does. $SLURM_DOUBLE_SALLOC: "pending" (default), "refused", or "late" (the job id
said only after 3 s). Every call is logged to $SLURM_DOUBLE_DIR/calls.log.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

JOB = "42"
DIR = Path(os.environ.get("SLURM_DOUBLE_DIR", "."))
STATE = DIR / "job.json"


def state() -> dict[str, str]:
    try:
        return json.loads(STATE.read_text())
    except (OSError, ValueError):
        return {}


def save(**values: str) -> None:
    tmp = STATE.with_suffix(".tmp")
    tmp.write_text(json.dumps({**state(), **values}))
    tmp.replace(STATE)


def salloc(argv: list[str]) -> int:
    mode = os.environ.get("SLURM_DOUBLE_SALLOC", "pending")
    if mode == "refused":
        print("salloc: error: Job submit/allocate failed: Invalid partition name specified",
              file=sys.stderr)  # fmt: skip
        return 1
    save(id=JOB, state="PENDING", reason="None", argv=" ".join(argv))

    def give_up(_signum: int, _frame: object) -> None:
        save(state="CANCELLED")
        print(f"salloc: Job allocation {JOB} has been revoked.", file=sys.stderr, flush=True)
        sys.exit(1)

    signal.signal(signal.SIGINT, give_up)
    signal.signal(signal.SIGTERM, give_up)
    if mode == "late":
        time.sleep(3)
    print(f"salloc: Pending job allocation {JOB}", file=sys.stderr, flush=True)
    print(f"salloc: job {JOB} queued and waiting for resources", file=sys.stderr, flush=True)
    while state().get("state") == "PENDING":
        time.sleep(0.05)
    if state().get("state") == "RUNNING":
        print(f"salloc: job {JOB} has been allocated resources", file=sys.stderr)
        print(f"salloc: Granted job allocation {JOB}", file=sys.stderr)
        return 0
    print(f"salloc: Job allocation {JOB} has been revoked.", file=sys.stderr)
    return 1


def squeue(argv: list[str]) -> int:
    job = state()
    fmt = argv[argv.index("-o") + 1]
    if job.get("state") in ("PENDING", "RUNNING"):
        print(fmt.replace("%T", job["state"]).replace("%r", job.get("reason", "None")))
    return 0


def scancel(argv: list[str]) -> int:
    if argv == [state().get("id")]:
        save(state="CANCELLED")
        return 0
    print(f"scancel: error: Kill job error on job id {argv}: Invalid job id specified",
          file=sys.stderr)  # fmt: skip
    return 1


def scontrol(argv: list[str]) -> int:
    if argv[:2] == ["show", "hostnames"]:
        print("node1\nnode2")
    elif argv[:3] == ["show", "job", "-o"]:
        print(f"JobId={JOB} JobState={state().get('state')} NodeList=node[1-2]")
    return 0


def main() -> int:
    name, argv = sys.argv[1], sys.argv[2:]
    with open(DIR / "calls.log", "a") as log:
        log.write(" ".join([name, *argv]) + "\n")
    commands = {"salloc": salloc, "squeue": squeue, "scancel": scancel, "scontrol": scontrol}
    return commands[name](argv)


if __name__ == "__main__":
    sys.exit(main())
