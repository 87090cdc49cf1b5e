# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The support table's gloo row for GPU tensors, called for real: the rank script with
--backend gloo --device cuda, two ranks on one H100 (torch 2.11.0+cu130; recorded by
tests/device/gloo_cuda_gpu.sh on 2026-11-26: tests/fixtures/README.md, "gloo on CUDA tensors on
the H100"). Every collective the table says gloo runs on GPU tensors passed, but AVG on int32:
gloo refused it with the very message it gives on CPU tensors, which the table's rule then
covered only on CPU (the recorded run failed that test). The rule now covers both."""

from __future__ import annotations

import json

import pytest

from nccl_preflight.node.collective_tables import support_of
from tests.recorded_gpu import FIXTURES

RECORDED = FIXTURES / "rank_json" / "h100-gloo-cuda"


def recorded_tests(dtype: str, rank: int) -> dict[str, dict]:
    record = json.loads((RECORDED / f"{dtype}-rank-{rank}.json").read_text())
    assert (record["backend"], record["device"], record["world_size"]) == ("gloo", "cuda:0", 2)
    assert record["versions"]["torch"] == "2.11.0+cu130"
    return {t["name"]: t for t in record["tests"]}


@pytest.mark.parametrize(
    ("dtype", "rank"), [("float32", 0), ("float32", 1), ("int32", 0), ("int32", 1)]
)
def test_what_gloo_ran_on_cuda_tensors_is_what_the_table_now_predicts(
    dtype: str, rank: int
) -> None:
    for name, test in recorded_tests(dtype, rank).items():
        predicted = support_of("gloo", "cuda", name, dtype)
        if name in ("checkin", "init"):
            assert test["status"] == "passed"
        elif predicted.state == "yes":
            assert test["status"] == "passed", (name, test.get("message"))
        elif name == "all_reduce_avg":  # the run predates the rule's GPU column: it was called
            assert (test["status"], predicted.state) == ("failed", "no")
            refusal = test["details"]["refusal"]
            assert refusal == "result type Float can't be cast to the desired output type Int"
            assert refusal in predicted.reason
        else:  # send_recv and barrier: the docs' cross, skipped without a call
            assert (test["status"], test["message"]) == ("skipped", predicted.reason)


def test_the_rule_covers_avg_on_integers_on_both_devices_and_nothing_else() -> None:
    for device in ("cpu", "cuda"):
        for dtype in ("int32", "int64", "int8", "uint8"):
            assert support_of("gloo", device, "all_reduce_avg", dtype).state == "no"
        assert support_of("gloo", device, "all_reduce_avg", "float32").state == "yes"
        assert support_of("gloo", device, "all_reduce_sum", "int32").state == "yes"
    assert support_of("nccl", "cuda", "all_reduce_avg", "int32").state == "yes"  # ran on the H100


@pytest.mark.parametrize("rank", [0, 1])
def test_the_bandwidth_sweep_on_cuda_tensors_ran_what_the_table_allows(rank: int) -> None:
    record = json.loads(
        (FIXTURES / "rank_json" / "h100-gloo-cuda-bandwidth" / f"rank-{rank}.json").read_text()
    )
    assert (record["backend"], record["device"], record["status"]) == ("gloo", "cuda:0", "passed")
    swept = {t["name"]: t for t in record["tests"] if t["name"].startswith("bandwidth_")}
    assert len(swept) == 7
    for name, test in swept.items():
        predicted = support_of("gloo", "cuda", name, "float32")
        expected = "passed" if predicted.state == "yes" else "skipped"
        assert test["status"] == expected, (name, test.get("message"))
    assert swept["bandwidth_send_recv"]["status"] == "skipped"
    assert max(row["size_bytes"] for row in swept["bandwidth_all_reduce"]["bandwidth"]) == 16 << 20
