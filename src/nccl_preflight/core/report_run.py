# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Build the JUnit files, summary.md, verdict.json and report.html of one run: the report play's
one step, run in the controller's own process (plugins/action/nccl_report.py) or as the module
library/nccl_report.py (same options, same result).

The run is read once and judged once (src/nccl_preflight/core/judged_run.py); every file written
here is a rendering of that one JudgedRun, and so is the run's metrics file for node_exporter
(``textfile_dir``: core/metrics.py write_run; not for a --check run, which launches nothing).
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .console import console_lines
from .forked import Forked, usable
from .judged_run import JudgedRun, judge_run
from .junit import point_latest, read_run, write_report
from .metrics import write_run
from .summary import summarize
from .verdict import verdict_document, write_verdict

ARGUMENT_SPEC: dict[str, dict] = {
    "report_root": {"type": "path", "required": True},
    "run_id": {"type": "str", "default": "latest"},
    "fallback_to_latest": {"type": "bool", "default": False},
    "ranks_launched": {"type": "bool", "default": True},
    "update_latest": {"type": "bool", "default": True},
    "html": {"type": "bool", "default": True},
    "html_template": {"type": "path", "default": ""},
    "run_check_mode": {"type": "bool", "default": False},
    "verdict_copy": {"type": "path", "default": ""},
    "textfile_dir": {"type": "path", "default": ""},
    "started": {"type": "float", "default": 0.0},
}


def resolve_run_dir(report_root: Path, run_id: str, fallback_to_latest: bool) -> Path | None:
    """The directory to report on, or None when there is none."""
    latest = report_root / "latest"
    if run_id and run_id != "latest":
        wanted = report_root / run_id
        if wanted.is_dir():
            return wanted
        if not fallback_to_latest:
            return None
    if latest.is_dir():
        return report_root / os.readlink(latest) if latest.is_symlink() else latest
    return None


# From this many suites on (64 nodes x 8 ranks), a forked child writes report.html while this
# process writes the JUnit files (core/forked.py). The JUnit files stay in this process: two
# processes creating 9,216 files in one directory wait on its lock, and the step was no faster.
FORK_FROM_SUITES = 512


def _html(p: dict[str, Any], run_dir: Path, judged: JudgedRun) -> str:
    from .html import TEMPLATE, write_html  # jinja2: only here (matplotlib: when it draws)

    return str(write_html(run_dir, Path(p.get("html_template") or TEMPLATE), judged))


def _write(
    p: dict[str, Any], run_dir: Path, judged: JudgedRun, markdown: str, verdict: dict[str, Any]
) -> tuple[list[str], str]:
    """Write the report files; -> (written paths, report.html path or ""). From
    FORK_FROM_SUITES suites on, a forked child writes report.html meanwhile (core/forked.py)."""
    wanted = p.get("html", True)
    page = None
    if wanted and len(judged.suites) >= FORK_FROM_SUITES and usable():
        page = Forked(lambda: _html(p, run_dir, judged))
    try:
        written = write_report(run_dir, judged, markdown)
        written.append(str(write_verdict(run_dir, verdict)))
    except BaseException:
        if page is not None:
            page.cancel()
        raise
    html = ""
    if wanted:
        given, html = page.result() if page is not None else (False, "")
        if not given:
            html = _html(p, run_dir, judged)
        written.append(html)
    if p["update_latest"]:
        point_latest(Path(p["report_root"]), run_dir.name)
    return written, html


def _write_metrics(p: dict[str, Any], judged: JudgedRun, written: list[str]) -> list[str]:
    """``textfile_dir``: the run's metrics for node_exporter (core/metrics.py write_run), added
    to ``written``; not for a --check run (it launches nothing). -> warnings: a directory that
    cannot take the file is said, the report stands."""
    directory = p.get("textfile_dir") or ""
    if not directory or p["run_check_mode"]:
        return []
    try:
        written.append(str(write_run(directory, judged, time.time(), p.get("started") or None)))
    except OSError as exc:
        return [f"textfile_dir {directory}: the run's metrics were not written: {exc}"]
    return []


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cyclic garbage collector off for the report step, as it was after it.

    The step holds millions of objects until it returns (8,192 ranks' results, their testcases)
    and makes no cycles of its own worth collecting: every full collection walked all of them
    again (issue 37: 13 % of the step's CPU at 1,024 ranks, growing with the run)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def run_report(p: dict, check_mode: bool) -> dict:
    """Build and (outside check mode) write the report of ``p`` (:data:`ARGUMENT_SPEC`).

    -> the result; ``failed: True`` with ``msg`` when there is no run to report on.
    """
    with _no_cycle_collection():
        return _run_report(p, check_mode)


def _run_report(p: dict, check_mode: bool) -> dict:
    report_root = Path(p["report_root"])
    run_id = p["run_id"] or "latest"
    run_dir = resolve_run_dir(report_root, run_id, p["fallback_to_latest"])
    if run_dir is None:
        return {
            "failed": True,
            "msg": (
                f"no collected files for run {run_id} under {report_root} on the control machine; "
                f"run the whole playbook (ansible-playbook playbooks/validate.yml) or pass an "
                f"existing run: -e nccl_run_id=<one of the directories in {report_root}>"
            ),
            "report_root": str(report_root),
            "run_id": run_id,
        }
    judged = judge_run(
        read_run(run_dir), ranks_launched=p["ranks_launched"], check_mode=p["run_check_mode"]
    )
    summary = summarize(judged)
    verdict = verdict_document(judged)
    written, html = (
        _write(p, run_dir, judged, summary["markdown"], verdict) if not check_mode else ([], "")
    )
    if p["verdict_copy"]:
        write_verdict(Path(p["verdict_copy"]), verdict, name="")
    warnings = _write_metrics(p, judged, written) if not check_mode else []
    result = {
        "changed": bool(written),
        "run_id": judged.run_id,
        "report_dir": str(run_dir),
        "junit": str(run_dir / "junit.xml"),
        "files": written,
        "verdict": summary["verdict"],
        "check_mode": summary["check_mode"],
        "totals": summary["totals"],
        "hosts": summary["hosts"],
        "bandwidth": summary["bandwidth"],
        "problems": summary["problems"],
        "summary": summary["markdown"],
        "summary_lines": summary["markdown"].splitlines(),
        "exit_class": verdict["class"],
        "exit_code": verdict["exit_code"],
        "findings": verdict["findings"],
        "html": html,
    }
    if warnings:
        result["warnings"] = warnings
    # The closing summary a person reads (plugins/callback/nccl_console.py prints it).
    return {**result, "console": console_lines(result, judged.folded)}
