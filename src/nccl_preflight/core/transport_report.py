# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The transport verdict of a run: which network every rank's NCCL really used, against what the
host offers (docs/design.md, "The transport NCCL used").

Pure functions over what reports/<run-id>/ holds: each host's nccl-rank-<R>.log (the rank's
NCCL_DEBUG_FILE, collected by the launch), rank-<R>.json (its backend), plan.json (hosts[].
expect_net, worked out from the facts by core/preflight/fabric_checks.py's nccl_expect_net) and
preflight/<host>.json (the fabric checks, quoted as the likely cause).
src/nccl_preflight/core/junit.py calls it: a ``transport`` testcase per rank, a line per host in
summary.md, ``transport`` in the summary.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from .findings import Case
from .hostlist import ONE_LINE_EACH, compress
from .transport import describe, net_kind, parse_nccl_log

if TYPE_CHECKING:
    from .findings import SuiteFile
    from .run_data import HostData, RunData

CAUSE_CHECKS = ("nccl_ib_hca", "nccl_config", "rdma", "gpudirect", "limits")
WARN_LINES = 10


def _expectations(run: RunData) -> dict[str, dict[str, str]]:
    """{host: the network plan.json expects it to use} (its first row with one)."""
    found: dict[str, dict[str, str]] = {}
    for row in run.plan.get("hosts") or []:
        if isinstance(row.get("expect_net"), dict):
            found.setdefault(str(row.get("host")), row["expect_net"])
    return found


NO_EXPECTATION = {"network": "any", "reason": "plan.json says nothing about the network to expect"}


def _likely_causes(host: HostData, parsed: dict[str, Any]) -> list[str]:
    causes = []
    for item in (host.preflight or {}).get("results") or []:
        if item.get("check") in CAUSE_CHECKS and item.get("status") == "failed":
            first = str(item.get("message") or "").splitlines()[0]
            causes.append(f"pre-flight check {item['check']}: {first}")
    for name in ("NCCL_IB_DISABLE", "NCCL_NET", "NCCL_IB_HCA"):
        if name in parsed.get("env", {}):
            causes.append(f"NCCL says {name} is set to {parsed['env'][name]}")
    if parsed.get("ib_no_device"):
        causes.append("NCCL says NET/IB : No device found")
    causes += [f"NCCL WARN: {w.split('NCCL WARN', 1)[-1].strip()}" for w in parsed["warnings"][:2]]
    return causes


def _net_line(parsed: dict[str, Any]) -> str:
    for channel in parsed.get("channels") or []:
        if channel["transport"].startswith("NET/"):
            return channel["line"]
    return parsed.get("net_line") or f"Using network {parsed.get('net')}"


def _skip_reason(host: HostData, rank: int, log: str | None, plan_backend: Any) -> str:
    result = host.ranks.get(rank) or {}
    backend = result.get("backend") or plan_backend
    if backend and backend != "nccl":
        return f"rank {rank} on {host.host} ran the {backend} backend: NCCL is not used"
    if log is None:
        debug = (result.get("env") or {}).get("NCCL_DEBUG")
        if debug and debug.upper() not in ("INFO", "TRACE"):
            return (
                f"rank {rank} on {host.host} ran with NCCL_DEBUG={debug}, so NCCL logged no "
                "transport; set nccl_debug: INFO"
            )
        return f"no NCCL log came back from rank {rank} on {host.host} (it never initialised NCCL?)"
    return ""


def _judge_rank(
    host: HostData, rank: int, parsed: dict, expect_net: dict, nnodes: int
) -> dict[str, Any]:
    where = f"rank {rank} on {host.host}"
    text = describe(parsed)
    kind = parsed.get("net_kind")
    base = {"status": "passed", "message": f"{where}: {text}"}
    if nnodes < 2:
        base["message"] += " (a single node: no network between nodes)"
        return base
    if kind is None:
        return {
            "status": "skipped",
            "message": f"{where}: the NCCL log does not say which network NCCL chose (no "
            "'Using network' line and no NET channel; NCCL_DEBUG_SUBSYS without INIT and NET?)",
        }
    wanted = expect_net.get("network", "any")
    wrong = (wanted == "ib" and kind == "socket") or (wanted == "socket" and kind != "socket")
    if not wrong:
        if wanted == "ib" and kind == "ib" and not parsed.get("gdrdma"):
            base["message"] += " (warning: no GDRDMA: see the pre-flight check gpudirect)"
        return base
    causes = _likely_causes(host, parsed)
    message = (
        f"{where} used {parsed.get('net')} where {wanted.upper() if wanted == 'ib' else wanted} "
        f"was expected ({expect_net.get('reason')}): {_net_line(parsed)}"
    )
    if causes:
        message += ". Likely cause: " + "; ".join(causes)
    return {"status": "failed", "message": message}


def analyze_run(run: RunData) -> dict[str, Any]:
    """{"ranks": {rank: verdict}, "hosts": [{host, line, net, expect_net, ...}]} for a run."""
    plan_backend = run.plan.get("backend")
    nnodes = len(run.plan.get("hosts") or []) or len(run.hosts)
    ranks: dict[int, dict[str, Any]] = {}
    hosts = []
    nets: dict[str, str] = {}
    expected = _expectations(run)
    for host in run.hosts:
        logs = host.nccl_logs or {}
        expect_net = expected.get(host.host) or dict(NO_EXPECTATION)
        parsed_by_rank = {}
        for rank in host.expected_ranks():
            log = logs.get(rank)
            if rank not in host.ranks and log is None:
                continue  # it never ran: its result testcase says why
            reason = _skip_reason(host, rank, log, plan_backend)
            if reason:
                ranks[rank] = {"host": host.host, "status": "skipped", "message": reason}
                continue
            parsed = parse_nccl_log(log or "", f"{host.host}/nccl-rank-{rank}.log")
            parsed_by_rank[rank] = parsed
            ranks[rank] = {
                "host": host.host,
                **_judge_rank(host, rank, parsed, expect_net, nnodes),
                "net": parsed.get("net"),
                "gdrdma": parsed.get("gdrdma"),
                "transports": parsed.get("transports"),
                "nccl_version": parsed.get("nccl_version"),
                "description": describe(parsed),
                "warnings": parsed["warnings"][:WARN_LINES],
            }
        net = next((p["net"] for p in parsed_by_rank.values() if p.get("net")), None)
        if net:
            nets[host.host] = net
        if host.expected_ranks():
            hosts.append(_host_row(host, parsed_by_rank, ranks, expect_net, net))
    _name_odd_networks(run, ranks, nets)
    return {"ranks": ranks, "hosts": hosts}


def _host_row(host, parsed_by_rank, ranks, expect_net, net) -> dict[str, Any]:
    if parsed_by_rank:
        said = describe(parsed_by_rank[min(parsed_by_rank)])
    else:
        reasons = [ranks[r]["message"] for r in host.expected_ranks() if r in ranks]
        said = reasons[0] if reasons else "no rank ran"
    return {
        "host": host.host,
        "said": said,  # what NCCL used, in words; ``line``: the same after the host's name
        "line": f"{host.host}: {said}",
        "net": net,
        "net_kind": net_kind(net),
        "expect_net": expect_net.get("network"),
        "expect_net_reason": expect_net.get("reason"),
    }


def _name_odd_networks(run: RunData, ranks: dict[int, dict], nets: dict[str, str]) -> None:
    """Nodes that used different networks: the ones off the most common network fail."""
    if len(set(nets.values())) < 2:
        return
    counts = Counter(nets.values())
    best = max(counts.values())
    order = [h.host for h in run.hosts]
    ref = next(nets[h] for h in order if h in nets and counts[nets[h]] == best)
    table = "; ".join(f"{h} {nets[h]}" for h in order if h in nets)
    for verdict in ranks.values():
        if verdict.get("net") and verdict["net"] != ref and verdict["status"] != "skipped":
            verdict["status"] = "failed"
            verdict["message"] += (
                f". The nodes used different networks ({table}); {verdict['host']} is off the "
                f"others' {ref}"
            )


def transport_case(verdict: dict[str, Any], classname: str) -> Case:
    """The ``transport`` testcase of one rank."""
    case = Case(
        "transport",
        classname,
        stdout=verdict["message"] if verdict["status"] == "passed" else None,
    )
    output = "\n".join(verdict.get("warnings") or []) or None
    if verdict["status"] == "failed":
        return case.fail(verdict["message"], output, kind="transport")
    if verdict["status"] == "skipped":
        return case.skip(verdict["message"])
    return case


def add_transport_cases(analysis: dict[str, Any], files: list[SuiteFile]) -> None:
    """Append a ``transport`` testcase to every rank suite that has a verdict in ``analysis``
    (analyze_run)."""
    for item in files:
        if item.kind != "rank" or item.rank not in analysis["ranks"]:
            continue
        classname = item.suite.cases[0].classname if item.suite.cases else ""
        item.suite.cases.append(transport_case(analysis["ranks"][item.rank], classname))


def transport_lines(analysis: dict[str, Any]) -> list[str]:
    """summary.md: one line per host of ``analysis`` (analyze_run) saying what NCCL used
    (nothing when no rank ran NCCL)."""
    rows = analysis["hosts"]
    if not rows:
        return []
    head = ["", "Transport (what NCCL used, from its INFO log):", ""]
    if len(rows) <= ONE_LINE_EACH:
        return head + [f"- {row['line']}" for row in rows]
    said: dict[str, list[str]] = {}  # beyond: the hosts that say the same, one line
    for row in rows:
        said.setdefault(row["said"], []).append(row["host"])
    return head + [f"- {compress(hosts)}: {text}" for text, hosts in said.items()]
