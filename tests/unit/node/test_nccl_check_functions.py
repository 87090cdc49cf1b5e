# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Pure functions of the rank script: closed-form expected values (files/nccl_check_verify.py),
options and the record (files/nccl_check.py)."""

from __future__ import annotations

import argparse
import json
import math
import os
import threading
from pathlib import Path

import pytest
import torch

from tests.check.support import load_part, load_script

nc = load_script()
ex = load_part("nccl_check_verify")
sw = load_part("nccl_check_sweep")
tables = load_part("nccl_check_tables")
opts = load_part("nccl_check_options")


# --- the documented examples, through the script's expected-value functions ------------------


def test_reduce_of_rank_with_4_ranks_gives_6() -> None:
    # input [rank] = base [0] + 1 * rank
    assert [ex.reduction_input([0], 1, r, 4) for r in range(4)] == [[0], [1], [2], [3]]
    assert ex.expected_sum([0], 1, 4, 4) == [6]


def test_reduce_scatter_with_2_ranks_gives_4_and_6() -> None:
    # input [2r+1, 2r+2] = base [1, 2] + 2 * rank
    assert ex.reduction_input([1, 2], 2, 1, 2) == [3, 4]
    assert ex.expected_reduce_scatter([1, 2], 2, 2, 2, 0) == [4]
    assert ex.expected_reduce_scatter([1, 2], 2, 2, 2, 1) == [6]


def test_scatter_of_ones_and_fives() -> None:
    # the root's chunks are payload(d) = [1, 1] + 4 * d
    assert [ex.payload([1, 1], 4, d, 2) for d in range(2)] == [[1, 1], [5, 5]]
    assert ex.expected_scatter([1, 1], 4, 0, 2) == [1, 1]
    assert ex.expected_scatter([1, 1], 4, 1, 2) == [5, 5]


def test_all_reduce_of_2_3_plus_2_rank_with_6_ranks_gives_42_48() -> None:
    assert ex.expected_sum([2, 3], 2, 6, 6) == [42, 48]


# --- closed forms against brute force ----------------------------------------------------------


@pytest.mark.parametrize(("n", "period"), [(1, 1), (2, 2), (7, 7), (7, 3), (64, 9), (300, 1)])
def test_closed_forms_match_brute_force(n: int, period: int) -> None:
    base = ex.base_pattern(2 * n + 3, 5)
    inputs = [ex.reduction_input(base, 3, r, period) for r in range(n)]
    assert ex.sum_of_tags(n, period) == sum(r % period for r in range(n))
    assert ex.expected_sum(base, 3, n, period) == [sum(col) for col in zip(*inputs, strict=True)]
    payloads = [ex.payload(base, 3, r, period) for r in range(n)]
    assert ex.expected_all_gather(base, 3, n, period) == [v for p in payloads for v in p]
    assert ex.expected_send_recv(base, 3, n, period, 0) == payloads[-1]
    assert ex.expected_all_to_all(base, 3, n, period, 1) == [
        v for s in range(n) for v in ex.all_to_all_chunk(base, 3, s, 1, period)
    ]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 1000])
def test_owner_input_closed_forms_match_brute_force(n: int) -> None:
    columns = list(zip(*(ex.owner_input(7, r, n) for r in range(n)), strict=True))
    reduce = {"product": math.prod, "min": min, "max": max}
    for op, func in reduce.items():
        assert [func(c) for c in columns] == ex.expected_owner(op, 7, n), op
    if n > 1:  # every two of SUM, PRODUCT, MIN, MAX, AVG differ on some element
        results = {op: [func(c) for c in columns] for op, func in reduce.items()}
        results["sum"] = [sum(c) for c in columns]
        results["avg"] = [sum(c) / n for c in columns]
        values = list(results.values())
        assert all(a != b for i, a in enumerate(values) for b in values[i + 1 :]), results


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int8, torch.float32])
@pytest.mark.parametrize("n", [2, 3, 8, 17, 64, 100])
def test_exact_pattern_keeps_every_partial_sum_exact(dtype: torch.dtype, n: int) -> None:
    pattern = ex.exact_pattern(n, dtype)
    if pattern is None:
        assert n > ex.exact_integer_limit(dtype)
        return
    base_period, period = pattern
    base = ex.base_pattern(base_period, base_period)
    rows = torch.tensor([ex.reduction_input(base, 1, r, period) for r in range(n)], dtype=dtype)
    # accumulate in the dtype itself, rank by rank, as a ring reduction does
    acc = torch.zeros(len(base), dtype=dtype)
    for row in rows:
        acc = acc + row
    assert acc.double().tolist() == [float(v) for v in ex.expected_sum(base, 1, n, period)]


def test_exact_limits() -> None:
    limits = {torch.bfloat16: 256, torch.float16: 2048, torch.float32: 2**24, torch.uint8: 255}
    assert {d: ex.exact_integer_limit(d) for d in limits} == limits
    assert ex.exact_pattern(300, torch.bfloat16) is None
    assert ex.exact_pattern(4, torch.float32) == (8, 4)


# --- comparing and naming the source -----------------------------------------------------------


def test_a_missing_contribution_names_the_rank() -> None:
    base, n = [2, 3], 4
    want = ex.expected_sum(base, 2, n, n)
    got = torch.tensor([want[0], want[1] - ex.reduction_input(base, 2, 3, n)[1]])
    source = ex.source_rule("sum", lambda r: ex.reduction_input(base, 2, r, n), n, want)
    details = ex.mismatch(got, want, source)
    assert details is not None
    assert (details["first_wrong_index"], details["expected"], details["got"]) == (1, 24, 15)
    assert details["source"] == "the contribution of rank 3 is missing"
    message = ex.mismatch_message(details)
    assert "1 of 2 elements wrong; first at index 1: expected 24, got 15" in message


def test_data_from_the_wrong_rank_is_named() -> None:
    base, n = ex.base_pattern(4, 4), 3
    want = ex.expected_all_gather(base, 1, n, n)
    got = torch.tensor(want)
    got[4:8] = torch.tensor(ex.payload(base, 1, 2, n))  # chunk 1 holds rank 2's payload
    source = ex.source_rule("copy", lambda j: ex.payload(base, 1, j, n), n, width=4)
    details = ex.mismatch(got, want, source)
    assert details is not None and details["first_wrong_index"] == 4
    assert details["source"] == "this element comes from rank 1; the value is rank 2's"


def test_equal_results_have_no_mismatch_and_avg_allows_one_ulp() -> None:
    owner = ex.source_rule("product", lambda r: ex.owner_input(2, r, 2), 2)
    assert ex.mismatch(torch.tensor([1.0, 2.0]), [1, 2], owner) is None
    close = torch.tensor([1.5 + 2**-23])  # one unit in the last place above
    alone = ex.source_rule("product", lambda r: ex.owner_input(1, r, 1), 1)
    assert ex.mismatch(close, [1.5], alone, ulps=1) is None
    assert ex.mismatch(close, [1.5], alone) is not None


def test_unsupported_is_only_the_backends_own_refusal() -> None:
    for text in (
        "ProcessGroupGloo does not support reduce_scatter",
        "Backend gloo does not support alltoall_base",
        "Cannot use ReduceOp.AVG with Gloo",
        "result type Float can't be cast to the desired output type Int",
    ):
        assert nc.unsupported(RuntimeError(text)), text
    assert not nc.unsupported(RuntimeError("Connection closed by peer [127.0.0.1]:1234"))
    assert not nc.unsupported(ValueError("does not support"))  # our own bug, not the backend's


def test_run_test_sorts_outcomes() -> None:
    def refuse() -> dict[str, object]:
        raise RuntimeError("ProcessGroupGloo does not support reduce_scatter")

    def crash() -> dict[str, object]:
        raise RuntimeError("Connection closed by peer")

    def wrong() -> dict[str, object]:
        raise ex.Fail("2 of 4 elements wrong", {"wrong": 2})

    maybe = nc.Support("maybe", "mpi's reduce on CUDA tensors is '?'")
    skipped = nc.run_test("t", refuse, maybe)
    error, failed = (nc.run_test("t", f) for f in (crash, wrong))
    assert (
        skipped["status"] == "skipped" and "does not support reduce_scatter" in skipped["message"]
    )
    # a refusal the support table did not predict ("yes", or no entry) fails, naming both
    for support in (nc.Support("yes", "gloo runs reduce_scatter on CPU tensors"), None):
        refused = nc.run_test("t", refuse, support)
        assert refused["status"] == "failed", refused
        assert "did not predict" in refused["message"]
        assert "does not support reduce_scatter" in refused["message"]
    assert error["status"] == "error" and error["message"].startswith("RuntimeError: Connection")
    assert failed["status"] == "failed" and failed["details"] == {"wrong": 2}
    assert nc.run_test("t", lambda: {"elements": 3})["status"] == "passed"


# --- bandwidth ---------------------------------------------------------------------------------


def test_busbw_factors_are_nccl_tests() -> None:
    assert nc.busbw("all_reduce", 10.0, 4) == pytest.approx(15.0)  # 2(n-1)/n
    for coll in ("all_gather", "reduce_scatter", "all_to_all"):
        assert nc.busbw(coll, 10.0, 4) == pytest.approx(7.5)  # (n-1)/n
    for coll in ("broadcast", "reduce", "send_recv"):
        assert nc.busbw(coll, 10.0, 4) == 10.0


def test_every_collective_is_one_record_looked_up_by_name() -> None:
    timed = {name for name, c in nc.COLLECTIVES.items() if c.run is not None}
    assert sorted(tables.BANDWIDTH_COLLECTIVES) == sorted(timed)
    assert tables.CORRECTNESS_TESTS[:5] == tuple(f"all_reduce_{op}" for op in ex.REDUCE_OPS)
    assert set(tables.CORRECTNESS_TESTS) == {t for c in nc.COLLECTIVES.values() for t in c.tests()}
    # one record per collective of the tables, in their order: the order of the tests
    assert list(nc.COLLECTIVES) == list(tables.COLLECTIVE_OPS)
    assert tuple(nc.VERIFIERS) == tables.CORRECTNESS_TESTS
    assert all(name == c.name for name, c in nc.COLLECTIVES.items())


def test_sizes_and_message_shapes() -> None:
    assert sw.sweep_sizes(1024, 1 << 20, 4) == [1024, 4096, 16384, 65536, 262144, 1048576]
    assert nc.message_shape("all_reduce", 1024, 4, 3) == (256, 1024)
    assert nc.message_shape("all_gather", 1024, 4, 3) == (255, 1020)  # a multiple of n
    assert nc.message_shape("all_to_all", 4, 4, 3) == (3, 12)


def test_bandwidth_table_has_nccl_tests_columns() -> None:
    row = {
        "size_bytes": 1024, "count": 256, "type": "float", "redop": "sum", "root": -1,
        "time_us": 12.5, "algbw_gbps": 0.08, "busbw_gbps": 0.12, "wrong": 0,
    }  # fmt: skip
    table = nc.bandwidth_table("all_reduce", [row, {**row, "busbw_gbps": 0.2}], 4).splitlines()
    assert table[1].split() == [
        "#",
        "size",
        "count",
        "type",
        "redop",
        "root",
        "time",
        "algbw",
        "busbw",
        "#wrong",
    ]
    assert table[3].split() == ["1024", "256", "float", "sum", "-1", "12.50", "0.08", "0.12", "0"]
    assert table[-1] == "# Avg bus bandwidth    : 0.16"


def test_gloo_tables_say_what_gloo_itself_bounds() -> None:
    row = {
        "size_bytes": 1024, "count": 256, "type": "float", "redop": "sum", "root": -1,
        "time_us": 12.5, "algbw_gbps": 0.08, "busbw_gbps": 0.04, "wrong": 0,
    }  # fmt: skip
    gloo = nc.bandwidth_table("reduce_scatter", [row], 2, "gloo").splitlines()
    assert gloo[-1].startswith("# Note: gloo runs reduce_scatter as an all_reduce")
    assert gloo[-2] == "# Avg bus bandwidth    : 0.04"
    nccl = nc.bandwidth_table("reduce_scatter", [row], 2, "nccl").splitlines()
    assert nccl[-1] == "# Avg bus bandwidth    : 0.04"


# --- options -----------------------------------------------------------------------------------


def test_parse_args_defaults_and_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    args = nc.parse_args(
        ["--min-busbw", "5", "--min-busbw-for", "all_reduce=20", "--tests", "bandwidth"]
    )
    assert (args.rank, args.world_size, args.local_rank) == (1, 2, 1)
    assert args.tests == list(tables.BANDWIDTH_TESTS)
    assert args.thresholds["all_reduce"] == 20.0 and args.thresholds["broadcast"] == 5.0
    assert args.init_method == "env://" and args.dtype == "float32"


@pytest.mark.parametrize(
    ("text", "size"),
    [("8", 8), ("64K", 65536), ("32M", 32 << 20), ("1G", 1 << 30), ("2MiB", 2 << 20)],
)
def test_parse_size(text: str, size: int) -> None:
    assert opts.parse_size(text) == size


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--factor", "1"], "--factor must be 2 or more"),
        (["--min-bytes", "2M", "--max-bytes", "1M"], "is smaller than --min-bytes"),
        (["--init-method", "tcp://h:1", "--rank", "0"], "needs --rank and --world-size"),
        (["--init-method", "udp://h:1", "--rank", "0", "--world-size", "1"], "must be env://"),
        (["--rank", "3", "--world-size", "2"], "--rank 3 is not below --world-size 2"),
        (["--rank", "0", "--world-size", "1", "--min-busbw", "-1"], "must be a positive number"),
        (["--rank", "0", "--world-size", "1", "--pause-before", "lunch"], "unknown test 'lunch'"),
    ],
)
def test_parse_args_rejects_nonsense(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(SystemExit) as exc:
        nc.parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_help_documents_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    parser = nc.build_parser()
    for action in parser._actions:
        assert action.help, f"{action.option_strings} has no help"
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    assert "--min-busbw-for" in capsys.readouterr().out


def test_threshold_names_a_known_collective() -> None:
    assert opts.ByName(nc.NAMES).threshold("bandwidth_all_gather=1.5") == ("all_gather", 1.5)
    with pytest.raises(argparse.ArgumentTypeError):
        opts.ByName(nc.NAMES).threshold("allgather=1.5")


# --- the record and the environment -------------------------------------------------------------


def test_record_is_rewritten_atomically(tmp_path: Path) -> None:
    record = nc.RankRecord(
        str(tmp_path / "out"), {"global_rank": 3, "host": "h", "tests": [], "status": "running"}
    )
    record.start("all_reduce_sum")
    assert (
        json.loads((tmp_path / "out" / "rank-3.json").read_text())["current_test"]
        == "all_reduce_sum"
    )
    record.add(nc.test_entry("all_reduce_sum", "failed", "wrong"))
    assert record.finish() == "failed"
    data = json.loads((tmp_path / "out" / "rank-3.json").read_text())
    assert data["status"] == "failed" and data["current_test"] is None and data["finished_at"]
    assert os.listdir(tmp_path / "out") == ["rank-3.json"]  # no temporary file left behind


def test_seen_environment_and_driver_version(tmp_path: Path) -> None:
    env = {
        "NCCL_DEBUG": "WARN",
        "MASTER_ADDR": "10.0.0.1",
        "HOME": "/root",
        "RANK": "0",
        "PATH": "/bin",
    }
    assert nc.seen_environment(env) == {
        "MASTER_ADDR": "10.0.0.1",
        "NCCL_DEBUG": "WARN",
        "RANK": "0",
    }
    proc = tmp_path / "version"
    proc.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 2023\n")
    assert nc.nvidia_driver_version(str(proc)) == "535.104.05"
    assert nc.nvidia_driver_version(str(tmp_path / "absent")) is None


def test_missing_ranks_name_node_and_host_from_a_neighbour() -> None:
    store = torch.distributed.HashStore()
    store.set("ready/0", nc.checkin_value("node-a", 0, 0))
    store.set("ready/2", nc.checkin_value("node-b", 1, 0))
    # 2 ranks per node: rank 3 shares node 1 with rank 2; ranks 4, 5 (node 2) never came
    assert nc.describe_missing(store, [1, 3, 4], 6, 2) == [
        {"rank": 1, "node_rank": 0, "host": "node-a"},
        {"rank": 3, "node_rank": 1, "host": "node-b"},
        {"rank": 4, "node_rank": 2, "host": None},
    ]
    store.add("ready_count", 1)  # rank 0 above checked in; now rank 1 completes a world of 2
    assert nc.check_in(store, 1, 2, nc.checkin_value("node-a", 0, 1), timeout=5) == []


def test_missing_ranks_take_their_node_from_the_planned_layout() -> None:
    # hosts with different slots=: node 0 runs rank 0, node 1 ranks 1-3, node 2 ranks 4-5
    layout = [1, 3, 2]
    assert [nc.node_of(r, layout) for r in range(6)] == [0, 1, 1, 1, 2, 2]
    store = torch.distributed.HashStore()
    store.set("ready/0", nc.checkin_value("node-a", 0, 0))
    store.set("ready/1", nc.checkin_value("node-b", 1, 0))
    assert nc.describe_missing(store, [2, 3, 4, 5], 6, layout) == [
        {"rank": 2, "node_rank": 1, "host": "node-b"},
        {"rank": 3, "node_rank": 1, "host": "node-b"},
        {"rank": 4, "node_rank": 2, "host": None},
        {"rank": 5, "node_rank": 2, "host": None},
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [("2,x", "is not a comma-separated list"), ("2,0", "is not a comma-separated list")],
)
def test_ranks_per_node_must_be_positive_counts(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        opts.rank_counts(text)


def test_ranks_per_node_must_add_up_to_the_world(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    argv = ["--rank", "0", "--world-size", "5"]
    assert nc.parse_args([*argv, "--ranks-per-node", "1,4"]).ranks_per_node == [1, 4]
    assert nc.parse_args(argv).ranks_per_node == [1] * 5  # torchrun's layout by hand
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert nc.parse_args(argv).ranks_per_node == [2, 2, 1]
    with pytest.raises(SystemExit):
        nc.parse_args([*argv, "--ranks-per-node", "2,2"])
    assert "--ranks-per-node 2,2 adds up to 4 ranks, not --world-size 5" in capsys.readouterr().err


# --- a wrong collective is caught by the check functions (the collective faked in-process) -----


def test_verify_all_reduce_fails_and_names_the_lost_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = ex.Context.make(0, 4, torch.device("cpu"), torch.float32)
    base = ex.base_pattern(ctx.count, ctx.base_period)

    def all_reduce_without_rank_2(tensor: torch.Tensor, op: object = None) -> None:
        inputs = [ex.reduction_input(base, 1, r, ctx.period) for r in (0, 1, 3)]
        tensor.copy_(torch.tensor(inputs).sum(dim=0))

    monkeypatch.setattr(ex.dist, "all_reduce", all_reduce_without_rank_2)
    with pytest.raises(ex.Fail) as exc:
        ex.verify_all_reduce(ctx, "sum")
    details = exc.value.details
    assert (details["first_wrong_index"], details["wrong"]) == (0, ctx.count)
    assert (details["expected"], details["got"]) == (4 + 6, 4 + 6 - 3)
    assert details["source"] == "the contribution of rank 2 is missing"


def test_check_all_gather_fails_on_a_chunk_from_the_wrong_rank(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctx = ex.Context.make(1, 3, torch.device("cpu"), torch.int32)
    base = ex.base_pattern(ctx.count, ctx.base_period)

    def all_gather_with_rank_0_twice(out: torch.Tensor, mine: torch.Tensor) -> None:
        chunks = [ex.payload(base, 1, r, ctx.period) for r in (0, 1, 0)]
        out.copy_(torch.tensor([v for c in chunks for v in c]))

    monkeypatch.setattr(ex, "all_gather_single", all_gather_with_rank_0_twice)
    with pytest.raises(ex.Fail) as exc:
        ex.verify_all_gather(ctx)
    details = exc.value.details
    assert details["first_wrong_index"] == 2 * ctx.count
    assert details["source"] == "this element comes from rank 2; the value is rank 0's"


def test_ring_exchange_posts_the_receive_before_the_send(monkeypatch: pytest.MonkeyPatch) -> None:
    # With gloo, a send posted first can hold the receive's announcement behind its whole payload
    # and halve the link rate (BENCHMARKS.md, fidelity); the receive must go first.
    posted: list[tuple[str, int]] = []

    def batch_isend_irecv(ops):
        posted.extend((op[0].__name__, op[2]) for op in ops)
        return []

    # P2POp checks for a process group; the order of the list is what matters here.
    monkeypatch.setattr(ex.dist, "P2POp", lambda op, tensor, peer: (op, tensor, peer))
    monkeypatch.setattr(ex.dist, "batch_isend_irecv", batch_isend_irecv)
    ex.ring_exchange(torch.zeros(2), torch.empty(2), rank=1, world_size=4)
    assert posted == [("irecv", 0), ("isend", 2)]


# --- all_reduce PRODUCT/MIN/MAX: a backend that applies another reduction is caught --------------

APPLY = {
    "sum": lambda rows: rows.sum(dim=0),
    "product": lambda rows: rows.prod(dim=0),
    "min": lambda rows: rows.min(dim=0).values,
    "max": lambda rows: rows.max(dim=0).values,
    "avg": lambda rows: rows.mean(dim=0),
}


def inputs_of_every_rank(
    monkeypatch: pytest.MonkeyPatch, op: str, n: int, dtype: torch.dtype
) -> torch.Tensor:
    """What verify_all_reduce(op) hands to all_reduce on each of n ranks (rows), captured."""
    rows: list[torch.Tensor] = []

    class Captured(Exception):
        pass

    def capture(tensor: torch.Tensor, op: object = None) -> None:
        rows.append(tensor.clone())
        raise Captured

    monkeypatch.setattr(ex.dist, "all_reduce", capture)
    for rank in range(n):
        with pytest.raises(Captured):
            ex.verify_all_reduce(ex.Context.make(rank, n, torch.device("cpu"), dtype), op)
    return torch.stack(rows)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize("asked", ["product", "min", "max"])
def test_all_reduce_fails_when_the_backend_applies_another_reduction(
    monkeypatch: pytest.MonkeyPatch, asked: str, n: int
) -> None:
    rows = inputs_of_every_rank(monkeypatch, asked, n, torch.float32)
    for applied, apply in APPLY.items():

        def all_reduce(tensor: torch.Tensor, op: object = None, apply=apply) -> None:
            tensor.copy_(apply(rows))

        monkeypatch.setattr(ex.dist, "all_reduce", all_reduce)
        ctx = ex.Context.make(0, n, torch.device("cpu"), torch.float32)
        if applied == asked:
            assert ex.verify_all_reduce(ctx, asked)["elements"] == ctx.count
            continue
        with pytest.raises(ex.Fail) as exc:
            ex.verify_all_reduce(ctx, asked)
        source = exc.value.details["source"]
        if applied != "avg":  # a float32 mean need not equal the exact one
            assert applied.upper() in source and f"not the {asked.upper()}" in source


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.bfloat16, torch.float16])
def test_product_min_max_results_are_exact_in_narrow_dtypes(
    monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype
) -> None:
    for op in ("product", "min", "max"):
        rows = inputs_of_every_rank(monkeypatch, op, 7, dtype)
        monkeypatch.setattr(
            ex.dist, "all_reduce", lambda t, op=None, r=rows, f=APPLY[op]: t.copy_(f(r))
        )
        assert ex.verify_all_reduce(ex.Context.make(3, 7, torch.device("cpu"), dtype), op)


# --- barrier: a rank that leaves before the last one arrived is caught ---------------------------


def barrier_on_threads(
    monkeypatch: pytest.MonkeyPatch, n: int, barrier: object
) -> dict[int, object]:
    """verify_barrier on n threads (one per rank) sharing one store; rank -> details or Fail."""
    monkeypatch.setattr(ex.dist, "barrier", barrier)
    store = torch.distributed.HashStore()
    results: dict[int, object] = {}

    def rank(r: int) -> None:
        ctx = ex.Context.make(r, n, torch.device("cpu"), torch.float32, store=store)
        try:
            results[r] = ex.verify_barrier(ctx)
        except ex.Fail as exc:
            results[r] = exc

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(results) == list(range(n))
    return results


def test_barrier_passes_when_every_rank_waits_for_the_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = 3
    waits = threading.Barrier(n)
    results = barrier_on_threads(monkeypatch, n, lambda: waits.wait(timeout=30))
    assert all(isinstance(d, dict) and d["rounds"] == n for d in results.values()), results


def test_barrier_fails_when_a_rank_leaves_before_the_last_arrived(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = 3
    results = barrier_on_threads(monkeypatch, n, lambda: None)  # returns at once: no barrier
    # each round one rank arrives last, after the others are in: they all left too early
    for rank, result in results.items():
        assert isinstance(result, ex.Fail), (rank, result)
        assert f"rank {rank} left the barrier" in str(result)
        late = {r for r in range(n) if r != rank}
        assert {e["late_rank"] for e in result.details["early"]} == late, result.details
        assert all(e["arrived"] < n for e in result.details["early"])
