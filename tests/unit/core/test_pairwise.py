# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Pairwise rounds: the tournament and suspects of the rank script (files/nccl_check_pairwise.py),
and the controller's judgement, JUnit, summary and pairwise.json
(src/nccl_preflight/core/pairwise.py) on synthetic matrices.
"""

from __future__ import annotations

import itertools
import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core import pairwise as nccl_pairwise
from nccl_preflight.core.html import TEMPLATE as HTML_TEMPLATE
from tests.builders.pairwise import healthy, rows_for, slow_node, statuses, sw, write_run
from tests.builders.report import module_result
from tests.check.support import load_part, load_script
from tests.jenkins_schema import validate_report_junit
from tests.report_build import build_report as report
from tests.report_build import build_verdict

nc = load_script()
pw = load_part("nccl_check_pairwise")
ps = load_part("nccl_check_pair_schedule")  # the schedule and rule the rank script imports


def judge(n: int, rows: list[dict], ratio: float = 0.8) -> dict[str, Any]:
    return nccl_pairwise.judge(list(range(n)), {i: f"h{i}" for i in range(n)}, rows, ratio)


# --- the rank script's part --------------------------------------------------------------------


@pytest.mark.parametrize("n", range(1, 11))
def test_tournament_meets_every_pair_once_in_disjoint_rounds(n: int) -> None:
    rounds = ps.tournament(n)
    pairs = [p for r in rounds for p in r]
    assert sorted(pairs) == list(itertools.combinations(range(n), 2))
    for r in rounds:
        nodes = [x for p in r for x in p]
        assert len(nodes) == len(set(nodes))  # disjoint: every pair of a round at once
        assert len(r) == n // 2
    assert len(rounds) == (0 if n < 2 else n - 1 if n % 2 == 0 else n)


@pytest.mark.parametrize("seed", range(30))
def test_rank_script_and_controller_pick_the_same_suspects(seed: int) -> None:
    rng = random.Random(seed)
    n, rails = rng.randint(3, 9), rng.randint(1, 3)
    bad = {rng.randrange(n): rng.choice([None, *range(rails)]) for _ in range(rng.randint(0, 2))}

    def speed(a: int, b: int, r: int) -> float:
        slow = any(x in (a, b) and (rail is None or rail == r) for x, rail in bad.items())
        return rng.uniform(0.2, 0.3) if slow else rng.uniform(0.8, 1.2)

    rows = rows_for(n, rails, speed)
    # One file (src/nccl_preflight/node/pair_schedule.py) under the two names.
    assert Path(ps.__file__).samefile(
        Path(nccl_pairwise.__file__).parent.parent / "node" / "pair_schedule.py"
    )
    table = ps.pair_values(rows)
    assert table == nccl_pairwise.pair_values(rows)
    assert ps.pair_reference(table) == pytest.approx(nccl_pairwise.pair_reference(table))
    assert ps.pair_suspects(table, 0.8) == nccl_pairwise.pair_suspects(table, 0.8)


def test_fast_partners_exclude_suspects_fastest_first() -> None:
    rows = rows_for(4, 1, lambda a, b, r: 10.0 + a + b)
    table = ps.pair_values(rows)
    assert ps.fast_partners(table, [], 0.0)[0] == 3
    # Without 3: nodes 1 and 2 both have their own pair (13) as median; the lower one wins.
    assert ps.fast_partners(table, [3], 0.0)[0] == 1
    assert ps.fast_partners(table, [0, 1, 2, 3], 0.0) == []


def test_pair_plan_peer_is_the_same_local_rank_of_the_partner() -> None:
    plan = pw.PairPlan({0: {0: 0, 1: 1}, 1: {0: 2, 1: 3}, 2: {0: 4}}, {0: "a", 1: "b", 2: "c"})
    assert plan.peer([(0, 1)], 0, 1) == 3
    assert plan.peer([(0, 1)], 2, 0) is None  # rests this round
    assert plan.peer([(1, 2)], 1, 1) is None  # the partner has no rail 1


def test_ratio_option_is_checked() -> None:
    with pytest.raises(SystemExit):
        nc.parse_args(["--rank", "0", "--world-size", "1", "--pair-min-ratio", "1.5"])
    with pytest.raises(SystemExit):
        nc.parse_args(["--rank", "0", "--world-size", "1", "--pair-iters", "0"])
    args = nc.parse_args(["--rank", "0", "--world-size", "1", "--pairwise", "always"])
    assert (args.pairwise, args.pair_min_ratio) == ("always", 0.8)


# --- the controller's judgement ------------------------------------------------------------------


@pytest.mark.parametrize("n", [3, 4, 5, 6, 8])
def test_one_slow_node_is_named_and_only_it(n: int) -> None:
    bad = n - 2
    rows = rows_for(n, 1, slow_node(bad), second=[(0, bad)])
    verdict = judge(n, rows)
    assert statuses(verdict) == {f"h{i}": "slow" if i == bad else "ok" for i in range(n)}
    slow = verdict["verdicts"][bad]
    assert slow["rails"] == [0] and slow["unconfirmed_rails"] == []
    assert "h0" in slow["message"] and "SLOW" in slow["message"]
    assert "2.5" in slow["message"]  # its median pair
    # the cluster's: 10 from 4 nodes on; on 3 nodes the median node has one fast, one slow pair
    assert verdict["reference_busbw_gbps"] == (6.25 if n == 3 else 10.0)
    assert f"cluster's {verdict['reference_busbw_gbps']:.3g} GB/s" in slow["message"]


def test_healthy_cluster_names_nobody() -> None:
    verdict = judge(6, rows_for(6, 1, healthy()))
    assert set(statuses(verdict).values()) == {"ok"}
    assert not any(p["slow"] for p in verdict["pairs"])


def test_second_pass_clears_a_suspect_that_is_fast_with_the_fastest_node() -> None:
    rows = rows_for(6, 1, slow_node(4), second=[(0, 4)])
    for row in rows:
        if row["pass"] == 2:
            row["busbw_gbps"] = 9.9  # fast this time: the first pass was a fluke
    verdict = judge(6, rows)
    assert statuses(verdict)["h4"] == "cleared"
    assert "cleared" in verdict["verdicts"][4]["message"]


def test_without_a_second_pass_a_suspect_is_slow_from_the_first_pass_only() -> None:
    verdict = judge(5, rows_for(5, 1, slow_node(1)))
    assert statuses(verdict)["h1"] == "slow"
    assert "first pass only" in verdict["verdicts"][1]["message"]


def test_a_bad_rail_is_named_by_its_local_rank() -> None:
    rows = rows_for(4, 2, slow_node(2, rail=1), second=[(0, 2)])
    verdict = judge(4, rows)
    assert statuses(verdict) == {"h0": "ok", "h1": "ok", "h2": "slow", "h3": "ok"}
    assert verdict["verdicts"][2]["rails"] == [1]
    assert "rail(s) 1" in verdict["verdicts"][2]["message"]


def test_two_nodes_cannot_tell_and_show_their_own_intra_node_figure() -> None:
    rows = rows_for(2, 1, lambda a, b, r: 1.0)
    for node, value in ((0, 7.5), (1, 0.5)):
        for local, peer in ((0, 1), (1, 0)):
            rows.append(
                {
                    "pass": "intra",
                    "round": 0,
                    "rank": node * 2 + local,
                    "node": node,
                    "peer_node": node,
                    "rail": local,
                    "peer_rank": node * 2 + peer,
                    "peer_local_rank": peer,
                    "bytes": 1,
                    "time_us": 1.0,
                    "busbw_gbps": value,
                    "wrong": 0,
                }
            )
    verdict = judge(2, rows)
    assert not verdict["decided"] and "two nodes cannot tell" in verdict["note"]
    assert statuses(verdict) == {"h0": "undecided", "h1": "undecided"}
    assert "within h1 local ranks 0-1: 0.5 GB/s" in verdict["verdicts"][1]["message"]


# --- JUnit, summary.md and pairwise.json through nccl_junit's hooks ------------------------------


def test_report_names_the_slow_node_in_junit_summary_and_pairwise_json(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, 4, 2, slow_node(2, rail=1), second=[(0, 2)])
    summary = report(run_dir)
    assert summary["verdict"] == "failed"
    assert [p for p in summary["problems"] if "pairwise.10_0_0_3" in p and "rail(s) 1" in p]
    assert not [p for p in summary["problems"] if "10_0_0_1 " in p or "10_0_0_2 " in p]
    assert "| node | 10.0.0.1 | 10.0.0.2 | 10.0.0.3 | 10.0.0.4 |" in summary["markdown"]
    assert (
        "the reference is 88.9% of the expected 11.2 GB/s (10.0.0.1's fabric link"
        in (summary["markdown"])
    )

    validate_report_junit(run_dir)
    cases = {
        c.get("classname"): c for c in ET.parse(run_dir / "junit" / "pairwise.xml").iter("testcase")
    }
    assert sorted(cases) == [f"pairwise.10_0_0_{i}" for i in range(1, 5)]
    bad = cases["pairwise.10_0_0_3"]
    assert bad.find("failure") is not None
    assert "10.0.0.1" in bad.findtext("system-out")  # its row: every partner
    assert all(cases[c].find("failure") is None for c in cases if c != "pairwise.10_0_0_3")

    doc = json.loads((run_dir / "pairwise.json").read_text())
    assert doc["schema"] == 1 and doc["rails"] == 2
    assert doc["expected_busbw_gbps"] == 11.25 and doc["reference_percent"] == 88.9
    assert [n["host"] for n in doc["nodes"]] == [f"10.0.0.{i}" for i in range(1, 5)]
    assert doc["matrix_by_rail_busbw_gbps"][0][2][0] == pytest.approx(10.0, rel=0.05)
    assert doc["matrix_by_rail_busbw_gbps"][1][2][0] == pytest.approx(2.5, rel=0.05)
    assert doc["matrix_busbw_gbps"][2][2] is None
    assert [v["status"] for v in doc["verdicts"]] == ["ok", "ok", "slow", "ok"]


def test_report_of_a_healthy_run_passes_and_says_nobody_is_slow(tmp_path: Path) -> None:
    summary = report(write_run(tmp_path, 6, 1, healthy(3), second=[]))
    assert summary["verdict"] == "passed", summary["problems"]
    assert "Pairwise: no node is slow." in summary["markdown"]


def test_run_without_pairwise_has_no_pairwise_json(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, 3, 1, healthy(), second=[])
    for path in run_dir.glob("*/rank-*.json"):
        doc = json.loads(path.read_text())
        doc["tests"] = []
        path.write_text(json.dumps(doc))
    (run_dir / "pairwise.json").write_text("{}")  # a stale one from an earlier report
    report(run_dir)
    assert not (run_dir / "pairwise.json").exists()
    assert not (run_dir / "junit" / "pairwise.xml").exists()


# --- the variables ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"nccl_pairwise": "always", "nccl_pair_min_ratio": "0.5"}, []),
        ({}, []),  # the defaults
        ({"nccl_pairwise": "yes"}, ["nccl_pairwise is 'yes', not one of auto, always, never"]),
        ({"nccl_pair_min_ratio": 1.5}, ["nccl_pair_min_ratio is 1.5, not a number above 0"]),
        ({"nccl_pair_min_ratio": "fast"}, ["nccl_pair_min_ratio is 'fast', not a number above 0"]),
    ],
)
def test_pairwise_variables_are_validated(values: dict, expected: list[str]) -> None:
    from nccl_preflight.core.inputs import pairwise_problems

    problems = pairwise_problems(values)
    assert len(problems) == len(expected)
    assert all(p.startswith(e) for p, e in zip(problems, expected, strict=True))


def test_auto_triggers_on_a_failed_test_or_a_busbw_below_its_trigger_at_large_sizes() -> None:
    def bw(name: str, status: str, rows: list[tuple[int, float]]) -> dict:
        return {
            "name": f"bandwidth_{name}",
            "status": status,
            "bandwidth": [{"size_bytes": s, "busbw_gbps": v} for s, v in rows],
        }

    mib = 1024 * 1024
    tests = [
        {"name": "all_reduce_sum", "status": "passed", "bandwidth": []},
        bw("all_reduce", "passed", [(mib, 0.01), (64 * mib, 9.0)]),
        bw("broadcast", "passed", [(mib, 0.01)]),  # never reached a judged size
        bw("all_gather", "failed", [(mib, 0.01)]),
    ]
    reasons = pw.trigger_reasons(tests, {"all_reduce": 10.0, "broadcast": 10.0}, 32 * mib)
    assert reasons == [
        "all_reduce busbw 9 GB/s at 67108864 B is below 10 GB/s",
        "bandwidth_all_gather failed",
    ]
    assert pw.trigger_reasons(tests[:3], {"all_reduce": 8.0}, 32 * mib) == []
    argv = ["--rank", "0", "--world-size", "1", "--pair-trigger=all_reduce=0.2"]
    args = nc.parse_args([*argv, "--pair-trigger-min-bytes", "4M"])
    assert args.pair_trigger == [("all_reduce", 0.2)] and args.pair_trigger_min_bytes == 4 * mib


def test_expected_busbw_names_only_known_collectives() -> None:
    from nccl_preflight.core.inputs import pairwise_problems

    assert pairwise_problems({"nccl_expected_busbw": {"allreduce": 1}}) == [
        "nccl_expected_busbw key 'allreduce' is not one of all_reduce, all_gather, "
        "reduce_scatter, all_to_all, broadcast, reduce, send_recv"
    ]


def test_report_html_draws_the_matrix_and_names_the_slow_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path, 4, 2, slow_node(2, rail=1), second=[(0, 2)])
    template = HTML_TEMPLATE
    args = {"report_root": str(tmp_path), "run_id": "run-1", "html_template": str(template)}
    module_result(args, capsys)
    html = (tmp_path / "run-1" / "report.html").read_text()
    heatmap = html.split('id="pairwise"')[1].split("</section>")[0]
    assert "<svg" in heatmap and "10.0.0.3" in heatmap
    assert "10.0.0.3" in heatmap.split("</svg>")[-1]  # the slow node's verdict under the map


# --- the pairwise-only relaunch after a collective timed out ------------------------------------


def test_relaunch_results_are_judged_when_the_run_itself_hung(tmp_path: Path) -> None:
    """The run's ranks hung in a collective (no pairwise test); the relaunch's rank files under
    <host>/pairwise/ give the matrix, the JUnit and a verdict finding that names the host."""
    run_dir = write_run(tmp_path, 3, 1, slow_node(1, factor=0.01), second=[(0, 1)])
    for path in sorted(run_dir.glob("*/rank-*.json")):
        (path.parent / "pairwise").mkdir()
        path.rename(path.parent / "pairwise" / path.name)
        hung = json.loads((path.parent / "pairwise" / path.name).read_text())
        hung.update(status="running", current_test="bandwidth_all_reduce", tests=[])
        path.write_text(json.dumps(hung))
    summary = report(run_dir)
    doc = json.loads((run_dir / "pairwise.json").read_text())
    assert doc["relaunched"] is True and "second launch" in doc["why"]
    assert [v["status"] for v in doc["verdicts"]] == ["ok", "slow", "ok"]
    assert "second launch" in summary["markdown"]
    verdict = build_verdict(run_dir)
    named = [f for f in verdict["findings"] if f["test"] == "pairwise"]
    assert [(f["class"], f["host"]) for f in named] == [("bandwidth", "10.0.0.2")]
    assert named[0]["what"].startswith("10.0.0.2 is SLOW")
    # The hang itself is still there, more severe than the slow node.
    assert verdict["class"] == "rank_lost" and "bandwidth" in verdict["classes"]


def test_the_run_s_own_pairwise_rounds_win_over_a_relaunch(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, 3, 1, healthy(), second=[])
    stale = run_dir / "10.0.0.1" / "pairwise"
    stale.mkdir()
    (stale / "rank-0.json").write_text((run_dir / "10.0.0.1" / "rank-0.json").read_text())
    report(run_dir)
    assert json.loads((run_dir / "pairwise.json").read_text())["relaunched"] is False


# --- a round that never finished (the ranks were stopped in it) ---------------------------------


def stop_in_first_round(run_dir: Path, n: int, dead: int) -> list[tuple[int, int]]:
    """Rewrite write_run's records as ranks stopped by their watchdog in round 0 of pass 1: the
    pair with `dead` never finished, the round's other pairs did (saved as the rounds went)."""
    first = ps.tournament(n)[0]
    for path in sorted(run_dir.glob("*/rank-*.json")):
        doc = json.loads(path.read_text())
        details = doc["tests"][0]["details"]
        rows = [
            {**r, "round": 0}
            for r in details["rows"]
            if r["pass"] == 1
            and tuple(sorted((r["node"], r["peer_node"]))) in first
            and dead not in (r["node"], r["peer_node"])
        ]
        doc["pairwise"] = {
            **details,
            "rows": rows,
            "under_way": {"pass": 1, "round": 0},
            "under_way_pairs": [list(p) for p in first],
        }
        message = "pairwise pass 1 round 0 did not finish within 10 s on this rank"
        doc.update(
            status="error",
            tests=[
                {
                    "name": "pairwise pass 1 round 0",
                    "status": "error",
                    "duration_s": 0,
                    "message": message,
                    "details": {},
                    "bandwidth": [],
                }
            ],
        )
        path.write_text(json.dumps(doc))
    return first


