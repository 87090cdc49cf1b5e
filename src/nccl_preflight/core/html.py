# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""reports/<run-id>/report.html: one self-contained page rendered from a jinja2 template.

The page needs no network when viewed (CSS and SVG inline) and links only relatively to the files
beside it, so the run directory can be archived as is. Everything that came from the inventory or a
node is escaped by jinja2's autoescape; only the SVG drawn here (core/plots.py escapes its text) is
inserted as markup. Sections for data other parts may add later (the pairwise matrix, the transport
each host used) are drawn only when that data is present (contract in docs/design.md).
A rendering of the judged run (src/nccl_preflight/core/judged_run.py): it judges nothing again and
reads no other writer's file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from nccl_preflight.node.files import write_atomically

from . import plots as nccl_plots
from .hints import link_speeds_mbps
from .hostlist import ONE_LINE_EACH, compress
from .pairwise import MATRIX_MAX_NODES
from .summary import failing_first, healthy_line
from .verdict import describe

if TYPE_CHECKING:
    from .bandwidth_rows import RunBandwidth
    from .findings import JudgedRun
    from .run_data import RunData

STATUS_ORDER = {"failed": 0, "error": 0, "skipped": 2, "passed": 3}

# The page's own template: it belongs to the code that renders it (the report_html_template
# variable, or the report call's html_template, may name another).
TEMPLATE = Path(__file__).with_name("templates") / "report.html.j2"


def preflight_table(run: RunData) -> dict[str, Any]:
    """Checks as columns (in the order first seen), a row per host that did not pass every check
    it ran (a check failed or in error, the host unreachable or without a pre-flight), a cell per
    status; the others as ``passed``: (how many, their hostlist), or None."""
    checks: dict[str, None] = {}
    rows, passed = [], []
    for host in run.hosts:
        results = (host.preflight or {}).get("results") or []
        for item in results:
            checks.setdefault(str(item.get("check") or "unnamed"), None)
        statuses = {item.get("status") for item in results}
        if host.reachable and results and statuses <= {"passed", "skipped"}:
            passed.append(host.host)
            continue
        cells: dict[str, dict[str, str]] = {}
        for item in results:
            text = str(item.get("message") or "")
            if item.get("hint"):
                text += f" Fix: {item['hint']}"
            name = str(item.get("check") or "unnamed")
            cells[name] = {"status": str(item.get("status") or "?"), "message": text}
        rows.append(
            {"host": host.host, "reachable": host.reachable, "ran": bool(cells), "cells": cells}
        )
    every = (f"{len(passed)} host{'s' if len(passed) != 1 else ''}", compress(passed))
    return {"checks": list(checks), "rows": rows, "passed": every if passed else None}


