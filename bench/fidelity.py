# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Fidelity: does nccl_check's busbw match what the link really carries?

Both fabric links of a 2-host lab are limited with tc tbf (lab.rate_limit). iperf3 between the two
hosts' fabric addresses gives the link rate (TCP goodput); nccl_check (gloo, started with torchrun
by hand, like roles/launch does) gives busbw at the largest size for every collective. The ratio
busbw / link rate is the fidelity. Goal: >= 0.9 for every collective.

Layout: 2 hosts x 2 ranks is the goal's layout, 2 hosts x 1 rank is measured beside it in the same
lab. Real nodes run several ranks (GPUs) behind one NIC, and nccl-tests' busbw makes the link rate
the ideal of a ring at any rank count. torchrun numbers the ranks host by host, so the ring
0 -> 1 -> 2 -> 3 -> 0 crosses the link once per direction and every connection between two ranks
carries payload one way only; with 1 rank per host one connection carries both directions, where
gloo's ring all_gather takes turns (BENCHMARKS.md, Findings). Traffic between two ranks of one host
stays in the host (loopback), as NVLink traffic does on GPU nodes. Each layout is recorded (hosts,
ranks per host, which send/recv pairs cross hosts) with its own table.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import (
    check_timeout_for,
    lab_session,
    log,
    median,
    rank_records,
    run_by_hand,
)
from tests.lab.harness import Lab

GOAL = 0.9
RATE = "1gbit"
HOSTS = 2
# Ranks per host of the layouts measured; the first is the goal's layout (see the docstring).
RANKS_PER_HOST = (2, 1)
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "send_recv")
MIN_BYTES = "16M"
MAX_BYTES = "64M"
ITERS = 5
WARMUP = 1
IPERF_SECONDS = 5
IPERF_PORT = 5201


def iperf3(
    lab: Lab, server: int = 1, client: int = 0, bidir: bool = False, port: int = IPERF_PORT
) -> dict[str, Any]:
    """TCP goodput from host `client` to host `server` over the fabric (lab addresses only).

    bidir: both directions at once (is the link full duplex?); adds reverse_received_bps.
    """
    srv, cli = lab.hosts[server], lab.hosts[client]
    bound = str(IPERF_SECONDS + 20)
    server_proc = lab.popen(
        srv,
        [
            "timeout",
            bound,
            "stdbuf",
            "-oL",
            "iperf3",
            "-s",
            "-1",
            "-B",
            srv.fabric_addr,
            "-p",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert server_proc.stdout is not None
        # Raw reads: select() on a buffered text file misses lines already in its buffer.
        fd = server_proc.stdout.fileno()
        deadline = time.monotonic() + 10
        seen = ""
        while "listening" not in seen.lower():
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, left))
            chunk = os.read(fd, 4096).decode(errors="replace") if ready else ""
            seen += chunk
            if left <= 0 or (ready and not chunk):
                raise RuntimeError(f"iperf3 server did not start in {srv.name}: {seen.strip()}")
        result = lab.run(
            cli,
            ["timeout", bound, "iperf3", "-c", srv.fabric_addr, "-B", cli.fabric_addr,
             "-p", str(port), "-t", str(IPERF_SECONDS), "-O", "1", "-J",
             *(["--bidir"] if bidir else [])],
            check=False, timeout=IPERF_SECONDS + 30,
        )  # fmt: skip
        if result.returncode != 0 or '"error"' in result.stdout:
            raise RuntimeError(f"iperf3 failed: {result.stdout[-500:]} {result.stderr[-500:]}")
        data = json.loads(result.stdout)
        end = data["end"]
        out = {
            "received_bps": float(end["sum_received"]["bits_per_second"]),
            "sent_bps": float(end["sum_sent"]["bits_per_second"]),
            "retransmits": end["sum_sent"].get("retransmits"),
        }
        if bidir:
            out["reverse_received_bps"] = float(
                end["sum_received_bidir_reverse"]["bits_per_second"]
            )
        return out
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired):
            server_proc.communicate(timeout=5)
        if server_proc.poll() is None:
            server_proc.kill()
            server_proc.wait(timeout=5)


