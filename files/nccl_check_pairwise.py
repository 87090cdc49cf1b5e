# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pairwise rounds of files/nccl_check.py (--pairwise): which node, which rail.

Round-robin rounds of disjoint node pairs, each pair exchanging both ways at once; with 2 nodes a
round within each node; a second pass pairs each suspect with the fastest node. The controller
judges (src/nccl_preflight/core/pairwise.py); the suspects of the second pass are picked here by the
same rule (tests/unit/test_pairwise.py holds the two together). docs/design.md, "Pairwise rounds".

A leaf module of the rank script (torch and the standard library only; it never imports
nccl_check, which runs as __main__): nccl_check.run_pairwise runs the phase with its own Run.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import torch
import torch.distributed as dist

# Sibling modules of the rank script (files/), never nccl_check itself.
from nccl_check_expect import Context, Details, Fail, Skip
from nccl_check_sweep import gbps, timed


class RankRun(Protocol):
    """What the rounds use of nccl_check's Run: the options, the record (its data, lock and
    write()), rank 0's tables, the watchdog's arm() and --pause-before's pause()."""

    args: argparse.Namespace
    record: Any
    tables: list[str]

    def arm(self, phase: str, seconds: float | None = None) -> None: ...

    def pause(self, phase: str) -> None: ...


PairKey = tuple[int, int, int]  # (node a, node b, rail), a <= b


