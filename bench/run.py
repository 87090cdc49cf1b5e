# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Run the benchmarks and rewrite BENCHMARKS.md.

    python -m bench.run [--only overhead,scaling,fidelity,detect,tuning,pairwise,ansible_floor,
                                slurm_overhead,slurm_cpu,slurm_scale,ansible_scale]
                        [--repeats N] [--sizes 2,8,16,32] [--keep-work]

Every benchmark brings up its own lab and tears it down, also on failure. Results are merged into
bench/results.json (the newest result of each benchmark, with its date and machine load), and
BENCHMARKS.md is rendered from that file. Benchmarks measure; they never assert timings.
`tuning` (the ansible knobs at 2 and 32 hosts), `pairwise` and `ansible_floor` (Ansible's own
floor on the overhead lab) are not part of the default set: they take long. `slurm_overhead` and
`slurm_cpu` (bench/under_slurm.py) and `slurm_scale` (bench/slurm_scale.py: 2 to 32 nodes) need
Debian's Slurm packages in the lab. `ansible_scale` (bench/ansible_scale.py: validate.yml's control
CPU per host at 2 to 32 hosts) keeps the stored rows of sizes it did not run, so sizes can be
measured one at a time (`--sizes 16`, then `--sizes 32`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import (
    ansible_floor,
    ansible_scale,
    detect,
    fidelity,
    overhead,
    pairwise,
    report,
    scaling,
    slurm_scale,
    under_slurm,
)
from bench.common import PROJECT_ROOT, log, machine_info, versions
from tests.lab.harness import lab_unavailable_reason

DEFAULT = ("overhead", "scaling", "fidelity", "detect")
ALL = (
    *DEFAULT, "tuning", "pairwise", "ansible_floor", "slurm_overhead", "slurm_cpu", "slurm_scale",
    "ansible_scale",
)  # fmt: skip
RESULTS = PROJECT_ROOT / "bench" / "results.json"
OUTPUT = PROJECT_ROOT / "BENCHMARKS.md"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--only",
        default=",".join(DEFAULT),
        help=f"comma-separated benchmarks out of {', '.join(ALL)} (default: {','.join(DEFAULT)})",
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, scaling.SIZES)),
        help="lab sizes for the scaling benchmark (default: 2,8,16,32)",
    )
    parser.add_argument(
        "--large-repeats",
        type=int,
        default=1,
        help=f"runs per scaling size above {scaling.LARGE} hosts (default: 1, to keep make bench "
        "near 25 minutes)",
    )
    parser.add_argument(
        "--keep-work", action="store_true", help="keep the work directory (logs, reports)"
    )
    parser.add_argument(
        "--render-only", action="store_true", help="only rewrite BENCHMARKS.md from results.json"
    )
    args = parser.parse_args(argv)
    args.only = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = [b for b in args.only if b not in ALL]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(ALL)}")
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    args.sizes = tuple(int(s) for s in args.sizes.split(",") if s.strip())
    return args


def run_one(name: str, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    if name == "overhead":
        return overhead.run(workdir, args.repeats)
    if name == "scaling":
        return scaling.run(
            workdir,
            args.repeats,
            sizes=args.sizes,
            variants=("project",),
            large_repeats=args.large_repeats,
        )
    if name == "tuning":
        sizes = scaling.TUNING_SIZES if args.sizes == scaling.SIZES else args.sizes
        res = scaling.run(
            workdir, args.repeats, sizes=sizes, variants=tuple(scaling.VARIANTS), tuning_sizes=sizes
        )
        res["name"] = "tuning"
        return res
    if name == "fidelity":
        return fidelity.run(workdir, args.repeats)
    if name == "detect":
        return detect.run(workdir, args.repeats)
    if name == "pairwise":
        return pairwise.run(workdir, args.repeats)
    if name == "ansible_floor":
        return ansible_floor.run(workdir, args.repeats)
    if name == "slurm_overhead":
        return under_slurm.run_overhead(workdir, args.repeats)
    if name == "slurm_cpu":
        return under_slurm.run_cpu(workdir, args.repeats)
    if name == "slurm_scale":
        sizes = slurm_scale.SIZES if args.sizes == scaling.SIZES else args.sizes
        return slurm_scale.run(workdir, args.repeats, sizes)
    if name == "ansible_scale":
        sizes = ansible_scale.SIZES if args.sizes == scaling.SIZES else args.sizes
        return ansible_scale.run(workdir, args.repeats, sizes)
    raise ValueError(name)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    stored: dict[str, Any] = {}
    if RESULTS.exists():
        stored = json.loads(RESULTS.read_text())
    if not args.render_only:
        reason = lab_unavailable_reason()
        if reason:
            print(f"bench: cannot run: {reason}", file=sys.stderr)
            return 2
        workdir = Path(tempfile.mkdtemp(prefix="nccl-bench-"))
        log(f"work directory {workdir}; load {os.getloadavg()}")
        failed = []
        try:
            for name in args.only:
                started = time.monotonic()
                load_before = os.getloadavg()
                try:
                    result = run_one(name, workdir, args)
                    if name == "ansible_scale":  # one size at a time: keep the others' rows
                        result = ansible_scale.merge(stored.get("benchmarks", {}).get(name), result)
                except Exception as exc:  # one broken benchmark must not lose the others
                    traceback.print_exc()
                    failed.append(name)
                    result = {"name": name, "error": f"{type(exc).__name__}: {exc}", "met": None}
                result["date"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
                result["duration_s"] = time.monotonic() - started
                result["load_before"] = load_before
                result["load_after"] = os.getloadavg()
                result["machine"] = machine_info()
                result["versions"] = versions()
                stored.setdefault("benchmarks", {})[name] = result
                RESULTS.write_text(json.dumps(stored, indent=1, default=str) + "\n")
                log(f"{name}: done in {result['duration_s']:.0f}s, met={result.get('met')}")
        finally:
            if args.keep_work or failed:
                log(f"logs and reports kept in {workdir}")
            else:
                shutil.rmtree(workdir, ignore_errors=True)
    OUTPUT.write_text(report.render(stored))
    log(f"wrote {OUTPUT.relative_to(PROJECT_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
