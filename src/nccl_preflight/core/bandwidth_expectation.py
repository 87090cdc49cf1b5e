# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Bandwidth judged against what the link should give, and against an earlier run.

Pure functions on the control machine (docs/design.md, "Expected bandwidth and baseline"); the
settings come from plan.json's ``bandwidth`` (written by roles/launch from nccl_expected_busbw,
nccl_busbw_warn, nccl_busbw_crit, nccl_busbw_efficiency, nccl_busbw_min_bytes, nccl_baseline) and
each host's ``link_speed_mbps``.

* Expected busbw of a collective: ``expected_busbw[collective]`` (GB/s) when given, else the
  slowest host's fabric x efficiency (nccl-tests' NCCL_TESTS_MIN_BW rule: 0.9): its RDMA port
  rate x the NICs in use when it has active RDMA ports, else its fabric link speed
  (src/nccl_preflight/core/rdma_expect.py).
* Judged only at a size of at least ``min_bytes`` (smaller messages are latency-bound): the
  largest such size of the sweep, busbw as nccl-tests prints it (the same on every rank).
  Below ``warn`` x expected: a warning; below ``crit`` x expected: a failure.
* Baseline: every collective (busbw at the largest size both runs measured) and every pair of the
  pairwise rounds compared with the earlier run; a drop of more than 10% is a failure.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .bandwidth_rows import ByName, RunBandwidth, by_size
from .config import defaults
from .findings import Case, Suite
from .rdma_expect import NicsUsed, cluster_figure, used_by_host

if TYPE_CHECKING:
    from .run_data import RunData

# plan.json's bandwidth keys -> the variable whose default (core/config.py defaults()) a plan
# without the key is judged with (a plan written when the run was cut short has none).
BANDWIDTH_VARIABLES = {
    "expected_busbw": "nccl_expected_busbw",
    "warn": "nccl_busbw_warn",
    "crit": "nccl_busbw_crit",
    "efficiency": "nccl_busbw_efficiency",
    "min_bytes": "nccl_busbw_min_bytes",
    "baseline": "nccl_baseline",
}
BASELINE_DROP = 0.10
_RANK_FILE = re.compile(r"^rank-\d+\.json$")


def settings(plan: dict[str, Any]) -> dict[str, Any]:
    """plan.json's bandwidth, a key it lacks from the variables' defaults."""
    plain = defaults()
    found = {key: plain[name] for key, name in BANDWIDTH_VARIABLES.items()}
    found.update({k: v for k, v in (plan.get("bandwidth") or {}).items() if v is not None})
    return found


def collective_rows(
    rank_docs: list[dict[str, Any]], read: ByName | None = None
) -> dict[str, dict[int, list[float]]]:
    """collective -> size -> every rank's nccl-tests busbw at that size; ``read``: by_size of
    ``rank_docs`` when made already (RunBandwidth.busbw)."""
    table: dict[str, dict[int, list[float]]] = {}
    for name, sizes in (by_size(enumerate(rank_docs)) if read is None else read).items():
        if name.startswith("bandwidth_"):
            per_size = table.setdefault(name.removeprefix("bandwidth_"), {})
            for size, (_, values) in sizes.items():
                per_size.setdefault(size, []).extend(map(float, values))
    return table


def fabric_expectation(
    plan: dict[str, Any],
    efficiency: float,
    used: dict[str, tuple[list[str], list[int]]] | None = None,
    rails: int = 1,
) -> tuple[float | None, str]:
    """(GB/s, where it comes from) from the slowest host's fabric: its RDMA ports' rate x the
    NICs in use (``used``: src/nccl_preflight/core/rdma_expect.py.used_by_host), else its
    interface's link speed; or (None, why not)."""
    return cluster_figure(plan, used or {}, efficiency, rails)