def test_a_round_that_never_finished_names_both_nodes_of_its_pair_as_timed_out(
    tmp_path: Path,
) -> None:
    run_dir = write_run(tmp_path, 4, 1, healthy(), second=[])
    first = stop_in_first_round(run_dir, 4, dead=2)
    partner = next(a if b == 2 else b for a, b in first if 2 in (a, b))
    summary = report(run_dir)
    doc = json.loads((run_dir / "pairwise.json").read_text())
    hung = {f"10.0.0.{2 + 1}", f"10.0.0.{partner + 1}"}
    assert {v["host"] for v in doc["verdicts"] if v["status"] == "timed out"} == hung
    assert {v["status"] for v in doc["verdicts"] if v["host"] not in hung} == {"ok"}
    assert [sorted((u["node_a"], u["node_b"])) for u in doc["unfinished"]] == [sorted((2, partner))]
    assert "the rounds after it never ran" in doc["note"]
    message = next(v["message"] for v in doc["verdicts"] if v["host"] == "10.0.0.3")
    assert f"its pair with 10.0.0.{partner + 1} did not finish (timed out)" in message
    assert "no pair of 10.0.0.3 finished" in message
    assert "did not finish (timed out)" in summary["markdown"]

    cases = {
        c.get("classname"): c for c in ET.parse(run_dir / "junit" / "pairwise.xml").iter("testcase")
    }
    failed = {k for k, c in cases.items() if c.find("failure") is not None}
    assert failed == {"pairwise." + h.replace(".", "_") for h in hung}
    assert cases["pairwise.10_0_0_3"].find("failure").get("type") == "pair timed out"
    verdict = build_verdict(run_dir)
    named = {f["host"] for f in verdict["findings"] if f["test"] == "pairwise"}
    assert named == hung
    assert {f["class"] for f in verdict["findings"] if f["test"] == "pairwise"} == {"rank_lost"}


