# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""nftables (``nft -j list ruleset``): parse, judge (nccl_firewall_chains' walker), fix.

Recorded examples: tests/fixtures/firewall/nft-*.json.
"""

from __future__ import annotations

import ipaddress
import json
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
    by_family,
    family,
    finding,
    if_match,
    norm,
    ports_complement,
    ports_intersect,
    ports_text,
)

IPTABLES_NFT_TABLES = {"filter", "raw", "mangle", "nat", "security"}


def parse_nft_json(text: str) -> dict[str, Any]:
    """``nft -j list ruleset`` -> {"chains": {(fam, table, chain): {...}}, "rules", "sets"}."""
    data = json.loads(text) if text.strip() else {"nftables": []}
    chains: dict[tuple, dict] = {}
    rules: dict[tuple, list] = {}
    sets: dict[tuple, list] = {}
    for obj in data.get("nftables", []):
        if "chain" in obj:
            c = obj["chain"]
            key = (c["family"], c["table"], c["name"])
            chains[key] = c
            rules.setdefault(key, [])
        elif "rule" in obj:
            r = obj["rule"]
            rules.setdefault((r["family"], r["table"], r["chain"]), []).append(r)
        elif "set" in obj:
            s = obj["set"]
            sets[(s["family"], s["table"], s["name"])] = s.get("elem", [])
    return {"chains": chains, "rules": rules, "sets": sets}


def _nft_value_ports(v: Any) -> list[Interval] | None:
    if isinstance(v, int):
        return [(v, v)]
    if isinstance(v, dict) and "range" in v:
        lo, hi = v["range"]
        if isinstance(lo, int) and isinstance(hi, int):
            return [(lo, hi)]
    if isinstance(v, dict) and "set" in v:
        out: list[Interval] = []
        for e in v["set"]:
            p = _nft_value_ports(e)
            if p is None:
                return None
            out += p
        return norm(out)
    return None


def _nft_value_has_addr(v: Any, addr: str, sets, fam_table) -> bool | None:
    if isinstance(v, str):
        if v.startswith("@"):
            elems = sets.get((*fam_table, v[1:]))
            if elems is None:
                return None
            return _nft_value_has_addr({"set": elems}, addr, sets, fam_table)
        try:
            return addr_in(addr, v)
        except ValueError:
            return None
    if isinstance(v, dict) and "prefix" in v:
        p = v["prefix"]
        return addr_in(addr, f"{p['addr']}/{p['len']}")
    if isinstance(v, dict) and "range" in v:
        lo, hi = (ipaddress.ip_address(x) for x in v["range"])
        a = ipaddress.ip_address(addr)
        return a.version == lo.version and lo <= a <= hi
    if isinstance(v, dict) and "set" in v:
        results = [_nft_value_has_addr(e, addr, sets, fam_table) for e in v["set"]]
        if any(r is True for r in results):
            return True
        return None if any(r is None for r in results) else False
    if isinstance(v, dict) and "elem" in v:
        return _nft_value_has_addr(v["elem"]["val"], addr, sets, fam_table)
    return None


def _nft_match(expr: dict, peer: str, q: Query, sets, fam_table):
    """-> (match True/False/None, dports or None)."""
    m = expr["match"]
    op, left, right = m.get("op", "=="), m["left"], m["right"]
    ok: bool | None = None
    dports = None
    if isinstance(left, dict) and "payload" in left:
        pl = left["payload"]
        proto, fld = pl.get("protocol"), pl.get("field")
        if proto in ("ip", "ip6") and fld in ("saddr", "daddr"):
            if (proto == "ip") != (family(peer) == 4):
                ok = False  # this rule only sees the other family
            else:
                addr = peer if fld == "saddr" else q.address
                ok = _nft_value_has_addr(right, addr, sets, fam_table) if addr else None
        elif proto in ("tcp", "th") and fld == "dport":
            ports = _nft_value_ports(right)
            if ports is None:
                return None, None
            cmp = {
                "<": [(PORT_MIN, ports[0][0] - 1)],
                "<=": [(PORT_MIN, ports[0][0])],
                ">": [(ports[-1][1] + 1, PORT_MAX)],
                ">=": [(ports[-1][1], PORT_MAX)],
                "!=": ports_complement(ports),
            }
            return True, cmp.get(op, ports)
        elif proto == "udp":
            ok = False
        else:
            return None, None
    elif isinstance(left, dict) and "meta" in left:
        key = left["meta"]["key"]
        if key == "l4proto":
            ok = right in ("tcp", 6) or (isinstance(right, dict) and "tcp" in right.get("set", []))
        elif key in ("iifname", "iif"):
            ok = if_match(q.ifname, str(right)) if q.ifname else None
        elif key == "nfproto":
            ok = right == ("ipv4" if family(peer) == 4 else "ipv6")
        else:
            return None, None
    elif isinstance(left, dict) and "ct" in left and left["ct"].get("key") == "state":
        states = right if isinstance(right, list) else [right]
        ok = "new" in states
    else:
        return None, None
    if ok is not None and op == "!=":
        ok = not ok
    return ok, dports


_NFT_VERDICTS = ("accept", "drop", "reject", "jump", "goto", "return", "continue", "queue")


def nft_rule_text(rule: dict) -> str:
    """A short nft-like rendering of a JSON rule, for messages."""
    parts = []
    for e in rule.get("expr", []):
        if "match" in e:
            m = e["match"]
            left, right = m["left"], m["right"]
            if "payload" in left:
                lt = f"{left['payload']['protocol']} {left['payload']['field']}"
            elif "meta" in left:
                lt = f"meta {left['meta']['key']}"
            elif "ct" in left:
                lt = f"ct {left['ct']['key']}"
            else:
                lt = json.dumps(left)
            rt = _nft_value_text(right)
            op = "" if m.get("op") in ("==", "in") else f"{m.get('op')} "
            parts.append(f"{lt} {op}{rt}")
        elif "counter" in e:
            parts.append("counter")
        elif "reject" in e:
            parts.append("reject" + (f" with {e['reject']['type']}" if e["reject"] else ""))
        elif "jump" in e or "goto" in e:
            k = "jump" if "jump" in e else "goto"
            parts.append(f"{k} {e[k]['target']}")
        elif "xt" in e:
            parts.append(f"xt {e['xt'].get('type')} {e['xt'].get('name')}")
        else:
            k = next(iter(e))
            parts.append(k if e[k] is None else f"{k} {json.dumps(e[k])}")
    return " ".join(parts)


def _nft_value_text(v: Any) -> str:
    if isinstance(v, dict) and "range" in v:
        return f"{v['range'][0]}-{v['range'][1]}"
    if isinstance(v, dict) and "prefix" in v:
        return f"{v['prefix']['addr']}/{v['prefix']['len']}"
    if isinstance(v, dict) and "set" in v:
        return "{ " + ", ".join(_nft_value_text(x) for x in v["set"]) + " }"
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    return str(v)


def _rule_step(r: dict, peer: str, q: Query, sets, fam_table) -> Step:
    """How one nft rule treats a new TCP connection from ``peer``."""
    state: bool | None = True
    ports: list[Interval] = [(PORT_MIN, PORT_MAX)]
    verdict, target = None, None
    for e in r.get("expr", []):
        if "match" in e:
            ok, dp = _nft_match(e, peer, q, sets, fam_table)
            if ok is False:
                return Step(False, ports, None)
            if ok is None:
                state = None
            if dp is not None:
                ports = ports_intersect(ports, dp)
        elif "xt" in e and e["xt"].get("type") == "match":
            state = None if state else state
        elif "xt" in e and e["xt"].get("type") == "target":
            name = e["xt"].get("name", "")
            verdict = {"REJECT": "reject", "DROP": "drop", "ACCEPT": "accept"}.get(name)
        elif "limit" in e:
            state = None if state else state
        else:
            k = next(iter(e))
            if k in _NFT_VERDICTS:
                verdict = k
                target = e[k].get("target") if isinstance(e[k], dict) else None
    if verdict in ("continue", "queue"):
        verdict = None
    return Step(state, ports, verdict, (*fam_table, target) if target else None)


def _ruleset(parsed: dict, peer: str, q: Query, acc: Findings) -> Ruleset:
    """The walker's view of nft for one peer; chains are (family, table, chain) keys."""
    chains, rules, sets = parsed["chains"], parsed["rules"], parsed["sets"]

    def step(rule, key) -> Step:
        s = _rule_step(rule, peer, q, sets, key[:2])
        if s.target is not None and s.target not in chains:
            s.target = None
        return s

    def policy(key) -> str | None:
        chain = chains[key]
        return chain.get("policy", "accept") if "hook" in chain else None

    def report(key, rule, action, certain, ports) -> None:
        fam, table, name = key
        if rule is None:
            pos, text = None, f"policy drop of chain {name}"
            acc_key = ("nftables", *key, "policy", q.label)
        else:
            pos, text = rule.get("handle"), nft_rule_text(rule)
            acc_key = ("nftables", *key, pos, q.label)
        f = finding("nftables", f"{fam} {table}", name, pos, text, action, certain, q.label)
        acc.add(acc_key, f, peer, ports)

    return Ruleset(lambda key: rules.get(key, []), step, policy, report)


