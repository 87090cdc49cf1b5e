# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What every firewall tool's judge shares (pure functions, no I/O).

The question asked of every firewall is the same: would a new TCP connection from a peer's fabric
address to one of our ports (MASTER_PORT, the ephemeral range) be dropped or rejected on this host?
Each tool's module (nccl_firewall_iptables, _nft, _ufw, _firewalld) turns the tool's own output
into finding dicts that name the tool, the table/chain (or zone), the rule and the command that
lets the traffic in; iptables and nft share the chain walker of nccl_firewall_chains.

The evaluation is deliberately conservative: a DROP/REJECT rule with a match we do not understand
is reported as one that *may* drop (``certain: false``); an ACCEPT we do not understand is not
taken as accepting.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

Interval = tuple[int, int]
PORT_MIN, PORT_MAX = 0, 65535

# Where a host's connections to its own fabric address arrive (its own ranks, its own probe).
LOOPBACK_IFNAME = "lo"


# --------------------------------------------------------------------------- port interval sets
def norm(intervals: list[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for lo, hi in sorted(i for i in intervals if i[0] <= i[1]):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def ports_intersect(a: list[Interval], b: list[Interval]) -> list[Interval]:
    out = []
    for alo, ahi in a:
        for blo, bhi in b:
            lo, hi = max(alo, blo), min(ahi, bhi)
            if lo <= hi:
                out.append((lo, hi))
    return norm(out)


def ports_subtract(a: list[Interval], b: list[Interval]) -> list[Interval]:
    out = list(a)
    for blo, bhi in b:
        nxt = []
        for lo, hi in out:
            if bhi < lo or blo > hi:
                nxt.append((lo, hi))
                continue
            if lo < blo:
                nxt.append((lo, blo - 1))
            if hi > bhi:
                nxt.append((bhi + 1, hi))
        out = nxt
    return norm(out)


def ports_union(a: list[Interval], b: list[Interval]) -> list[Interval]:
    return norm(list(a) + list(b))


def ports_complement(a: list[Interval]) -> list[Interval]:
    return ports_subtract([(PORT_MIN, PORT_MAX)], a)


def ports_text(ports: list[Interval], sep: str = "-") -> str:
    return ",".join(str(lo) if lo == hi else f"{lo}{sep}{hi}" for lo, hi in ports)


def parse_port_list(spec: str, sep: str = ":") -> list[Interval]:
    """``29500,32768:60999`` (iptables, ufw; firewalld with ``sep`` "-") -> intervals."""
    out = []
    for part in spec.split(","):
        if sep in part:
            lo, hi = part.split(sep, 1)
            out.append((int(lo or PORT_MIN), int(hi or PORT_MAX)))
        else:
            out.append((int(part), int(part)))
    return norm(out)


# --------------------------------------------------------------------------- the question
@dataclass
class Query:
    """A new TCP connection from one of ``peers`` to ``ports`` on ``address`` via ``ifname``."""

    peers: list[str]
    ports: list[Interval]
    label: str  # "MASTER_PORT" or "ephemeral range" — used in messages
    ifname: str = ""
    address: str = ""


def host_queries(
    peers: list[str], ports: list[tuple[str, list[Interval]]], address: str, ifname: str
) -> list[Query]:
    """The queries of one host: per ``(label, ports)``, the peers arriving on ``ifname``, and,
    when ``address`` is known, this host itself: its own ranks and its own probe connect to its
    fabric address, and that traffic arrives on the loopback interface, from ``address``.

    A rule that drops it (one without ``-i <fabric>``) is as fatal as one that drops a peer, so
    the fix a finding prints lets this host in as well.
    """
    out = []
    for label, spans in ports:
        out.append(Query(list(peers), spans, label, ifname=ifname, address=address))
        if address:
            out.append(Query([address], spans, label, ifname=LOOPBACK_IFNAME, address=address))
    return out


@dataclass
class Findings:
    """Findings of one tool, merged per rule (one rule may hit several peers)."""

    findings: dict[tuple, dict[str, Any]] = field(default_factory=dict)

    def add(self, key: tuple, finding: dict[str, Any], peer: str, ports: list[Interval]) -> None:
        cur = self.findings.get(key)
        if cur is None:
            finding["peers"] = [peer]
            finding["ports"] = [list(p) for p in ports]
            self.findings[key] = finding
            return
        if peer not in cur["peers"]:
            cur["peers"].append(peer)
        merged = ports_union([tuple(p) for p in cur["ports"]], ports)
        cur["ports"] = [list(p) for p in merged]

    def finalize(self, fixer) -> list[dict[str, Any]]:
        """Every finding with ``ports_text`` and ``fix`` (``fixer(finding, ports)``)."""
        out = []
        for f in self.findings.values():
            ports = [tuple(p) for p in f["ports"]]
            f["ports_text"] = ports_text(ports)
            f["fix"] = fixer(f, ports)
            out.append(f)
        return out


def finding(
    tool: str,
    table: str,
    chain: str,
    position: Any,
    rule: str,
    action: str,
    certain: bool,
    label: str,
) -> dict[str, Any]:
    """A finding before its peers, ports and fix are known (see Findings)."""
    return {
        "tool": tool,
        "table": table,
        "chain": chain,
        "position": position,
        "rule": rule,
        "action": action,
        "certain": certain,
        "label": label,
    }


def family(addr: str) -> int:
    return ipaddress.ip_address(addr).version


def addr_in(addr: str, spec: str) -> bool:
    """``spec`` is an address, a CIDR or an address/netmask as iptables prints it."""
    return ipaddress.ip_address(addr) in ipaddress.ip_network(spec, strict=False)


def if_match(ifname: str, pattern: str) -> bool:
    """iptables writes a wildcard interface as ``eth+``, nft as ``eth*``."""
    if pattern.endswith(("+", "*")):
        return ifname.startswith(pattern[:-1])
    return ifname == pattern


def by_family(peers: list[str]) -> list[tuple[int, list[str]]]:
    """``peers`` grouped by address family, IPv4 first: a fix command names one family."""
    groups: dict[int, list[str]] = {}
    for p in peers:
        groups.setdefault(family(p), []).append(p)
    return sorted(groups.items())


def describe_finding(f: dict[str, Any]) -> str:
    """One line: tool, table/chain, rule number, the rule, what it blocks and from whom."""
    where = " ".join(x for x in (f["table"], f"chain {f['chain']}") if x)
    word = "handle" if f["tool"] == "nftables" else "rule"
    pos = f" {word} {f['position']}" if f.get("position") not in (None, "") else ""
    verb = {"drop": "drops", "reject": "rejects", "deny": "denies"}.get(f["action"], f["action"])
    maybe = "" if f.get("certain", True) else "may "
    return (
        f"{f['tool']} {where}{pos} ({f['rule']}) {maybe}{verb if not maybe else f['action']} "
        f"tcp/{f['ports_text']} ({f['label']}) from {', '.join(f['peers'])}"
    )
