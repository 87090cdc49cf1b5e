# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Judge the pairwise rounds of a run: which node, which rail (docs/design.md, "Pairwise").

Pure functions on the control machine. Every rank of files/nccl_check.py --pairwise records its
own figure for each pair it took part in (the ``pairwise`` test of rank-<R>.json, ``details.rows``);
here the rows of all ranks become one node x node matrix per rail and a verdict per node:

* a pair's figure is the slower of its two ranks' own figures;
* the reference is the median over nodes of each node's median pair (the median pair itself
  would be a slow one on 3 nodes with one bad node);
* a pair is slow below ``min_ratio`` x the reference; a node is a suspect on a rail when more
  than half of its pairs on that rail are slow;
* the rank script re-ran every suspect with a fast non-suspect node (pass 2): slow again confirms
  it, fast clears it, so a node is never blamed for its partner;
* the rule works on whatever pairs were measured: all of them, or a few partners per node when
  the first pass is bounded (nccl_pair_rounds); it lives once, in
  src/nccl_preflight/node/pair_schedule.py, which the rank script ships as its sibling;
* two nodes cannot tell which one is bad: both are "undecided", with each node's own intra-node
  figure when it has more than one rank.

The JUnit hook (src/nccl_preflight/core/junit.py) takes a suite with a ``pairwise`` testcase per
node; the report writes ``pairwise.json`` beside summary.md.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nccl_preflight.node.files import write_atomically
from nccl_preflight.node.pair_schedule import (
    PairKey,
    node_values,
    pair_reference,
    pair_suspects,
    pair_values,
)

from .bandwidth_expectation import fabric_expectation, settings
from .findings import Case, Suite
from .rdma_expect import NicsUsed, used_by_host

if TYPE_CHECKING:
    from .run_data import RunData

SCHEMA = 1
RELAUNCH_DIR = "pairwise"  # reports/<run-id>/<host>/pairwise/: the pairwise-only relaunch
RELAUNCH_WHY = (
    "a collective timed out or stalled, so the pairwise rounds ran alone in a second launch "
    "(nccl_pairwise); a pair with the slow node shows where"
)
# pairwise.json, report.html's heatmap and summary.md hold the node x node matrix up to this many
# nodes; beyond, the pairs measured (pairwise.json "pairs") and the slowest of them: with the
# first pass bounded (nccl_pair_rounds) most cells of a big matrix are empty, and 1,024 nodes
# would make a million cells per rail.
MATRIX_MAX_NODES = 32
SLOWEST_SHOWN = 10


# --------------------------------------------------------------------------------------------
# The verdict
# --------------------------------------------------------------------------------------------


def _sig(value: float) -> float:
    """4 significant digits (a pair at 20 KB/s is 2.048e-05 GB/s, not 0)."""
    return float(f"{value:.4g}")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _pct(value: float, reference: float) -> str:
    return f"{100 * value / reference:.0f}%" if reference > 0 else "?"


