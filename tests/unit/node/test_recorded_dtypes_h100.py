# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The rank script's correctness tests in every element type it offers, with the nccl backend on
one H100 (world size 1; recorded by tests/device/dtypes_gpu.sh on 2026-11-26:
tests/fixtures/README.md, "Every element type on the H100"), against the support table the
script skips by (node/collective_tables.py, shipped as files/nccl_check_tables.py): every test
the table says nccl runs on GPU tensors ran and passed in every type, AVG on integers and
PRODUCT on bfloat16 included; nothing was skipped but send/recv, which needs two ranks."""

from __future__ import annotations

import json

import pytest

from nccl_preflight.node.collective_tables import support_of
from tests.recorded_gpu import FIXTURES

DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8")


@pytest.mark.parametrize("dtype", DTYPES)
def test_each_type_ran_as_the_support_table_predicts_for_nccl(dtype: str) -> None:
    rank = json.loads((FIXTURES / "rank_json" / "h100-nccl-dtypes" / f"{dtype}.json").read_text())
    assert (rank["backend"], rank["device"], rank["dtype"]) == ("nccl", "cuda:0", dtype)
    assert rank["versions"]["nccl"] == "2.28.9" and rank["world_size"] == 1
    for test in rank["tests"]:
        name, status = test["name"], test["status"]
        if name == "send_recv":
            assert status == "skipped" and "2 ranks" in test["message"]
            continue
        predicted = support_of("nccl", "cuda", name, dtype)
        if name in ("checkin", "init", "barrier"):
            assert status == "passed", name
            continue
        assert (predicted.state, status) == ("yes", "passed"), (name, predicted)
