# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The controller's report steps on a run directory a test wrote, in the order the report runs
them (src/nccl_preflight/core/run_data.py read_run, nccl_junit.build_suites, nccl_summary.summarize,
nccl_junit.write_report; nccl_verdict.build_verdict for the verdict)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nccl_preflight.core import junit as nccl_junit
from nccl_preflight.core import verdict as nccl_verdict


def build_report(run_dir: Path) -> dict[str, Any]:
    """Read the run, build its suites and summary and write every report file; -> the summary."""
    run = nccl_junit.read_run(run_dir)
    files = nccl_junit.build_suites(run)
    summary = nccl_junit.summarize(run, files)
    nccl_junit.write_report(run_dir, run, files, summary)
    return summary


def build_verdict(run_dir: Path) -> dict[str, Any]:
    """The verdict of the run in ``run_dir`` (nothing written)."""
    run = nccl_junit.read_run(run_dir)
    files = nccl_junit.build_suites(run)
    return nccl_verdict.build_verdict(run, files, nccl_junit.summarize(run, files))
