# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pairwise rounds of files/nccl_check.py (--pairwise): which node, which rail.

Rounds of disjoint node pairs from a round-robin tournament (at most --pair-rounds of them), each
pair exchanging both ways at once; with 2 nodes a round within each node; a second pass pairs each
suspect with a distinct fast node, all at once. The schedule and the rule live once, in
nccl_check_pair_schedule.py (a link to src/nccl_preflight/node/pair_schedule.py, which the
controller's judgement, src/nccl_preflight/core/pairwise.py, imports too). docs/design.md,
"Pairwise rounds".

A leaf module of the rank script (torch and the standard library only; it never imports
nccl_check, which runs as __main__): nccl_check.run_pairwise runs the phase with its own Run.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import torch
import torch.distributed as dist

# Sibling modules of the rank script (files/), never nccl_check itself.
from nccl_check_pair_schedule import (
    Round,
    first_pass,
    pair_reference,
    pair_suspects,
    pair_values,
    second_pass,
)
from nccl_check_sweep import gbps, timed
from nccl_check_verify import Context, Details, Fail, Skip


class RankRun(Protocol):
    """What the rounds use of nccl_check's Run: the options, the record (its data, lock and
    write()), rank 0's tables, the watchdog's arm() and --pause-before's pause()."""

    args: argparse.Namespace
    record: Any
    tables: list[str]

    def arm(self, phase: str, seconds: float | None = None) -> None: ...

    def pause(self, phase: str) -> None: ...


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
        pairs = [
            [(nodes[a], nodes[b]) for a, b in r] for r in first_pass(len(nodes), args.pair_rounds)
        ]
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
        self.settings |= {"pair_rounds": args.pair_rounds, "all_rounds": all_rounds(len(nodes))}
        self.settings |= {"rounds": [[list(p) for p in r] for r in pairs], "why": why}
        for rnd in rounds:
            self.play(rnd, nbytes)
        table = pair_values(self.every_row())
        suspects = pair_suspects(table, args.pair_min_ratio) if len(nodes) >= 3 else {}
        limit = args.pair_min_ratio * pair_reference(table)
        second = second_pass(table, list(suspects), limit) if suspects else []
        for i, rnd in enumerate(second):
            self.play(PairRound(2, i, rnd), nbytes)
        every = self.every_row()  # a collective: every rank calls it
        if self.ctx.rank == 0:
            self.run.tables.append(pairwise_table(nbytes, every, plan))
        details = {**self.settings, "suspects": {str(n): r for n, r in suspects.items()}}
        details |= {"second_pass": suspect_partners(second, suspects), "rows": self.rows}
        if wrong := [r for r in self.rows if r["wrong"]]:
            raise Fail(
                f"{wrong[0]['wrong']} elements wrong from rank {wrong[0]['peer_rank']} in pass "
                f"{wrong[0]['pass']}: data is corrupted between these two ranks",
                details,
            )
        return details


def all_rounds(n: int) -> int:
    """The rounds of the whole tournament of n nodes: n - 1, odd n: n (one node rests in each)."""
    return 0 if n < 2 else n - 1 + n % 2


def suspect_partners(rounds: Sequence[Round], suspects: dict[int, list[int]]) -> list[list[int]]:
    """[[suspect, its second-pass partner], ...] in suspect order."""
    return sorted([a, b] if a in suspects else [b, a] for r in rounds for a, b in r)


# Rank 0's text shows the node x node matrix up to this many nodes (its columns), else the
# slowest pairs: a matrix of 1,024 nodes is a million mostly empty cells.
TABLE_MAX_NODES = 32
TABLE_SLOWEST = 10


def pairwise_table(nbytes: int, every: list[Details], plan: PairPlan) -> str:
    """Rank 0's text: the node x node matrix of the first pass (slowest rail; up to
    TABLE_MAX_NODES nodes, else its slowest pairs), the second pass."""
    table, hosts, nodes = pair_values(every), plan.hosts, sorted(plan.ranks)
    cells: dict[tuple[int, int], float] = {}
    for (a, b, _), value in table.items():
        cells[a, b] = cells[b, a] = min(value, cells.get((a, b), value))
    lines = [
        f"# pairwise, {len(nodes)} nodes, {nbytes} B each way per exchange, "
        f"busbw (GB/s) of the slowest rail, first pass"
    ]
    if len(nodes) <= TABLE_MAX_NODES:
        width = max(8, *(len(hosts[n]) for n in nodes))
        lines.append("#" + " " * width + "".join(f" {hosts[n][-10:]:>10}" for n in nodes))
        for a in nodes:
            row = [cells.get((a, b)) for b in nodes]
            text = " ".join(f"{'-':>10}" if v is None else f"{v:>10.4g}" for v in row)
            lines.append(f" {hosts[a]:>{width}} {text}")
    else:
        slowest = sorted((v, a, b) for (a, b), v in cells.items() if a < b)[:TABLE_SLOWEST]
        lines.append(f"# {len(cells) // 2} node pairs measured; the {len(slowest)} slowest:")
        lines += [f"# {hosts[a]} - {hosts[b]}: {v:.4g} GB/s" for v, a, b in slowest]
    for (a, b, rail), value in sorted(pair_values(every, 2).items()):
        lines.append(f"# second pass: {hosts[a]} - {hosts[b]} rail {rail}: {value:.4g} GB/s")
    for (a, _, rail), value in sorted(pair_values(every, "intra").items()):
        lines.append(f"# within {hosts[a]}: local ranks {rail} and its pair: {value:.4g} GB/s")
    if len(nodes) == 2:
        lines.append("# Note: two nodes cannot tell which of them is bad")
    return "\n".join(lines)
