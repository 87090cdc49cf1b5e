# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/judged_run.py: one report build reads the run once and makes each
judgement once; JUnit, summary.md, verdict.json, report.html and pairwise.json render it, and no
writer reads a file another writer of the same build wrote (issue 26, item 2)."""

from __future__ import annotations

import builtins
import gc
import io
import json
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from nccl_preflight.core import (
    bandwidth_expectation,
    html,  # noqa: F401 - imported before the spies, so that its names are wrapped too
    pairwise,
    report_run,
    transport_report,
    verdict,
)
from tests.builders.pairwise import slow_node, write_run
from tests.builders.report import params

# Every judgement of a run, by the module that is its home.
JUDGEMENTS = {
    "evaluate": bandwidth_expectation,
    "judge_expectations": bandwidth_expectation,
    "analyze_run": transport_report,
    "pairwise_document": pairwise,
    "findings": verdict,
}
# What the writers of one build write into the run directory.
WRITTEN = ("pairwise.json", "junit.xml", "summary.md", "verdict.json", "report.html")


def spy_on_judgements(monkeypatch: pytest.MonkeyPatch) -> dict[str, mock.Mock]:
    """A Mock wrapping each judgement, put in place of every name the core binds it to."""
    spies = {}
    for name, home in JUDGEMENTS.items():
        original = getattr(home, name)
        spies[name] = mock.Mock(wraps=original)
        for module in [m for n, m in sys.modules.items() if n.startswith("nccl_preflight.core")]:
            if getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, spies[name])
    return spies


def record_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every file opened for reading (open(), Path.read_text) from now on."""
    reads: list[Path] = []
    real_open = builtins.open

    def recording_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, (str, Path)) and not set(mode) & set("wax+"):
            reads.append(Path(file).resolve())
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", recording_open)
    monkeypatch.setattr(io, "open", recording_open)
    return reads


def collected_run(tmp_path: Path) -> tuple[Path, Path]:
    """(run directory, baseline run directory): a run of 4 nodes with pairwise rounds that name
    a slow node, a failed pre-flight check with a consequence, and an earlier run as baseline
    whose own report (pairwise.json included) was built before."""
    base = write_run(tmp_path / "earlier", 4, 2, slow_node(2, rail=1), second=[(0, 2)])
    report_run.run_report(params(base), check_mode=False)
    run_dir = write_run(tmp_path, 4, 2, slow_node(2, rail=1), second=[(0, 2)])
    plan = json.loads((run_dir / "plan.json").read_text())
    plan["bandwidth"] = {"baseline": str(base)}
    (run_dir / "plan.json").write_text(json.dumps(plan))
    (run_dir / "preflight").mkdir()
    results = [
        {"check": "mtu", "status": "failed", "message": "fab0 mtu 1500", "hint": "set 9000"},
        {
            "check": "ports",
            "status": "failed",
            "message": "port 29500 closed",
            "cause": {"host": "10.0.0.1", "check": "mtu"},
        },
    ]
    doc = {"host": "10.0.0.1", "results": results}
    (run_dir / "preflight" / "10.0.0.1.json").write_text(json.dumps(doc))
    return run_dir, base


def test_one_build_makes_each_judgement_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir, _ = collected_run(tmp_path)
    spies = spy_on_judgements(monkeypatch)
    result = report_run.run_report(params(run_dir), check_mode=False)
    # The run is what the test built: a slow node, a pre-flight cause with its consequence, a
    # baseline compared, every file written.
    assert result["exit_class"] == "preflight_failed"
    assert {f["id"] for f in result["findings"]} >= {"pairwise/10.0.0.3/pairwise", "10.0.0.1/mtu"}
    assert "baseline" in result["summary"]
    assert {Path(f).name for f in result["files"]} >= set(WRITTEN)
    assert {name: spy.call_count for name, spy in spies.items()} == dict.fromkeys(JUDGEMENTS, 1)


def test_no_writer_reads_what_another_writer_of_the_build_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir, base = collected_run(tmp_path)
    report_run.run_report(params(run_dir), check_mode=False)  # pairwise.json & co. are there
    reads = record_reads(monkeypatch)
    report_run.run_report(params(run_dir), check_mode=False)
    reads = list(reads)  # the build's reads, not the test's below
    heatmap = (run_dir / "report.html").read_text().split('id="pairwise"')[1]
    assert "<svg" in heatmap and "10.0.0.3" in heatmap  # drawn from the build's own document
    own = run_dir.resolve()
    read_back = [
        p for p in reads if p.is_relative_to(own) and (p.name in WRITTEN or "junit" in p.parts)
    ]
    assert read_back == []
    # What it reads of the earlier run is that run's (the baseline's) own pairwise.json.
    assert base.resolve() / "pairwise.json" in reads


@pytest.mark.parametrize("enabled_before", [True, False])
def test_the_cycle_collector_is_off_for_the_step_and_as_it_was_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, enabled_before: bool
) -> None:
    run_dir, _ = collected_run(tmp_path)
    seen: list[bool] = []
    judge = report_run.judge_run

    def judging(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return judge(*args, **kwargs)

    monkeypatch.setattr(report_run, "judge_run", judging)
    was = gc.isenabled()
    try:
        (gc.enable if enabled_before else gc.disable)()
        result = report_run.run_report(params(run_dir), check_mode=False)
        assert seen == [False] and result["exit_class"] == "preflight_failed"
        assert gc.isenabled() is enabled_before
        # A step that fails leaves the collector as it found it too.
        monkeypatch.setattr(report_run, "summarize", mock.Mock(side_effect=RuntimeError("x")))
        with pytest.raises(RuntimeError):
            report_run.run_report(params(run_dir), check_mode=False)
        assert gc.isenabled() is enabled_before
    finally:
        (gc.enable if was else gc.disable)()