def pairwise(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    """The pairwise document (src/nccl_preflight/core/pairwise.py, pairwise.json: nodes,
    matrix_busbw_gbps) as a heatmap, when the ranks ran the pairwise rounds."""
    if not isinstance(doc, dict) or not doc.get("nodes"):
        return None
    slow = [v for v in doc.get("verdicts") or [] if v.get("status") in ("slow", "timed out")]
    note = " ".join([str(doc.get("note") or "")] + [str(v.get("message") or "") for v in slow])
    if doc.get("matrix_busbw_gbps") is None and len(doc["nodes"]) > MATRIX_MAX_NODES:
        return {"svg": "", "note": _no_heatmap(doc, note)}
    if not doc.get("matrix_busbw_gbps"):
        return None
    hosts = [str(node.get("host")) for node in doc["nodes"]]
    matrix = [[None if v is None else float(v) for v in row] for row in doc["matrix_busbw_gbps"]]
    if len(matrix) != len(hosts) or any(len(row) != len(hosts) for row in matrix):
        return {"svg": "", "note": "pairwise.json is not a square matrix over its nodes"}
    if nccl_plots.matplotlib_import_error() is not None:
        return {"svg": "", "note": "matplotlib is missing on the control machine"}
    unit = "busbw GB/s (slowest rail, first pass)"
    return {"svg": nccl_plots.heatmap_svg(hosts, matrix, unit), "note": note.strip()}


def _no_heatmap(doc: dict[str, Any], note: str) -> str:
    """Why a big run has no heatmap, and the slow nodes' messages."""
    pairs = sum(1 for p in doc.get("pairs") or [] if p.get("pass") == 1)
    why = (
        f"{len(doc['nodes'])} nodes: the heatmap is drawn up to {MATRIX_MAX_NODES} nodes; "
        f"pairwise.json has every pair measured ({pairs} rail pairs of the first pass) and "
        "summary.md the slowest."
    )
    return f"{why} {note.strip()}".strip()


def transports(analysis: dict[str, Any]) -> list[dict[str, Any]]:
    """Per host, what NCCL used, from the ranks' NCCL INFO logs (``analysis``:
    transport_report.analyze_run): the same rows as summary.md's Transport section; none when
    no rank left an NCCL log to read. Beyond ONE_LINE_EACH hosts, the hosts whose row says the
    same are one row, their hostlist in ``host``."""
    hosts = analysis["hosts"]
    if not any(row.get("net") for row in hosts):
        return []
    keyed = []
    for row in hosts:
        expect_net = row.get("expect_net") or ""
        said = (
            row.get("net") or "",
            f"{expect_net} ({row.get('expect_net_reason') or ''})" if expect_net else "",
            row["said"],
        )
        keyed.append((said, row["host"]))
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for said, host in keyed:
        grouped.setdefault(said, []).append(host)
    pairs = (
        [(said, [host]) for said, host in keyed]
        if len(hosts) <= ONE_LINE_EACH
        else list(grouped.items())
    )
    return [
        {"host": compress(names), "net": net, "expect_net": expect_net, "summary": summary}
        for (net, expect_net, summary), names in pairs
    ]


def busbw_plots(run: RunData, rows: RunBandwidth | None = None) -> tuple[list[dict[str, Any]], str]:
    """([{collective, svg}], why there is none); ``rows``: the run's bandwidth rows when read
    already (judged_run.JudgedRun.rows)."""
    series = nccl_plots.busbw_series(run, rows.measured if rows else None)
    if not series:
        return [], "no rank measured bandwidth in this run"
    speeds = link_speeds_mbps(run)
    link_gbps = min(speeds.values()) / 8000 if speeds else None
    required = rows.thresholds if rows else nccl_plots.thresholds(run)
    plots = []
    for name in sorted(series):
        plots.append(
            {
                "collective": name,
                "svg": nccl_plots.busbw_svg(name, series[name], link_gbps, required.get(name)),
            }
        )
    return plots, ""


def expectations(result: dict[str, Any]) -> dict[str, Any]:
    """Each collective's busbw against the expected (as summary.md; ``result``:
    src/nccl_preflight/core/bandwidth_expectation.py's evaluate): {rows: [{collective, size,
    measured, expected, percent, verdict, source}], notes: [str]}."""
    rows, unjudged = [], {}
    for r in result["collectives"]:
        if r["verdict"] == "not judged":
            unjudged.setdefault(str(r["why"]), []).append(str(r["collective"]))
            continue
        rows.append(
            {
                "collective": str(r["collective"]),
                "size": str(r["size_bytes"]),
                "measured": f"{r['measured_gbps']:.4g}",
                "expected": f"{r['expected_gbps']:.4g}",
                "percent": f"{r['percent']:g}%",
                "verdict": str(r["verdict"]),
                "source": str(r["source"]),
            }
        )
    notes = [f"not judged ({', '.join(names)}): {why}" for why, names in unjudged.items()]
    if result["baseline"]:
        drops = "; ".join(
            f"{d['what']}: {d['now_gbps']:.4g} GB/s, was {d['then_gbps']:.4g} ({d['percent']:g}%)"
            for d in result["drops"]
        )
        notes.append(
            f"baseline {result['baseline']}: "
            + (result["baseline_error"] or drops or "nothing dropped more than 10%")
        )
    return {"rows": rows, "notes": notes}


def links(run: RunData, run_dir: Path) -> list[dict[str, Any]]:
    """Relative links to every rank's log and JSON (the files read_run read) and each host's own
    files, when present."""
    rows = []
    for host in run.hosts:
        base = quote(host.host, safe="")

        def href(name: str, base: str = base, folder: str = host.host) -> str | None:
            return f"{base}/{quote(name)}" if (run_dir / folder / name).is_file() else None

        ranks = []
        for rank in host.expected_ranks():
            doc = host.ranks.get(rank) or {}
            has_json = rank in host.ranks or rank in host.unreadable
            ranks.append(
                {
                    "rank": rank,
                    "status": str(doc.get("status") or "no result"),
                    "log": f"{base}/rank-{rank}.log" if rank in host.rank_logs else None,
                    "json": f"{base}/rank-{rank}.json" if has_json else None,
                }
            )
        extra = [
            {"name": name, "href": href(name)}
            for name in ("torchrun.log", "launch.json", "nccl.env")
            if href(name)
        ]
        rows.append({"host": host.host, "ranks": ranks, "extra": extra})
    return rows


def _folded(rows: list[dict[str, Any]], healthy: set[str]) -> dict[str, Any]:
    """``rows`` (one per host) as {shown: the rows of hosts not healthy, folded: the others}."""
    return {
        "shown": [row for row in rows if row["host"] not in healthy],
        "folded": [row for row in rows if row["host"] in healthy],
    }


def headline(hosts: list[str]) -> str:
    """The failing hosts as the page's header names them: each, or beyond ONE_LINE_EACH how
    many and their hostlist."""
    if len(hosts) <= ONE_LINE_EACH:
        return ", ".join(hosts)
    return f"{len(hosts)} hosts: {compress(hosts)}"


def predicted_skips(plan: dict[str, Any]) -> dict[str, Any]:
    """plan.json's predicted_skips (the support table of nccl_check.py, known before launch):
    {backend, skips: [{test, reason}]}; the template escapes every string."""
    skips = [
        {"test": str(s.get("test") or "?"), "reason": str(s.get("reason") or "")}
        for s in plan.get("predicted_skips") or []
        if isinstance(s, dict)
    ]
    return {"backend": str(plan.get("backend") or "?"), "skips": skips}


def context(judged: JudgedRun, run_dir: Path) -> dict[str, Any]:
    """Everything the template shows; plain data, escaped by the template."""
    run, chosen, folded = judged.run, judged.exit_class, judged.folded
    causes = [
        {**f.to_json(), "consequences": [c.to_json() for c in folded.consequences_of(f)]}
        for f in folded.heads
        if not f.consequence
    ]
    failing_hosts = list(dict.fromkeys(f["host"] for f in causes if f["host"]))
    shown, healthy = failing_first(judged.hosts, judged.findings, folded)
    plots, plots_note = busbw_plots(run, judged.rows)
    files = [
        {"name": n, "href": n}
        for n in ("junit.xml", "summary.md", "verdict.json", "plan.json")
        if (run_dir / n).is_file() or n in ("junit.xml", "summary.md", "verdict.json")
    ]
    return {
        "run_id": run.run_id,
        "passed": chosen.name == "passed",
        "verdict": {"class": chosen.name, "exit_code": chosen.code, "meaning": chosen.meaning},
        "verdict_text": describe(chosen.name),
        "check_mode": judged.check_mode,
        "failing_hosts": headline(failing_hosts),
        "causes": causes,
        # Consequences without a pointer (nothing found explains them): listed after the causes.
        "consequences": [f.to_json() for f in folded.heads if f.consequence],
        "plan": run.plan,
        "totals": judged.totals,
        "hosts": shown,
        "healthy": {"rows": healthy, "says": healthy_line(healthy)} if healthy else None,
        "predicted": predicted_skips(run.plan or {}),
        "preflight": preflight_table(run),
        "plots": plots,
        "plots_note": plots_note,
        "expected": expectations(judged.expectations),
        "pairwise": pairwise(judged.pairwise),
        "transports": transports(judged.transport),
        "links": _folded(links(run, run_dir), {row["host"] for row in healthy}),
        "files": files,
    }


def render(template: Path, data: dict[str, Any]) -> str:
    """The template with autoescape on for every value (StrictUndefined: a typo fails loudly)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template.parent)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template(template.name).render(**data)


def write_html(run_dir: Path, template: Path, judged: JudgedRun) -> Path:
    """run_dir/report.html: the template rendered from the judged run."""
    path = run_dir / "report.html"
    write_atomically(path, render(template, context(judged, run_dir)))
    return path