def fix_command(table: str, chain: str, peers: list[str], ports: list[Interval]) -> str:
    """``nft insert rule`` (at the top of ``chain``) accepting ``ports`` from ``peers``; one
    command per address family (an inet table sees both), joined by ``&&``."""
    dport = ports_text(ports)
    dport = dport if len(ports) == 1 else "{ " + dport.replace(",", ", ") + " }"
    where = " ".join(shlex.quote(part) for part in (*table.split(), chain))
    cmds = []
    for fam, group in by_family(peers):
        saddr = "ip saddr" if fam == 4 else "ip6 saddr"
        src = group[0] if len(group) == 1 else "{ " + ", ".join(group) + " }"
        cmds.append(f"nft insert rule {where} {saddr} {src} tcp dport {dport} accept")
    return " && ".join(cmds)


def evaluate_nft(
    parsed: dict[str, Any], queries: list[Query], skip_tables: set[tuple[str, str]] | None = None
):
    """Findings for an nft ruleset. ``skip_tables`` {(family, table)} are reported elsewhere
    (tables owned by iptables-nft or firewalld)."""
    skip_tables = skip_tables or set()
    acc = Findings()
    for q in queries:
        for peer in q.peers:
            fam = "ip" if family(peer) == 4 else "ip6"
            ruleset = _ruleset(parsed, peer, q, acc)
            for key, c in parsed["chains"].items():
                if c.get("hook") not in ("input", "prerouting") or key[:2] in skip_tables:
                    continue
                if key[0] not in (fam, "inet"):
                    continue
                walk(ruleset, key, list(q.ports))

    def fixer(f, ports):
        return fix_command(f["table"], f["chain"], f["peers"], ports)

    return acc.finalize(fixer)


def iptables_owned_nft_tables(iptables_variant: str, parsed_nft: dict) -> set[tuple[str, str]]:
    """With iptables-nft, iptables' own tables also show in nft; report them once (as iptables)."""
    if iptables_variant != "nf_tables":
        return set()
    return {
        k[:2] for k in parsed_nft["chains"] if k[0] in ("ip", "ip6") and k[1] in IPTABLES_NFT_TABLES
    }
