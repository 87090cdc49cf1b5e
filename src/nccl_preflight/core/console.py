# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The run's closing summary as plain text lines for a terminal or a CI log.

Rendered from the report's own result (src/nccl_preflight/core/report_run.py: the summary's hosts
and bandwidth, the verdict's class and findings), never from summary.md. Plain aligned lines: no
Markdown, no escapes, no colour; every character that would move the cursor or colour a terminal
(control characters, ESC) is taken out of what the nodes answered. plugins/callback/
nccl_console.py prints the lines once, after the play recap. Causes and their consequences are
folded as summary.md and report.html fold them: the judged run's one folding (core/findings.py
Folded; a caller that holds only verdict.json gets it from the model too: findings.folded_verdict).
Only the standard library.

At most MAX_LINES lines at any size (issue 37): beyond HOST_TABLE_MAX hosts the hosts are three
lines (the failing, the affected and the healthy ones, each a count and a Slurm hostlist), and the
failures get the lines the other sections leave, then a count of the rest and where they are.
"""

from __future__ import annotations

import re
from typing import Any

from .findings import Finding, Folded
from .hostlist import ONE_LINE_EACH, compress

# C0 and C1 control characters and DEL: none reaches a terminal from a node's answer.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
INDENT = "  "
MAX_FINDINGS = 20  # causes shown at most
MAX_LINES = 40  # the whole summary at most
HOST_TABLE_MAX = ONE_LINE_EACH  # more hosts: a line per status with their hostlist
MIN_FAILURE_LINES = 8  # what the failures get at least, whatever the other sections took
LINE_MAX_LINES = 3  # lines of one finding's what, or fix, shown at most
CONSEQUENCES_SHOWN = 2  # consequences listed under their cause, then a count
HOSTLIST_CHARS = 200  # a hostlist longer than this is cut, with the count of its hosts


def plain(value: Any) -> str:
    """``value`` as one line of text: every control character (newline, tab, ESC) a space."""
    return _CONTROL.sub(" ", str(value)).strip()


def _plain_lines(value: Any) -> list[str]:
    """``value``'s lines, each made plain; at least one."""
    return [plain(line) for line in str(value).splitlines()] or [""]


