# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""firewalld (``firewall-cmd --zone=<z> --list-all``, ``--info-service``): parse, judge, fix.

Recorded examples: tests/fixtures/firewall/firewalld-*.txt.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from .firewall_common import (
    LOOPBACK_IFNAME,
    Findings,
    Interval,
    Query,
    addr_in,
    family,
    finding,
    norm,
    parse_port_list,
    ports_intersect,
    ports_subtract,
    ports_text,
    ports_union,
)


def parse_firewalld_list_all(text: str) -> dict[str, Any]:
    """``firewall-cmd --zone=<z> --list-all`` -> {"zone", "target", "ports", "sources", "rich"}."""
    zone = ""
    fields: dict[str, str] = {}
    rich: list[str] = []
    last = ""
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if not raw.startswith((" ", "\t")):
            zone = raw.split()[0]
            continue
        line = raw.strip()
        m = re.match(r"([a-z][a-z0-9 -]*):\s*(.*)$", line)
        if m and not line.startswith("rule "):
            last = m.group(1)
            fields[last] = m.group(2)
            if last == "rich rules" and m.group(2):
                rich.append(m.group(2))
        elif last == "rich rules":
            rich.append(line)
    ports = []
    for p in fields.get("ports", "").split():
        num, _, proto = p.partition("/")
        if proto == "tcp":
            ports += parse_port_list(num, "-")
    return {
        "zone": zone,
        "target": fields.get("target", "default"),
        "ports": norm(ports),
        "services": fields.get("services", "").split(),
        "sources": fields.get("sources", "").split(),
        "rich": rich,
    }


def parse_firewalld_service_info(text: str) -> dict[str, Any]:
    """``firewall-cmd --info-service=<s>`` -> {"name", "ports" (tcp intervals), "includes"}."""
    name, fields = "", {}
    for raw in text.splitlines():
        if raw.strip() and not raw.startswith((" ", "\t")):
            name = raw.strip()
            continue
        m = re.match(r"\s+([a-z][a-z-]*):\s*(.*)$", raw)
        if m:
            fields[m.group(1)] = m.group(2)
    ports = []
    for p in fields.get("ports", "").split():
        num, _, proto = p.partition("/")
        if proto == "tcp":
            ports += parse_port_list(num, "-")
    return {"name": name, "ports": norm(ports), "includes": fields.get("includes", "").split()}


def firewalld_service_ports(
    names: list[str], services: dict[str, dict[str, Any]]
) -> tuple[list[Interval], list[str]]:
    """The tcp ports the zone's ``names`` open, following includes, from ``services`` (name ->
    parse_firewalld_service_info result); -> (ports, names that could not be read)."""
    ports: list[Interval] = []
    unknown: list[str] = []
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        info = services.get(name)
        if info is None:
            unknown.append(name)
            continue
        ports = ports_union(ports, info["ports"])
        todo += info["includes"]
    return ports, unknown


def _rich(rule: str) -> dict[str, Any]:
    def attr(name: str) -> str | None:
        m = re.search(rf'\b{name}="?([^"\s]*)"?', rule)
        return m.group(1) if m else None

    action = next((a for a in ("accept", "reject", "drop") if re.search(rf"\b{a}\b", rule)), None)
    port = attr("port")
    proto = attr("protocol")
    priority = attr("priority")
    return {
        "family": attr("family"),
        "source": attr("address") if "source" in rule else None,
        "ports": parse_port_list(port, "-") if port else None,
        "proto": proto,
        "action": action,
        "priority": int(priority) if priority and re.fullmatch(r"-?\d+", priority) else 0,
        "negated": "not" in rule.split("source", 1)[-1].split("address", 1)[0],
        "understood": not re.search(r"\b(service|ipset|mac|forward-port|masquerade|icmp)", rule),
    }


def _zone_order(rich: list[tuple[int, str, dict]]) -> tuple[list, list, list, list]:
    """firewalld's order of a zone's rich rules: priority < 0 (ascending), then at priority 0
    the deny rules (drop, reject) and the allow rules, then priority > 0 (ascending)."""
    pre = sorted((x for x in rich if x[2]["priority"] < 0), key=lambda x: x[2]["priority"])
    deny = [x for x in rich if x[2]["priority"] == 0 and x[2]["action"] in ("drop", "reject")]
    allow = [x for x in rich if x[2]["priority"] == 0 and x[2]["action"] == "accept"]
    post = sorted((x for x in rich if x[2]["priority"] > 0), key=lambda x: x[2]["priority"])
    return pre, deny, allow, post