def test_unfinished_pairs_are_those_of_the_round_under_way_without_a_row() -> None:
    rows = rows_for(4, 1, lambda a, b, r: 1.0)
    done = [{**r, "round": 3} for r in rows if {r["node"], r["peer_node"]} == {0, 3}]
    tests = [(0, {"under_way": {"pass": 1, "round": 3}, "under_way_pairs": [[0, 3], [2, 1]]})]
    assert nccl_pairwise.unfinished_pairs(tests, done) == [(1, 2)]
    assert nccl_pairwise.unfinished_pairs([(0, {"under_way": None})], done) == []
    intra = [(0, {"under_way": {"pass": "intra", "round": 0}, "under_way_pairs": [[0, 1]]})]
    assert nccl_pairwise.unfinished_pairs(intra, []) == []  # local ranks, not nodes
    rested = nccl_pairwise.judge([0, 1, 2], {0: "a", 1: "b", 2: "c"}, [], 0.8, [(1, 2)])
    assert [v["status"] for v in rested["verdicts"]] == ["not measured", "timed out", "timed out"]
    assert "the ranks were stopped in a round it rested in" in rested["verdicts"][0]["message"]


def test_a_very_slow_pair_is_recorded_with_significant_digits_not_as_zero() -> None:
    assert sw.gbps(64 << 10, 3.2) == pytest.approx(2.048e-5)  # 20 KB/s
    assert sw.gbps(1 << 20, 1e-4) == 10.49
    rows = rows_for(3, 1, lambda a, b, r: sw.gbps(64 << 10, 3.2) if 1 in (a, b) else 10.0)
    verdict = judge(3, rows)
    assert "2.05e-05" in verdict["verdicts"][1]["message"]


