# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The backend x operation support table (src/nccl_preflight/node/collective_tables.py, the rank
script's nccl_check_tables): the ranks' lookup and the controller's prediction from it.

The live side (every row called on the real gloo backend) is tests/check/test_support_table.py.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import torch

from nccl_preflight.core import support as core_support
from nccl_preflight.core import support as ns
from nccl_preflight.node import collective_tables
from tests.check.support import SCRIPT, load_part, load_script

nc = load_script()
tables = load_part("nccl_check_tables")  # the copy the rank script uses
TEXT = SCRIPT.read_text(encoding="utf-8")
REFUSALS = json.loads(
    (Path(__file__).parents[2] / "fixtures" / "torch" / "refusals.json").read_text()
)
DEVICES = ("cpu", "cuda", "xpu", "npu")


def test_the_controller_reads_the_same_table_and_tests() -> None:
    """One file, imported under two names (tests/unit/node/test_collective_tables.py, which also
    checks that the control machine reads it without torch): the same values."""
    assert collective_tables.SUPPORT == tables.SUPPORT
    assert collective_tables.SUPPORT_RULES == tables.SUPPORT_RULES
    assert collective_tables.SUPPORT_SOURCE == tables.SUPPORT_SOURCE
    assert collective_tables.ALL_TESTS == tables.ALL_TESTS


def test_the_controller_predicts_what_every_rank_will_predict() -> None:
    """Each test on each backend, device and dtype, asked as a run asks (--device, --dtype,
    --tests): the controller predicts a skip exactly where the rank's own lookup says no."""
    backends = (*tables.SUPPORT, "hccl", "ucc")
    for backend, device, dtype, test in itertools.product(
        backends, DEVICES, nc.DTYPES, tables.ALL_TESTS
    ):
        args = ["--device", device, f"--dtype={dtype}", "--tests", test]
        rank = nc.support_of(backend, device, test, dtype)
        expected = [{"test": test, "reason": rank.reason}] if rank.state == "no" else []
        assert core_support.predicted_skips(backend, args) == expected, (backend, device, test)


def test_every_backend_and_device_of_the_table_answers_for_every_collective() -> None:
    for backend, devices in tables.SUPPORT.items():
        assert set(devices) == {"cpu", "gpu"}, backend
        for kind, row in devices.items():
            assert set(row) - {"*"} <= set(nc.COLLECTIVES), (backend, kind)
            for coll in nc.COLLECTIVES:
                assert row.get(coll, row.get("*")) in ("yes", "no", "maybe"), (backend, kind, coll)


@pytest.mark.parametrize(
    ("backend", "device", "test", "state", "words"),
    [
        # rows of torch's table (docs/source/distributed.md, "Backends")
        ("gloo", "cuda", "send_recv", "no", "gloo has no send_recv on CUDA (GPU column) tensors"),
        ("gloo", "cuda", "barrier", "no", "gloo has no barrier on CUDA"),
        ("gloo", "cuda", "bandwidth_reduce_scatter", "yes", "gloo runs reduce_scatter on CUDA"),
        ("mpi", "cpu", "reduce_scatter", "no", "mpi has no reduce_scatter on CPU tensors"),
        ("mpi", "cuda", "bandwidth_reduce_scatter", "no", "mpi has no reduce_scatter on CUDA"),
        ("mpi", "cuda", "all_reduce_sum", "maybe", "is '?' in the torch.distributed docs"),
        ("nccl", "cpu", "broadcast", "no", "nccl has no broadcast on CPU tensors"),
        ("nccl", "cuda", "all_to_all", "yes", "nccl runs all_to_all"),
        ("xccl", "xpu", "all_to_all", "yes", "xccl runs all_to_all on XPU"),
        ("xccl", "cpu", "gather", "no", "xccl has no gather on CPU"),
        # no column for hccl or ucc: nothing predicted, so any refusal fails
        ("hccl", "npu", "all_reduce_sum", "unknown", "no hccl on NPU (GPU column) tensors"),
        ("ucc", "cpu", "all_reduce_sum", "unknown", "no ucc on CPU tensors"),
    ],
)
def test_rows_of_torchs_table(backend: str, device: str, test: str, state: str, words: str) -> None:
    support = nc.support_of(backend, device, test, "float32")
    assert support.state == state and words in support.reason, support


