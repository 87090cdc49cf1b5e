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
  - When ufw is active, its rules and defaults are judged from C(ufw status verbose), and from
    iptables only the rules outside ufw's own chains (a DROP inserted before them, say); tables
    owned by iptables-nft or firewalld are not reported a second time from nft.
  - firewalld - the zone of O(ifname) (else the default zone) with C(firewall-cmd --list-all);
    the ports of its services, and of the services they include, are read with
    C(firewall-cmd --info-service) and count as open. A service that cannot be read turns what the
    zone's target would reject into an uncertain finding (C(certain) false), not a certain one.
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

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nccl_firewall_read import PORTS_SPEC, read_firewall


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "peers": {"type": "list", "elements": "str", "required": True},
            "ports": {"type": "list", "elements": "dict", "required": True, "options": PORTS_SPEC},
            "address": {"type": "str", "default": ""},
            "ifname": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    p = module.params
    seen = read_firewall(module, p["peers"], p["ports"], p["address"], p["ifname"])
    module.exit_json(changed=False, **seen)


if __name__ == "__main__":
    main()
