# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""One run, read once and judged once: the model every report file renders.

src/nccl_preflight/core/report_run.py reads reports/<run-id>/ (run_data.read_run) and calls
judge_run once; it builds the typed model of src/nccl_preflight/core/findings.py (JudgedRun:
its testcases, its findings and their folding, each made once). junit.xml and junit/*.xml
(junit.write_report), summary.md (summary.summarize), verdict.json (verdict.verdict_document),
report.html (html.write_html), pairwise.json, the metrics and the console lines are renderings
of it: none of them judges again or reads a file another writer wrote (docs/design.md, "The
report").
"""

from __future__ import annotations

from .bandwidth_expectation import evaluate
from .bandwidth_rows import run_bandwidth
from .findings import JudgedRun, fold
from .junit import build_suites
from .pairwise import pairwise_document
from .rdma_expect import used_by_host
from .run_data import RunData
from .run_stop import run_stop
from .summary import bandwidth_table, host_rows, suite_totals
from .transport_report import analyze_run
from .verdict import exit_class, findings

__all__ = ["JudgedRun", "judge_run"]  # JudgedRun: the model (core/findings.py) this judge builds


def judge_run(run: RunData, ranks_launched: bool = True, check_mode: bool = False) -> JudgedRun:
    """Judge ``run`` once (``ranks_launched``: ranks were launched, a run without any is an
    error; ``check_mode``: the run was a dry run, which its renderings say)."""
    used = used_by_host(run)  # the NICs NCCL used, read from its logs once
    stop = run_stop(run)
    transport = analyze_run(run)
    pairwise = pairwise_document(run, used)
    ranked = ((rank, doc) for host in run.hosts for rank, doc in host.ranks.items())
    rows = run_bandwidth(ranked)
    expectations = evaluate(run, pairwise, used, rows)
    suites = build_suites(
        run,
        stop=stop,
        transport=transport,
        pairwise=pairwise,
        expectations=expectations,
        ranks_launched=ranks_launched,
    )
    found = findings(run, suites, pairwise, stop)
    totals = suite_totals(suites)
    failed = totals["failures"] + totals["errors"] > 0 or not suites
    classes, chosen = exit_class(found, failed)
    return JudgedRun(
        run=run,
        check_mode=check_mode,
        stop=stop,
        transport=transport,
        pairwise=pairwise,
        expectations=expectations,
        suites=suites,
        findings=found,
        folded=fold(found),
        totals=totals,
        failed=failed,
        hosts=host_rows(run, suites),
        bandwidth=bandwidth_table(run, expectations, rows.rank_busbw),
        classes=classes,
        exit_class=chosen,
        rows=rows,
    )
