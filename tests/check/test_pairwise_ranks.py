# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""files/nccl_check.py --pairwise for real: 3 "nodes" x 2 ranks on loopback (gloo), each rank
started on its own with NODE_RANK/LOCAL_WORLD_SIZE as torchrun would set them per node.

What the rank script must leave behind for the controller: every round's pair, rail by rail,
measured by both of its ranks, each rank's own figure, and per-rank bandwidth rows.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

from tests.check.support import RUN_LIMIT_S, SCRIPT, by_name, env, records
from tests.ports import free_port

NODES, LOCAL = 3, 2


def test_every_pair_of_nodes_is_measured_on_every_rail_by_both_ranks(tmp_path: Path) -> None:
    port = free_port()
    procs = []
    for node, local in itertools.product(range(NODES), range(LOCAL)):
        rank = node * LOCAL + local
        argv = [sys.executable, str(SCRIPT), "--init-method", f"tcp://127.0.0.1:{port}"]
        argv += ["--rank", str(rank), "--world-size", str(NODES * LOCAL)]
        argv += ["--local-rank", str(local), "--out-dir", str(tmp_path), "--timeout", "60"]
        argv += ["--tests", "all_reduce_sum,bandwidth_all_reduce", "--max-bytes", "4K"]
        argv += ["--iters", "2", "--warmup", "1", "--pairwise", "always"]
        argv += ["--pair-bytes", "64K", "--pair-iters", "2"]
        procs.append(
            subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env={**env(), "NODE_RANK": str(node), "LOCAL_WORLD_SIZE": str(LOCAL)},
            )
        )
    outputs = [p.communicate(timeout=RUN_LIMIT_S)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), outputs

    found = records(tmp_path)
    assert sorted(found) == list(range(NODES * LOCAL))
    measured: dict[tuple[int, int, int], list[int]] = {}
    for rank, record in found.items():
        pairwise = by_name(record)["pairwise"]
        assert pairwise["status"] == "passed", pairwise
        details = pairwise["details"]
        # 3 nodes: three rounds of one pair, one node rests in each
        assert sorted(p for r in details["rounds"] for p in r) == [[0, 1], [0, 2], [1, 2]]
        assert [len(r) for r in details["rounds"]] == [1, 1, 1]
        for row in details["rows"]:
            assert row["rank"] == rank and row["wrong"] == 0 and row["busbw_gbps"] > 0
            assert row["rail"] == record["local_rank"] == row["peer_local_rank"]
            assert row["peer_rank"] == row["peer_node"] * LOCAL + row["rail"]
            if row["pass"] == 1:
                pair = (*sorted((row["node"], row["peer_node"])), row["rail"])
                measured.setdefault(pair, []).append(rank)
        # Per-rank truth: each rank's own time beside nccl-tests' averaged one.
        rows = by_name(record)["bandwidth_all_reduce"]["bandwidth"]
        assert all(r["rank_time_us"] > 0 and r["rank_busbw_gbps"] > 0 for r in rows)
    expected = {(a, b, rail) for a, b in itertools.combinations(range(NODES), 2) for rail in (0, 1)}
    assert set(measured) == expected
    assert all(len(ranks) == 2 for ranks in measured.values())  # both ends of every pair
    assert "# pairwise, 3 nodes" in outputs[0]


def start_single_rank_nodes(
    out: Path, nodes: int, timeout: int, extra: list[str]
) -> list[subprocess.Popen[str]]:
    """``nodes`` one-rank "nodes" running only barrier and the pairwise rounds (4K, one
    exchange) with ``extra`` options, on loopback."""
    port, procs = free_port(), []
    for rank in range(nodes):
        argv = [sys.executable, str(SCRIPT), "--init-method", f"tcp://127.0.0.1:{port}"]
        argv += ["--rank", str(rank), "--world-size", str(nodes), "--local-rank", "0"]
        argv += ["--out-dir", str(out), "--timeout", str(timeout), "--tests", "barrier"]
        argv += ["--pairwise", "always", "--pair-bytes", "4K", "--pair-iters", "1", *extra]
        environ = {**env(), "NODE_RANK": str(rank), "LOCAL_WORLD_SIZE": "1"}
        procs.append(
            subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environ
            )
        )
    return procs


def single_rank_nodes(
    out: Path, nodes: int, timeout: int, extra: list[str]
) -> tuple[list[int], list[str]]:
    """(exit codes, outputs) of start_single_rank_nodes once they ended."""
    procs = start_single_rank_nodes(out, nodes, timeout, extra)
    outputs = [p.communicate(timeout=RUN_LIMIT_S)[0] for p in procs]
    return [p.returncode for p in procs], outputs


# Rank 2 (node 2) pauses before round 1 (pair 0-2), after round 0 (pair 1-2).
PAUSE_IN_ROUND_1 = ["--pause-before", "pairwise pass 1 round 1@2"]


