# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/node/firewall_chains.py, the walker iptables and nft share, on rulesets
written as data: jump comes back, goto does not, RETURN and running off a user chain return, a base
chain's policy takes what is left, an undecidable rule never accepts."""

from __future__ import annotations

from nccl_preflight.node.firewall_chains import Ruleset, Step, walk

ALL = [(0, 65535)]


def ruleset(chains: dict[str, list[Step]], policies: dict[str, str]):
    """Rules are Steps themselves; -> (Ruleset, the reports it got)."""
    reports: list[tuple] = []
    rs = Ruleset(
        rules=lambda chain: chains.get(chain, []),
        step=lambda rule, chain: rule,
        policy=lambda chain: policies.get(chain),
        report=lambda chain, rule, action, certain, ports: reports.append(
            (chain, None if rule is None else chains[chain].index(rule) + 1, action, certain, ports)
        ),
    )
    return rs, reports


def test_jump_comes_back_and_the_policy_takes_the_rest() -> None:
    rs, reports = ruleset(
        {
            "INPUT": [Step(True, ALL, "jump", "FENCE"), Step(True, [(22, 22)], "accept")],
            "FENCE": [Step(True, [(29500, 29500)], "drop"), Step(True, [(100, 200)], "return")],
        },
        {"INPUT": "drop"},
    )
    assert walk(rs, "INPUT", [(22, 22), (150, 150), (29500, 29500), (40000, 40001)]) == []
    assert reports == [
        ("FENCE", 1, "drop", True, [(29500, 29500)]),
        # 150 returned from FENCE and 40000-40001 ran off its end: both back in INPUT, where
        # nothing accepts them.
        ("INPUT", None, "drop", True, [(150, 150), (40000, 40001)]),
    ]


def test_goto_does_not_come_back_to_its_caller() -> None:
    rs, reports = ruleset(
        {
            "INPUT": [Step(True, ALL, "jump", "A"), Step(True, ALL, "accept")],
            "A": [Step(True, ALL, "goto", "B"), Step(True, ALL, "drop")],
            "B": [],
        },
        {"INPUT": "drop"},
    )
    walk(rs, "INPUT", [(29500, 29500)])
    # B runs off its end: back to INPUT (A's caller), not to A's drop.
    assert reports == []


def test_an_undecidable_rule_may_drop_but_never_accepts() -> None:
    rs, reports = ruleset(
        {"INPUT": [Step(None, [(29500, 29500)], "accept"), Step(None, ALL, "reject")]},
        {"INPUT": "drop"},
    )
    walk(rs, "INPUT", [(29500, 29500)])
    assert reports == [
        ("INPUT", 2, "reject", False, [(29500, 29500)]),
        ("INPUT", None, "drop", True, [(29500, 29500)]),
    ]


def test_a_rule_that_cannot_match_or_decides_nothing_is_passed_over() -> None:
    rs, reports = ruleset(
        {
            "INPUT": [
                Step(False, ALL, "drop"),
                Step(True, ALL, None),  # LOG, a counter, an unknown target
                Step(True, ALL, "jump", None),  # a jump to a chain not in the ruleset
                Step(True, [(1, 10)], "drop"),
            ]
        },
        {"INPUT": "accept"},
    )
    assert walk(rs, "INPUT", [(5, 29500)]) == []
    assert reports == [("INPUT", 4, "drop", True, [(5, 10)])]
