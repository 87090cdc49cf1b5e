# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""reports/<run-id>/ of a run whose ranks measured given bus bandwidths (the input of
core/bandwidth_expectation.py), for the bandwidth judgement and the metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MIB = 1024 * 1024


def rank_doc(rank: int, node: int, busbw: dict[str, dict[int, float]]) -> dict[str, Any]:
    tests = [
        {
            "name": f"bandwidth_{collective}",
            "status": "passed",
            "duration_s": 1.0,
            "message": "",
            "details": {},
            "bandwidth": [
                {"size_bytes": size, "busbw_gbps": value, "rank_busbw_gbps": value, "wrong": 0}
                for size, value in sorted(sizes.items())
            ],
        }
        for collective, sizes in busbw.items()
    ]
    return {
        "schema": 1,
        "host": f"node{node}",
        "global_rank": rank,
        "node_rank": node,
        "status": "passed",
        "started_at": "2026-01-01T00:00:00+00:00",
        "finished_at": "2026-01-01T00:00:09+00:00",
        "tests": tests,
    }


def write_run(
    root: Path,
    name: str,
    busbw: dict[str, dict[int, float]],
    bandwidth: dict[str, Any] | None = None,
    speed: int | None = 10000,
) -> Path:
    run_dir = root / name
    hosts = []
    for node in range(2):
        host = f"10.0.0.{node + 1}"
        hosts.append(
            {
                "host": host,
                "node_rank": node,
                "nproc_per_node": 1,
                "rank_offset": node,
                "link_speed_mbps": speed,
            }
        )
        (run_dir / host).mkdir(parents=True)
        (run_dir / host / f"rank-{node}.json").write_text(json.dumps(rank_doc(node, node, busbw)))
    plan = {"run_id": name, "hosts": hosts, "world_size": 2, "bandwidth": bandwidth or {}}
    (run_dir / "plan.json").write_text(json.dumps(plan))
    return run_dir
