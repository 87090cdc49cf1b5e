# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""iptables-save / ip6tables-save: parse, judge (nccl_firewall_chains' walker), fix.

Recorded examples: tests/fixtures/firewall/iptables-save-*.txt, ip6tables-save-drop.txt.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from .firewall_chains import Ruleset, Step, walk
from .firewall_common import (
    PORT_MAX,
    PORT_MIN,
    Findings,
    Interval,
    Query,
    addr_in,
    family,
    finding,
    if_match,
    parse_port_list,
    ports_complement,
    ports_intersect,
    ports_text,
)


def parse_iptables_save(text: str) -> dict[str, Any]:
    """Parse iptables-save output: ``{"variant", "tables": {t: {"policies", "rules"}}}``.

    ``rules[chain]`` is a list of ``(position, rule_text, argv)`` with 1-based positions as
    ``iptables -L --line-numbers`` shows them.
    """
    tables: dict[str, Any] = {}
    variant = ""
    cur: dict[str, Any] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            m = re.search(r"iptables-save v[\d.]+ \((\w+)\)", line)
            if m:
                variant = m.group(1)
            continue
        if line.startswith("*"):
            cur = tables.setdefault(line[1:], {"policies": {}, "rules": {}})
        elif line == "COMMIT" or cur is None:
            cur = None if line == "COMMIT" else cur
        elif line.startswith(":"):
            name, policy = line[1:].split()[:2]
            cur["policies"][name] = None if policy == "-" else policy
            cur["rules"].setdefault(name, [])
        elif line.startswith("["):  # iptables-save -c counters prefix
            argv = shlex.split(line.split("]", 1)[1])
            _add_rule(cur, argv, line)
        else:
            _add_rule(cur, shlex.split(line), line)
    return {"variant": variant, "tables": tables}


def _add_rule(table: dict[str, Any], argv: list[str], text: str) -> None:
    if len(argv) < 2 or argv[0] != "-A":
        return
    rules = table["rules"].setdefault(argv[1], [])
    rules.append((len(rules) + 1, text, argv[2:]))


# Targets that decide nothing: the packet goes on to the next rule.
NONTERMINAL = {"LOG", "NFLOG", "MARK", "CONNMARK", "CT", "TRACE", "AUDIT", "TCPMSS", "NOTRACK"}


def match_rule(argv: list[str], peer: str, q: Query) -> tuple[bool | None, list[Interval], dict]:
    """Does this rule match a new TCP packet from ``peer``? -> (match, dports, target info).

    match is True, False or None (a condition we cannot judge).
    """
    dports: list[Interval] = [(PORT_MIN, PORT_MAX)]
    state: bool | None = True
    target: dict[str, Any] = {"kind": None, "name": None}
    neg = False
    i = 0

    def cond(ok: bool | None) -> None:
        nonlocal state, neg
        if ok is not None and neg:
            ok = not ok
        neg = False
        if ok is False:
            state = False
        elif ok is None and state is True:
            state = None

    while i < len(argv):
        a = argv[i]
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if a == "!":
            neg = True
            i += 1
            continue
        if a in ("-j", "-g", "--jump", "--goto"):
            target = {"kind": "goto" if a in ("-g", "--goto") else "jump", "name": nxt}
            break  # what follows are the target's own options
        if a in ("-p", "--protocol"):
            cond(nxt.lower() in ("tcp", "6", "all", "0"))
            i += 2
        elif a in ("-s", "--source", "--src"):
            cond(any(addr_in(peer, s) for s in nxt.split(",")))
            i += 2
        elif a in ("-d", "--destination", "--dst"):
            cond(any(addr_in(q.address, s) for s in nxt.split(",")) if q.address else None)
            i += 2
        elif a in ("-i", "--in-interface"):
            cond(if_match(q.ifname, nxt) if q.ifname else None)
            i += 2
        elif a in ("-o", "--out-interface"):
            cond(False)  # no output interface on INPUT/PREROUTING
            i += 2
        elif a in ("-m", "--match"):
            i += 2  # loading a match module says nothing by itself
        elif a in ("--dport", "--destination-port", "--dports", "--destination-ports"):
            ports = parse_port_list(nxt)
            if neg:
                ports = ports_complement(ports)
                neg = False
            dports = ports_intersect(dports, ports)
            if not dports:
                state = False
            i += 2
        elif a in ("--state", "--ctstate"):
            cond("NEW" in nxt.upper().split(","))
            i += 2
        elif a == "--syn":
            cond(True)
            i += 1
        elif a == "--comment":
            i += 2
        elif a.startswith("-"):
            # an option we do not model (--sport, --match-set, --limit, --tcp-flags ...):
            # skip its values and call the rule undecidable
            cond(None)
            i += 1
            while i < len(argv) and not argv[i].startswith("-") and argv[i] != "!":
                i += 1
        else:
            i += 1
    return state, dports, target