def test_gloo_avg_on_integers_is_predicted_with_the_message_torch_raises() -> None:
    for dtype in ("int32", "int64", "int8", "uint8"):
        support = nc.support_of("gloo", "cpu", "all_reduce_avg", dtype)
        assert support.state == "no" and "gloo has no AVG on integer tensors" in support.reason
        recorded = REFUSALS["cases"][f"gloo/cpu/all_reduce_avg/{dtype}"]
        assert recorded.startswith("RuntimeError: result type Float can't be cast to")
    assert nc.support_of("gloo", "cpu", "all_reduce_avg", "float16").state == "yes"
    assert nc.support_of("gloo", "cpu", "all_reduce_sum", "int8").state == "yes"


def test_the_recorded_refusals_are_recognised_as_refusals() -> None:
    """The exact messages torch 2.13 raised here (tests/fixtures/torch/refusals.json)."""
    for case, text in REFUSALS["cases"].items():
        exc_type, _, message = text.partition(": ")
        exc = {"RuntimeError": RuntimeError, "AssertionError": AssertionError}[exc_type](message)
        refusal = nc.unsupported(exc)
        # an operation refused is a refusal; a backend missing from this build is not: init
        # errors say why the run cannot happen at all
        assert refusal == (not case.endswith("/init")), case


def test_an_unpredicted_refusal_of_a_real_message_fails_and_a_maybe_skips() -> None:
    text = REFUSALS["cases"]["gloo/cpu/all_reduce_bxor/float32"].partition(": ")[2]

    def refuse() -> dict[str, object]:
        raise RuntimeError(text)

    yes = nc.support_of("gloo", "cpu", "all_reduce_sum", "float32")
    failed = nc.run_test("all_reduce_sum", refuse, yes)
    assert failed["status"] == "failed"
    assert failed["message"].startswith(
        "the backend refused it, which the support table did not predict (gloo runs all_reduce"
    )
    assert failed["message"].endswith(text) and failed["details"]["refusal"] == text
    maybe = nc.support_of("mpi", "cuda", "all_reduce_sum", "float32")
    assert nc.run_test("all_reduce_sum", refuse, maybe)["status"] == "skipped"


@pytest.mark.parametrize(
    ("backend", "args", "expected"),
    [
        ("gloo", [], []),
        ("gloo", ["--dtype", "int8"], ["all_reduce_avg"]),
        ("gloo", ["--dtype=int32", "--tests", "bandwidth"], []),
        ("gloo", ["--device", "cuda"], ["send_recv", "barrier", "bandwidth_send_recv"]),
        ("mpi", ["--tests", "reduce_scatter,all_reduce"], ["reduce_scatter"]),
        ("mpi", [], ["reduce_scatter", "bandwidth_reduce_scatter"]),
        ("nccl", [], []),
        ("hccl", [], []),
        ("ucc", [], []),
    ],
)
def test_predicted_skips_for_a_run(backend: str, args: list[str], expected: list[str]) -> None:
    skips = ns.nccl_predicted_skips(TEXT, backend, args)
    assert [s["test"] for s in skips] == expected
    assert all(s["reason"] for s in skips)


def test_a_launch_script_of_ones_own_without_the_table_predicts_nothing() -> None:
    wrapper = "import os, sys\nos.execv(sys.executable, [sys.executable, 'nccl_check.py'])\n"
    assert ns.nccl_predicted_skips(wrapper, "gloo", ["--device", "cuda"]) == []
    assert ns.nccl_predicted_skips("not python (", "gloo", []) == []
    assert ns.nccl_predicted_skips(TEXT, "gloo", ["--device", "cuda"])  # the real one predicts


def test_torch_here_is_the_one_the_messages_were_recorded_with() -> None:
    assert torch.__version__ == REFUSALS["torch"]