def judge(
    nodes: Sequence[int],
    hosts: dict[int, str],
    rows: Sequence[dict[str, Any]],
    min_ratio: float,
    unfinished: Sequence[tuple[int, int]] = (),
) -> dict[str, Any]:
    """Verdicts, reference and pairs from every rank's rows (pure; see the module docstring).

    ``unfinished``: node pairs of the round under way when the ranks were stopped that never
    finished (unfinished_pairs()); both of their nodes are "timed out", never passes."""
    first, second, intra = pair_values(rows, 1), pair_values(rows, 2), pair_values(rows, "intra")
    reference = pair_reference(first)
    limit = min_ratio * reference
    decided = len(nodes) >= 3
    suspects = pair_suspects(first, min_ratio) if decided else {}
    pairs = _pair_list(hosts, [(1, first), (2, second), ("intra", intra)], rows, limit)
    per_node = node_values(first)
    by_node: dict[int, list[int]] = {}
    for i, pair in enumerate(pairs):
        for end in {pair["node_a"], pair["node_b"]}:
            by_node.setdefault(end, []).append(i)
    verdicts = []
    for node in nodes:
        values = per_node.get(node, [])
        verdict: dict[str, Any] = {
            "host": hosts.get(node, f"node {node}"),
            "node_rank": node,
            "median_busbw_gbps": _sig(statistics.median(values)) if values else None,
            "rails": [],
            "pairs": by_node.get(node, []),
        }
        verdict.update(_node_status(node, verdict, suspects, second, intra, limit, decided))
        verdict["message"] = _message(verdict, pairs, reference, limit, len(nodes))
        partners = sorted({b if a == node else a for a, b in unfinished if node in (a, b)})
        if partners and verdict["status"] != "slow":
            verdict["status"] = "timed out"
            verdict["message"] = _timed_out_message(verdict, [hosts.get(p, p) for p in partners])
        elif unfinished and verdict["status"] == "not measured":
            verdict["message"] = (
                f"{verdict['host']}: no pair was measured: the ranks were stopped in a round "
                "it rested in, and the rounds after it never ran"
            )
        verdicts.append(verdict)
    note = "" if decided else _undecided_note(len(nodes))
    if unfinished:
        note = "; ".join(
            filter(None, [note, "the ranks were stopped in a round: the rounds after it never ran"])
        )
    return {
        "unfinished": [
            {
                "a": hosts.get(a, f"node {a}"),
                "b": hosts.get(b, f"node {b}"),
                "node_a": a,
                "node_b": b,
            }
            for a, b in unfinished
        ],
        "reference_busbw_gbps": _sig(reference),
        "limit_busbw_gbps": _sig(limit),
        "decided": decided,
        "note": note,
        "pairs": pairs,
        "verdicts": verdicts,
    }


def _timed_out_message(verdict: dict[str, Any], partners: list[Any]) -> str:
    host, median = verdict["host"], verdict["median_busbw_gbps"]
    others = (
        f"its other pairs finished (median {_fmt(median)} GB/s)"
        if median is not None
        else f"no pair of {host} finished"
    )
    return (
        f"{host}: its pair with {', '.join(map(str, partners))} did not finish (timed out): one "
        f"of the two is bad or unreachable; {others}. Check the link between them (ping, "
        "ethtool, the firewall) and the node whose pairs did not finish"
    )


def unfinished_pairs(
    tests: Sequence[tuple[int, dict[str, Any]]], rows: Sequence[dict[str, Any]]
) -> list[tuple[int, int]]:
    """Node pairs of the round under way when the ranks were stopped (each rank's record saves
    it before every round: ``under_way``, ``under_way_pairs``) for which no rank has a row."""
    planned: set[tuple[Any, Any, int, int]] = set()
    for _, details in tests:
        at = details.get("under_way") or {}
        if at.get("pass") in (1, 2):  # intra-node rounds pair local ranks, not nodes
            for a, b in details.get("under_way_pairs") or []:
                planned.add((at["pass"], at.get("round"), min(a, b), max(a, b)))
    done = {
        (r.get("pass"), r.get("round"), *sorted((int(r["node"]), int(r["peer_node"]))))
        for r in rows
    }
    return sorted({(a, b) for key in planned - done for a, b in [key[2:]]})


def _undecided_note(n: int) -> str:
    if n == 2:
        return (
            "two nodes cannot tell which of them is bad: a slow pair is slow for both; add a "
            "third node (or compare each node's own intra-node figure)"
        )
    return "fewer than two nodes: nothing to pair"


def _pair_list(
    hosts: dict[int, str],
    tables: list[tuple[int | str, dict[PairKey, float]]],
    rows: Sequence[dict[str, Any]],
    limit: float,
) -> list[dict[str, Any]]:
    ranks: dict[tuple[int | str, int, int, int], dict[str, Any]] = {}
    for r in rows:  # each rank's own figure, by pass and pair (one pass over the rows)
        a, b = sorted((int(r["node"]), int(r["peer_node"])))
        rail = min(int(r["rail"]), int(r.get("peer_local_rank", r["rail"])))
        ranks.setdefault((r.get("pass"), a, b, rail), {})[str(r.get("rank"))] = r["busbw_gbps"]
    pairs = []
    for pass_, table in tables:
        for (a, b, rail), value in sorted(table.items()):
            by_rank = ranks.get((pass_, a, b, rail), {})
            pairs.append(
                {
                    "pass": pass_,
                    "a": hosts.get(a, f"node {a}"),
                    "b": hosts.get(b, f"node {b}"),
                    "node_a": a,
                    "node_b": b,
                    "rail": rail,
                    "busbw_gbps": value,
                    "by_rank": by_rank,
                    "slow": pass_ != "intra" and value < limit,
                }
            )
    return pairs