def fix_command(tool: str, table: str, chain: str, position: int | None, peers, ports) -> str:
    """The iptables command that accepts ``ports`` from ``peers`` before the rule at
    ``position`` of ``chain`` (before everything when the chain's policy drops)."""
    cmd = tool.replace("-save", "")
    where = f"-I {shlex.quote(chain)} {position or 1}"
    t = "" if table == "filter" else f"-t {shlex.quote(table)} "
    match = "-m multiport --dports" if len(ports) > 1 else "--dport"
    return (
        f"{cmd} {t}{where} -p tcp -s {','.join(peers)} {match} {ports_text(ports, ':')} -j ACCEPT"
    )


# The chains a packet to a local socket crosses, in order (iptables semantics: each table's chain
# is evaluated on its own; a DROP anywhere drops).
INPUT_PATH = (
    ("raw", "PREROUTING"),
    ("mangle", "PREROUTING"),
    ("mangle", "INPUT"),
    ("filter", "INPUT"),
    ("security", "INPUT"),
)

_VERDICT = {"ACCEPT": "accept", "DROP": "drop", "REJECT": "reject", "RETURN": "return"}


def _ruleset(tables: dict, tool: str, peer: str, q: Query, acc: Findings) -> Ruleset:
    """The walker's view of iptables for one peer; chains are (table, chain) pairs."""

    def step(rule, chain) -> Step:
        state, dports, target = match_rule(rule[2], peer, q)
        name = target["name"]
        if name in _VERDICT:
            return Step(state, dports, _VERDICT[name])
        if name is None or name in NONTERMINAL or name not in tables[chain[0]]["rules"]:
            return Step(state, dports, None)
        return Step(state, dports, target["kind"], (chain[0], name))

    def policy(chain) -> str | None:
        value = tables[chain[0]]["policies"].get(chain[1])
        return value.lower() if value else None

    def report(chain, rule, action, certain, ports) -> None:
        tname, name = chain
        if rule is None:
            pos, text = None, f":{name} {action.upper()} (chain policy)"
        else:
            pos, text = rule[0], rule[1]
        f = finding(tool, tname, name, pos, text, action, certain, q.label)
        acc.add((tool, tname, name, pos if rule else "policy", q.label), f, peer, ports)

    return Ruleset(lambda chain: tables[chain[0]]["rules"].get(chain[1], []), step, policy, report)


def evaluate_iptables(parsed: dict[str, Any], queries: list[Query], tool: str = "iptables"):
    """Findings for iptables-save (``tool`` "iptables") or ip6tables-save ("ip6tables")."""
    fam = 6 if tool.startswith("ip6") else 4
    acc = Findings()
    tables = parsed.get("tables", {})
    for q in queries:
        for peer in q.peers:
            if family(peer) != fam:
                continue
            ruleset = _ruleset(tables, tool, peer, q, acc)
            for tname, chain in INPUT_PATH:
                if tname in tables and chain in tables[tname]["policies"]:
                    walk(ruleset, (tname, chain), list(q.ports))

    def fixer(f, ports):
        return fix_command(tool, f["table"], f["chain"], f["position"], f["peers"], ports)

    return acc.finalize(fixer)
