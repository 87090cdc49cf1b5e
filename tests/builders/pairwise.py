# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""reports/<run-id>/ of a pairwise run: the rows the rank script measures for each pair at given
speeds, a slow node among healthy ones."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.check.support import load_part

sw = load_part("nccl_check_sweep")


Speed = Callable[[int, int, int], float]  # (node a, node b, rail) -> GB/s of the pair


def rows_for(
    n: int,
    rails: int,
    speed: Speed,
    second: list[tuple[int, int]] = (),
    first: list[tuple[int, int]] | None = None,
) -> list[dict]:
    """Every rank's rows as nccl_check.py records them: each rank's own figure for each pair
    (the two ranks of a pair see slightly different times, the slower one counts). ``first``:
    the first pass's pairs (default: every pair)."""
    rows = []
    every = list(itertools.combinations(range(n), 2))
    for pass_, pairs in [(1, every if first is None else first), (2, list(second))]:
        for a, b in pairs:
            for rail in range(rails):
                value = speed(a, b, rail)
                for node, peer, jitter in ((a, b, 1.0), (b, a, 1.02)):
                    rows.append(
                        {
                            "pass": pass_,
                            "round": 0,
                            "rank": node * rails + rail,
                            "node": node,
                            "peer_node": peer,
                            "rail": rail,
                            "peer_rank": peer * rails + rail,
                            "peer_local_rank": rail,
                            "bytes": 1 << 20,
                            "time_us": 1.0,
                            "busbw_gbps": sw.gbps(int(value * jitter * 1e9), 1.0),
                            "wrong": 0,
                        }
                    )
    return rows


def slow_node(bad: int, factor: float = 0.25, rail: int | None = None) -> Speed:
    def speed(a: int, b: int, r: int) -> float:
        hit = bad in (a, b) and (rail is None or r == rail)
        return 10.0 * factor if hit else 10.0

    return speed


def healthy(seed: int = 1) -> Speed:
    rng = random.Random(seed)
    return lambda a, b, r: 10.0 * rng.uniform(0.9, 1.1)


def statuses(verdict: dict[str, Any]) -> dict[str, str]:
    return {v["host"]: v["status"] for v in verdict["verdicts"]}


def write_run(
    tmp_path: Path,
    n: int,
    rails: int,
    speed: Speed,
    second: list,
    rounds: list[list[tuple[int, int]]] | None = None,
) -> Path:
    """A run directory of n nodes x rails ranks whose pairwise rows are ``speed``'s figures;
    ``rounds``: the first pass's rounds (default: every pair, no rounds recorded)."""
    run_dir = tmp_path / "run-1"
    first = None if rounds is None else [p for r in rounds for p in r]
    rows = rows_for(n, rails, speed, second, first)
    world = n * rails
    hosts = []
    for node in range(n):
        host = f"10.0.0.{node + 1}"
        hosts.append(
            {"host": host, "node_rank": node, "nproc_per_node": rails, "rank_offset": node * rails}
        )
        (run_dir / host).mkdir(parents=True)
        for local in range(rails):
            rank = node * rails + local
            details = {
                "mode": "always",
                "why": "--pairwise always",
                "min_ratio": 0.8,
                "pair_bytes": 1 << 20,
                "iters": 5,
                "nodes": [
                    {"node_rank": i, "host": f"node{i}", "local_ranks": rails} for i in range(n)
                ],
                "rows": [r for r in rows if r["rank"] == rank],
            }
            if rounds is not None:
                details["rounds"] = [[list(p) for p in r] for r in rounds]
                details["all_rounds"] = n - 1 + n % 2
            doc = {
                "schema": 1,
                "host": f"node{node}",
                "global_rank": rank,
                "local_rank": local,
                "node_rank": node,
                "world_size": world,
                "status": "passed",
                "started_at": "2026-01-01T00:00:00+00:00",
                "finished_at": "2026-01-01T00:00:09+00:00",
                "tests": [
                    {
                        "name": "pairwise",
                        "status": "passed",
                        "duration_s": 1.0,
                        "message": "",
                        "details": details,
                        "bandwidth": [],
                    }
                ],
            }
            (run_dir / host / f"rank-{rank}.json").write_text(json.dumps(doc))
    for entry in hosts:
        entry["link_speed_mbps"] = 100000  # 100 Gb/s x 0.9 = 11.25 GB/s expected per pair
    plan = {"run_id": "run-1", "hosts": hosts, "world_size": world, "backend": "gloo"}
    (run_dir / "plan.json").write_text(json.dumps(plan))
    return run_dir
