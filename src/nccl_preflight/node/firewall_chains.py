# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The chain walker iptables and nftables share: jump, goto, return and chain policies.

Both tools evaluate a packet the same way: the rules of a chain in order, the first verdict wins;
a jump enters another chain and comes back when it runs off its end or RETURNs, a goto does not
come back to its caller; a base (built-in) chain that runs off its end applies its policy. What
differs is how one rule matches, and that is the tool's own ``step``.

The walker follows a *set of destination ports* rather than one packet: the ports still undecided
(``todo``) shrink as rules accept or drop them, so one walk answers for MASTER_PORT or the whole
ephemeral range at once.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from .firewall_common import (
    Interval,
    ports_intersect,
    ports_subtract,
    ports_union,
)

# A loop of jumps (which the kernel refuses anyway) or a very deep one stops here.
MAX_DEPTH = 32

VERDICTS = ("accept", "drop", "reject", "return", "jump", "goto")


@dataclass
class Step:
    """How one rule treats a new TCP connection of the query being walked.

    ``state``: the rule matches (True), cannot match (False) or has a condition we cannot judge
    (None). ``ports``: the destination ports it matches. ``verdict``: one of VERDICTS, or None
    for a rule that decides nothing (a counter, LOG, an unknown target). ``target``: the chain a
    jump or goto enters (None when it is not in the ruleset).
    """

    state: bool | None
    ports: list[Interval]
    verdict: str | None
    target: Hashable | None = None


@dataclass
class Ruleset:
    """A tool's ruleset as the walker sees it, for one (peer, query).

    ``rules(chain)``: the rules of a chain, in order. ``step(rule, chain)``: how one of them
    treats the connection. ``policy(chain)``: a base chain's policy ("accept", "drop" or
    "reject"), or None for a chain without one (a user chain: running off its end returns).
    ``report(chain, rule, action, certain, ports)``: a drop or reject of ``ports``; ``rule`` is
    None when it is the chain's policy.
    """

    rules: Callable[[Hashable], Sequence[Any]]
    step: Callable[[Any, Hashable], Step]
    policy: Callable[[Hashable], str | None]
    report: Callable[[Hashable, Any, str, bool, list[Interval]], None]


def walk(ruleset: Ruleset, chain: Hashable, todo: list[Interval], depth: int = 0) -> list[Interval]:
    """Walk ``chain`` for the ports ``todo``; -> the ports that come back to the caller (those
    that ran off the end of a user chain or met a RETURN). Drops are reported as met."""
    returned: list[Interval] = []
    for rule in ruleset.rules(chain):
        if not todo or depth > MAX_DEPTH:
            break
        step = ruleset.step(rule, chain)
        hit = ports_intersect(todo, step.ports)
        if step.state is False or not hit or step.verdict is None:
            continue
        certain = step.state is True
        if step.verdict in ("drop", "reject"):
            ruleset.report(chain, rule, step.verdict, certain, hit)
        elif step.verdict in ("jump", "goto"):
            if step.target is None:
                continue
            back = walk(ruleset, step.target, hit, depth + 1)
            if certain and step.verdict == "goto":
                returned = ports_union(returned, back)
            elif certain:
                todo = ports_union(ports_subtract(todo, hit), back)
                continue
        elif step.verdict == "return" and certain:
            returned = ports_union(returned, hit)
        if certain:
            todo = ports_subtract(todo, hit)
    policy = ruleset.policy(chain)
    if policy is None:  # a user chain: running off its end returns to the caller
        return ports_union(returned, todo)
    if policy in ("drop", "reject") and todo:
        ruleset.report(chain, None, policy, True, todo)
    return []
