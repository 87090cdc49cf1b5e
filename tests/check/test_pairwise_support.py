# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pairwise rounds ask the support table first: their exchanges are send/recv, which gloo
has not on GPU tensors. On an H100 (tests/fixtures/rank_json/h100-gloo-cuda-pairwise/) gloo
with CUDA tensors aborted the rank process in the first exchange ("writev ...: Bad address") and
its peer erred with "Connection closed by peer"; now the phase is a skip saying why, before any
exchange. The phase runs here with the script's own RankRecord and a Context stand-in whose
device is CUDA (no GPU here): nothing of the rounds may be called."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from tests.check.support import load_script

nc = load_script()


class Ctx:
    """What Pairwise and run_pairwise ask of a Context, for 2 ranks on 2 nodes."""

    def __init__(self, device: str) -> None:
        self.device, self.world_size, self.rank = torch.device(device), 2, 0

    def all_gather_json(self, mine: Any) -> list[Any]:
        return [mine, (1, 0, "peer", 1)]


def run_phase(tmp_path: Path, backend: str, device: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    data = {"global_rank": 0, "node_rank": 0, "local_rank": 0, "host": "me", "backend": backend}
    record = nc.RankRecord(str(tmp_path), {**data, "tests": []})
    args = SimpleNamespace(pairwise="always", dtype="float32")
    run = SimpleNamespace(args=args, record=record, arm=lambda *_: None)
    called = []
    monkeypatch.setattr(nc.Pairwise, "body", lambda self, why: called.append(why) or {"rows": []})
    nc.run_pairwise(run, Ctx(device), None)
    [entry] = json.loads((tmp_path / "rank-0.json").read_text())["tests"]
    return {**entry, "called": called}


def test_gloo_with_cuda_tensors_skips_the_rounds_saying_why_before_any_exchange(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = run_phase(tmp_path, "gloo", "cuda", monkeypatch)
    assert (entry["name"], entry["status"], entry["called"]) == ("pairwise", "skipped", [])
    # as run_tests() records a skip the table predicts: never called
    assert (entry["details"], entry["duration_s"]) == ({"support": "no"}, 0)
    assert entry["message"] == (
        "the pairwise rounds exchange with send/recv: gloo has no send_recv on CUDA (GPU column) "
        "tensors (torch.distributed docs, Backends table)"
    )


@pytest.mark.parametrize(("backend", "device"), [("gloo", "cpu"), ("nccl", "cuda")])
def test_where_send_recv_runs_the_rounds_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str, device: str
) -> None:
    entry = run_phase(tmp_path, backend, device, monkeypatch)
    assert (entry["status"], entry["called"]) == ("passed", ["--pairwise always"])


RECORDED = Path(__file__).parents[1] / "fixtures" / "rank_json"


def recorded(case: str, rank: int) -> dict:
    return json.loads((RECORDED / case / f"rank-{rank}.json").read_text())


def test_on_the_h100_the_rounds_aborted_gloo_then_and_are_skipped_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before (commit 9690e42): rank 1 was aborted in the first exchange (its record stops in
    the phase, its torchrun log says why) and rank 0 erred; after: both ranks skip the phase
    with the words the stand-in run gives."""
    died, erred = (
        recorded("h100-gloo-cuda-pairwise-abort", 1),
        recorded("h100-gloo-cuda-pairwise-abort", 0),
    )
    assert (died["status"], died["current_test"]) == ("running", "pairwise")
    log = (Path(__file__).parents[1] / "fixtures" / "runfaults").joinpath(
        "torchrun-gloo-cuda-pairwise-abort-h100.log"
    )
    assert "writev [127.0.0.1]:9637: Bad address" in log.read_text()
    [phase] = [t for t in erred["tests"] if t["name"] == "pairwise"]
    assert phase["status"] == "error" and "Connection closed by peer" in phase["message"]
    expected = run_phase(tmp_path, "gloo", "cuda", monkeypatch)["message"]
    for rank in (0, 1):
        now = recorded("h100-gloo-cuda-pairwise-skip", rank)
        assert (now["status"], now["device"]) == ("passed", "cuda:0")
        [phase] = [t for t in now["tests"] if t["name"] == "pairwise"]
        assert (phase["status"], phase["message"]) == ("skipped", expected)