def tournament(n: int) -> list[list[tuple[int, int]]]:
    """Round-robin rounds of disjoint pairs of 0..n-1 (circle method); odd n: one node rests."""
    if n < 2:
        return []
    players: list[int | None] = list(range(n)) + ([None] if n % 2 else [])
    rounds = []
    for _ in range(len(players) - 1):
        ends = zip(players[: len(players) // 2], reversed(players), strict=False)
        rounds.append(sorted((min(a, b), max(a, b)) for a, b in ends if None not in (a, b)))
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def pair_values(rows: Sequence[Details], pass_: int | str = 1) -> dict[PairKey, float]:
    """(node a, node b, rail) -> busbw of the pair: the slower of its two ranks' own figures.
    Within a node (pass "intra") the rail is the lower local rank of the pair."""
    table: dict[PairKey, float] = {}
    for row in (row for row in rows if row.get("pass") == pass_):
        a, b = sorted((int(row["node"]), int(row["peer_node"])))
        key = (a, b, min(int(row["rail"]), int(row.get("peer_local_rank", row["rail"]))))
        table[key] = min(table.get(key, math.inf), float(row["busbw_gbps"]))
    return table


def node_medians(table: dict[PairKey, float]) -> dict[int, float]:
    per_node: dict[int, list[float]] = {}
    for (a, b, _), value in table.items():
        for node in {a, b}:
            per_node.setdefault(node, []).append(value)
    return {node: statistics.median(values) for node, values in per_node.items()}


def pair_reference(table: dict[PairKey, float]) -> float:
    """The median over nodes of each node's median pair."""
    return statistics.median(node_medians(table).values()) if table else 0.0


def pair_suspects(table: dict[PairKey, float], min_ratio: float) -> dict[int, list[int]]:
    """node -> rails on which more than half of its pairs are below min_ratio x reference."""
    limit = min_ratio * pair_reference(table)
    slow: dict[tuple[int, int], int] = {}
    total: dict[tuple[int, int], int] = {}
    for (a, b, rail), value in table.items():
        for key in ((a, rail), (b, rail)):
            slow[key] = slow.get(key, 0) + (value < limit)
            total[key] = total.get(key, 0) + 1
    suspects: dict[int, list[int]] = {}
    for node, rail in sorted(key for key in total if 2 * slow[key] > total[key]):
        suspects.setdefault(node, []).append(rail)
    return suspects


def fastest_node(table: dict[PairKey, float], exclude: Sequence[int]) -> int | None:
    """The node with the highest median pair, not excluded (the lowest node on a tie)."""
    candidates = [(-m, node) for node, m in node_medians(table).items() if node not in exclude]
    return min(candidates)[1] if candidates else None


def partner_in(pairs: Sequence[tuple[int, int]], me: int) -> int | None:
    return next((b if me == a else a for a, b in pairs if me in (a, b)), None)


@dataclass
class PairPlan:
    """Who is where: node rank -> {local rank: global rank}, and the hosts."""

    ranks: dict[int, dict[int, int]]
    hosts: dict[int, str]

    def peer(self, pairs: Sequence[tuple[int, int]], node: int, local: int) -> int | None:
        """The global rank this rank exchanges with in a round of node pairs, or None (rests)."""
        partner = partner_in(pairs, node)
        return None if partner is None else self.ranks[partner].get(local)


class PairRound(NamedTuple):
    pass_: int | str  # 1, 2 or "intra"
    number: int
    pairs: list[tuple[int, int]]  # node pairs (intra: local-rank pairs, node = this node)


def trigger_reasons(tests: Sequence[Details], below: dict[str, float], min_bytes: int) -> list[str]:
    """Why --pairwise auto runs on this rank: a failed bandwidth test, or a collective's busbw
    at its largest size >= min_bytes under its --pair-trigger figure (pure)."""
    reasons = []
    for test in (t for t in tests if t["name"].startswith("bandwidth_")):
        collective = test["name"].removeprefix("bandwidth_")
        big = [r for r in test.get("bandwidth") or [] if r["size_bytes"] >= min_bytes]
        if test["status"] == "failed":
            reasons.append(f"{test['name']} failed")
        elif collective in below and big and big[-1]["busbw_gbps"] < below[collective]:
            reasons.append(
                f"{collective} busbw {big[-1]['busbw_gbps']:g} GB/s at {big[-1]['size_bytes']} B "
                f"is below {below[collective]:g} GB/s"
            )
    return reasons


class Pairwise:
    """The pairwise phase of one rank, after the tests (run_pairwise())."""

    def __init__(self, run: RankRun, ctx: Context):
        self.run, self.args, self.ctx = run, run.args, ctx
        self.rows: list[Details] = []  # this rank's own figure for each pair it was in
        self.settings: Details = {}  # what the test's details hold besides the rows
        data = run.record.data
        self.node, self.local = data["node_rank"], data["local_rank"]
        self.plan = PairPlan({}, {})
        for node, local, host, rank in ctx.all_gather_json(
            (self.node, self.local, data["host"], ctx.rank)
        ):
            self.plan.ranks.setdefault(int(node), {})[int(local)] = int(rank)
            self.plan.hosts[int(node)] = str(host)
        self.nodes = sorted(self.plan.ranks)

    def trigger(self) -> str:
        """Why the phase runs ("" when it does not), agreed by every rank."""
        if self.args.pairwise == "always":
            return "--pairwise always"
        below, min_bytes = dict(self.args.pair_trigger), self.args.pair_trigger_min_bytes
        reasons = trigger_reasons(self.run.record.data["tests"], below, min_bytes)
        flag = torch.tensor([float(bool(reasons))], dtype=torch.float32, device=self.ctx.device)
        dist.all_reduce(flag)
        if float(flag.cpu()) == 0:
            return ""
        return "; ".join(reasons) if reasons else "another rank's bandwidth test fell short"

    def save(self, rnd: PairRound) -> None:
        """The rows so far and the round under way in the record's "pairwise" (docs/design.md,
        "Rank result"), so a round that hangs leaves the earlier ones and names its own pairs."""
        saved = {**self.settings, "rows": list(self.rows)}
        saved["under_way"] = {"pass": rnd.pass_, "round": rnd.number}
        saved["under_way_pairs"] = [list(p) for p in rnd.pairs]
        with self.run.record.lock:
            self.run.record.data["pairwise"] = saved
            self.run.record.write()

    def exchange(self, peer: int, nbytes: int) -> tuple[float, int, int]:
        """(seconds per exchange, bytes each way, wrong elements), both ways at once, batched on
        the world communicator (docs/design.md, "Pairwise rounds", Transport)."""
        ctx = self.ctx
        elem = torch.empty(0, dtype=ctx.dtype).element_size()
        count = max(1, nbytes // elem)
        send = torch.full((count,), 1 + ctx.rank % ctx.period, dtype=ctx.dtype, device=ctx.device)
        recv = torch.zeros(count, dtype=ctx.dtype, device=ctx.device)
        ops = [dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)]
        once = lambda: [request.wait() for request in dist.batch_isend_irecv(ops)]  # noqa: E731
        seconds = timed(once, ctx.device, 1, self.args.pair_iters)  # the warm-up connects
        return seconds, count * elem, int((recv != 1 + peer % ctx.period).sum())

    def play(self, rnd: PairRound, nbytes: int) -> None:
        """One round on every rank (the resting ones only wait at the barriers)."""
        phase = f"pairwise pass {rnd.pass_} round {rnd.number}"
        self.run.arm(phase)
        self.save(rnd)
        self.run.pause(phase)
        node, local = self.node, self.local
        if rnd.pass_ == "intra":  # the pairs are local ranks of this node
            peer_node, peer_local = node, partner_in(rnd.pairs, local)
            peer = None if peer_local is None else self.plan.ranks[node].get(peer_local)
        else:
            peer_node, peer_local = partner_in(rnd.pairs, node), local
            peer = self.plan.peer(rnd.pairs, node, local)
        dist.barrier()  # every pair of the round starts together
        if peer is not None:
            seconds, sent, wrong = self.exchange(peer, nbytes)
            row = {"pass": rnd.pass_, "round": rnd.number, "rank": self.ctx.rank, "node": node}
            row |= {"peer_node": peer_node, "rail": local, "peer_rank": peer}
            row |= {
                "peer_local_rank": peer_local,
                "bytes": sent,
                "time_us": round(seconds * 1e6, 2),
            }
            self.rows.append({**row, "busbw_gbps": gbps(sent, seconds), "wrong": wrong})
            self.save(rnd)
        dist.barrier()

    def every_row(self) -> list[Details]:
        return [row for part in self.ctx.all_gather_json(self.rows) for row in part]

    def body(self, why: str) -> Details:
        """Every round of both passes; this rank's details (rank 0 also keeps the table)."""
        args, plan, nodes = self.args, self.plan, self.nodes
        if len(nodes) < 2:
            raise Skip("one node: there is no other node to pair it with")
        nbytes = args.pair_bytes or (1 << 20 if self.ctx.device.type == "cpu" else 64 << 20)
        pairs = [[(nodes[a], nodes[b]) for a, b in r] for r in tournament(len(nodes))]
        rounds = [PairRound(1, i, r) for i, r in enumerate(pairs)]
        if len(nodes) == 2:  # two cannot tell which is bad: each node's own figure, where it can
            locals_ = max(len(r) for r in plan.ranks.values())
            rounds.append(PairRound("intra", 0, [(i, i + 1) for i in range(0, locals_ - 1, 2)]))
        hosts = [
            {"node_rank": n, "host": plan.hosts[n], "local_ranks": len(plan.ranks[n])}
            for n in nodes
        ]
        self.settings = {"mode": args.pairwise, "min_ratio": args.pair_min_ratio}
        self.settings |= {"pair_bytes": nbytes, "iters": args.pair_iters, "nodes": hosts}
        self.settings |= {"rounds": [[list(p) for p in r] for r in pairs], "why": why}
        for rnd in rounds:
            self.play(rnd, nbytes)
        table = pair_values(self.every_row())
        suspects = pair_suspects(table, args.pair_min_ratio) if len(nodes) >= 3 else {}
        fastest = fastest_node(table, list(suspects))
        second = [] if fastest is None else sorted(suspects)
        for i, node in enumerate(second):
            pair = (min(node, fastest), max(node, fastest))  # type: ignore[type-var]
            self.play(PairRound(2, i, [pair]), nbytes)
        every = self.every_row()  # a collective: every rank calls it
        if self.ctx.rank == 0:
            self.run.tables.append(pairwise_table(nbytes, every, plan))
        details = {**self.settings, "suspects": {str(n): r for n, r in suspects.items()}}
        details |= {"second_pass": [[n, fastest] for n in second], "rows": self.rows}
        if wrong := [r for r in self.rows if r["wrong"]]:
            raise Fail(
                f"{wrong[0]['wrong']} elements wrong from rank {wrong[0]['peer_rank']} in pass "
                f"{wrong[0]['pass']}: data is corrupted between these two ranks",
                details,
            )
        return details


def pairwise_table(nbytes: int, every: list[Details], plan: PairPlan) -> str:
    """Rank 0's text: the node x node matrix of the first pass (slowest rail), the second pass."""
    table, hosts, nodes = pair_values(every), plan.hosts, sorted(plan.ranks)
    width = max(8, *(len(hosts[n]) for n in nodes))
    lines = [
        f"# pairwise, {len(nodes)} nodes, {nbytes} B each way per exchange, "
        f"busbw (GB/s) of the slowest rail, first pass",
        "#" + " " * width + "".join(f" {hosts[n][-10:]:>10}" for n in nodes),
    ]
    for a in nodes:
        cells = [
            [v for (x, y, _), v in table.items() if a != b and {x, y} == {a, b}] for b in nodes
        ]
        row = " ".join(f"{min(c):>10.4g}" if c else f"{'-':>10}" for c in cells)
        lines.append(f" {hosts[a]:>{width}} {row}")
    for (a, b, rail), value in sorted(pair_values(every, 2).items()):
        lines.append(f"# second pass: {hosts[a]} - {hosts[b]} rail {rail}: {value:.4g} GB/s")
    for (a, _, rail), value in sorted(pair_values(every, "intra").items()):
        lines.append(f"# within {hosts[a]}: local ranks {rail} and its pair: {value:.4g} GB/s")
    if len(nodes) == 2:
        lines.append("# Note: two nodes cannot tell which of them is bad")
    return "\n".join(lines)
