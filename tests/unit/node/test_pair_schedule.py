# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pairwise rounds at scale (issue 27 item 6): a first pass bounded by nccl_pair_rounds
(src/nccl_preflight/node/pair_schedule.py, the rank script's nccl_check_pair_schedule), the
second pass in as few rounds as there can be, and the controller's judgement, pairwise.json,
summary.md, JUnit and report.html on a sparse set of pairs."""

from __future__ import annotations

import itertools
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nccl_preflight.core import pairwise as nccl_pairwise
from nccl_preflight.core.html import pairwise as html_pairwise
from nccl_preflight.node import pair_schedule as ps
from tests.builders.pairwise import Speed, healthy, rows_for, slow_node, statuses, write_run
from tests.check.support import load_script
from tests.report_build import build_report as report

nc = load_script()


def partners(rounds: list[list[tuple[int, int]]]) -> dict[int, list[int]]:
    met: dict[int, list[int]] = {}
    for a, b in (p for r in rounds for p in r):
        met.setdefault(a, []).append(b)
        met.setdefault(b, []).append(a)
    return met


def assert_matchings(rounds: list[list[tuple[int, int]]], n: int) -> None:
    """Every round a matching of 0..n-1 (perfect, one node resting on odd n); no pair twice."""
    for r in rounds:
        ends = [x for p in r for x in p]
        assert len(ends) == len(set(ends)) and len(r) == n // 2
        assert all(0 <= a < b < n for a, b in r)
    every = [p for r in rounds for p in r]
    assert len(every) == len(set(every))


@pytest.mark.parametrize("n", [*range(2, 18), 31, 64, 65, 127, 1023, 1024])
@pytest.mark.parametrize("bound", [0, 1, 2, 8, ps.DEFAULT_PAIR_ROUNDS, 40])
def test_first_pass_is_bounded_matchings_with_distinct_partners(n: int, bound: int) -> None:
    rounds = ps.first_pass(n, bound)
    assert_matchings(rounds, n)
    every = n - 1 + n % 2  # the whole tournament's rounds
    played = every if bound == 0 else min(bound, every)
    assert len(rounds) == played
    met = partners(rounds)
    if played == every:  # the whole tournament: every node meets every other
        assert rounds == ps.tournament(n)
        assert all(sorted(met[x]) == [y for y in range(n) if y != x] for x in range(n))
    elif n % 2 == 0:
        assert all(len(met[x]) == bound for x in range(n))
    else:  # one node rests in each round, never the same one twice
        counts = sorted(len(met.get(x, [])) for x in range(n))
        assert counts == [bound - 1] * bound + [bound] * (n - bound)


def test_small_clusters_keep_every_pair_by_default() -> None:
    for n in range(2, 17):
        pairs = {p for r in ps.first_pass(n, ps.DEFAULT_PAIR_ROUNDS) for p in r}
        assert pairs == set(itertools.combinations(range(n), 2))
    assert len(ps.first_pass(1024, ps.DEFAULT_PAIR_ROUNDS)) == 16
    assert len(ps.first_pass(17, ps.DEFAULT_PAIR_ROUNDS)) == 16  # 17 nodes: a 17-round tournament


def test_bounded_partners_lie_all_along_the_node_order() -> None:
    """Spread rounds, not the first 16: a node's partners fall in many blocks of 64 nodes (racks,
    when the hostfile is in rack order), not only beside it."""
    met = partners(ps.first_pass(1024, 16))
    for node in (0, 1, 500, 1023):
        assert len({p // 64 for p in met[node]}) >= 8, sorted(met[node])


def test_rank_script_default_and_option_match_the_variable() -> None:
    defaults = Path(__file__).parents[3] / "roles/nccl_defaults/defaults/main/checks.yml"
    assert f"nccl_pair_rounds: {ps.DEFAULT_PAIR_ROUNDS}\n" in defaults.read_text()
    args = nc.parse_args(["--rank", "0", "--world-size", "1"])
    assert args.pair_rounds == ps.DEFAULT_PAIR_ROUNDS
    assert (
        nc.parse_args(["--rank", "0", "--world-size", "1", "--pair-rounds", "0"]).pair_rounds == 0
    )
    with pytest.raises(SystemExit):
        nc.parse_args(["--rank", "0", "--world-size", "1", "--pair-rounds", "-1"])


@pytest.mark.parametrize(
    ("value", "wrong"), [(16, False), ("0", False), (-1, True), ("many", True), (2.5, True)]
)
def test_the_variable_is_checked(value: object, wrong: bool) -> None:
    from nccl_preflight.core.inputs import pairwise_problems

    problems = pairwise_problems({"nccl_pair_rounds": value})
    assert bool(problems) == wrong
    assert all("nccl_pair_rounds" in p for p in problems)


# --- the second pass --------------------------------------------------------------------------


def first_pass_table(n: int, rails: int, speed: Speed, bound: int = 16) -> dict:
    rounds = ps.first_pass(n, bound)
    return ps.pair_values(rows_for(n, rails, speed, first=[p for r in rounds for p in r]))


def test_several_suspects_are_rerun_in_one_round_each_with_a_distinct_fast_node() -> None:
    bad = {3, 17, 40, 41, 63}
    table = first_pass_table(64, 1, lambda a, b, r: 2.0 if {a, b} & bad else 10.0)
    suspects = ps.pair_suspects(table, 0.8)
    assert set(suspects) == bad
    rounds = ps.second_pass(table, list(suspects), 0.8 * ps.pair_reference(table))
    assert len(rounds) == 1
    ends = [x for p in rounds[0] for x in p]
    assert len(ends) == len(set(ends)) == 2 * len(bad)  # disjoint pairs, all at once
    assert sorted(x for p in rounds[0] for x in p if x in bad) == sorted(bad)
    assert all(len({a, b} & bad) == 1 for a, b in rounds[0])  # never two suspects together


def test_more_suspects_than_fast_nodes_take_more_rounds_never_two_suspects_together() -> None:
    medians = {0: 10.0, 1: 9.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.0, 6: 1.0}
    table = {(n, n, 0): v for n, v in medians.items()}  # one figure per node, its median
    rounds = ps.second_pass(table, [2, 3, 4, 5, 6], 5.0)
    assert rounds == [[(0, 2), (1, 3)], [(0, 4), (1, 5)], [(0, 6)]]
    assert ps.second_pass(table, list(medians), 5.0) == []  # nobody to compare with


# --- the controller on a sparse set of pairs --------------------------------------------------


def judge_bounded(n: int, rails: int, speed: Speed, bound: int = 16) -> dict:
    """As a run does: the first pass's rows, the rank script's second pass, the judgement."""
    rounds = ps.first_pass(n, bound)
    first = [p for r in rounds for p in r]
    table = ps.pair_values(rows_for(n, rails, speed, first=first))
    suspects = ps.pair_suspects(table, 0.8)
    second = ps.second_pass(table, list(suspects), 0.8 * ps.pair_reference(table))
    rows = rows_for(n, rails, speed, [p for r in second for p in r], first)
    return nccl_pairwise.judge(list(range(n)), {i: f"h{i}" for i in range(n)}, rows, 0.8)


@pytest.mark.parametrize("n", [64, 1024, 1023])
def test_one_slow_node_is_named_and_its_partners_are_not(n: int) -> None:
    verdict = judge_bounded(n, 1, slow_node(n // 3))
    slow = {h: s for h, s in statuses(verdict).items() if s != "ok"}
    assert slow == {f"h{n // 3}": "slow"}
    named = verdict["verdicts"][n // 3]
    assert named["second_pass"] and all(
        v < verdict["limit_busbw_gbps"] for v in named["second_pass"].values()
    )
    assert len(named["pairs"]) == 16 + 1 or (n % 2 and len(named["pairs"]) == 15 + 1)


def test_a_slow_rail_of_one_node_among_64_names_that_rail() -> None:
    verdict = judge_bounded(64, 2, slow_node(9, rail=1), bound=8)
    assert {h: s for h, s in statuses(verdict).items() if s != "ok"} == {"h9": "slow"}
    assert verdict["verdicts"][9]["rails"] == [1]


@pytest.mark.parametrize("n", [64, 1024])
def test_one_slow_link_blames_neither_end(n: int) -> None:
    a, b = ps.first_pass(n, 16)[5][3]  # a pair the first pass measures

    def speed(x: int, y: int, r: int) -> float:
        return 1.0 if {x, y} == {a, b} else 10.0

    verdict = judge_bounded(n, 1, speed)
    assert set(statuses(verdict).values()) == {"ok"}
    assert [p for p in verdict["pairs"] if p["slow"]] != []  # the slow pair is shown


def test_a_node_whose_partners_are_mostly_slow_is_cleared_by_the_second_pass() -> None:
    """Node 5 meets 16 partners; 9 of them are slow nodes, so most of its pairs are slow: it is
    a suspect, re-run with a fast node, and cleared; the 9 are named."""
    n, victim = 64, 5
    bad = set(sorted(partners(ps.first_pass(n, 16))[victim])[:9])
    verdict = judge_bounded(n, 1, lambda a, b, r: 1.0 if {a, b} & bad else 10.0)
    found = statuses(verdict)
    assert found[f"h{victim}"] == "cleared"
    assert {h for h, s in found.items() if s == "slow"} == {f"h{x}" for x in bad}


def test_a_healthy_1024_node_run_names_nobody() -> None:
    verdict = judge_bounded(1024, 1, healthy(7))
    assert set(statuses(verdict).values()) == {"ok"}


# --- pairwise.json, summary.md, JUnit and report.html beyond the matrix's size ----------------


def test_a_64_node_report_with_a_bounded_first_pass(tmp_path: Path) -> None:
    n, bad = 64, 21
    rounds = ps.first_pass(n, 8)
    table = ps.pair_values(rows_for(n, 1, slow_node(bad), first=[p for r in rounds for p in r]))
    second = ps.second_pass(table, [bad], 0.8 * ps.pair_reference(table))
    run_dir = write_run(tmp_path, n, 1, slow_node(bad), [p for r in second for p in r], rounds)
    summary = report(run_dir)
    assert summary["verdict"] == "failed"
    assert [p for p in summary["problems"] if "pairwise.10_0_0_22" in p]
    assert "| node | 10.0.0.1 |" not in summary["markdown"]  # no 64-column matrix
    assert (
        "64 nodes: the matrix is shown up to 32 nodes; 256 node pairs measured"
        in (summary["markdown"])
    )
    assert "8 of 63 rounds (nccl_pair_rounds" in summary["markdown"]
    table = summary["markdown"].split("the 10 slowest:")[1].strip().split("\n\n")[0]
    rows = table.splitlines()[2:]
    assert len(rows) == 10 and all("10.0.0.22" in r for r in rows[:8])  # its 8 pairs first
    assert not any("10.0.0.22" in r for r in rows[8:])

    doc = json.loads((run_dir / "pairwise.json").read_text())
    assert doc["matrix_busbw_gbps"] is None and doc["matrix_by_rail_busbw_gbps"] is None
    assert (doc["first_pass_rounds"], doc["all_rounds"], doc["every_pair"]) == (8, 63, False)
    assert len([p for p in doc["pairs"] if p["pass"] == 1]) == 8 * 32
    assert [v["host"] for v in doc["verdicts"] if v["status"] != "ok"] == ["10.0.0.22"]

    cases = list(ET.parse(run_dir / "junit" / "pairwise.xml").iter("testcase"))
    assert len(cases) == n and sum(c.find("failure") is not None for c in cases) == 1

    shown = html_pairwise(doc)
    assert shown is not None and shown["svg"] == ""
    assert "64 nodes: the heatmap is drawn up to 32 nodes" in shown["note"]
    assert "10.0.0.22 is SLOW" in shown["note"]


def test_rank_zeros_text_lists_the_slowest_pairs_beyond_32_nodes() -> None:
    from tests.check.support import load_part

    pw = load_part("nccl_check_pairwise")
    n, bad = 64, 7
    first = [p for r in ps.first_pass(n, 8) for p in r]
    plan = pw.PairPlan({i: {0: i} for i in range(n)}, {i: f"node{i:02d}" for i in range(n)})
    text = pw.pairwise_table(1 << 20, rows_for(n, 1, slow_node(bad), first=first), plan)
    lines = text.splitlines()
    assert lines[1] == "# 256 node pairs measured; the 10 slowest:"
    assert all("node07" in line for line in lines[2:10]) and "node07" not in lines[10]
    assert len(lines) == 12  # no 64-column matrix
    small = pw.pairwise_table(
        1 << 20,
        rows_for(4, 1, slow_node(1)),
        pw.PairPlan({i: {0: i} for i in range(4)}, {i: f"node{i}" for i in range(4)}),
    )
    assert small.splitlines()[1].split() == ["#", "node0", "node1", "node2", "node3"]
