# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Fold overhead runs made in turns with another tree into bench/results.json.

Other sessions share this machine's cores, so one tree's numbers alone cannot tell a change
from the load. Measure both trees in turns, one repeat each, each in its own checkout:

    for i in 1 2 3; do
      (cd ../this  && .venv/bin/python -m bench.run --only overhead --repeats 1
                   && cp bench/results.json /tmp/this-$i.json)
      (cd ../other && .venv/bin/python -m bench.run --only overhead --repeats 1
                   && cp bench/results.json /tmp/other-$i.json)
    done
    .venv/bin/python -m bench.same_load --other-name "main (3280b5c)" \\
        --this /tmp/this-*.json --other /tmp/other-*.json
    .venv/bin/python -m bench.run --render-only

The overhead result becomes the medians of this tree's runs (bench/overhead.py's summary), and
BENCHMARKS.md shows every turn of both trees beside it (bench/report.py).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.overhead import summarize
from bench.run import RESULTS

KEPT = ("date", "duration_s", "load_before", "load_after", "machine", "versions")


def overhead_of(path: Path) -> dict[str, Any]:
    result = json.loads(path.read_text())["benchmarks"]["overhead"]
    if "runs" not in result:
        raise SystemExit(f"{path}: no overhead runs (error: {result.get('error')})")
    return result


def row(result: dict[str, Any]) -> dict[str, Any]:
    keys = ("floor_s", "playbook_s", "ratio", "overhead_s", "control_cpu_s", "node_cpu_s",
            "floor_cpu_s", "all_passed")  # fmt: skip
    return {
        **{k: result.get(k) for k in keys},
        "load_before": (result.get("load_before") or [None])[0],
        "date": result.get("date"),
    }


def fold(this: list[Path], other: list[Path], other_name: str) -> dict[str, Any]:
    mine = [overhead_of(p) for p in this]
    theirs = [overhead_of(p) for p in other]
    summary = summarize([run for result in mine for run in result["runs"]])
    summary.update({k: mine[-1].get(k) for k in KEPT})
    summary["date"] = f"{mine[0].get('date')} to {mine[-1].get('date')}"
    summary["load_before"] = mine[0].get("load_before")
    dates = [r.get("date") for r in mine + theirs if r.get("date")]
    summary["same_load"] = {
        "other": other_name,
        "when": f"{min(dates)} to {max(dates)}" if dates else "n/a",
        "pairs": [
            {"this tree": row(a), other_name: row(b)} for a, b in zip(mine, theirs, strict=False)
        ],
    }
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.same_load", description=__doc__)
    parser.add_argument("--this", nargs="+", type=Path, required=True)
    parser.add_argument("--other", nargs="+", type=Path, required=True)
    parser.add_argument("--other-name", required=True)
    args = parser.parse_args(argv)
    stored = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    stored.setdefault("benchmarks", {})["overhead"] = fold(args.this, args.other, args.other_name)
    RESULTS.write_text(json.dumps(stored, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
