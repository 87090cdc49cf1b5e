# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""One run, read once and judged once: the object every report file renders.

src/nccl_preflight/core/report_run.py reads reports/<run-id>/ (run_data.read_run) and calls
judge_run once; junit.xml and junit/*.xml (junit.write_report), summary.md (summary.summarize),
verdict.json (verdict.verdict_document), report.html (html.write_html), pairwise.json and the
console lines are renderings of the JudgedRun it returns: none of them judges again or reads a
file another writer wrote (docs/design.md, "The report").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .bandwidth_expectation import evaluate
from .bandwidth_rows import RunBandwidth, run_bandwidth
from .exit_classes import ExitClass
from .junit import SuiteFile, build_suites
from .pairwise import pairwise_document
from .rdma_expect import used_by_host
from .run_data import RunData
from .run_stop import RunStop, run_stop
from .summary import bandwidth_table, host_rows, suite_totals
from .transport_report import analyze_run
from .verdict import exit_class, findings


@dataclass(frozen=True)
class JudgedRun:
    """A run (its collected files) with every judgement of it, each made once."""

    run: RunData
    check_mode: bool  # the run was ansible-playbook --check: only the read-only checks ran
    stop: RunStop | None  # the stage that stopped the run before its ranks started (run_stop)
    transport: dict[str, Any]  # what NCCL used, per rank and host (transport_report.analyze_run)
    pairwise: dict[str, Any] | None  # pairwise.json's document (pairwise.pairwise_document)
    expectations: dict[str, Any]  # busbw against the expected and the baseline (evaluate)
    suites: list[SuiteFile]  # every testcase: pre-flight, ranks, transport, pairwise, bandwidth
    findings: list[dict[str, Any]]  # verdict.json's findings, with ids and cause pointers
    totals: dict[str, int]  # tests, failures, errors, skipped over every suite
    failed: bool  # a failed or erroneous testcase anywhere, or no suite at all
    hosts: list[dict[str, Any]]  # per host: pre-flight in words, ranks passed and failed
    bandwidth: list[dict[str, Any]]  # busbw per collective at its largest size
    classes: list[str]  # every class found, in severity order
    exit_class: ExitClass  # the run's class: the most severe finding's
    rows: RunBandwidth | None = None  # every rank's bandwidth rows, read once (run_bandwidth)

    @property
    def run_id(self) -> str:
        return self.run.run_id


def judge_run(run: RunData, expect_ranks: bool = True, check_mode: bool = False) -> JudgedRun:
    """Judge ``run`` once (``expect_ranks``: a run without any rank is an error; ``check_mode``:
    the run was a dry run, which its renderings say)."""
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
        expect_ranks=expect_ranks,
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
        totals=totals,
        failed=failed,
        hosts=host_rows(run, suites),
        bandwidth=bandwidth_table(run, expectations, rows.rank_busbw),
        classes=classes,
        exit_class=chosen,
        rows=rows,
    )
