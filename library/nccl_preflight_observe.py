#!/usr/bin/python
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight's observation on one node: TCP to the peers, the firewall, the listeners."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_preflight_observe
short_description: A node's side of the pre-flight - TCP to the peers, the firewall, the listeners
description:
  - The pre-flight's one observation on a node, after M(nccl_preflight_start) started the
    pre-flight (O(nccl_preflight_start#module:preflight)) - the listeners on the fabric address
    and the torch probe.
    Each part runs when its option is given, in this order - connect to O(targets), read the
    firewall (O(firewall)), collect the listeners and the torch probe (O(collect)) and, when this
    is the run's last call on the node, remove its run directory (O(collect.remove_run_dir)).
  - One module for these jobs, and one call, by design - a module per job would be one more SSH
    round trip and Python start per host (0.4-0.7 s each), and the listeners must be collected
    after this host's own connections. Like M(ansible.builtin.wait_for), the name says what the
    options have in common - what this node shows the pre-flight; the judging is done on the
    control machine.
  - O(targets) - for each target, connects from O(source) with a short timeout and closes at once.
    ICMP is often blocked; TCP to the very ports the job uses is what matters. A refused
    connection is retried for O(refused_retry) seconds (a listener that has not called C(listen)
    yet); a timeout is not retried. Never fails for an unreachable target; each target's outcome
    is in RV(results).
  - O(firewall) - reads (never changes) this host's firewall. It runs C(ufw status verbose),
    C(firewall-cmd --list-all), C(nft -j list ruleset), C(iptables-save) and C(ip6tables-save),
    whichever are installed, and reports every rule or policy that would drop or reject a new
    TCP connection from O(firewall.peers) to O(firewall.ports) on O(firewall.address) (arriving
    on O(firewall.ifname)), and from this host itself (its own ranks and probes connect to
    O(firewall.address); that traffic arrives on C(lo)).
  - When ufw is active, its rules and defaults are judged from C(ufw status verbose), and from
    iptables only the rules outside ufw's own chains (a DROP inserted before them, say); tables
    owned by iptables-nft or firewalld are not reported a second time from nft.
  - firewalld - the zone of O(firewall.ifname) (else the default zone) with
    C(firewall-cmd --list-all); the ports of its services, and of the services they include, are
    read with C(firewall-cmd --info-service) and count as open. A service that cannot be read
    turns what the zone's target would reject into an uncertain finding (C(certain) false).
  - O(collect) - after the connections, stops the listeners and the torch probe that
    M(nccl_preflight_start) started and returns what they saw in RV(collect) - optionally waits
    until the listeners got every expected connection, writes C(<path>/listener.stop), waits up to
    O(collect.stop_timeout) seconds for the listener process to exit (kills it after that; it
    first waits for the torch probe, up to the start's C(python_timeout)) and returns what it
    saw, what torch reported and this host's clock.
version_added: "0.1.0"
options:
  targets:
    description: Where to connect.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: A label (C(master), C(ring)) for the result.
        type: str
        required: true
      host:
        description: The inventory name of the peer, for messages.
        type: str
        default: ""
      address:
        description: Literal address to connect to.
        type: str
        required: true
      port:
        description: TCP port.
        type: int
        required: true
  source:
    description: Local address to connect from (this host's fabric address); empty = let the
      kernel choose.
    type: str
    default: ""
  timeout:
    description: Seconds to wait for each connection.
    type: float
    default: 3
  refused_retry:
    description: Seconds during which a refused connection is tried again.
    type: float
    default: 2
  firewall:
    description:
      - Read the firewall for rules that would drop TCP from O(firewall.peers) to
        O(firewall.ports). Reading iptables and nftables needs root (C(become)); a tool that
        cannot be read is reported in RV(firewall) with its error.
      - Not given - the firewall is not read and RV(firewall) is empty.
    type: dict
    suboptions:
      peers:
        description: Fabric addresses of the other hosts.
        type: list
        elements: str
        required: true
      ports:
        description: Port ranges to check, each C({label, low, high}).
        type: list
        elements: dict
        required: true
      address:
        description: This host's fabric address (destination of the connections).
        type: str
        default: ""
      ifname:
        description: This host's fabric interface (where the connections arrive).
        type: str
        default: ""
  collect:
    description:
      - Collect the pre-flight's listeners and torch probe after the probes - wait up to
        O(collect.wait) seconds for the listeners to get every expected connection, stop them,
        optionally remove the run directory.
    type: dict
    suboptions:
      path:
        description: The listener directory.
        type: path
        required: true
      wait:
        description:
          - Seconds to wait first for the listener process to end by itself (every expected
            connection came) before writing the stop file; RV(collect) C(waited) says whether it
            did. C(0) - stop at once.
        type: float
        default: 0
      leave_unfinished:
        description:
          - Listeners that did not end by themselves within O(collect.wait) seconds (a peer's
            probe is still to come - its host runs this task in a later batch of C(forks)
            hosts) are left running, with the run directory; RV(collect) is then only
            C(pending) (true), C(clock) and C(waited). A later call with O(collect) (after
            every host's probes) stops them.
          - Their life stays bounded on the node without this controller - the start's
            C(timeout) (C(preflight_listen_timeout)).
        type: bool
        default: false
      stop_timeout:
        description:
          - Seconds to wait for the listener process to exit after the stop file; after that it
            is killed and the collect fails.
          - Keep it above the start's C(python_timeout) - the listener process waits for the
            torch probe.
        type: float
        default: 10
      remove_run_dir:
        description:
          - Remove this directory (the run's private directory, which holds O(collect.path))
            and everything in it once the listener's result is read, also when the collect
            fails. Only this user's own directory is removed, never through a symbolic link.
          - For a pre-flight that no launch follows - the collect is then the last call on the
            host.
        type: path
      abandon:
        description:
          - The run is over on this host before its pre-flight was collected (the environment
            stage stopped it) - remove O(collect.remove_run_dir) first, on which the listener
            process lets its torch probe go and ends at once, then wait up to
            O(collect.stop_timeout) seconds until that process is gone (killed after that).
            Nothing is collected; RV(collect) says C(run_dir_removed), C(pid) and C(ended).
          - Needs O(collect.remove_run_dir).
        type: bool
        default: false
extends_documentation_fragment:
  - nccl_program
attributes:
  check_mode:
    support: full
    details:
      - Only connects, closes and reads; nothing on the host changes.
      - O(collect) in check mode only reads the clock.
author:
  - nccl-preflight contributors
"""

EXAMPLES = r"""
- name: Connect to the master's MASTER_PORT from the fabric address
  nccl_preflight_observe:
    source: 10.0.0.12
    targets:
      - {name: master, host: node1, address: 10.0.0.11, port: 29500}

- name: Connect to the peers and read the firewall in one call
  nccl_preflight_observe:
    source: 10.0.0.12
    targets:
      - {name: master, host: node1, address: 10.0.0.11, port: 29500}
    firewall:
      peers: [10.0.0.11]
      address: 10.0.0.12
      ifname: enp1s0f0np0
      ports:
        - {label: ephemeral range, low: 32768, high: 60999}
  become: true

- name: Connect, then stop the pre-flight's listeners and collect who connected
  nccl_preflight_observe:
    source: 10.0.0.12
    targets:
      - {name: master, host: node1, address: 10.0.0.11, port: 29500}
    collect:
      path: /tmp/nccl-preflight-RUN-node2/preflight
      wait: 5
      stop_timeout: 70
  register: probed
"""

RETURN = r"""
results:
  description: One entry per target, in order.
  returned: always
  type: list
  elements: dict
  sample:
    - name: master
      host: node1
      address: 10.0.0.11
      port: 29500
      source: 10.0.0.12
      ok: false
      error: timed out after 3.0 s
      error_kind: timeout
      elapsed_ms: 3001
firewall:
  description:
    - With O(firewall), C(findings) (rules or policies that drop or reject the traffic;
      C(certain) false means the rule has a condition this module cannot judge and may drop it;
      C(fix) is the command that lets the traffic in, on this host) and C(tools) (per tool,
      whether it is installed, was read and what went wrong reading it); empty without
      O(firewall).
  returned: always
  type: dict
  sample:
    findings:
      - tool: iptables
        table: filter
        chain: INPUT
        position: 3
        rule: "-A INPUT -p tcp -m tcp --dport 29500 -j DROP"
        action: drop
        certain: true
        label: MASTER_PORT
        peers: [10.0.0.12, 10.0.0.11]
        ports: [[29500, 29500]]
        ports_text: "29500"
        fix: "iptables -I INPUT 3 -p tcp -s 10.0.0.12,10.0.0.11 --dport 29500 -j ACCEPT"
        text: "iptables filter chain INPUT rule 3 (...) drops tcp/29500 (MASTER_PORT) from ..."
    tools: {iptables: {present: true, read: true, active: true, error: ""}}
collect:
  description:
    - With O(collect), what the listeners saw - C(listeners) (one entry per listener, C(accepted)
      the peer address of each accepted connection, C(complete) whether it got its C(connections)),
      C(pid), C(ended) (why the listener process ended - C(complete), C(stop file), C(timeout),
      C(run directory removed), or C(nothing bound)), C(timed_out) (the timeout or the stop file
      closed a listener before its connections came), C(killed) (it did not exit within
      O(collect.stop_timeout)), C(python) (what the torch probe reported, as
      RV(nccl_facts#module:ansible_facts.nccl.python), with C(reason) saying why a value is
      empty), C(clock) (this host's C(time.time()) when the module started, also when the
      collect fails), C(waited) (with O(collect.wait) - C(seconds), C(ended_alone)),
      C(run_dir_removed) (with O(collect.remove_run_dir); C(remove_error) says why not),
      C(pending) (with O(collect.leave_unfinished) - the listeners were left running).
    - C(failed) and C(msg) when the listeners could not be collected (this module does not fail
      for it); C(listeners) is then empty.
  returned: with O(collect)
  type: dict
  sample:
    listeners:
      - {name: master, address: 10.0.0.11, port: 29500, connections: 2, error: "",
         accepted: ["10.0.0.12", "10.0.0.11"], complete: true}
    pid: 4242
    ended: complete
    timed_out: false
    killed: false
    clock: 1763776800.123456
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nccl_preflight.node.payload import guard_payload

# AnsiballZ's payload directory (in the system's temporary directory, not the run's): SIGTERM
# and SIGHUP end this process through the wrapper's cleanup from here on, and main() removes it
# first thing, so that no way out leaves it (node/payload.py).
_LEAVE_NO_PAYLOAD = guard_payload(globals().get("_modlib_path"))
from ansible.module_utils.nccl_preflight.node.observe_call import OBSERVE_SPEC, observe

# O(program_python) and O(run_id) are the action plugin's
# (plugins/action/nccl_preflight_observe.py): the module itself is what runs when they are not
# given.
ACTION_OPTIONS = {
    "program_python": {"type": "str", "default": ""},
    "run_id": {"type": "str", "default": ""},
}


def main() -> None:
    _LEAVE_NO_PAYLOAD()
    module = AnsibleModule(
        argument_spec={**OBSERVE_SPEC, **ACTION_OPTIONS}, supports_check_mode=True
    )
    module.exit_json(**observe(module.params, module.check_mode, module))


if __name__ == "__main__":
    main()
