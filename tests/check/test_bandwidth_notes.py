# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The notes nccl_check prints under gloo's bandwidth tables, and the torch behaviour they state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.check.support import load_script, torchrun

nc = load_script()
OPS_WORKER = Path(__file__).with_name("gloo_ops_worker.py")
ROW = {
    "size_bytes": 1024, "count": 256, "type": "float", "redop": "sum", "root": -1,
    "time_us": 12.5, "algbw_gbps": 0.08, "busbw_gbps": 0.04, "wrong": 0,
}  # fmt: skip


@pytest.mark.parametrize(
    ("collective", "noted_at"),
    [
        ("reduce_scatter", {2, 3, 4, 8}),  # an all_reduce at any rank count
        ("all_gather", {2}),  # both directions on one connection only with 2 ranks
        ("broadcast", {3, 4, 8}),  # a binomial tree is one send with 2 ranks
        ("all_reduce", set()),
        ("send_recv", set()),
    ],
)
def test_gloo_notes_appear_only_at_the_rank_counts_they_hold_for(
    collective: str, noted_at: set[int]
) -> None:
    for n in (2, 3, 4, 8):
        last = nc.bandwidth_table(collective, [ROW], n, "gloo").splitlines()[-1]
        assert last.startswith("# Note: gloo") == (n in noted_at), (collective, n, last)
        assert (nc.bandwidth_note("gloo", collective, n) is not None) == (n in noted_at)
        assert nc.bandwidth_note("nccl", collective, n) is None


@pytest.mark.torchrun
def test_gloo_reduce_scatter_is_an_all_reduce_in_both_apis(tmp_path: Path) -> None:
    """What the reduce_scatter note says, pinned: when a torch release gives gloo a real
    reduce-scatter, this fails; then measure it (bench fidelity), use it, and fix the note."""
    n = 3
    proc = torchrun(n, str(tmp_path), script=OPS_WORKER)

    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    for rank in range(n):
        ops = json.loads((tmp_path / f"ops-{rank}.json").read_text())
        assert ops["reduce_scatter_single"] == ["gloo:all_reduce"], ops  # the whole input
        assert ops["reduce_scatter_list"] == ["gloo:all_reduce"] * n, ops  # one per chunk
        assert ops["reduce_scatter_list_result"] == [float(n)] * 4, ops
        assert ops["all_gather_single"] == ["gloo:all_gather"], ops
        assert ops["broadcast"] == ["gloo:broadcast"], ops
