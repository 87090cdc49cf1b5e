# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read-only evaluation of host firewalls for the pre-flight (pure functions, no I/O).

The question asked of every firewall is the same: would a new TCP connection from a peer's fabric
address to one of our ports (MASTER_PORT, the ephemeral range) be dropped or rejected on this host?
Each parser turns the tool's own output into ``Finding`` dicts that name the tool, the table/chain
(or zone), the rule and the command that would let the traffic in.

Supported inputs (recorded examples in tests/fixtures/firewall/):
  * ``iptables-save`` / ``ip6tables-save`` text,
  * ``nft -j list ruleset`` JSON,
  * ``ufw status verbose`` text,
  * ``firewall-cmd --zone=<z> --list-all`` text.

The evaluation is deliberately conservative: a DROP/REJECT rule with a match we do not understand
is reported as one that *may* drop (``certain: false``); an ACCEPT we do not understand is not
taken as accepting.
"""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

Interval = tuple[int, int]
PORT_MIN, PORT_MAX = 0, 65535


# --------------------------------------------------------------------------- port interval sets
def _norm(intervals: list[Interval]) -> list[Interval]:
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
    return _norm(out)


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
    return _norm(out)


def ports_union(a: list[Interval], b: list[Interval]) -> list[Interval]:
    return _norm(list(a) + list(b))


def ports_complement(a: list[Interval]) -> list[Interval]:
    return ports_subtract([(PORT_MIN, PORT_MAX)], a)


def ports_text(ports: list[Interval], sep: str = "-") -> str:
    return ",".join(str(lo) if lo == hi else f"{lo}{sep}{hi}" for lo, hi in ports)


# --------------------------------------------------------------------------- the question
@dataclass
class Query:
    """A new TCP connection from one of ``peers`` to ``ports`` on ``address`` via ``ifname``."""

    peers: list[str]
    ports: list[Interval]
    label: str  # "MASTER_PORT" or "ephemeral range" — used in messages
    ifname: str = ""
    address: str = ""


@dataclass
class _Acc:
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


def _finalize(acc: _Acc, fixer) -> list[dict[str, Any]]:
    out = []
    for f in acc.findings.values():
        ports = [tuple(p) for p in f["ports"]]
        f["ports_text"] = ports_text(ports)
        f["fix"] = fixer(f, ports)
        out.append(f)
    return out


def _family(addr: str) -> int:
    return ipaddress.ip_address(addr).version


def _addr_in(addr: str, spec: str) -> bool:
    """``spec`` is an address, a CIDR or an address/netmask as iptables prints it."""
    return ipaddress.ip_address(addr) in ipaddress.ip_network(spec, strict=False)


def _if_match(ifname: str, pattern: str) -> bool:
    """iptables writes a wildcard interface as ``eth+``, nft as ``eth*``."""
    if pattern.endswith(("+", "*")):
        return ifname.startswith(pattern[:-1])
    return ifname == pattern


# =========================================================================== iptables-save
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
            _add_ipt_rule(cur, argv, line)
        else:
            _add_ipt_rule(cur, shlex.split(line), line)
    return {"variant": variant, "tables": tables}


def _add_ipt_rule(table: dict[str, Any], argv: list[str], text: str) -> None:
    if len(argv) < 2 or argv[0] != "-A":
        return
    rules = table["rules"].setdefault(argv[1], [])
    rules.append((len(rules) + 1, text, argv[2:]))


def _parse_port_list(spec: str, sep: str = ":") -> list[Interval]:
    out = []
    for part in spec.split(","):
        if sep in part:
            lo, hi = part.split(sep, 1)
            out.append((int(lo or PORT_MIN), int(hi or PORT_MAX)))
        else:
            out.append((int(part), int(part)))
    return _norm(out)


_IPT_NONTERMINAL = {"LOG", "NFLOG", "MARK", "CONNMARK", "CT", "TRACE", "AUDIT", "TCPMSS", "NOTRACK"}


def _ipt_match(argv: list[str], peer: str, q: Query) -> tuple[bool | None, list[Interval], dict]:
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
            cond(any(_addr_in(peer, s) for s in nxt.split(",")))
            i += 2
        elif a in ("-d", "--destination", "--dst"):
            cond(any(_addr_in(q.address, s) for s in nxt.split(",")) if q.address else None)
            i += 2
        elif a in ("-i", "--in-interface"):
            cond(_if_match(q.ifname, nxt) if q.ifname else None)
            i += 2
        elif a in ("-o", "--out-interface"):
            cond(False)  # no output interface on INPUT/PREROUTING
            i += 2
        elif a in ("-m", "--match"):
            i += 2  # loading a match module says nothing by itself
        elif a in ("--dport", "--destination-port", "--dports", "--destination-ports"):
            ports = _parse_port_list(nxt)
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


def _ipt_fix(tool: str, table: str, chain: str, position: int | None, peers, ports) -> str:
    cmd = tool.replace("-save", "")
    where = f"-I {chain} {position}" if position else f"-I {chain} 1"
    t = "" if table == "filter" else f"-t {table} "
    match = "-m multiport --dports" if len(ports) > 1 else "--dport"
    return (
        f"{cmd} {t}{where} -p tcp -s {','.join(peers)} {match} {ports_text(ports, ':')} -j ACCEPT"
    )


# The chains a packet to a local socket crosses, in order (iptables semantics: each table's chain
# is evaluated on its own; a DROP anywhere drops).
_IPT_PATH = (
    ("raw", "PREROUTING"),
    ("mangle", "PREROUTING"),
    ("mangle", "INPUT"),
    ("filter", "INPUT"),
    ("security", "INPUT"),
)


# Chains ufw makes in iptables (ufw-before-input, ufw-user-input, ...) and ip6tables (ufw6-...).
UFW_CHAIN_PREFIXES = ("ufw-", "ufw6-")


def ufw_owns(finding: dict[str, Any]) -> bool:
    """Whether an iptables finding is ufw's own: a rule in one of ufw's chains, or a built-in
    chain's policy (ufw sets it from its defaults). With ufw active, evaluate_ufw judges those
    from ``ufw status``; the other iptables rules (one inserted before ufw's chains) still count.
    """
    return finding["chain"].startswith(UFW_CHAIN_PREFIXES) or finding["position"] is None


def evaluate_iptables(parsed: dict[str, Any], queries: list[Query], tool: str = "iptables"):
    """Findings for iptables-save (``tool`` "iptables") or ip6tables-save ("ip6tables")."""
    fam = 6 if tool.startswith("ip6") else 4
    acc = _Acc()
    tables = parsed.get("tables", {})

    def walk(tname: str, chain: str, peer: str, q: Query, todo, depth: int):
        """Walk ``chain`` for ports ``todo``; returns ports that come back to the caller."""
        table = tables[tname]
        returned: list[Interval] = []
        for pos, text, argv in table["rules"].get(chain, []):
            if not todo or depth > 32:
                break
            state, dports, target = _ipt_match(argv, peer, q)
            hit = ports_intersect(todo, dports)
            if state is False or not hit:
                continue
            name = target["name"]
            if name is None or name in _IPT_NONTERMINAL:
                continue
            if name == "ACCEPT":
                if state:
                    todo = ports_subtract(todo, hit)
            elif name in ("DROP", "REJECT"):
                key = (tool, tname, chain, pos)
                finding = {
                    "tool": tool,
                    "table": tname,
                    "chain": chain,
                    "position": pos,
                    "rule": text,
                    "action": name.lower(),
                    "certain": bool(state),
                    "label": q.label,
                }
                acc.add((*key, q.label), finding, peer, hit)
                if state:
                    todo = ports_subtract(todo, hit)
            elif name == "RETURN":
                if state:
                    todo = ports_subtract(todo, hit)
                    returned = ports_union(returned, hit)
            elif name in table["rules"]:
                back = walk(tname, name, peer, q, hit, depth + 1)
                if state:
                    todo = ports_subtract(todo, hit)
                    if target["kind"] == "goto":
                        returned = ports_union(returned, back)
                    else:
                        todo = ports_union(todo, back)
        policy = table["policies"].get(chain)
        if policy is None:  # user chain: fall off the end = return
            return ports_union(returned, todo)
        if policy in ("DROP", "REJECT") and todo:
            key = (tool, tname, chain, "policy")
            finding = {
                "tool": tool,
                "table": tname,
                "chain": chain,
                "position": None,
                "rule": f":{chain} {policy} (chain policy)",
                "action": policy.lower(),
                "certain": True,
                "label": q.label,
            }
            acc.add((*key, q.label), finding, peer, todo)
        return []

    for q in queries:
        for peer in q.peers:
            if _family(peer) != fam:
                continue
            for tname, chain in _IPT_PATH:
                if tname in tables and chain in tables[tname]["policies"]:
                    walk(tname, chain, peer, q, list(q.ports), 0)

    def fixer(f, ports):
        return _ipt_fix(tool, f["table"], f["chain"], f["position"], f["peers"], ports)

    return _finalize(acc, fixer)


# =========================================================================== nftables JSON
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
        return _norm(out)
    return None


def _nft_value_has_addr(v: Any, addr: str, sets, fam_table) -> bool | None:
    if isinstance(v, str):
        if v.startswith("@"):
            elems = sets.get((*fam_table, v[1:]))
            if elems is None:
                return None
            return _nft_value_has_addr({"set": elems}, addr, sets, fam_table)
        try:
            return _addr_in(addr, v)
        except ValueError:
            return None
    if isinstance(v, dict) and "prefix" in v:
        p = v["prefix"]
        return _addr_in(addr, f"{p['addr']}/{p['len']}")
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
            if (proto == "ip") != (_family(peer) == 4):
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
            ok = _if_match(q.ifname, str(right)) if q.ifname else None
        elif key == "nfproto":
            ok = right == ("ipv4" if _family(peer) == 4 else "ipv6")
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


def evaluate_nft(
    parsed: dict[str, Any], queries: list[Query], skip_tables: set[tuple[str, str]] | None = None
):
    """Findings for an nft ruleset. ``skip_tables`` {(family, table)} are reported elsewhere
    (tables owned by iptables-nft or firewalld)."""
    skip_tables = skip_tables or set()
    acc = _Acc()
    chains, rules, sets = parsed["chains"], parsed["rules"], parsed["sets"]

    def walk(key, peer: str, q: Query, todo, depth: int):
        fam_table = key[:2]
        returned: list[Interval] = []
        for r in rules.get(key, []):
            if not todo or depth > 32:
                break
            state: bool | None = True
            ports: list[Interval] = list(todo)
            verdict, target = None, None
            for e in r.get("expr", []):
                if "match" in e:
                    ok, dp = _nft_match(e, peer, q, sets, fam_table)
                    if ok is False:
                        state = False
                        break
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
            if state is False or not ports or verdict is None:
                continue
            if verdict == "accept":
                if state:
                    todo = ports_subtract(todo, ports)
            elif verdict in ("drop", "reject"):
                fam, table, chain = key
                finding = {
                    "tool": "nftables",
                    "table": f"{fam} {table}",
                    "chain": chain,
                    "position": r.get("handle"),
                    "rule": nft_rule_text(r),
                    "action": verdict,
                    "certain": bool(state),
                    "label": q.label,
                }
                acc.add(("nftables", *key, r.get("handle"), q.label), finding, peer, ports)
                if state:
                    todo = ports_subtract(todo, ports)
            elif verdict == "return":
                if state:
                    todo = ports_subtract(todo, ports)
                    returned = ports_union(returned, ports)
            elif verdict in ("jump", "goto") and (*fam_table, target) in chains:
                back = walk((*fam_table, target), peer, q, ports, depth + 1)
                if state:
                    todo = ports_subtract(todo, ports)
                    if verdict == "goto":
                        returned = ports_union(returned, back)
                    else:
                        todo = ports_union(todo, back)
        chain = chains[key]
        if "hook" not in chain:
            return ports_union(returned, todo)
        if chain.get("policy") == "drop" and todo:
            fam, table, name = key
            finding = {
                "tool": "nftables",
                "table": f"{fam} {table}",
                "chain": name,
                "position": None,
                "rule": f"policy drop of chain {name}",
                "action": "drop",
                "certain": True,
                "label": q.label,
            }
            acc.add(("nftables", *key, "policy", q.label), finding, peer, todo)
        return []

    for q in queries:
        for peer in q.peers:
            fam = "ip" if _family(peer) == 4 else "ip6"
            for key, c in chains.items():
                if c.get("hook") not in ("input", "prerouting") or key[:2] in skip_tables:
                    continue
                if key[0] not in (fam, "inet"):
                    continue
                walk(key, peer, q, list(q.ports), 0)

    def fixer(f, ports):
        saddr = "ip saddr" if _family(f["peers"][0]) == 4 else "ip6 saddr"
        peers = f["peers"][0] if len(f["peers"]) == 1 else "{ " + ", ".join(f["peers"]) + " }"
        dport = ports_text(ports)
        dport = dport if len(ports) == 1 else "{ " + dport.replace(",", ", ") + " }"
        return f"nft insert rule {f['table']} {f['chain']} {saddr} {peers} tcp dport {dport} accept"

    return _finalize(acc, fixer)


def iptables_owned_nft_tables(iptables_variant: str, parsed_nft: dict) -> set[tuple[str, str]]:
    """With iptables-nft, iptables' own tables also show in nft; report them once (as iptables)."""
    if iptables_variant != "nf_tables":
        return set()
    return {
        k[:2] for k in parsed_nft["chains"] if k[0] in ("ip", "ip6") and k[1] in IPTABLES_NFT_TABLES
    }


# =========================================================================== ufw
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
            v6 = "(v6)" in to or "(v6)" in frm
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
            ports = _parse_port_list(pm.group(1))
            proto = pm.group(2)
            continue
        am = re.fullmatch(r"([0-9a-fA-F.:]+(?:/\d+)?)(?:/(tcp|udp))?", tok)
        if am:
            addr = am.group(1)
            proto = am.group(2) or proto
            continue
        understood = False  # an application profile name or something else
    return addr, ports, proto, iface, understood


def evaluate_ufw(parsed: dict[str, Any], queries: list[Query]):
    acc = _Acc()
    if not parsed.get("active"):
        return []
    for q in queries:
        for peer in q.peers:
            v6 = _family(peer) == 6
            todo = list(q.ports)
            for pos, r in enumerate(parsed["rules"], 1):
                if not todo:
                    break
                action = r["action"].split()
                if r["v6"] != v6 or (len(action) > 1 and action[1] != "IN"):
                    continue
                taddr, tports, tproto, tif, tok = _ufw_endpoint(r["to"])
                faddr, fports, fproto, _fif, fok = _ufw_endpoint(r["from"])
                state: bool | None = True if (tok and fok and fports is None) else None
                if "udp" in (tproto, fproto):
                    continue
                if faddr and not _addr_in(peer, faddr):
                    continue
                if taddr and q.address and not _addr_in(q.address, taddr):
                    continue
                if tif and q.ifname and not _if_match(q.ifname, tif):
                    continue
                hit = ports_intersect(todo, tports) if tports else list(todo)
                if not hit:
                    continue
                if action[0] in ("ALLOW", "LIMIT"):
                    if state and action[0] == "ALLOW":
                        todo = ports_subtract(todo, hit)
                elif action[0] in ("DENY", "REJECT"):
                    finding = {
                        "tool": "ufw",
                        "table": "",
                        "chain": "ufw-user-input",
                        "position": pos,
                        "rule": r["text"],
                        "action": action[0].lower(),
                        "certain": bool(state),
                        "label": q.label,
                    }
                    acc.add(("ufw", pos, q.label), finding, peer, hit)
                    if state:
                        todo = ports_subtract(todo, hit)
            if todo and parsed["default_incoming"] in ("deny", "reject"):
                finding = {
                    "tool": "ufw",
                    "table": "",
                    "chain": "default incoming policy",
                    "position": None,
                    "rule": f"Default: {parsed['default_incoming']} (incoming)",
                    "action": parsed["default_incoming"],
                    "certain": True,
                    "label": q.label,
                }
                acc.add(("ufw", "default", q.label), finding, peer, todo)

    def fixer(f, ports):
        cmds = [
            f"ufw insert 1 allow proto tcp from {p} to any port {ports_text(ports, ':')}"
            for p in f["peers"]
        ]
        return " && ".join(cmds)

    return _finalize(acc, fixer)


# =========================================================================== firewalld
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
            ports += _parse_port_list(num, "-")
    return {
        "zone": zone,
        "target": fields.get("target", "default"),
        "ports": _norm(ports),
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
            ports += _parse_port_list(num, "-")
    return {"name": name, "ports": _norm(ports), "includes": fields.get("includes", "").split()}


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


def _firewalld_rich(rule: str) -> dict[str, Any]:
    def attr(name: str) -> str | None:
        m = re.search(rf'{name}="([^"]*)"', rule)
        return m.group(1) if m else None

    action = next((a for a in ("accept", "reject", "drop") if re.search(rf"\b{a}\b", rule)), None)
    port = attr("port")
    proto = attr("protocol")
    return {
        "family": attr("family"),
        "source": attr("address") if "source" in rule else None,
        "ports": _parse_port_list(port, "-") if port else None,
        "proto": proto,
        "action": action,
        "negated": "not" in rule.split("source", 1)[-1].split("address", 1)[0],
        "understood": not re.search(r"\b(service|ipset|mac|forward-port|masquerade|icmp)", rule),
    }


def evaluate_firewalld(
    parsed: dict[str, Any],
    queries: list[Query],
    services: dict[str, dict[str, Any]] | None = None,
):
    """firewalld evaluates a zone as: deny rich rules (drop/reject), then allow (ports, the
    services' ports, accept rich rules), then the zone target (``default``/``%%REJECT%%`` reject,
    ``DROP`` drops).

    ``services``: name -> parse_firewalld_service_info result, for the zone's services and what
    they include; a service missing there makes a target finding uncertain, not certain.
    """
    acc = _Acc()
    target = parsed["target"]
    if target == "ACCEPT":
        return []
    zone = parsed["zone"]
    service_ports, unknown = firewalld_service_ports(parsed.get("services", []), services or {})
    listed = ", ".join(parsed.get("services", [])) or "none"
    unread = f"; services not read: {', '.join(unknown)}" if unknown else ""
    for q in queries:
        for peer in q.peers:
            fam = "ipv4" if _family(peer) == 4 else "ipv6"
            todo = list(q.ports)
            rich = []
            for pos, rule_text in enumerate(parsed["rich"], 1):
                r = _firewalld_rich(rule_text)
                if r["family"] and r["family"] != fam:
                    continue
                if r["proto"] and r["proto"] != "tcp":
                    continue
                if r["source"] and _addr_in(peer, r["source"]) == r["negated"]:
                    continue
                rich.append((pos, rule_text, r))
            for pos, rule_text, r in rich:
                hit = ports_intersect(todo, r["ports"]) if r["ports"] else list(todo)
                if hit and r["action"] in ("reject", "drop"):
                    finding = {
                        "tool": "firewalld",
                        "table": f"zone {zone}",
                        "chain": "rich rules",
                        "position": pos,
                        "rule": rule_text,
                        "action": r["action"],
                        "certain": r["understood"],
                        "label": q.label,
                    }
                    acc.add(("firewalld", pos, q.label), finding, peer, hit)
                    if r["understood"]:
                        todo = ports_subtract(todo, hit)
            todo = ports_subtract(todo, parsed["ports"])
            todo = ports_subtract(todo, service_ports)
            for _pos, _text, r in rich:
                if r["action"] == "accept" and r["understood"]:
                    todo = ports_subtract(todo, r["ports"] or [(PORT_MIN, PORT_MAX)])
            if todo:
                action = "drop" if target == "DROP" else "reject"
                finding = {
                    "tool": "firewalld",
                    "table": f"zone {zone}",
                    "chain": "target",
                    "position": None,
                    "rule": f"target: {target} (port not in the zone's ports or services; "
                    f"services: {listed}{unread})",
                    "action": action,
                    # A service that could not be read may open the port.
                    "certain": not unknown,
                    "label": q.label,
                }
                acc.add(("firewalld", "target", q.label), finding, peer, todo)

    def fixer(f, ports):
        z = f["table"].removeprefix("zone ")
        spec = ports_text(ports)
        return (
            f"firewall-cmd --zone={z} --add-port={spec}/tcp && "
            f"firewall-cmd --permanent --zone={z} --add-port={spec}/tcp"
        )

    return _finalize(acc, fixer)


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