def table(
    header: list[str], rows: list[list[Any]], right: frozenset[int] = frozenset()
) -> list[str]:
    """Columns two spaces apart, each as wide as its widest cell; ``right``: the columns (by
    index) aligned to the right (numbers)."""
    cells = [[plain(c) for c in header]] + [[plain(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = []
    for row in cells:
        parts = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append((INDENT + "  ".join(parts)).rstrip())
    return lines


def rank_span(ranks: list[Any]) -> str:
    """[0, 1, 2, 5] -> '0-2,5'; '-' when none."""
    numbers = sorted({int(r) for r in ranks if r is not None})
    spans: list[str] = []
    start = previous = None
    for number in [*numbers, None]:
        if start is not None and (number is None or number != previous + 1):
            spans.append(str(start) if start == previous else f"{start}-{previous}")
            start = None
        if number is not None and start is None:
            start = number
        previous = number
    return ",".join(spans) or "-"


def _host_status(row: dict[str, Any], failing: set[str], affected: set[str]) -> str:
    if not row.get("reachable", True):
        return "UNREACHABLE"
    ranks = len(row.get("ranks") or [])
    failed = int(row.get("ranks_failed") or 0)
    if row.get("host") in affected:  # every finding of it folded under another host's cause
        lost = f": {failed} of {ranks} ranks failed" if failed else ""
        return f"affected (a consequence of another host's failure){lost}"
    if failed:
        return f"FAILED: {failed} of {ranks} ranks failed"
    if row.get("host") in failing:
        return "FAILED"
    return "ok" if ranks else "ok, not launched"


def hostlist_line(names: list[str], limit: int = HOSTLIST_CHARS) -> str:
    """``names`` as one Slurm hostlist (core/hostlist.py compress), cut after ``limit``
    characters at a name's end, saying so."""
    text = plain(compress(names))
    if len(text) <= limit:
        return text
    cut = text.rfind(",", 0, limit)
    return f"{text[: max(cut, 0)]},... (summary.md lists all {len(names)})"


def _statuses(result: dict[str, Any], folded: Folded) -> list[tuple[dict[str, Any], str]]:
    """Every host row with its status in words (_host_status)."""
    failing = {f.host for f in folded.heads}
    named = {f.host for f in folded.heads} | {c.host for u in folded.under.values() for c in u}
    affected = named - failing
    return [(row, _host_status(row, failing, affected)) for row in result.get("hosts") or []]


def _host_lines(result: dict[str, Any], folded: Folded) -> list[str]:
    """A row per host up to HOST_TABLE_MAX hosts; beyond, a line per kind of status."""
    statuses = _statuses(result, folded)
    if not statuses:
        return []
    if len(statuses) > HOST_TABLE_MAX:
        return _host_groups(statuses)
    rows = [
        [
            row.get("host"),
            "-" if row.get("node_rank") is None else row["node_rank"],
            rank_span(row.get("ranks") or []),
            row.get("preflight") or "",
            status,
        ]
        for row, status in statuses
    ]
    header = ["host", "node rank", "ranks", "pre-flight", "status"]
    return ["", "Hosts:", *table(header, rows, right=frozenset({1}))]


def _host_groups(statuses: list[tuple[dict[str, Any], str]]) -> list[str]:
    """The hosts by status: failing (failed, unreachable), affected (by another's failure), ok."""
    groups: dict[str, list[str]] = {"failing": [], "affected": [], "ok": []}
    for row, status in statuses:
        kind = next((k for k in ("ok", "affected") if status.startswith(k)), "failing")
        groups[kind].append(str(row.get("host")))
    counts = ", ".join(f"{len(names)} {kind}" for kind, names in groups.items() if names)
    lines = ["", f"Hosts ({len(statuses)}: {counts}):"]
    width = max(len(kind) for kind, names in groups.items() if names)
    for kind, names in groups.items():
        if names:
            lines.append(f"{INDENT}{kind.ljust(width)}  {len(names):>5}  {hostlist_line(names)}")
    return lines


def _where(item: Finding) -> str:
    where = plain(item.host)
    if item.rank is not None:
        where += f" rank {plain(item.rank)}"
    return f"{where} {plain(item.test)}"


def _cut(lines: list[str]) -> list[str]:
    """At most LINE_MAX_LINES of a finding's text, the last saying what was left out."""
    shown = [line for line in lines if line][:LINE_MAX_LINES] or [""]
    left = len([line for line in lines if line]) - len(shown)
    return [*shown[:-1], f"{shown[-1]} (+{left} lines in verdict.json)"] if left > 0 else shown


def _cause_lines(number: int, item: Finding, consequences: list[Finding]) -> list[str]:
    """One cause: where and what, its fix, the first consequences it explains and their count."""
    what = _cut(_plain_lines(item.what))
    lines = [f"{INDENT}{number}. {_where(item)}: {what[0]}"]
    lines += [f"{INDENT}   {line}" for line in what[1:]]
    fix = _cut(_plain_lines(item.fix))
    lines.append(f"{INDENT}   fix: {fix[0]}")
    lines += [f"{INDENT}        {line}" for line in fix[1:]]
    for consequence in consequences[:CONSEQUENCES_SHOWN]:
        first = _plain_lines(consequence.what)[0]
        lines.append(f"{INDENT}   consequence: {_where(consequence)}: {first}")
    more = consequences[CONSEQUENCES_SHOWN:]
    if more:
        hosts = hostlist_line(list(dict.fromkeys(c.host for c in more)), 80)
        lines.append(f"{INDENT}   ... and {len(more)} more consequences on {hosts}")
    return lines


def _finding_lines(folding: Folded, budget: int) -> list[str]:
    """Each cause numbered with its fix; the findings it explains folded under it, without a fix
    of their own (verdict.json's ``cause`` pointers; src/nccl_preflight/core/verdict.py); in
    ``budget`` lines, then how many causes are left and on which hosts."""
    causes = folding.heads
    if not causes:
        return []
    folded = sum(map(len, folding.under.values()))
    counts = f"{len(causes)}" + (f", plus {folded} folded under their causes" if folded else "")
    lines = ["", f"Failures ({counts}):"]
    shown = 0
    for number, item in enumerate(causes[:MAX_FINDINGS], 1):
        block = _cause_lines(number, item, folding.consequences_of(item))
        room = budget - len(lines) - (1 if number < len(causes) else 0)
        if shown and len(block) > room:
            break
        lines += block
        shown = number
    if len(causes) > shown:
        rest = causes[shown:]
        hosts = list(dict.fromkeys(f.host for f in rest if f.host))
        on = f", on {len(hosts)} host(s): {hostlist_line(hosts, 120)}" if hosts else ""
        lines.append(f"{INDENT}... and {len(rest)} more in verdict.json and summary.md{on}")
    return lines


def _size(size: Any) -> str:
    value = float(size or 0)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} B" if unit == "B" else f"{value:.4g} {unit}"
        value /= 1024
    return ""


def _of_expected(row: dict[str, Any]) -> str:
    if row.get("percent_of_expected") is None:
        return "-"
    judged = "" if row.get("judged_size", True) else " (latency-bound, not judged)"
    return f"{row['percent_of_expected']:g}%{judged}"


def _bandwidth_lines(result: dict[str, Any]) -> list[str]:
    bandwidth = result.get("bandwidth") or []
    if not bandwidth:
        return []
    header = ["collective", "size", "ranks", "min", "median", "max", "slowest rank", "of expected"]
    rows = [
        [
            str(row.get("collective") or "").removeprefix("bandwidth_"),
            _size(row.get("size_bytes")),
            row.get("ranks"),
            f"{float(row.get('busbw_min_gbps') or 0):.3f}",
            f"{float(row.get('busbw_median_gbps') or 0):.3f}",
            f"{float(row.get('busbw_max_gbps') or 0):.3f}",
            row.get("slowest_rank"),
            _of_expected(row),
        ]
        for row in bandwidth
    ]
    title = "Bus bandwidth at the largest size (GB/s, each rank's own time):"
    return ["", title, *table(header, rows, right=frozenset({1, 2, 3, 4, 5, 6}))]


def console_lines(result: dict[str, Any], folded: Folded) -> list[str]:
    """The closing summary of the report's ``result``: verdict, hosts, failures with their fixes,
    bus bandwidth, where the report is; plain lines, none of them ending in a space; at most
    MAX_LINES at any size (the failures take what the other sections leave). ``folded``: the
    judged run's findings, folded (JudgedRun.folded, or findings.folded_verdict of verdict.json's
    findings)."""
    verdict = "FAILED" if result.get("verdict") == "failed" else "PASSED"
    check = " (check mode)" if result.get("check_mode") else ""
    totals = result.get("totals") or {}
    lines = [
        f"nccl-preflight run {plain(result.get('run_id') or '?')}: {verdict}{check}",
        f"{INDENT}class {plain(result.get('exit_class') or '?')} (exit code "
        f"{plain(result.get('exit_code'))} with bin/nccl-preflight); "
        f"{totals.get('tests', 0)} tests, {totals.get('failures', 0)} failures, "
        f"{totals.get('errors', 0)} errors, {totals.get('skipped', 0)} skipped",
    ]
    if check:
        lines.append(f"{INDENT}a dry run: only the read-only checks ran; no rank was launched")
    lines += _host_lines(result, folded)
    report_dir = plain(result.get("report_dir") or "")
    tail = [
        *_bandwidth_lines(result),
        "",
        f"Report: {plain(result.get('html') or '') or report_dir + '/summary.md'}",
        f"{INDENT}beside it: summary.md, verdict.json, junit.xml in {report_dir}",
    ]
    budget = max(MAX_LINES - len(lines) - len(tail), MIN_FAILURE_LINES)
    return lines + _finding_lines(folded, budget) + tail