def hung_verdict(run_dir: Path) -> dict[str, Any]:
    """The verdict of ``run_dir`` once every rank is left running in the all_reduce sweep."""
    for path in run_dir.glob("*/rank-*.json"):
        hung = json.loads(path.read_text())
        hung.update(status="running", current_test="bandwidth_all_reduce", tests=[])
        path.write_text(json.dumps(hung))
    return build_verdict(run_dir)


def test_two_nodes_that_hang_say_why_no_node_is_named(tmp_path: Path) -> None:
    """No relaunch on two nodes (nccl_pairwise_relaunch needs 3): the hang's finding says why."""
    run_dir = write_run(tmp_path, 2, 1, healthy(), second=[])
    verdict = hung_verdict(run_dir)
    lost = [f for f in verdict["findings"] if f["class"] == "rank_lost"]
    assert lost and all("two nodes the pairwise rounds cannot tell" in f["fix"] for f in lost)
    # Three nodes relaunch instead: no such sentence.
    run_dir = write_run(tmp_path / "three", 3, 1, healthy(), second=[])
    verdict = hung_verdict(run_dir)
    assert not [f for f in verdict["findings"] if "two nodes" in f["fix"]]


def test_report_html_says_which_pair_timed_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stop_in_first_round(write_run(tmp_path, 4, 1, healthy(), second=[]), 4, dead=2)
    template = HTML_TEMPLATE
    args = {"report_root": str(tmp_path), "run_id": "run-1", "html_template": str(template)}
    module_result(args, capsys)
    html = (tmp_path / "run-1" / "report.html").read_text()
    under_map = html.split('id="pairwise"')[1].split("</section>")[0].split("</svg>")[-1]
    assert "10.0.0.3: its pair with" in under_map and "did not finish" in under_map
    assert "the rounds after it never ran" in under_map


