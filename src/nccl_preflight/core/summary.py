# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The summary of one run (summary.md and the module's result): hosts, bandwidth, problems,
verdict.

summarize renders the judged run (src/nccl_preflight/core/judged_run.py: its hosts, bandwidth
table and totals are the judge's, made once), judging nothing again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .bandwidth_expectation import expectation_markdown
from .hostlist import compress
from .pairwise import pairwise_markdown
from .text import md_escape
from .transport_report import transport_lines

if TYPE_CHECKING:
    from .findings import Case, Finding, Folded, JudgedRun, SuiteFile
    from .run_data import RunData


def _problem(case: Case) -> str:
    """A failed or erroneous testcase in one line: its first line, then its fix."""
    what = case.message.splitlines()[0] if case.message else ""
    fix = case.fix.splitlines()[0] if case.fix else ""
    if fix and not what:
        what = f"Hint: {fix}"
    elif fix and "\n" not in case.message:
        what = f"{what} Hint: {fix}"
    return f"{case.classname} {case.name}: {what}"


def _problems(files: list[SuiteFile]) -> list[tuple[str, str]]:
    """(the id of its finding or "", its line) per failed or erroneous testcase: every one."""
    return [
        (case.finding, _problem(case))
        for item in files
        for case in item.suite.cases
        if case.bad and (case.message or case.fix)
    ]


def folded_problem_lines(problems: list[tuple[str, str]], folded: Folded) -> list[str]:
    """summary.md's problems: each cause, the lines of its consequences indented under it
    (the judged run's folding); a line whose cause has no line of its own stays on top."""
    cause_of = {c.id: cause for cause, under in folded.under.items() for c in under}
    under: dict[str, list[str]] = {}
    top: list[tuple[str, str]] = []  # (the finding's id or "", line)
    for fid, line in problems:
        if fid in cause_of:
            under.setdefault(cause_of[fid], []).append(line)
        else:
            top.append((fid, line))
    shown = {fid for fid, _ in top if fid}
    lines = []
    for fid, line in top:
        lines.append(f"- {md_escape(line)}")
        lines += [f"  - consequence: {md_escape(c)}" for c in under.get(fid, []) if fid]
    for cause_id, rest in under.items():
        if cause_id not in shown:
            lines += [f"- {md_escape(c)}" for c in rest]
    return lines


def _percent_cell(row: dict[str, Any]) -> str:
    if row.get("percent_of_expected") is None:
        return "-"
    late = "" if row.get("judged_size") else " (latency-bound, not judged)"
    return f"{row['percent_of_expected']:g}%{late}"


def _human_bytes(size: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:g} {unit}" if unit == "B" else f"{size:.4g} {unit}"
        size /= 1024  # type: ignore[assignment]
    return str(size)


def predicted_skip_lines(plan: dict[str, Any]) -> list[str]:
    """plan.json's predicted_skips (the support table of nccl_check.py), known before launch."""
    skips = plan.get("predicted_skips") or []
    if not skips:
        return []
    lines = ["", f"Skipped on every rank, as the support table predicts ({plan.get('backend')}):"]
    return lines + [""] + [f"- {s.get('test')}: skipped: {s.get('reason')}" for s in skips]


def _header_lines(
    run: RunData, totals: dict[str, int], failed: bool, check_mode: bool
) -> list[str]:
    """The title (verdict), the check-mode note and the run's shape and counts."""
    return [
        f"# nccl-preflight run {run.run_id}: {'FAILED' if failed else 'PASSED'}"
        + (" (check mode)" if check_mode else ""),
        "",
        *(
            [
                "Check mode (--check): a dry run. Only the read-only checks ran; nothing was "
                "started or written on the nodes and no rank was launched.",
                "",
            ]
            if check_mode
            else []
        ),
        f"world size {run.plan.get('world_size', '?')}, backend {run.plan.get('backend', '?')}, "
        f"master {run.plan.get('master_addr', '?')}:{run.plan.get('master_port', '?')}; "
        f"{totals['tests']} tests, {totals['failures']} failures, {totals['errors']} errors, "
        f"{totals['skipped']} skipped",
    ]


def failing_first(
    hosts: list[dict[str, Any]], found: list[Finding], folded: Folded
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the hosts a finding names or whose row is not ``ok``: first those whose own failure is
    a cause, in the findings' order, then the others in host order; the healthy hosts, in host
    order). summary.md and report.html show the first and fold the second into one row."""
    causes = [f.host for f in folded.heads if f.host]
    named = {f.host for f in found if f.host}
    by_host = {row["host"]: row for row in hosts}
    first = [by_host[h] for h in dict.fromkeys(causes) if h in by_host]
    shown = {row["host"] for row in first}
    rest, healthy = [], []
    for row in hosts:
        if row["host"] not in shown:
            (rest if row["host"] in named or not row.get("ok", True) else healthy).append(row)
    return first + rest, healthy


def _host_row_line(row: dict[str, Any]) -> str:
    node_rank = "" if row["node_rank"] is None else row["node_rank"]
    pre = row["preflight"] if row["reachable"] else f"UNREACHABLE; {row['preflight']}"
    return (
        f"| {md_escape(row['host'])} | {node_rank} | {md_escape(pre)} | "
        f"{row['ranks_passed']} | {row['ranks_failed']} |"
    )


def healthy_line(healthy: list[dict[str, Any]]) -> tuple[str, str]:
    """(how many healthy hosts, their Slurm hostlist) for the one row that stands for them."""
    return f"{len(healthy)} healthy host{'s' if len(healthy) != 1 else ''}", compress(
        [row["host"] for row in healthy]
    )


def _host_table_lines(judged: JudgedRun) -> list[str]:
    """The hosts table, failing first; the healthy hosts one row (how many, their hostlist),
    their own rows in a <details> block under the table."""
    header = [
        "| host | node rank | pre-flight | ranks passed | ranks failed |",
        "|---|---|---|---|---|",
    ]
    shown, healthy = failing_first(judged.hosts, judged.findings, judged.folded)
    lines = ["", *header, *map(_host_row_line, shown)]
    if not healthy:
        return lines
    count, hostlist = healthy_line(healthy)
    texts = {row["preflight"] for row in healthy}
    pre = texts.pop() if len(texts) == 1 else "no check failed"
    passed = sum(row["ranks_passed"] for row in healthy)
    lines.append(f"| {md_escape(hostlist)} ({count}) | | {md_escape(pre)} | {passed} | 0 |")
    lines += ["", f"<details><summary>{count}, one row each</summary>", "", *header]
    return [*lines, *map(_host_row_line, healthy), "", "</details>"]


def _bandwidth_lines(bandwidth: list[dict[str, Any]]) -> list[str]:
    if not bandwidth:
        return []
    lines = [
        "",
        "Bus bandwidth at the largest size (GB/s, each rank's own time):",
        "",
        "| collective | size | ranks | min | median | max | slowest rank | median / expected |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in bandwidth:
        lines.append(
            f"| {md_escape(row['collective'])} | {_human_bytes(row['size_bytes'])} | "
            f"{row['ranks']} | "
            f"{row['busbw_min_gbps']:.3f} | {row['busbw_median_gbps']:.3f} | "
            f"{row['busbw_max_gbps']:.3f} | {row['slowest_rank']} | {_percent_cell(row)} |"
        )
    return lines


def summarize(judged: JudgedRun) -> dict[str, Any]:
    """Host table, bandwidth table, problems, verdict of the judged run; and the same as
    Markdown. A check-mode run (``ansible-playbook --check``: only reads on the nodes) says so
    and carries ``check_mode: true``."""
    run, totals = judged.run, judged.totals
    keyed = _problems(judged.suites)
    problems = [line for _, line in keyed]
    lines = _header_lines(run, totals, judged.failed, judged.check_mode)
    lines += _host_table_lines(judged)
    lines += _bandwidth_lines(judged.bandwidth)
    lines += transport_lines(judged.transport)
    lines += expectation_markdown(judged.expectations) + pairwise_markdown(judged.pairwise)
    lines += predicted_skip_lines(run.plan)
    if problems:
        # Each cause, the problems that are its consequences indented under it.
        lines += ["", "Problems:", ""]
        lines += folded_problem_lines(keyed, judged.folded)
    return {
        "verdict": "failed" if judged.failed else "passed",
        "check_mode": judged.check_mode,
        "totals": totals,
        "hosts": judged.hosts,
        "bandwidth": judged.bandwidth,
        "problems": problems,
        "transport": judged.transport["hosts"],
        "markdown": "\n".join(lines) + "\n",
    }