def assert_round_zero_kept(found: dict[int, dict], ranks: list[int], outputs: list[str]) -> None:
    """Each rank's record keeps round 0 (pair 1-2: ranks 1 and 2 have its row) and names round 1
    (pair 0-2) as the round under way."""
    assert sorted(found) == ranks, outputs
    for rank in ranks:
        record = found[rank]
        # a rank whose watchdog ended an earlier phase never reached the rounds: say which
        assert "pairwise" in record, (rank, record.get("current_test"), record["tests"], outputs)
        saved = record["pairwise"]
        assert saved["under_way"] == {"pass": 1, "round": 1}, rank
        assert saved["under_way_pairs"] == [[0, 2]]
        assert [(r["round"], r["peer_node"]) for r in saved["rows"]] == (
            [(0, 3 - rank)] if rank in (1, 2) else []
        )
        assert all(r["busbw_gbps"] > 0 for r in saved["rows"])


def test_a_round_that_hangs_leaves_the_rounds_before_it_on_disk(tmp_path: Path) -> None:
    """Rank 2 stops before round 1; the watchdogs end every rank. Round 0 (pair 1-2) is in every
    record's ``pairwise``, with the round under way, and the controller names nodes 0 and 2 as
    timed out, node 1 not."""
    from nccl_preflight.core import pairwise as nccl_pairwise

    codes, outputs = single_rank_nodes(tmp_path, 3, 8, PAUSE_IN_ROUND_1)
    assert codes == [124] * 3, outputs

    found = records(tmp_path)
    assert_round_zero_kept(found, [0, 1, 2], outputs)
    tests = nccl_pairwise.pairwise_tests(found)
    rows = [row for _, details in tests for row in details["rows"]]
    assert nccl_pairwise.unfinished_pairs(tests, rows) == [(0, 2)]
    hosts = {n: f"n{n}" for n in range(3)}
    verdict = nccl_pairwise.judge(range(3), hosts, rows, 0.8, [(0, 2)])
    assert [v["status"] for v in verdict["verdicts"]] == ["timed out", "ok", "timed out"]


def test_a_node_that_dies_in_a_round_leaves_the_rounds_before_it_on_disk(tmp_path: Path) -> None:
    """Rank 2 is killed (SIGKILL) before round 1: with gloo the other ranks' round-1 barrier
    raises (the connection is gone) instead of hanging. Their records still keep round 0 and
    the round under way, beside the pairwise test's error, so the controller judges round 0."""
    from nccl_preflight.core import pairwise as nccl_pairwise

    procs = start_single_rank_nodes(tmp_path, 3, 10, PAUSE_IN_ROUND_1)
    assert procs[2].stdout is not None
    for line in procs[2].stdout:  # the pause announces itself
        if "paused before pairwise pass 1 round 1" in line:
            break
    procs[2].kill()
    outputs = [p.communicate(timeout=RUN_LIMIT_S)[0] for p in procs]
    assert procs[2].returncode == -9

    found = records(tmp_path)
    kept = {rank: found[rank] for rank in (0, 1)}
    assert_round_zero_kept(kept, [0, 1], outputs)
    errors = [t for rank in (0, 1) for t in found[rank]["tests"] if t["name"] == "pairwise"]
    assert [t["status"] for t in errors] == ["error", "error"], outputs
    tests = nccl_pairwise.pairwise_tests(kept)
    rows = [row for _, details in tests for row in details["rows"]]
    assert [(r["rank"], r["peer_node"]) for r in rows] == [(1, 2)]
    assert nccl_pairwise.unfinished_pairs(tests, rows) == [(0, 2)]


def test_a_bounded_first_pass_plays_that_many_rounds_of_distinct_partners(tmp_path: Path) -> None:
    """5 single-rank "nodes", --pair-rounds 3: 3 of the tournament's 5 rounds, each a matching
    with one node resting, no partner twice; the rows and the controller's pairwise document
    say so (issue 27 item 6: the bound that keeps 1,024 nodes at 16 rounds)."""
    from nccl_preflight.core import pairwise as nccl_pairwise
    from nccl_preflight.node.pair_schedule import first_pass

    nodes, bound = 5, 3
    codes, outputs = single_rank_nodes(tmp_path, nodes, 60, ["--pair-rounds", str(bound)])
    assert codes == [0] * nodes, outputs

    found = records(tmp_path)
    expected = [[list(p) for p in r] for r in first_pass(nodes, bound)]
    met: dict[int, list[int]] = {}
    for rank, record in found.items():
        details = by_name(record)["pairwise"]["details"]
        assert details["rounds"] == expected and len(expected) == bound
        assert (details["pair_rounds"], details["all_rounds"]) == (bound, nodes)
        first = [r for r in details["rows"] if r["pass"] == 1]
        resting = [i for i, r in enumerate(expected) if not any(rank in p for p in r)]
        assert sorted(r["round"] for r in first) == [i for i in range(bound) if i not in resting]
        met[rank] = [r["peer_node"] for r in first]
        assert len(set(met[rank])) == len(met[rank]) >= bound - 1  # distinct partners
    assert sum(len(m) for m in met.values()) == bound * (nodes - 1)  # 2 pairs a round, both ends
    tests = nccl_pairwise.pairwise_tests(found)
    rows = [row for _, details in tests for row in details["rows"]]
    settings = tests[0][1]
    doc = nccl_pairwise._rounds_played(settings, rows, nodes)
    assert doc == {
        "pair_rounds": bound,
        "first_pass_rounds": bound,
        "all_rounds": nodes,
        "every_pair": False,
        "second_pass_rounds": len({r["round"] for r in rows if r["pass"] == 2}),
    }
    assert "# pairwise, 5 nodes" in outputs[0]