def test_every_pair_shows_its_percent_of_the_expected_figure(tmp_path: Path) -> None:
    """Issue 14 item 4: measured/expected in % wherever busbw is shown, node pairs included."""
    run_dir = write_run(tmp_path, 4, 2, slow_node(2, rail=1), second=[(0, 2)])
    summary = report(run_dir)
    doc = json.loads((run_dir / "pairwise.json").read_text())
    for pair in doc["pairs"]:
        assert pair["percent_of_expected"] == pytest.approx(
            100 * pair["busbw_gbps"] / 11.25, abs=0.06
        )
    slow = doc["matrix_busbw_gbps"][0][2]  # node 0 with the slow node: its slow rail
    assert (
        f"| {nccl_pairwise._fmt(slow)} ({round(100 * slow / 11.25, 1):g}%) |"
        in (summary["markdown"])
    )
    bad = {
        c.get("classname"): c for c in ET.parse(run_dir / "junit" / "pairwise.xml").iter("testcase")
    }["pairwise.10_0_0_3"]
    assert "% expected" in bad.findtext("system-out")
    assert f"{round(100 * slow / 11.25, 1):g}%" in bad.findtext("system-out")


def test_the_why_names_where_the_trigger_figure_came_from(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, 3, 1, healthy(3), second=[])
    plan = json.loads((run_dir / "plan.json").read_text())
    plan["pair_triggers"] = [
        {
            "collective": "all_reduce",
            "trigger_gbps": 0.9,
            "expected_gbps": 1.125,
            "source": "node0's fabric link 10000 Mb/s x 0.9",
        }
    ]
    (run_dir / "plan.json").write_text(json.dumps(plan))
    for rank_file in run_dir.glob("*/rank-*.json"):
        doc = json.loads(rank_file.read_text())
        doc["tests"][0]["details"]["why"] = "all_reduce busbw 0.3 GB/s at 16384 B is below 0.9 GB/s"
        rank_file.write_text(json.dumps(doc))
    report(run_dir)
    why = json.loads((run_dir / "pairwise.json").read_text())["why"]
    assert why == (
        "all_reduce busbw 0.3 GB/s at 16384 B is below 0.9 GB/s "
        "(the trigger is nccl_busbw_warn x node0's fabric link 10000 Mb/s x 0.9)"
    )