def largest_rows(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """collective -> the bandwidth row of rank 0 at the largest size."""
    rec = next((r for r in records if r.get("global_rank") == 0), None)
    rows: dict[str, dict[str, Any]] = {}
    if rec is None:
        return rows
    for test in rec.get("tests", []):
        name = test.get("name", "")
        if not name.startswith("bandwidth_"):
            continue
        table = test.get("bandwidth") or (test.get("details") or {}).get("bandwidth") or []
        if table:
            row = max(table, key=lambda r: r["size_bytes"])
            rows[name.removeprefix("bandwidth_")] = {**row, "status": test.get("status")}
        else:
            rows[name.removeprefix("bandwidth_")] = {
                "status": test.get("status"),
                "message": test.get("message"),
            }
    return rows


def layout(ranks_per_host: int) -> dict[str, Any]:
    """The rank layout as torchrun makes it (rank = node rank * ranks per host + local rank), and
    which pairs of nccl_check's send/recv ring (rank r sends to r + 1) cross hosts."""
    world = HOSTS * ranks_per_host
    pairs = [(r, (r + 1) % world) for r in range(world)]
    crosses = [(a, b) for a, b in pairs if a // ranks_per_host != b // ranks_per_host]
    return {
        "label": f"{HOSTS} hosts x {ranks_per_host} rank{'s' if ranks_per_host > 1 else ''}",
        "hosts": HOSTS,
        "ranks_per_host": ranks_per_host,
        "world_size": world,
        "hosts_of_ranks": [r // ranks_per_host for r in range(world)],
        "send_recv_cross_host": [f"{a}->{b}" for a, b in crosses],
        "send_recv_same_host": [f"{a}->{b}" for a, b in pairs if (a, b) not in crosses],
        # every rank waits for its send and its receive: with a leg on the link, the link bounds it
        "send_recv_every_rank_on_link": all(
            any(r in pair for pair in crosses) for r in range(world)
        ),
    }


def summarize(runs: list[dict[str, Any]], label: str) -> dict[str, dict[str, Any]]:
    """collective -> median busbw and ratio over the repeats, for one layout."""
    per_run = [r["layouts"][label] for r in runs]
    summary = {}
    for c in COLLECTIVES:
        rows = [m["rows"][c] for m in per_run if "busbw_gbps" in m["rows"].get(c, {})]
        summary[c] = {
            "busbw_gbps": median([row["busbw_gbps"] for row in rows]),
            "size_bytes": rows[0]["size_bytes"] if rows else None,
            "ratio": median([m["ratios"][c] for m in per_run if m["ratios"][c] is not None]),
        }
    return summary


def goal_met(summary: dict[str, dict[str, Any]]) -> bool:
    return all(s["ratio"] is not None and s["ratio"] >= GOAL for s in summary.values())


def run(workdir: Path, repeats: int) -> dict[str, Any]:
    check_args = [
        "--tests", ",".join(f"bandwidth_{c}" for c in COLLECTIVES),
        "--min-bytes", MIN_BYTES, "--max-bytes", MAX_BYTES,
        "--iters", str(ITERS), "--warmup", str(WARMUP),
    ]  # fmt: skip
    layouts = [layout(k) for k in RANKS_PER_HOST]
    for lay in layouts:
        log(
            f"fidelity: layout {lay['label']} (world {lay['world_size']}); send/recv pairs across "
            f"hosts {', '.join(lay['send_recv_cross_host'])}, within a host "
            f"{', '.join(lay['send_recv_same_host']) or 'none'}"
        )
    runs: list[dict[str, Any]] = []
    for i in range(repeats):
        log(f"fidelity: repeat {i + 1}/{repeats}")
        with lab_session(HOSTS, slots=RANKS_PER_HOST[0]) as (lab, _cpu):
            for h in lab.hosts:
                lab.rate_limit(h, RATE)
            link = iperf3(lab)
            duplex = iperf3(lab, bidir=True, port=IPERF_PORT + 1)
            link_gbytes = link["received_bps"] / 8e9
            measured: dict[str, Any] = {}
            for j, lay in enumerate(layouts):
                hand = run_by_hand(
                    lab, workdir / "fidelity", f"r{i}-{lay['ranks_per_host']}",
                    nproc=lay["ranks_per_host"], check_args=check_args,
                    check_timeout=check_timeout_for(300), port=29500 + len(layouts) * i + j,
                )  # fmt: skip
                rows = largest_rows(rank_records(hand.out_dirs))
                ratios = {
                    c: (rows[c]["busbw_gbps"] / link_gbytes)
                    if c in rows and "busbw_gbps" in rows[c]
                    else None
                    for c in COLLECTIVES
                }
                measured[lay["label"]] = {
                    "rcs": hand.rcs, "wall_s": hand.wall_s, "rows": rows, "ratios": ratios,
                }  # fmt: skip
                log(
                    f"fidelity: {lay['label']}: link {link['received_bps'] / 1e9:.3f} Gbit/s, "
                    f"rcs {hand.rcs}, "
                    + ", ".join(f"{c} {fmt_ratio(ratios[c])}" for c in COLLECTIVES)
                )
            runs.append({"link": link, "duplex": duplex, "layouts": measured})
    link_bps = median([r["link"]["received_bps"] for r in runs])
    duplex_bps = (
        median([r["duplex"]["received_bps"] for r in runs]),
        median([r["duplex"]["reverse_received_bps"] for r in runs]),
    )
    by_layout = {}
    for lay in layouts:
        summary = summarize(runs, lay["label"])
        by_layout[lay["label"]] = {"layout": lay, "summary": summary, "met": goal_met(summary)}
    goal_layout = by_layout[layouts[0]["label"]]
    return {
        "name": "fidelity",
        "goal": f"busbw / iperf3 link rate >= {GOAL} for every collective, {layouts[0]['label']}",
        "met": goal_layout["met"],
        "rate": RATE,
        "link_bps": link_bps,
        "duplex_bps": duplex_bps,
        "check_args": check_args,
        # the goal's layout; every layout measured, the goal's first, is in "layouts"
        "layout": goal_layout["layout"],
        "summary": goal_layout["summary"],
        "layouts": by_layout,
        "runs": runs,
        "repeats": repeats,
    }


def fmt_ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