def test_the_summary_shows_the_predicted_skips_of_plan_json_before_any_rank_ran() -> None:
    from nccl_preflight.core import junit as nccl_junit

    plan = {
        "backend": "gloo",
        "predicted_skips": ns.nccl_predicted_skips(TEXT, "gloo", ["--device", "cuda"]),
    }
    lines = nccl_junit.predicted_skip_lines(plan)
    assert lines[1] == "Skipped on every rank, as the support table predicts (gloo):"
    assert (
        "- send_recv: skipped: gloo has no send_recv on CUDA (GPU column) tensors "
        "(torch.distributed docs, Backends table)"
    ) in lines
    assert nccl_junit.predicted_skip_lines({"backend": "gloo"}) == []


def test_a_refusal_is_a_rank_that_could_not_run_the_test_not_wrong_data() -> None:
    from nccl_preflight.core import verdict as nccl_verdict

    refused = nc.run_test(
        "all_reduce_avg",
        lambda: (_ for _ in ()).throw(RuntimeError("Cannot use ReduceOp.PREMUL_SUM with Gloo")),
        nc.support_of("gloo", "cpu", "all_reduce_avg", "float32"),
    )
    assert refused["status"] == "failed"
    assert nccl_verdict._rank_class(None, None, refused, "failure") == ("rank_lost", False)
    wrong = {"status": "failed", "details": {"wrong": 3}}
    assert nccl_verdict._rank_class(None, None, wrong, "failure") == ("wrong_data", False)


def test_report_html_shows_the_predicted_skips_escaped_before_the_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.builders.report import RunDir, page, report

    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).all_passed()
    plan = json.loads((run.dir / "plan.json").read_text())
    skips = ns.nccl_predicted_skips(TEXT, "gloo", ["--device", "cuda"])
    # a reason with markup in it (a launch_script of one's own could say anything): escaped
    skips.append({"test": "odd<b>", "reason": "<script>alert(1)</script> & more"})
    (run.dir / "plan.json").write_text(json.dumps({**plan, "predicted_skips": skips}))
    report(run, capsys)
    html = (run.dir / "report.html").read_text()
    assert "<script>alert" not in html and "odd<b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in html
    body = " ".join(" ".join(page(run).text).split())
    heading = "Skipped on every rank, as the support table predicts (gloo)"
    line = (
        "send_recv : skipped: gloo has no send_recv on CUDA (GPU column) tensors "
        "(torch.distributed docs, Backends table)"
    )
    assert heading in body and line in body, body[:3000]
    assert "odd<b> : skipped: <script>alert(1)</script> & more" in body
    # before the results: above the hosts, the pre-flight and the bandwidth sections
    assert body.index(heading) < body.index("Hosts") < body.index("Bus bandwidth against")
    # no predicted skip: no section
    (run.dir / "plan.json").write_text(json.dumps(plan))
    report(run, capsys)
    assert "support table predicts" not in (run.dir / "report.html").read_text()


def docs_table() -> dict[tuple[str, str, str], str]:
    """(backend, cpu|gpu, function) -> yes|no|maybe from the transcribed torch docs table."""
    lines = (Path(__file__).parents[2] / "fixtures" / "torch" / "backends-table.txt").read_text()
    rows = [line.split() for line in lines.splitlines() if line and not line.startswith("#")]
    header = next(x for x in lines.splitlines() if x.startswith("# function")).split()[2:]
    table = {}
    for function, *cells in rows:
        assert len(cells) == len(header), function
        for column, cell in zip(header, cells, strict=True):
            backend, kind = column.split("-")
            table[(backend, kind, function)] = cell
    return table


def test_every_cell_of_the_support_table_is_the_one_torchs_docs_give() -> None:
    """Every (backend, device, collective) of SUPPORT against the torch docs' Backends table
    (tests/fixtures/torch/backends-table.txt, transcribed with its source): the cited source of
    the rows this machine cannot call (GPU columns, nccl, xccl; mpi without an MPI build)."""
    docs = docs_table()
    functions = {"send_recv": ("send", "recv")}
    assert set(tables.SUPPORT) == {b for b, _, _ in docs}
    for backend, devices in tables.SUPPORT.items():
        for kind, row in devices.items():
            for coll in nc.COLLECTIVES:
                mine = row.get(coll, row.get("*"))
                for function in functions.get(coll, (coll,)):
                    assert mine == docs[(backend, kind, function)], (backend, kind, coll)
