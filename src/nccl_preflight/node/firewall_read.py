# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Read a node's firewall (never change it) and judge it
(src/nccl_preflight/node/firewall_<tool>.py).

Runs the read-only commands through the calling module (AnsibleModule.run_command); used by
library/nccl_preflight_observe.py, which reads the firewall in the same call as its probes (one
SSH round trip less per host).
"""

from __future__ import annotations

import os

from .commands import CommandRunner
from .firewall_common import describe_finding, host_queries
from .firewall_firewalld import (
    evaluate_firewalld,
    parse_firewalld_list_all,
    parse_firewalld_service_info,
)
from .firewall_iptables import evaluate_iptables, parse_iptables_save
from .firewall_nft import (
    evaluate_nft,
    iptables_owned_nft_tables,
    parse_nft_json,
)
from .firewall_ufw import evaluate_ufw, parse_ufw_status, ufw_owns

# sbin directories are often missing from a non-login PATH over SSH
EXTRA_PATHS = ["/usr/sbin", "/sbin", "/usr/local/sbin"]

# The argument spec of one port range (nccl_preflight_observe's firewall.ports).
PORTS_SPEC = {
    "label": {"type": "str", "required": True},
    "low": {"type": "int", "required": True},
    "high": {"type": "int"},
}


class Reader:
    def __init__(self, module: CommandRunner) -> None:
        self.module = module
        self.tools: dict[str, dict] = {}

    def run(self, tool: str, argv: list[str]) -> str | None:
        """Run a read-only command; None (and the reason in tools) when absent or failing."""
        path = self.module.get_bin_path(argv[0], opt_dirs=EXTRA_PATHS)
        info = self.tools.setdefault(tool, {"present": False, "read": False, "error": ""})
        if path is None:
            return None
        info["present"] = True
        rc, out, err = self.module.run_command([path, *argv[1:]], environ_update={"LC_ALL": "C"})
        if rc != 0:
            info["error"] = f"{' '.join(argv)} exited {rc}: {(err or out).strip()[:300]}"
            if os.geteuid() != 0:
                info["error"] += " (not root: set preflight_become_firewall: true)"
            return None
        info["read"] = True
        return out


# A service includes others; a loop or a long chain stops here.
MAX_FIREWALLD_SERVICES = 64


def read_firewalld_services(reader: Reader, names: list[str]) -> dict[str, dict]:
    """``firewall-cmd --info-service`` of each of ``names`` and of what they include.

    -> name -> parse_firewalld_service_info result; a service that cannot be read is missing
    (its error stays in the reader's tools).
    """
    services: dict[str, dict] = {}
    todo = list(names)
    tried: set[str] = set()
    while todo and len(tried) < MAX_FIREWALLD_SERVICES:
        name = todo.pop(0)
        if name in tried:
            continue
        tried.add(name)
        out = reader.run("firewalld", ["firewall-cmd", f"--info-service={name}"])
        if out is None:
            continue
        info = parse_firewalld_service_info(out)
        services[name] = info
        todo += info["includes"]
    return services


def read_firewalld(reader: Reader, ifname: str, queries: list) -> tuple[bool, list[dict]]:
    """firewalld's findings for the zone of ``ifname`` (else the default zone); -> (whether
    firewalld runs, findings)."""
    out = reader.run("firewalld", ["firewall-cmd", "--state"])
    tools = reader.tools.get("firewalld")
    if out is None and tools and tools["present"]:
        # firewall-cmd --state exits non-zero when firewalld is stopped (252, "not running") or
        # D-Bus is not there (36): installed but not filtering, which is no error.
        tools["note"] = "not running: " + tools["error"]
        tools["error"] = ""
    running = out is not None and out.strip() == "running"
    if tools:
        tools["active"] = running
    if not running:
        return False, []
    zone = ""
    if ifname:
        zone = (
            reader.run("firewalld", ["firewall-cmd", f"--get-zone-of-interface={ifname}"]) or ""
        ).strip()
    if not zone:
        reader.tools["firewalld"]["error"] = ""
        zone = (reader.run("firewalld", ["firewall-cmd", "--get-default-zone"]) or "").strip()
    out = (
        reader.run("firewalld", ["firewall-cmd", f"--zone={zone}", "--list-all"]) if zone else None
    )
    if out is None:
        return True, []
    parsed = parse_firewalld_list_all(out)
    services = read_firewalld_services(reader, parsed["services"])
    return True, evaluate_firewalld(parsed, queries, services)


def read_firewall(
    module: CommandRunner, peers: list[str], ports: list[dict], address: str, ifname: str
) -> dict:
    """Every rule or policy that would drop a new TCP connection from ``peers`` to ``ports``.

    ``ports``: [{label, low, high}] as PORTS_SPEC. -> {"findings": [...], "tools": {...}}.
    This host's own connections to ``address`` (its ranks, its probe; they arrive on ``lo``) are
    judged with the peers', so a finding's fix lets both in (nccl_firewall_common.host_queries).
    """
    spans = [(s["label"], [(s["low"], s["low"] if s.get("high") is None else s["high"])])
             for s in ports]  # fmt: skip
    queries = host_queries(peers, spans, address, ifname)
    reader = Reader(module)
    findings: list[dict] = []

    ufw_active = False
    out = reader.run("ufw", ["ufw", "status", "verbose"])
    if out is not None:
        parsed = parse_ufw_status(out)
        ufw_active = parsed["active"]
        reader.tools["ufw"]["active"] = ufw_active
        findings += evaluate_ufw(parsed, queries)

    firewalld_running, found = read_firewalld(reader, ifname, queries)
    findings += found

    variant = ""
    for tool in ("iptables", "ip6tables"):
        out = reader.run(tool, [f"{tool}-save"])
        if out is None:
            continue
        parsed = parse_iptables_save(out)
        variant = variant or parsed["variant"]
        reader.tools[tool]["active"] = bool(parsed["tables"])
        found = evaluate_iptables(parsed, queries, tool=tool)
        if ufw_active:
            reader.tools[tool]["note"] = (
                "ufw's chains and policies reported as ufw; the other rules judged here"
            )
            found = [f for f in found if not ufw_owns(f)]
        findings += found

    out = reader.run("nftables", ["nft", "-j", "list", "ruleset"])
    if out is not None:
        parsed = parse_nft_json(out)
        skip = iptables_owned_nft_tables(variant, parsed)
        if firewalld_running:
            skip |= {k[:2] for k in parsed["chains"] if k[1] == "firewalld"}
        if ufw_active:
            skip |= {k[:2] for k in parsed["chains"] if k[0] in ("ip", "ip6")}
        reader.tools["nftables"]["active"] = bool(parsed["chains"])
        reader.tools["nftables"]["skipped_tables"] = sorted(" ".join(t) for t in skip)
        findings += evaluate_nft(parsed, queries, skip_tables=skip)

    for finding in findings:
        finding["text"] = describe_finding(finding)
    return {"findings": findings, "tools": reader.tools}
