# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The support table against the real backends of this machine (torch 2.13 CPU build).

gloo on CPU: every row is called for real by nccl_check under torchrun; the one narrower
refusal (AVG on integer tensors) is predicted and skipped without a call, and the message torch
raises when it is called anyway is recorded again and compared with tests/fixtures/torch/.
Rows this machine cannot call (gloo, nccl and xccl on GPU tensors; mpi, not in this build)
cite torch's documentation in the rank script's SUPPORT (files/nccl_check_tables.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed as dist

from tests.check.support import (
    FAST,
    TIMEOUT_S,
    by_name,
    env,
    load_part,
    load_script,
    records,
    torchrun,
)

nc = load_script()
tables = load_part("nccl_check_tables")
FIXTURES = Path(__file__).parents[1] / "fixtures" / "torch"
pytestmark = pytest.mark.torchrun


def test_every_gloo_cpu_row_runs_for_real_and_avg_on_int32_is_a_predicted_skip(
    tmp_path: Path,
) -> None:
    proc = torchrun(
        2, "--out-dir", str(tmp_path), "--timeout", str(TIMEOUT_S), "--dtype", "int32", *FAST
    )

    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank, rec in records(tmp_path).items():
        tests = by_name(rec)
        avg = tests["all_reduce_avg"]
        assert avg["status"] == "skipped", (rank, avg)
        assert avg["message"] == nc.support_of("gloo", "cpu", "all_reduce_avg", "int32").reason
        assert avg["details"] == {"support": "no"} and avg["duration_s"] == 0
        ran = {name: t["status"] for name, t in tests.items() if name != "all_reduce_avg"}
        assert set(ran.values()) == {"passed"}, ran
        # every collective of the table's gloo/cpu row was called on the real backend
        called = {tables.collective_of(name) for name in ran} - {None}
        assert called == set(nc.COLLECTIVES)
    assert "skipped all_reduce_avg: gloo has no AVG on integer tensors" in proc.stdout


def test_the_refusals_torch_raises_here_are_the_recorded_ones() -> None:
    """Calls gloo with what the table says it refuses, and nccl/mpi/ucc init, for real."""
    proc = subprocess.run(
        [sys.executable, str(FIXTURES / "record_refusals.py")],
        capture_output=True,
        text=True,
        env=env(),
        timeout=150,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads((FIXTURES / "refusals.json").read_text())


@pytest.mark.skipif(not dist.is_mpi_available(), reason="this torch build has no MPI backend")
def test_mpi_rows_on_cpu(tmp_path: Path) -> None:  # pragma: no cover - needs an MPI build
    proc = torchrun(2, "--out-dir", str(tmp_path), "--backend", "mpi", *FAST)
    for rec in records(tmp_path).values():
        tests = by_name(rec)
        assert tests["reduce_scatter"]["status"] == "skipped"
        assert all(
            t["status"] == "passed"
            for name, t in tests.items()
            if name not in ("checkin", "reduce_scatter", "bandwidth_reduce_scatter", "barrier")
        ), proc.stdout


def test_a_real_refusal_the_table_did_not_predict_fails_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    """The same run with the table's gloo rule taken away: gloo itself refuses AVG on int32."""
    args = ["--out-dir", str(tmp_path), "--timeout", str(TIMEOUT_S), "--dtype", "int32"]
    args += ["--tests", "all_reduce_avg,all_reduce_sum", *FAST]
    proc = torchrun(2, *args, script=Path(__file__).with_name("unpredicted_worker.py"))

    assert proc.returncode != 0, proc.stdout + proc.stderr
    recorded = json.loads((FIXTURES / "refusals.json").read_text())["cases"]
    message = recorded["gloo/cpu/all_reduce_avg/int32"].partition(": ")[2]
    for rank, rec in records(tmp_path).items():
        tests = by_name(rec)
        avg = tests["all_reduce_avg"]
        assert avg["status"] == "failed", (rank, avg)
        assert avg["message"] == (
            "the backend refused it, which the support table did not predict (gloo runs "
            "all_reduce on CPU tensors (torch.distributed docs, Backends table)): " + message
        )
        assert avg["details"]["refusal"] == message
        assert tests["all_reduce_sum"]["status"] == "passed"  # a refusal is not a broken group
        assert rec["status"] == "failed"