def judge_expectations(
    plan: dict[str, Any],
    rank_docs: list[dict[str, Any]],
    used: dict[str, tuple[list[str], list[int]]] | None = None,
    read: ByName | None = None,
) -> dict[str, Any]:
    """Per collective: measured, expected, percent, verdict (ok|warn|crit|not judged);
    ``read``: as collective_rows'."""
    conf = settings(plan)
    fabric, fabric_source = fabric_expectation(plan, float(conf["efficiency"]), used)
    rows = []
    for collective, sizes in sorted(collective_rows(rank_docs, read).items()):
        explicit = (conf["expected_busbw"] or {}).get(collective)
        expected = float(explicit) if explicit is not None else fabric
        source = "nccl_expected_busbw" if explicit is not None else fabric_source
        big = [s for s in sizes if s >= int(conf["min_bytes"])]
        row: dict[str, Any] = {
            "collective": collective,
            "expected_gbps": expected,
            "source": source,
        }
        if expected is None:
            row.update(verdict="not judged", why=f"no expected busbw: {source}")
        elif not big:
            row.update(
                verdict="not judged",
                why=f"the sweep never reached {conf['min_bytes']} B (largest {max(sizes)} B), "
                "where bandwidth, not latency, decides: raise --max-bytes in nccl_check_args",
            )
        else:
            size = max(big)
            measured = float(statistics.median(sizes[size]))
            ratio = measured / expected if expected > 0 else 0.0
            verdict = (
                "crit"
                if ratio < float(conf["crit"])
                else "warn"
                if ratio < float(conf["warn"])
                else "ok"
            )
            row.update(
                size_bytes=size,
                measured_gbps=measured,
                percent=round(100 * ratio, 1),
                verdict=verdict,
            )
        rows.append(row)
    return {"settings": conf, "collectives": rows}


def _message(row: dict[str, Any], conf: dict[str, Any]) -> str:
    if row["verdict"] == "not judged":
        return f"{row['collective']}: not judged: {row['why']}"
    limit = {"crit": conf["crit"], "warn": conf["warn"]}.get(row["verdict"])
    text = (
        f"{row['collective']}: busbw {row['measured_gbps']:.4g} GB/s at {row['size_bytes']} B is "
        f"{row['percent']:g}% of the expected {row['expected_gbps']:.4g} GB/s ({row['source']})"
    )
    if limit is None:
        return text
    return text + (
        f", below {float(limit) * 100:g}%: check the link speed (ethtool, ibstat), the interface "
        "NCCL uses (NCCL_SOCKET_IFNAME, NCCL_IB_HCA) and the pairwise rounds (nccl_pairwise=always)"
    )


# --------------------------------------------------------------------------------------------
# Baseline
# --------------------------------------------------------------------------------------------


def read_rank_docs(run_dir: Path) -> list[dict[str, Any]]:
    docs = []
    for path in sorted(Path(run_dir).glob("*/rank-*.json")):
        if _RANK_FILE.match(path.name):
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(doc, dict):
                docs.append(doc)
    return docs


def _largest_common(now: dict[int, list[float]], then: dict[int, list[float]]) -> int | None:
    common = set(now) & set(then)
    return max(common) if common else None