def _node_status(
    node: int,
    verdict: dict[str, Any],
    suspects: dict[int, list[int]],
    second: dict[PairKey, float],
    intra: dict[PairKey, float],
    limit: float,
    decided: bool,
) -> dict[str, Any]:
    if verdict["median_busbw_gbps"] is None:
        return {"status": "not measured"}
    if not decided:
        own = {rail: v for (a, _, rail), v in intra.items() if a == node}
        return {"status": "undecided", "intra_busbw_gbps": own}
    if node not in suspects:
        return {"status": "ok"}
    again = {rail: v for (a, b, rail), v in second.items() if node in (a, b)}
    confirmed = [r for r in suspects[node] if r in again and again[r] < limit]
    unconfirmed = [r for r in suspects[node] if r not in again]
    if not confirmed and not unconfirmed:
        return {"status": "cleared", "suspect_rails": suspects[node], "second_pass": again}
    return {
        "status": "slow",
        "rails": confirmed + unconfirmed,
        "unconfirmed_rails": unconfirmed,
        "second_pass": again,
    }


def _message(
    verdict: dict[str, Any], pairs: list[dict[str, Any]], reference: float, limit: float, n: int
) -> str:
    host, status, median = verdict["host"], verdict["status"], verdict["median_busbw_gbps"]
    mine = [pairs[i] for i in verdict["pairs"]]
    if status == "not measured":
        return f"{host}: no pair was measured (its ranks did not take part)"
    if status == "undecided":
        own = verdict.get("intra_busbw_gbps") or {}
        within = "; ".join(
            f"within {host} local ranks {r}-{r + 1}: {_fmt(v)} GB/s" for r, v in own.items()
        )
        return f"{host}: median pair {_fmt(median)} GB/s; {_undecided_note(n)}" + (
            f". {within}" if within else ""
        )
    head = (
        f"{host}: median pair {_fmt(median)} GB/s against the cluster's {_fmt(reference)} GB/s "
        f"({_pct(median, reference)})"
    )
    if status == "ok":
        return head + "; no rail is slow"
    if status == "cleared":
        again = ", ".join(
            f"rail {r}: {_fmt(v)} GB/s" for r, v in sorted(verdict["second_pass"].items())
        )
        return head + f"; most of its pairs were slow, but the second pass cleared it ({again})"
    slow = [p for p in mine if p["slow"] and p["pass"] == 1 and p["rail"] in verdict["rails"]]
    shown = ", ".join(
        f"with {p['b'] if p['a'] == host else p['a']} rail {p['rail']}: {_fmt(p['busbw_gbps'])}"
        for p in slow
    )
    again = "; ".join(
        f"second pass rail {r}: {_fmt(v)} GB/s" for r, v in sorted(verdict["second_pass"].items())
    )
    unconfirmed = (
        f" (rail(s) {', '.join(map(str, verdict['unconfirmed_rails']))} from the first pass only)"
        if verdict["unconfirmed_rails"]
        else ""
    )
    return (
        f"{host} is SLOW on rail(s) {', '.join(map(str, verdict['rails']))}{unconfirmed}: "
        f"{head.split(': ', 1)[1]}; below {_fmt(limit)} GB/s: {shown} GB/s"
        + (f"; {again}" if again else "")
        + ". Check this node's NIC on that rail (link speed, ethtool/ibstat, cable, PCIe) and "
        "the interface NCCL uses there (NCCL_SOCKET_IFNAME, NCCL_IB_HCA)"
    )


# --------------------------------------------------------------------------------------------
# From the collected rank results to pairwise.json, JUnit and Markdown
# --------------------------------------------------------------------------------------------


