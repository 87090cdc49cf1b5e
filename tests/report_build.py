# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The controller's report steps on a run directory a test wrote, in the order the report runs
them (src/nccl_preflight/core/run_data.py read_run, judged_run.judge_run, summary.summarize,
junit.write_report; verdict.verdict_document for the verdict)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nccl_preflight.core import junit as nccl_junit
from nccl_preflight.core import verdict as nccl_verdict
from nccl_preflight.core.judged_run import judge_run
from nccl_preflight.core.summary import summarize
from tests.verdict_schema import validate_verdict


def build_report(run_dir: Path) -> dict[str, Any]:
    """Read the run, judge it, write JUnit, summary.md and pairwise.json; -> the summary."""
    judged = judge_run(nccl_junit.read_run(run_dir))
    summary = summarize(judged)
    nccl_junit.write_report(run_dir, judged, summary["markdown"])
    return summary


def build_verdict(run_dir: Path) -> dict[str, Any]:
    """The verdict of the run in ``run_dir`` (nothing written), valid against its schema."""
    return validate_verdict(nccl_verdict.verdict_document(judge_run(nccl_junit.read_run(run_dir))))
