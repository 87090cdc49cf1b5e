# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pairwise rounds' schedule and rule, once for both sides (docs/design.md, "Pairwise rounds").

One file, two names, as node/collective_tables.py: the control machine imports it as
``nccl_preflight.node.pair_schedule``; the rank script imports it as ``nccl_check_pair_schedule``,
the sibling files/nccl_check_pair_schedule.py, a symbolic link to this file, which the launch's
zipapp ships like every sibling. Standard library only, no import of the project.

* the schedule: the first pass plays rounds of the circle method's round-robin tournament, every
  round (each node meets every other) when there are at most ``bound`` of them, else ``bound``
  rounds spread evenly over it: every round is still a perfect matching, no partner comes twice;
* the rule: a pair's figure, the reference (the median over nodes of each node's median pair),
  the suspects (more than half of a node's pairs on a rail slow); it works on whatever pairs were
  measured, all of them or a few per node;
* the second pass: each suspect with a distinct fast non-suspect node, as many at once as there
  are fast nodes, so one round for any number of suspects up to that.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

PairKey = tuple[int, int, int]  # (node a, node b, rail), a <= b (intra: a == b, lower local rank)
Round = list[tuple[int, int]]  # disjoint node pairs (a, b), a < b, played at once

# The first pass's default bound on rounds (nccl_pair_rounds): every round up to 16 nodes (15
# rounds), 16 distinct partners per node beyond (docs/design.md, "Pairwise rounds": why 16).
DEFAULT_PAIR_ROUNDS = 16


def tournament(n: int) -> list[Round]:
    """Round-robin rounds of disjoint pairs of 0..n-1 (circle method); odd n: one node rests."""
    if n < 2:
        return []
    players: list[int | None] = list(range(n)) + ([None] if n % 2 else [])
    rounds = []
    for _ in range(len(players) - 1):
        ends = zip(players[: len(players) // 2], reversed(players), strict=False)
        rounds.append(
            sorted((min(a, b), max(a, b)) for a, b in ends if a is not None and b is not None)
        )
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def first_pass(n: int, bound: int) -> list[Round]:
    """The first pass's rounds of n nodes: the whole tournament when it has at most ``bound``
    rounds (0: no bound), else ``bound`` of its rounds spread evenly over it (round i * T // bound
    of the T rounds). The circle method's rounds are disjoint, so no partner comes twice; spread,
    a node's partners lie all along the node order (in consecutive rounds they would be its
    neighbours in the hostfile, often its own rack). Odd n: a node rests in at most one of them."""
    rounds = tournament(n)
    if bound <= 0 or len(rounds) <= bound:
        return rounds
    return [rounds[i * len(rounds) // bound] for i in range(bound)]


def pair_values(rows: Sequence[dict], pass_: int | str = 1) -> dict[PairKey, float]:
    """(node a, node b, rail) -> busbw of the pair: the slower of its two ranks' own figures.
    Within a node (pass "intra") the rail is the lower local rank of the pair."""
    table: dict[PairKey, float] = {}
    for row in rows:
        if row.get("pass") != pass_:
            continue
        a, b = sorted((int(row["node"]), int(row["peer_node"])))
        key = (a, b, min(int(row["rail"]), int(row.get("peer_local_rank", row["rail"]))))
        table[key] = min(table.get(key, math.inf), float(row["busbw_gbps"]))
    return table


def node_values(table: dict[PairKey, float]) -> dict[int, list[float]]:
    """node -> the figures of every pair it was in (an intra-node pair counts once)."""
    per_node: dict[int, list[float]] = {}
    for (a, b, _), value in table.items():
        per_node.setdefault(a, []).append(value)
        if b != a:
            per_node.setdefault(b, []).append(value)
    return per_node


def node_medians(table: dict[PairKey, float]) -> dict[int, float]:
    return {node: statistics.median(v) for node, v in node_values(table).items()}


def pair_reference(table: dict[PairKey, float]) -> float:
    """The median over nodes of each node's median pair."""
    medians = node_medians(table)
    return float(statistics.median(medians.values())) if medians else 0.0


def pair_suspects(table: dict[PairKey, float], min_ratio: float) -> dict[int, list[int]]:
    """node -> rails on which more than half of its pairs are below min_ratio x reference."""
    limit = min_ratio * pair_reference(table)
    counts: dict[tuple[int, int], list[int]] = {}
    for (a, b, rail), value in table.items():
        for node in {a, b}:
            seen = counts.setdefault((node, rail), [0, 0])
            seen[0] += value < limit
            seen[1] += 1
    suspects: dict[int, list[int]] = {}
    for (node, rail), (slow, total) in sorted(counts.items()):
        if 2 * slow > total:
            suspects.setdefault(node, []).append(rail)
    return suspects


def fast_partners(table: dict[PairKey, float], suspects: Sequence[int], limit: float) -> list[int]:
    """The nodes a suspect may be re-run with, fastest first (highest median pair, the lowest
    node on a tie): the non-suspects whose median pair is not slow; none of those: every
    non-suspect (then the fastest of them comes first, as always)."""
    medians = node_medians(table)
    others = sorted((n for n in medians if n not in suspects), key=lambda n: (-medians[n], n))
    return [n for n in others if medians[n] >= limit] or others


def second_pass(table: dict[PairKey, float], suspects: Sequence[int], limit: float) -> list[Round]:
    """Rounds of the second pass: every suspect (in node order) with a distinct fast partner
    (fast_partners), as many at once as there are such partners: one round unless the suspects
    outnumber them. Never two suspects together, so a node is never judged by a suspect."""
    fast, order = fast_partners(table, suspects, limit), sorted(suspects)
    if not fast:
        return []
    rounds = []
    for start in range(0, len(order), len(fast)):
        chunk = zip(order[start : start + len(fast)], fast, strict=False)
        rounds.append(sorted((min(s, f), max(s, f)) for s, f in chunk))
    return rounds