def evaluate_firewalld(
    parsed: dict[str, Any],
    queries: list[Query],
    services: dict[str, dict[str, Any]] | None = None,
):
    """firewalld evaluates a zone as: rich rules with a negative priority, deny rich rules (drop,
    reject), then allow (ports, the services' ports, accept rich rules), rich rules with a
    positive priority, then the zone target (``default``/``%%REJECT%%`` reject, ``DROP`` drops).

    ``services``: name -> parse_firewalld_service_info result, for the zone's services and what
    they include; a service missing there makes a target finding uncertain, not certain.
    A host's connections to itself (queries arriving on ``lo``) are not judged: firewalld accepts
    everything on the loopback interface before any zone.
    """
    acc = Findings()
    target = parsed["target"]
    if target == "ACCEPT":
        return []
    zone = parsed["zone"]
    service_ports, unknown = firewalld_service_ports(parsed.get("services", []), services or {})
    listed = ", ".join(parsed.get("services", [])) or "none"
    unread = f"; services not read: {', '.join(unknown)}" if unknown else ""
    for q in queries:
        if q.ifname == LOOPBACK_IFNAME:
            continue
        for peer in q.peers:
            pre, deny, allow, post = _zone_order(_rich_for(parsed["rich"], peer))

            def apply(rules, todo, peer=peer, q=q):
                for pos, rule_text, r in rules:
                    hit = ports_intersect(todo, r["ports"]) if r["ports"] else list(todo)
                    if hit and r["action"] in ("reject", "drop"):
                        f = finding(
                            "firewalld",
                            f"zone {zone}",
                            "rich rules",
                            pos,
                            rule_text,
                            r["action"],
                            r["understood"],
                            q.label,
                        )
                        acc.add(("firewalld", pos, q.label), f, peer, hit)
                    if hit and r["action"] and r["understood"]:
                        todo = ports_subtract(todo, hit)
                return todo

            todo = apply(deny, apply(pre, list(q.ports)))
            todo = ports_subtract(todo, parsed["ports"])
            todo = ports_subtract(todo, service_ports)
            todo = apply(post, apply(allow, todo))
            if todo:
                action = "drop" if target == "DROP" else "reject"
                rule = (
                    f"target: {target} (port not in the zone's ports or services; "
                    f"services: {listed}{unread})"
                )
                # A service that could not be read may open the port.
                f = finding(
                    "firewalld", f"zone {zone}", "target", None, rule, action, not unknown, q.label
                )
                acc.add(("firewalld", "target", q.label), f, peer, todo)
    return acc.finalize(fix_command)


def _rich_for(rich: list[str], peer: str) -> list[tuple[int, str, dict]]:
    """The zone's rich rules (numbered from 1 as listed) that can match TCP from ``peer``."""
    fam = "ipv4" if family(peer) == 4 else "ipv6"
    out = []
    for pos, rule_text in enumerate(rich, 1):
        r = _rich(rule_text)
        if r["family"] and r["family"] != fam:
            continue
        if r["proto"] and r["proto"] != "tcp":
            continue
        if r["source"] and addr_in(peer, r["source"]) == r["negated"]:
            continue
        out.append((pos, rule_text, r))
    return out


def fix_command(f: dict[str, Any], ports: list[Interval]) -> str:
    """The zone's target rejects: open the ports in the zone (now and ``--permanent``). A rich
    rule drops: an accept rich rule of priority -1 per peer and port range, which firewalld
    puts before every rule of priority 0 (deny rules come before ports otherwise)."""
    z = shlex.quote(f["table"].removeprefix("zone "))
    if f["chain"] != "rich rules":
        spec = ports_text(ports)
        return (
            f"firewall-cmd --zone={z} --add-port={spec}/tcp && "
            f"firewall-cmd --permanent --zone={z} --add-port={spec}/tcp"
        )
    cmds = []
    for peer in f["peers"]:
        fam = "ipv4" if family(peer) == 4 else "ipv6"
        for lo, hi in ports:
            port = str(lo) if lo == hi else f"{lo}-{hi}"
            rule = (
                f'rule priority="-1" family="{fam}" source address="{peer}" '
                f'port port="{port}" protocol="tcp" accept'
            )
            for permanent in ("", "--permanent "):
                cmds.append(f"firewall-cmd {permanent}--zone={z} --add-rich-rule='{rule}'")
    return " && ".join(cmds)
