"""Fidelity: does nccl_check's busbw match what the link really carries?

Both fabric links of a 2-host lab are limited with tc tbf (lab.rate_limit). iperf3 between the two
hosts' fabric addresses gives the link rate (TCP goodput); nccl_check (2 hosts x 1 rank, gloo,
started with torchrun by hand, like roles/launch does) gives busbw at the largest size for every
collective. The ratio busbw / link rate is the fidelity. Goal: >= 0.9 for every collective.
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


def run(workdir: Path, repeats: int) -> dict[str, Any]:
    check_args = [
        "--tests", ",".join(f"bandwidth_{c}" for c in COLLECTIVES),
        "--min-bytes", MIN_BYTES, "--max-bytes", MAX_BYTES,
        "--iters", str(ITERS), "--warmup", str(WARMUP),
    ]  # fmt: skip
    runs: list[dict[str, Any]] = []
    for i in range(repeats):
        log(f"fidelity: repeat {i + 1}/{repeats}")
        with lab_session(2, slots=1) as (lab, _cpu):
            for h in lab.hosts:
                lab.rate_limit(h, RATE)
            link = iperf3(lab)
            duplex = iperf3(lab, bidir=True, port=IPERF_PORT + 1)
            hand = run_by_hand(
                lab, workdir / "fidelity", f"r{i}", nproc=1, check_args=check_args,
                check_timeout=check_timeout_for(300), port=29500 + i,
            )  # fmt: skip
            rows = largest_rows(rank_records(hand.out_dirs))
            link_gbytes = link["received_bps"] / 8e9
            runs.append(
                {
                    "link": link,
                    "duplex": duplex,
                    "rcs": hand.rcs,
                    "wall_s": hand.wall_s,
                    "rows": rows,
                    "ratios": {
                        c: (rows[c]["busbw_gbps"] / link_gbytes)
                        if c in rows and "busbw_gbps" in rows[c]
                        else None
                        for c in COLLECTIVES
                    },
                }
            )
            log(
                f"fidelity: link {link['received_bps'] / 1e9:.3f} Gbit/s, rcs {hand.rcs}, "
                + ", ".join(f"{c} {fmt_ratio(runs[-1]['ratios'][c])}" for c in COLLECTIVES)
            )
    link_bps = median([r["link"]["received_bps"] for r in runs])
    duplex_bps = (
        median([r["duplex"]["received_bps"] for r in runs]),
        median([r["duplex"]["reverse_received_bps"] for r in runs]),
    )
    summary = {
        c: {
            "busbw_gbps": median(
                [r["rows"][c]["busbw_gbps"] for r in runs if "busbw_gbps" in r["rows"].get(c, {})]
            ),
            "size_bytes": next(
                (r["rows"][c]["size_bytes"] for r in runs if "size_bytes" in r["rows"].get(c, {})),
                None,
            ),
            "ratio": median([r["ratios"][c] for r in runs if r["ratios"][c] is not None]),
        }
        for c in COLLECTIVES
    }
    ratios = [s["ratio"] for s in summary.values()]
    met = all(r is not None and r >= GOAL for r in ratios)
    return {
        "name": "fidelity",
        "goal": f"busbw / iperf3 link rate >= {GOAL} for every collective",
        "met": met,
        "rate": RATE,
        "link_bps": link_bps,
        "duplex_bps": duplex_bps,
        "check_args": check_args,
        "summary": summary,
        "runs": runs,
        "repeats": repeats,
    }


def fmt_ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
