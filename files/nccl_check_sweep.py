# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Timing for files/nccl_check.py, nccl-tests style: the sweep's sizes, one operation timed on a
rank, rates in GB/s, and the verdict on a sweep's rows.

A leaf module of the rank script (torch and the standard library only; it never imports
nccl_check, which runs as __main__). The timed calls and busbw factors are the Collective records
in nccl_check.py; the pairwise rounds (nccl_check_pairwise.py) time their exchanges here too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

# A sibling module of the rank script (files/), never nccl_check itself.
from nccl_check_verify import Context, Details, Fail


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work: timing must not stop before the collective ends."""
    if device.type != "cpu" and hasattr(torch, "accelerator"):
        torch.accelerator.synchronize(device)
    elif device.type != "cpu":
        getattr(torch, device.type).synchronize(device)


Thunk = Callable[[], object]


def sweep_sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes


def sig4(value: float) -> float:
    """4 significant digits (a pair at 20 KB/s is 2.048e-05 GB/s, not 0)."""
    return float(f"{value:.4g}")


def gbps(nbytes: int, seconds: float) -> float:
    return sig4(nbytes / seconds / 1e9)


@dataclass
class Sweep:
    """One run's sweep: its sizes, iterations, "type" column, thresholds, and the watchdog's
    `arm(phase, size)` for each size."""

    ctx: Context
    sizes: list[int]
    iters: int
    warmup: int
    type_name: str
    thresholds: dict[str, float | None]  # collective -> --min-busbw(-for)
    arm: Callable[[str, int], None]


def timed(
    call: Thunk, device: torch.device, warmup: int, iters: int, start: Thunk = lambda: None
) -> float:
    """Seconds per call on this rank: `warmup` untimed calls, `start()` (a barrier), then the
    average of `iters` timed ones, each time waiting for the device's queued work."""
    for _ in range(warmup):
        call()
    synchronize(device)
    start()
    started = time.perf_counter()
    for _ in range(iters):
        call()
    synchronize(device)
    return (time.perf_counter() - started) / iters


def judge_sweep(collective: str, rows: list[Details], threshold: float | None) -> Details:
    """The test's details; Fail on a wrong element, or a busbw under the threshold at the
    largest size."""
    avg = sum(row["busbw_gbps"] for row in rows) / len(rows) if rows else 0.0
    details: Details = {"bandwidth": rows, "avg_busbw_gbps": sig4(avg)}
    if threshold is not None:
        details["threshold_gbps"] = threshold
    if bad := [row for row in rows if row["wrong"]]:
        raise Fail(
            f"{collective}: {bad[0]['wrong']} of {bad[0]['count']} elements wrong at "
            f"{bad[0]['size_bytes']} B: data is corrupted in transit; rerun the correctness "
            "tests with --verbose to find the rank",
            details,
        )
    if threshold is not None and rows and rows[-1]["busbw_gbps"] < threshold:
        raise Fail(
            f"{collective} busbw {rows[-1]['busbw_gbps']:g} GB/s at {rows[-1]['size_bytes']} B is "
            f"below the required {threshold:g} GB/s: check which interface carries the traffic "
            "(NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_DEBUG=INFO) and the link speed "
            "(ethtool, ibstat) on every host",
            details,
        )
    return details
