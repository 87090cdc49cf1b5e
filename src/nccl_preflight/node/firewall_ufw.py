# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""ufw (``ufw status verbose``): parse, judge, fix; and which iptables findings are ufw's own.

Recorded examples: tests/fixtures/firewall/ufw-status-*.txt (and iptables-save-ufw-custom-drop.txt
for ufw's chains in iptables).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from .firewall_common import (
    LOOPBACK_IFNAME,
    Findings,
    Query,
    addr_in,
    family,
    finding,
    if_match,
    parse_port_list,
    ports_intersect,
    ports_subtract,
    ports_text,
)

# Chains ufw makes in iptables (ufw-before-input, ufw-user-input, ...) and ip6tables (ufw6-...).
UFW_CHAIN_PREFIXES = ("ufw-", "ufw6-")


def ufw_owns(finding: dict[str, Any]) -> bool:
    """Whether an iptables finding is ufw's own: a rule in one of ufw's chains, or a built-in
    chain's policy (ufw sets it from its defaults). With ufw active, evaluate_ufw judges those
    from ``ufw status``; the other iptables rules (one inserted before ufw's chains) still count.
    """
    return finding["chain"].startswith(UFW_CHAIN_PREFIXES) or finding["position"] is None


def parse_ufw_status(text: str) -> dict[str, Any]:
    """``ufw status verbose`` -> {"active", "default_incoming", "rules": [...]}.

    Each rule: {"text", "to", "action", "from", "v6"}, in the order ufw evaluates them.
    """
    active = False
    default_in = ""
    rules = []
    in_table = False
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("Status:"):
            active = line.split(":", 1)[1].strip() == "active"
        elif line.startswith("Default:"):
            m = re.search(r"(\w+) \(incoming\)", line)
            default_in = m.group(1) if m else ""
        elif line.startswith("--"):
            in_table = True
        elif in_table and line.strip():
            body = re.sub(r"^\[\s*\d+\]\s*", "", line.strip())
            body = body.split("#", 1)[0].rstrip()  # rule comments
            cols = re.split(r"\s{2,}", body)
            if len(cols) < 3:
                continue
            to, action, frm = cols[0], cols[1], cols[2]
            v6 = "(v6)" in to or "(v6)" in frm or _names_ipv6(to) or _names_ipv6(frm)
            rules.append(
                {
                    "text": line.strip(),
                    "to": to.replace("(v6)", "").strip(),
                    "action": action,
                    "from": frm.replace("(v6)", "").strip(),
                    "v6": v6,
                }
            )
    return {"active": active, "default_incoming": default_in, "rules": rules}


def _names_ipv6(column: str) -> bool:
    """ufw marks a rule "(v6)" only where its address is Anywhere; a rule for one IPv6 address or
    network (``ufw allow from fd00::12 ...``) shows that address instead."""
    for token in column.split():
        try:
            network = ipaddress.ip_network(re.sub(r"/(tcp|udp)$", "", token), strict=False)
        except ValueError:  # a port, Anywhere, (v6), an application name
            continue
        if network.version == 6:
            return True
    return False


def _ufw_endpoint(spec: str):
    """'Anywhere', '10.0.0.0/8', '29500/tcp', '10.0.0.1 29500/tcp', 'Anywhere on eth0', '22/tcp
    (OpenSSH)' -> (address or None, ports or None, proto or None, iface or None, understood)."""
    spec = re.sub(r"\(.*?\)", "", spec).strip()
    iface = None
    m = re.search(r"\bon (\S+)$", spec)
    if m:
        iface = m.group(1)
        spec = spec[: m.start()].strip()
    addr, ports, proto, understood = None, None, None, True
    for tok in spec.split():
        if tok == "Anywhere":
            continue
        pm = re.fullmatch(r"([\d,:]+)(?:/(tcp|udp))?", tok)
        if pm:
            ports = parse_port_list(pm.group(1))
            proto = pm.group(2)
            continue
        am = re.fullmatch(r"([0-9a-fA-F.:]+(?:/\d+)?)(?:/(tcp|udp))?", tok)
        if am:
            addr = am.group(1)
            proto = am.group(2) or proto
            continue
        understood = False  # an application profile name or something else
    return addr, ports, proto, iface, understood


def _rule_hit(r: dict[str, Any], peer: str, q: Query, todo):
    """-> (ports of ``todo`` the rule matches, certain) or None when it cannot match."""
    taddr, tports, tproto, tif, tok = _ufw_endpoint(r["to"])
    faddr, fports, fproto, _fif, fok = _ufw_endpoint(r["from"])
    if "udp" in (tproto, fproto):
        return None
    if faddr and not addr_in(peer, faddr):
        return None
    if taddr and q.address and not addr_in(q.address, taddr):
        return None
    if tif and q.ifname and not if_match(q.ifname, tif):
        return None
    hit = ports_intersect(todo, tports) if tports else list(todo)
    return (hit, bool(tok and fok and fports is None)) if hit else None


def evaluate_ufw(parsed: dict[str, Any], queries: list[Query]):
    """Findings for ``ufw status verbose``: the first matching rule decides, then the default.

    A host's connections to itself (queries arriving on ``lo``) are not judged: ufw's
    before.rules accept everything on the loopback interface before any rule ufw status shows.
    """
    acc = Findings()
    if not parsed.get("active"):
        return []
    for q in queries:
        if q.ifname == LOOPBACK_IFNAME:
            continue
        for peer in q.peers:
            v6 = family(peer) == 6
            todo = list(q.ports)
            for pos, r in enumerate(parsed["rules"], 1):
                if not todo:
                    break
                action = r["action"].split()
                if r["v6"] != v6 or (len(action) > 1 and action[1] != "IN"):
                    continue
                matched = _rule_hit(r, peer, q, todo)
                if matched is None:
                    continue
                hit, certain = matched
                if action[0] in ("DENY", "REJECT"):
                    f = finding(
                        "ufw",
                        "",
                        "ufw-user-input",
                        pos,
                        r["text"],
                        action[0].lower(),
                        certain,
                        q.label,
                    )
                    acc.add(("ufw", pos, q.label), f, peer, hit)
                elif action[0] != "ALLOW":  # LIMIT may drop a burst: not taken as accepting
                    continue
                if certain:
                    todo = ports_subtract(todo, hit)
            if todo and parsed["default_incoming"] in ("deny", "reject"):
                default = parsed["default_incoming"]
                f = finding(
                    "ufw",
                    "",
                    "default incoming policy",
                    None,
                    f"Default: {default} (incoming)",
                    default,
                    True,
                    q.label,
                )
                acc.add(("ufw", "default", q.label), f, peer, todo)
    return acc.finalize(fix_command)


def fix_command(f: dict[str, Any], ports) -> str:
    """``ufw allow`` per peer: inserted at the denying rule's number (so it comes first), or
    appended when the default policy denies (no rule matched; ``ufw insert 1`` fails on a ruleset
    without rules, and for an IPv6 rule above the IPv4 ones)."""
    where = f"insert {f['position']} " if f["position"] else ""
    spec = ports_text(ports, ":")
    return " && ".join(
        f"ufw {where}allow proto tcp from {p} to any port {spec}" for p in f["peers"]
    )