def pairwise_tests(ranks: dict[int, dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    found = []
    for rank, result in sorted(ranks.items()):
        for test in result.get("tests") or []:
            if test.get("name") != "pairwise":
                continue
            details = test.get("details") or {}
            if isinstance(details.get("rows"), list):
                found.append((rank, details))
                break
        else:  # stopped in the pairwise phase: the rounds it saved as it went
            partial = result.get("pairwise")
            if isinstance(partial, dict) and isinstance(partial.get("rows"), list):
                found.append((rank, partial))
    return found


def relaunch_ranks(report_dir: Path | None, host: str) -> dict[int, dict[str, Any]]:
    """rank-<R>.json of the pairwise-only relaunch (roles/launch/tasks/pairwise.yml), which
    collects into reports/<run-id>/<host>/pairwise/ after a collective timed out or stalled."""
    found: dict[int, dict[str, Any]] = {}
    if report_dir is None:
        return found
    for path in sorted((Path(report_dir) / host / RELAUNCH_DIR).glob("rank-*.json")):
        match = re.match(r"^rank-(\d+)\.json$", path.name)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if match and isinstance(doc, dict):
            found[int(match.group(1))] = doc
    return found


def _pairwise_tests(run: RunData) -> tuple[list[tuple[int, dict[str, Any]]], bool]:
    """(global rank, details) of every rank's pairwise test that measured something, and
    whether they come from the relaunch (used only when the run itself has none)."""
    found = [t for host in run.hosts for t in pairwise_tests(host.ranks)]
    if found:
        return found, False
    found = [
        t for host in run.hosts for t in pairwise_tests(relaunch_ranks(run.report_dir, host.host))
    ]
    return found, bool(found)


def pairwise_document(run: RunData, used: NicsUsed | None = None) -> dict[str, Any] | None:
    """pairwise.json of a run (docs/design.md), or None when no rank ran the pairwise phase.

    ``used``: rdma_expect.used_by_host(run), read here when not given."""
    tests, relaunched = _pairwise_tests(run)
    if not tests:
        return None
    settings = tests[0][1]
    why = settings.get("why", "")
    if relaunched:
        why = RELAUNCH_WHY
    rows: list[dict[str, Any]] = []
    for rank, details in tests:
        rows += [{**row, "rank": row.get("rank", rank)} for row in details["rows"]]
    hosts = {int(n["node_rank"]): str(n.get("host")) for n in settings.get("nodes") or []}
    rails = {int(n["node_rank"]): int(n.get("local_ranks", 1)) for n in settings.get("nodes") or []}
    for host in run.hosts:  # the inventory's names win over the nodes' own hostnames
        if host.node_rank is not None:
            hosts[int(host.node_rank)] = host.host
    nodes = sorted(hosts)
    min_ratio = float(settings.get("min_ratio", 0.8))
    verdict = judge(nodes, hosts, rows, min_ratio, unfinished_pairs(tests, rows))
    first = pair_values(rows, 1)
    n_rails = max(rails.values(), default=1)
    shown = len(nodes) <= MATRIX_MAX_NODES
    expected, source = _pair_expectation(run, n_rails, used)
    reference = verdict["reference_busbw_gbps"]
    for pair in verdict["pairs"]:
        pair["percent_of_expected"] = _percent(pair.get("busbw_gbps"), expected)
    return {
        "schema": SCHEMA,
        "run_id": run.run_id,
        "expected_busbw_gbps": expected,
        "expected_from": source,
        "reference_percent": _percent(reference, expected),
        "mode": settings.get("mode"),
        "why": _with_trigger_source(why, run.plan),
        "relaunched": relaunched,
        "min_ratio": min_ratio,
        "pair_bytes": settings.get("pair_bytes"),
        "iters": settings.get("iters"),
        "nodes": [{"node_rank": n, "host": hosts[n], "rails": rails.get(n, 1)} for n in nodes],
        "rails": n_rails,
        **_rounds_played(settings, rows, len(nodes)),
        "matrix_busbw_gbps": _matrix(first, nodes, None) if shown else None,
        "matrix_by_rail_busbw_gbps": (
            [_matrix(first, nodes, r) for r in range(n_rails)] if shown else None
        ),
        **verdict,
    }


def _matrix(
    first: dict[PairKey, float], nodes: list[int], rail: int | None
) -> list[list[float | None]]:
    """nodes x nodes, the first pass on ``rail`` (None: the slowest rail); null never measured."""
    index = {node: i for i, node in enumerate(nodes)}
    cells: list[list[float | None]] = [[None] * len(nodes) for _ in nodes]
    for (a, b, r), value in first.items():
        if (rail is not None and r != rail) or a not in index or b not in index:
            continue
        for i, j in ((index[a], index[b]), (index[b], index[a])):
            old = cells[i][j]
            cells[i][j] = value if old is None else min(old, value)
    return cells


def _rounds_played(settings: dict[str, Any], rows: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """How much of the tournament the first pass played (nccl_pair_rounds) and the second
    pass's rounds; a record without them (an older rank script) played every round."""
    every = int(settings.get("all_rounds") or (0 if n < 2 else n - 1 + n % 2))
    played = len(settings["rounds"]) if isinstance(settings.get("rounds"), list) else every
    return {
        "pair_rounds": settings.get("pair_rounds"),
        "first_pass_rounds": played,
        "all_rounds": every,
        "every_pair": played >= every,
        "second_pass_rounds": len({r.get("round") for r in rows if r.get("pass") == 2}),
    }


def _percent(value: float | None, expected: float | None) -> float | None:
    """value as a % of expected (one decimal), None when either is unknown."""
    if value is None or not expected:
        return None
    return round(100 * float(value) / expected, 1)


def _with_trigger_source(why: str, plan: dict[str, Any] | None) -> str:
    """The rank's why, with where its trigger figure came from (plan.json pair_triggers)."""
    for trigger in (plan or {}).get("pair_triggers") or []:
        collective = str(trigger.get("collective", ""))
        if collective and trigger.get("source") and why.startswith(collective + " "):
            return f"{why} (the trigger is nccl_busbw_warn x {trigger['source']})"
    return why


def _pair_expectation(run: RunData, rails: int, used: NicsUsed | None) -> tuple[float | None, str]:
    """What a pair should reach each way: nccl_expected_busbw's send_recv, else the fabric (an
    RDMA figure shared out over the rails that run at once)."""
    conf = settings(run.plan)
    explicit = (conf["expected_busbw"] or {}).get("send_recv")
    if explicit is not None:
        return float(explicit), "nccl_expected_busbw send_recv"
    used = used_by_host(run) if used is None else used
    return fabric_expectation(run.plan, float(conf["efficiency"]), used, rails)


def _host_label(host: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", host)


def _row_text(doc: dict[str, Any], verdict: dict[str, Any]) -> str:
    lines = [verdict["message"], "", "pass  rail  partner  busbw (GB/s)  % expected  slow  by rank"]
    for i in verdict["pairs"]:
        p = doc["pairs"][i]
        partner = p["b"] if p["node_a"] == verdict["node_rank"] else p["a"]
        by_rank = ", ".join(f"{r}: {v}" for r, v in sorted(p["by_rank"].items()))
        percent = p.get("percent_of_expected")
        lines.append(
            f"{p['pass']!s:>5} {p['rail']:>5}  {partner}  {p['busbw_gbps']:.4g}  "
            f"{'-' if percent is None else f'{percent:g}%'}  "
            f"{'yes' if p['slow'] else 'no'}  {by_rank}"
        )
    return "\n".join(lines)


def pairwise_suites(doc: dict[str, Any] | None) -> list[tuple[str, Any, str]]:
    """[(path, Suite, host)]: junit/pairwise.xml, a `pairwise` testcase per node of the
    pairwise document ``doc`` (pairwise_document)."""
    if doc is None:
        return []
    cases = []
    for verdict in doc["verdicts"]:
        case = Case(
            "pairwise",
            f"pairwise.{_host_label(verdict['host'])}",
            stdout=_row_text(doc, verdict),
        )
        if verdict["status"] == "slow":
            case.fail(verdict["message"], kind="slow node")
        elif verdict["status"] == "timed out":
            case.fail(verdict["message"], kind="pair timed out")
        elif verdict["status"] in ("undecided", "not measured"):
            case.skip(verdict["message"])
        cases.append(case)
    props = {
        "reference_busbw_gbps": str(doc["reference_busbw_gbps"]),
        "min_ratio": str(doc["min_ratio"]),
        "pair_bytes": str(doc["pair_bytes"]),
        "expected_busbw_gbps": str(doc["expected_busbw_gbps"]),
        "reference_percent_of_expected": str(doc["reference_percent"]),
    }
    return [("junit/pairwise.xml", Suite("pairwise", cases, properties=props), "")]


def pairwise_markdown(doc: dict[str, Any] | None) -> list[str]:
    """summary.md's pairwise part of the pairwise document ``doc``: the node x node matrix
    (slowest rail; up to MATRIX_MAX_NODES nodes, else the slowest pairs) and the verdicts."""
    if doc is None:
        return []
    names = [n["host"] for n in doc["nodes"]]
    lines = [
        "",
        f"Pairwise rounds ({doc['why'] or doc['mode']}): busbw per node pair, GB/s, slowest rail, "
        f"first pass{_rounds_note(doc)}; reference {_fmt(doc['reference_busbw_gbps'])} GB/s, "
        f"slow below {_fmt(doc['limit_busbw_gbps'])} GB/s ({doc['min_ratio']:g} x reference)"
        + (
            f"; the reference is {doc['reference_percent']:g}% of the expected "
            f"{_fmt(doc['expected_busbw_gbps'])} GB/s ({doc['expected_from']})"
            if doc["reference_percent"] is not None
            else ""
        )
        + ":",
        "",
    ]
    expected = doc["expected_busbw_gbps"]
    if doc.get("matrix_busbw_gbps") is not None:
        lines += ["| node | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        for name, row in zip(names, doc["matrix_busbw_gbps"], strict=True):
            lines.append(f"| {name} | " + " | ".join(_cell(v, expected) for v in row) + " |")
    else:
        lines += _slowest_pairs(doc, expected)
    lines.append("")
    if doc["note"]:
        lines.append(f"Pairwise: {doc['note']}.")
    for verdict in doc["verdicts"]:
        if verdict["status"] != "ok" or not doc["decided"]:
            lines.append(f"- {verdict['status']}: {verdict['message']}")
    if doc["decided"] and all(v["status"] in ("ok", "cleared") for v in doc["verdicts"]):
        lines.append("Pairwise: no node is slow.")
    return lines


def _rounds_note(doc: dict[str, Any]) -> str:
    """ ", 16 of 1023 rounds (nccl_pair_rounds)" when the first pass did not meet every pair."""
    if doc.get("every_pair", True):
        return ""
    return (
        f", {doc['first_pass_rounds']} of {doc['all_rounds']} rounds (nccl_pair_rounds "
        f"{doc['pair_rounds']}: each node met up to {doc['first_pass_rounds']} partners)"
    )


def _slowest_pairs(doc: dict[str, Any], expected: float | None) -> list[str]:
    """Beyond MATRIX_MAX_NODES nodes: how many pairs were measured and the slowest of them."""
    first: dict[tuple[int, int], dict[str, Any]] = {}
    for pair in (p for p in doc["pairs"] if p["pass"] == 1):
        key = (pair["node_a"], pair["node_b"])
        if key not in first or pair["busbw_gbps"] < first[key]["busbw_gbps"]:
            first[key] = pair
    slowest = sorted(first.values(), key=lambda p: (p["busbw_gbps"], p["node_a"], p["node_b"]))
    lines = [
        f"{len(doc['nodes'])} nodes: the matrix is shown up to {MATRIX_MAX_NODES} nodes; "
        f"{len(first)} node pairs measured (pairwise.json `pairs` has each), the "
        f"{min(SLOWEST_SHOWN, len(slowest))} slowest:",
        "",
        "| node | node | rail | busbw (GB/s) |",
        "|---|---|---|---|",
    ]
    for p in slowest[:SLOWEST_SHOWN]:
        lines.append(f"| {p['a']} | {p['b']} | {p['rail']} | {_cell(p['busbw_gbps'], expected)} |")
    return lines


def _cell(value: float | None, expected: float | None) -> str:
    """A matrix cell: busbw, and its % of the expected figure when there is one."""
    percent = _percent(value, expected)
    return _fmt(value) + ("" if percent is None else f" ({percent:g}%)")


def write_pairwise(report_dir: Path, doc: dict[str, Any] | None) -> list[str]:
    """reports/<run-id>/pairwise.json of the pairwise document ``doc`` when the run has pairwise
    rounds; the written paths."""
    path = Path(report_dir) / "pairwise.json"
    if doc is None:
        if path.is_file():
            path.unlink()
        return []
    write_atomically(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return [str(path)]
