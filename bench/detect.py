# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Time to detect: a fabric link goes down mid-run; how long until the play has reported?

validate.yml runs on a 2-host lab with a small nccl_run_timeout. As soon as a rank has recorded
MIN_TESTS_DONE tests in its rank-<R>.json (the ranks are inside the collectives), host 2's fabric
link is set down.
Measured: seconds from the link going down to the end of ansible-playbook (the report written and
the verdict given). Goal: <= nccl_run_timeout + 15 s.
"""

from __future__ import annotations

import contextlib
import glob
import json
import time
from pathlib import Path
from typing import Any

from bench.common import PHASES, finish_playbook, lab_session, log, median, start_playbook

RUN_TIMEOUT = 60
GOAL_MARGIN = 15.0
NPROC = 1
# The link goes down once a rank has recorded this many tests (check-in, init, a collective).
MIN_TESTS_DONE = 3
# Enough work that the ranks are still running when the link goes down.
CHECK_ARGS = ["--max-bytes", "4M", "--iters", "50"]


def run(workdir: Path, repeats: int) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    for i in range(repeats):
        log(f"detect: repeat {i + 1}/{repeats}")
        run_root = workdir / "detect" / f"runroot-r{i}"
        run_root.mkdir(parents=True, exist_ok=True)
        with lab_session(2, slots=NPROC) as (lab, cpu):
            victim = lab.hosts[1]
            before = cpu.usage_s()
            proc, ctx = start_playbook(
                lab, workdir / "detect", f"r{i}",
                ["-e", f"nccl_run_timeout={RUN_TIMEOUT}", "-e", f"nccl_run_root={run_root}",
                 "-e", json.dumps({"nccl_check_args": CHECK_ARGS})],
            )  # fmt: skip
            pattern = str(run_root / "nccl-preflight-*" / "results" / "rank-*.json")
            down_at = None
            while proc.poll() is None:
                if _tests_done(pattern) >= MIN_TESTS_DONE:
                    lab.link_down(victim)
                    down_at = time.monotonic()
                    break
                time.sleep(0.1)
            pb = finish_playbook(proc, ctx, cpu, before, timeout=RUN_TIMEOUT + 600)
        detect_s = None if down_at is None else pb.ended - down_at
        log(
            f"detect: link down {'never (no rank file)' if down_at is None else 'mid-run'}; "
            f"play ended {detect_s if detect_s is None else round(detect_s, 1)}s later, rc {pb.rc}"
        )
        runs.append(
            {
                "detect_s": detect_s,
                "down_after_start_s": None if down_at is None else down_at - pb.started,
                "wall_s": pb.wall_s,
                "rc": pb.rc,
                "phases": pb.phases,
                "log": pb.log_path,
                "summary": _summary(Path(pb.report_dir)),
            }
        )
    detect = median([r["detect_s"] for r in runs])
    return {
        "name": "detect",
        "goal": f"play reported <= nccl_run_timeout + {GOAL_MARGIN:g} s after the link went down",
        "met": detect is not None
        and all(r["detect_s"] is not None for r in runs)
        and detect <= RUN_TIMEOUT + GOAL_MARGIN,
        "run_timeout": RUN_TIMEOUT,
        "check_args": CHECK_ARGS,
        "detect_s": detect,
        "down_after_start_s": median([r["down_after_start_s"] for r in runs]),
        "wall_s": median([r["wall_s"] for r in runs]),
        "phases": {p: median([r["phases"].get(p, 0.0) for r in runs]) for p in PHASES},
        "reported_failure": all(r["rc"] != 0 for r in runs),
        "runs": runs,
        "repeats": repeats,
    }


def _tests_done(pattern: str) -> int:
    """The most tests any rank has recorded so far (0 while no rank file exists)."""
    done = 0
    for path in glob.glob(pattern):
        with contextlib.suppress(OSError, ValueError):
            done = max(done, len(json.loads(Path(path).read_text()).get("tests", [])))
    return done


def _summary(report_root: Path) -> str:
    """The first lines of the run's summary.md (what the user saw), if written."""
    for path in sorted(report_root.glob("*/summary.md")):
        return "\n".join(path.read_text(errors="replace").splitlines()[:12])
    return ""
