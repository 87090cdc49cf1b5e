#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read ufw, firewalld, nftables and iptables (never change them) and report blocking rules."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_firewall
short_description: Report firewall rules that would drop TCP from peers to the job's ports
description:
  - Reads, never changes, the host firewall through C(ufw status verbose),
    C(firewall-cmd --list-all), C(nft -j list ruleset), C(iptables-save) and C(ip6tables-save),
    whichever are installed, and reports every rule or policy that would drop or reject a new TCP
    connection from O(peers) to O(ports) on O(address) (arriving on O(ifname)).
  - Reading iptables and nftables needs root; run it with C(become) when the remote user is not
    root. A tool that cannot be read is reported in RV(tools) with its error.
  - When ufw is active it is the one reported (its rules are also in iptables); tables owned by
    iptables-nft or firewalld are not reported a second time from nft.
version_added: "0.1.0"
options:
  peers:
    description: Fabric addresses of the other hosts.
    type: list
    elements: str
    required: true
  ports:
    description: Port ranges to check, each with a label.
    type: list
    elements: dict
    required: true
    suboptions:
      label:
        description: C(MASTER_PORT) or C(ephemeral range), used in messages.
        type: str
        required: true
      low:
        description: First port.
        type: int
        required: true
      high:
        description: Last port (defaults to O(ports[].low)).
        type: int
  address:
    description: This host's fabric address (destination of the connections).
    type: str
    default: ""
  ifname:
    description: This host's fabric interface (where the connections arrive).
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    details: Only reads.
author:
  - nccl-preflight contributors
"""

EXAMPLES = r"""
- name: Look for firewall rules that drop the job's traffic
  nccl_firewall:
    peers: [10.0.0.12, 10.0.0.13]
    address: 10.0.0.11
    ifname: enp1s0f0np0
    ports:
      - {label: MASTER_PORT, low: 29500}
      - {label: ephemeral range, low: 32768, high: 60999}
  become: true
"""

RETURN = r"""
findings:
  description: Rules or policies that drop/reject the traffic; C(certain) false means the rule
    has a condition this module cannot judge and may drop it.
  returned: always
  type: list
  elements: dict
  sample:
    - tool: iptables
      table: filter
      chain: INPUT
      position: 3
      rule: "-A INPUT -p tcp -m tcp --dport 29500 -j DROP"
      action: drop
      certain: true
      label: MASTER_PORT
      peers: [10.0.0.12]
      ports: [[29500, 29500]]
      ports_text: "29500"
      fix: "iptables -I INPUT 3 -p tcp -s 10.0.0.12 --dport 29500 -j ACCEPT"
      text: "iptables filter chain INPUT rule 3 (...) drops tcp/29500 (MASTER_PORT) from 10.0.0.12"
tools:
  description: Per tool, whether it is installed, was read and what went wrong reading it.
  returned: always
  type: dict
  sample: {iptables: {present: true, read: true, active: true, error: ""}}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nccl_firewall_rules import (
    Query,
    describe_finding,
    evaluate_firewalld,
    evaluate_iptables,
    evaluate_nft,
    evaluate_ufw,
    iptables_owned_nft_tables,
    parse_firewalld_list_all,
    parse_iptables_save,
    parse_nft_json,
    parse_ufw_status,
)

# sbin directories are often missing from a non-login PATH over SSH
EXTRA_PATHS = ["/usr/sbin", "/sbin", "/usr/local/sbin"]


class Reader:
    def __init__(self, module: AnsibleModule) -> None:
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


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "peers": {"type": "list", "elements": "str", "required": True},
            "ports": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "label": {"type": "str", "required": True},
                    "low": {"type": "int", "required": True},
                    "high": {"type": "int"},
                },
            },
            "address": {"type": "str", "default": ""},
            "ifname": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    p = module.params
    queries = [
        Query(
            peers=p["peers"],
            ports=[(spec["low"], spec["high"] if spec["high"] is not None else spec["low"])],
            label=spec["label"],
            ifname=p["ifname"],
            address=p["address"],
        )
        for spec in p["ports"]
    ]
    reader = Reader(module)
    findings: list[dict] = []

    ufw_active = False
    out = reader.run("ufw", ["ufw", "status", "verbose"])
    if out is not None:
        parsed = parse_ufw_status(out)
        ufw_active = parsed["active"]
        reader.tools["ufw"]["active"] = ufw_active
        findings += evaluate_ufw(parsed, queries)

    firewalld_running = False
    out = reader.run("firewalld", ["firewall-cmd", "--state"])
    if out is not None and out.strip() == "running":
        firewalld_running = True
        zone = ""
        if p["ifname"]:
            zone = (
                reader.run("firewalld", ["firewall-cmd", f"--get-zone-of-interface={p['ifname']}"])
                or ""
            ).strip()
        if not zone:
            reader.tools["firewalld"]["error"] = ""
            zone = (reader.run("firewalld", ["firewall-cmd", "--get-default-zone"]) or "").strip()
        if zone:
            out = reader.run("firewalld", ["firewall-cmd", f"--zone={zone}", "--list-all"])
            if out is not None:
                findings += evaluate_firewalld(parse_firewalld_list_all(out), queries)
    if "firewalld" in reader.tools:
        reader.tools["firewalld"]["active"] = firewalld_running

    variant = ""
    for tool in ("iptables", "ip6tables"):
        out = reader.run(tool, [f"{tool}-save"])
        if out is None:
            continue
        parsed = parse_iptables_save(out)
        variant = variant or parsed["variant"]
        reader.tools[tool]["active"] = bool(parsed["tables"])
        if ufw_active:
            reader.tools[tool]["note"] = "managed by ufw, reported as ufw"
            continue
        findings += evaluate_iptables(parsed, queries, tool=tool)

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
    module.exit_json(changed=False, findings=findings, tools=reader.tools)


if __name__ == "__main__":
    main()