def compare_baseline(
    rank_docs: list[dict[str, Any]],
    base_docs: list[dict[str, Any]],
    pairs_now: list[dict[str, Any]],
    pairs_then: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Every collective and pair that dropped more than BASELINE_DROP against the baseline."""
    drops = []
    now, then = collective_rows(rank_docs), collective_rows(base_docs)
    for collective in sorted(set(now) & set(then)):
        size = _largest_common(now[collective], then[collective])
        if size is None:
            continue
        a = float(statistics.median(now[collective][size]))
        b = float(statistics.median(then[collective][size]))
        if b > 0 and a < (1 - BASELINE_DROP) * b:
            drops.append({"what": collective, "size_bytes": size, "now_gbps": a, "then_gbps": b})
    earlier = {
        (p["a"], p["b"], p["rail"]): p["busbw_gbps"] for p in pairs_then if p.get("pass") == 1
    }
    for p in pairs_now:
        key = (p["a"], p["b"], p["rail"])
        then = earlier.get(key, 0.0) if p.get("pass") == 1 else 0.0
        if then > 0 and p["busbw_gbps"] < (1 - BASELINE_DROP) * then:
            drops.append(
                {
                    "what": f"pair {p['a']} - {p['b']} rail {p['rail']}",
                    "size_bytes": None,
                    "now_gbps": p["busbw_gbps"],
                    "then_gbps": then,
                }
            )
    for drop in drops:
        drop["percent"] = round(100 * drop["now_gbps"] / drop["then_gbps"], 1)
    return drops


def _pairs(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / "pairwise.json"
    try:
        return list(json.loads(path.read_text(encoding="utf-8")).get("pairs") or [])
    except (OSError, ValueError, AttributeError):
        return []


# --------------------------------------------------------------------------------------------
# Hooks for nccl_junit: suites and summary lines
# --------------------------------------------------------------------------------------------


def _docs(run: RunData) -> list[dict[str, Any]]:
    return [doc for host in run.hosts for doc in host.ranks.values()]


def evaluate(
    run: RunData,
    pairwise: dict[str, Any] | None,
    used: NicsUsed | None = None,
    rows: RunBandwidth | None = None,
) -> dict[str, Any]:
    """Expectations and baseline of a run; reads only the baseline's files (plan.json's
    expect.baseline: the earlier run's directory, resolved by roles/launch). ``pairwise``: the
    run's pairwise document (src/nccl_preflight/core/pairwise.py), its pairs compared with the
    baseline's; ``used``: rdma_expect.used_by_host(run), read here when not given; ``rows``:
    the run's bandwidth rows when read already (bandwidth_rows.run_bandwidth)."""
    used = used_by_host(run) if used is None else used
    result = judge_expectations(run.plan, _docs(run), used, rows.busbw if rows else None)
    baseline = Path(result["settings"]["baseline"]) if result["settings"]["baseline"] else None
    result["baseline"] = str(baseline) if baseline else ""
    result["baseline_error"] = ""
    result["drops"] = []
    if baseline is not None:
        base_docs = read_rank_docs(baseline)
        if not base_docs:
            result["baseline_error"] = f"no rank result under {baseline} (nccl_baseline)"
        else:
            result["drops"] = compare_baseline(
                _docs(run), base_docs, pairwise["pairs"] if pairwise else [], _pairs(baseline)
            )
    return result


def expected_figures(expectations: dict[str, Any]) -> tuple[dict[str, tuple[float, str]], int]:
    """({collective: (expected GB/s, where it comes from)}, nccl_busbw_min_bytes) of a run's
    ``expectations`` (evaluate), for every table that shows a busbw (summary.md, report.html):
    measured / expected in %."""
    figures = {
        row["collective"]: (float(row["expected_gbps"]), str(row["source"]))
        for row in expectations["collectives"]
        if row["expected_gbps"]
    }
    return figures, int(expectations["settings"]["min_bytes"])


def expectation_suites(result: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """[(path, Suite, host)]: junit/bandwidth.xml (expected_busbw, baseline) when judged;
    ``result``: evaluate's."""
    conf = result["settings"]
    cases = []
    for row in result["collectives"]:
        if row["verdict"] == "not judged":
            continue
        case = Case("expected_busbw", f"bandwidth.{row['collective']}", stdout=_message(row, conf))
        if row["verdict"] == "crit":
            case.fail(_message(row, conf), kind="below expected")
        cases.append(case)
    if result["baseline"]:
        case = Case("baseline", "bandwidth.baseline", stdout=_baseline_text(result))
        if result["baseline_error"]:
            case.error(result["baseline_error"], kind="baseline")
        elif result["drops"]:
            case.fail(_baseline_text(result), kind="dropped")
        cases.append(case)
    if not cases:
        return []
    return [("junit/bandwidth.xml", Suite("bandwidth", cases), "")]


def _drop_text(drop: dict[str, Any]) -> str:
    at = f" at {drop['size_bytes']} B" if drop["size_bytes"] else ""
    return (
        f"{drop['what']}{at}: {drop['now_gbps']:.4g} GB/s, was {drop['then_gbps']:.4g} "
        f"({drop['percent']:g}%)"
    )


def _baseline_text(result: dict[str, Any]) -> str:
    if result["baseline_error"]:
        return result["baseline_error"]
    if not result["drops"]:
        return f"nothing dropped more than {BASELINE_DROP:.0%} against {result['baseline']}"
    drops = "; ".join(_drop_text(d) for d in result["drops"])
    return f"dropped more than {BASELINE_DROP:.0%} against {result['baseline']}: {drops}"


def expectation_markdown(result: dict[str, Any]) -> list[str]:
    """summary.md's expectation part, from evaluate's ``result``."""
    conf = result["settings"]
    rows = result["collectives"]
    if not rows and not result["baseline"]:
        return []
    lines = ["", "Bus bandwidth against the expected (measured / expected):", ""]
    judged = [r for r in rows if r["verdict"] != "not judged"]
    if judged:
        lines += [
            "| collective | size | measured GB/s | expected GB/s | % | verdict | expected from |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in judged:
            lines.append(
                f"| {r['collective']} | {r['size_bytes']} | {r['measured_gbps']:.4g} | "
                f"{r['expected_gbps']:.4g} | {r['percent']:g}% | {r['verdict']} | {r['source']} |"
            )
        lines.append("")
    unjudged: dict[str, list[str]] = {}
    for r in rows:
        if r["verdict"] in ("warn", "crit"):
            lines.append(f"- {r['verdict'].upper()}: {_message(r, conf)}")
        elif r["verdict"] == "not judged":
            unjudged.setdefault(r["why"], []).append(r["collective"])
    for why, names in unjudged.items():
        lines.append(f"- not judged ({', '.join(names)}): {why}")
    if result["baseline"]:
        lines.append(f"- baseline: {_baseline_text(result)}")
    return lines
