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

import statistics
from typing import Any

from .bandwidth_expectation import evaluate, expected_figures
from .bandwidth_rows import RANK_BUSBW, ByName, by_size, run_bandwidth
from .findings import JudgedRun, SuiteFile, fold
from .junit import build_suites
from .pairwise import pairwise_document
from .rdma_expect import used_by_host
from .run_data import RunData
from .run_stop import run_stop
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


def suite_totals(files: list[SuiteFile]) -> dict[str, int]:
    """Tests, failures, errors and skipped over every suite."""
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for item in files:
        for key, value in item.suite.counts().items():
            totals[key] += value
    return totals


def host_rows(run: RunData, files: list[SuiteFile]) -> list[dict[str, Any]]:
    """Per host: reachable, its pre-flight in words, how many of its ranks passed and failed,
    and ``ok``: reachable, no pre-flight check and no rank failed or in error."""
    preflight: dict[str, dict[str, int]] = {}
    ranks: dict[str, list[SuiteFile]] = {}
    for item in files:
        if item.kind == "preflight":
            preflight.setdefault(item.host, item.suite.counts())
        elif item.kind == "rank":
            ranks.setdefault(item.host, []).append(item)
    hosts = []
    for host in run.hosts:
        c = preflight.get(host.host)
        pre_failed = c["failures"] + c["errors"] if c else 0
        if c is None:
            pre_text = "not run"
        else:
            passed = c["tests"] - pre_failed - c["skipped"]
            pre_text = f"{passed} passed, {pre_failed} failed, {c['skipped']} skipped"
        mine = ranks.get(host.host, [])
        failed = sum(1 for f in mine if not f.suite.ok)
        hosts.append(
            {
                "host": host.host,
                "node_rank": host.node_rank,
                "reachable": host.reachable,
                "preflight": pre_text,
                "ranks_passed": len(mine) - failed,
                "ranks_failed": failed,
                "ranks": [f.rank for f in mine],
                "ok": host.reachable and not pre_failed and not failed,
            }
        )
    return hosts


def bandwidth_table(
    run: RunData, expectations: dict[str, Any], read: ByName | None = None
) -> list[dict[str, Any]]:
    """busbw per collective at its largest measured size, over the ranks that measured it, with
    its share of the expected figure (``expectations``: bandwidth_expectation.evaluate);
    ``read``: the ranks' rank_busbw_gbps when read already (RunBandwidth.rank_busbw)."""
    ranked = ((rank, result) for host in run.hosts for rank, result in host.ranks.items())
    per_test = by_size(ranked, RANK_BUSBW) if read is None else read
    figures, min_bytes = expected_figures(expectations) if per_test else ({}, 0)
    table = []
    for name in sorted(per_test):
        size = max(per_test[name])
        ranks, measured = per_test[name][size]
        values = list(zip(ranks, map(float, measured), strict=True))
        slowest = min(values, key=lambda item: item[1])
        busbw = [value for _, value in values]
        expected = figures.get(name.removeprefix("bandwidth_"), (None, ""))[0]
        median = statistics.median(busbw)
        table.append(
            {
                "collective": name,
                "size_bytes": size,
                "ranks": len(values),
                "busbw_min_gbps": min(busbw),
                "busbw_median_gbps": median,
                "busbw_max_gbps": max(busbw),
                "slowest_rank": slowest[0],
                # measured / expected (src/nccl_preflight/core/bandwidth_expectation.py),
                # judged from min_bytes up
                "expected_gbps": expected,
                "percent_of_expected": round(100 * median / expected, 1) if expected else None,
                "judged_size": size >= min_bytes,
            }
        )
    return table
