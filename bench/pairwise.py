# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Pairwise rounds: what the phase costs against one plain check of the same hosts.

validate.yml with `nccl_pairwise=always` on 4 and 8 lab hosts (1 rank each, the default check:
every test, the default sweep, the default --pair-bytes). From each rank's own record: the plain
check (check-in to the last bandwidth test: the sum of its tests' durations) and the pairwise
phase (the `pairwise` test's duration), the slowest rank of each. Goal: pairwise <= 2x the check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common import fmt, lab_session, log, median, rank_records, run_playbook

GOAL = 2.0
SIZES = (4, 8)


def _phases(records: list[dict[str, Any]]) -> tuple[float | None, float | None, dict[str, Any]]:
    """(check s, pairwise s, details of rank 0's pairwise test), slowest rank of each."""
    check, pairwise, details = [], [], {}
    for record in records:
        tests = record.get("tests") or []
        check.append(sum(t["duration_s"] for t in tests if t["name"] != "pairwise"))
        pair = [t for t in tests if t["name"] == "pairwise"]
        if pair:
            pairwise.append(pair[0]["duration_s"])
            if record.get("global_rank") == 0:
                details = pair[0].get("details") or {}
    return (max(check) if check else None, max(pairwise) if pairwise else None, details)


def run(workdir: Path, repeats: int, sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    per_size: dict[str, Any] = {}
    for n in sizes:
        runs = []
        for i in range(repeats):
            with lab_session(n, slots=1) as (lab, cpu):
                pb = run_playbook(
                    lab, cpu, workdir / "pairwise", f"{n}-r{i}", ["-e", "nccl_pairwise=always"]
                )
            check_s, pair_s, details = _phases(rank_records([Path(pb.report_dir)]))
            runs.append(
                {
                    "rc": pb.rc,
                    "wall_s": pb.wall_s,
                    "check_s": check_s,
                    "pairwise_s": pair_s,
                    "rounds": len(details.get("rounds") or []),
                    "second_pass": len(details.get("second_pass") or []),
                    "pair_bytes": details.get("pair_bytes"),
                }
            )
            log(f"pairwise: {n} hosts: check {fmt(check_s)} s, pairwise {fmt(pair_s)} s")
        check = median([r["check_s"] for r in runs if r["check_s"] is not None])
        pairs = median([r["pairwise_s"] for r in runs if r["pairwise_s"] is not None])
        per_size[str(n)] = {
            "runs": runs,
            "check_s": check,
            "pairwise_s": pairs,
            "ratio": pairs / check if check and pairs is not None else None,
        }
    ratios = [s["ratio"] for s in per_size.values()]
    return {
        "name": "pairwise",
        "goal": f"pairwise <= {GOAL:g}x one plain check ({' and '.join(map(str, sizes))} hosts)",
        "repeats": repeats,
        "sizes": per_size,
        "met": all(r is not None and r <= GOAL for r in ratios) if ratios else None,
    }


def line(r: dict[str, Any]) -> str:
    return ", ".join(
        f"{n} hosts: {fmt(s['pairwise_s'])} s vs {fmt(s['check_s'])} s = {fmt(s['ratio'], 2)}x"
        for n, s in r["sizes"].items()
    )


def section(r: dict[str, Any], header: list[str]) -> list[str]:
    out = [
        "## Pairwise rounds against one plain check",
        "",
        *header,
        "validate.yml with `nccl_pairwise=always` (1 rank per host, the default check and "
        "--pair-bytes; veth links without a limit, so gloo on this machine's CPU sets the pace). "
        "From every rank's record: the plain check (sum of its tests) and the pairwise test, the "
        "slowest rank of each.",
        "",
        "| hosts | rounds | second pass | check (s) | pairwise (s) | ratio | playbook (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, s in r["sizes"].items():
        first = s["runs"][0] if s["runs"] else {}
        wall = median([run["wall_s"] for run in s["runs"]])
        out.append(
            f"| {n} | {first.get('rounds')} | {first.get('second_pass')} | {fmt(s['check_s'])} "
            f"| {fmt(s['pairwise_s'])} | {fmt(s['ratio'], 2)}x | {fmt(wall)} |"
        )
    return [*out, ""]
