# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The environment stage's findings: a host whose fabric interface or address could not be
worked out stops the run there, before anything is started on a node.

``nccl_env_findings`` reads every host's interface choice (roles/nccl_env: the result of
``nccl_fabric_choice`` with the ``cidr`` and ``socket_ifname`` it was given) and its interfaces
(``ansible_facts.nccl.interfaces``), and returns one result per host of the inventory in the
shape of a pre-flight check result, ``{check: "environment", host, status, message, hint}``:
``error`` for a host whose environment could not be worked out (or that dropped out before),
``skipped`` for a healthy host of a run that stops. Nothing (``{}``) when every host is fine.
"""

from __future__ import annotations

from typing import Any

from nccl_preflight.core.preflight.result import check_result
from nccl_preflight.node.fabric_choice import fabric_network, nccl_fabric_candidate

CHECK = "environment"


def _result(host: str, status: str, message: str, hint: str = "") -> dict[str, str]:
    return check_result(CHECK, host, status, message, hint)


def interface_table(interfaces: dict[str, Any]) -> str:
    """'eth0 198.18.1.2/24, fab0 10.0.1.11/24, lo 127.0.0.1/8' (name only when it has none)."""
    parts = []
    for name in sorted(interfaces):
        entry = interfaces[name] or {}
        addresses = [
            f"{a.get('address')}/{a.get('prefixlen')}"
            for a in (entry.get("ipv4") or []) + (entry.get("ipv6") or [])
        ]
        state = "" if entry.get("state") in (None, "up", "unknown") else f" ({entry['state']})"
        parts.append(f"{name}{state} {' '.join(addresses) or 'no address'}")
    return ", ".join(parts) or "no interface at all"


def host_problem(host: str, choice: dict[str, Any] | None, facts: dict[str, Any]) -> str:
    """Why ``host`` has no fabric address, naming what was asked and what it has; "" when fine."""
    if choice is None:
        return f"{host}: unreachable or failed before the environment stage"
    if choice.get("address"):
        return ""
    interfaces = _interfaces(facts)
    has = interface_table(interfaces)
    cidr, wanted = choice.get("cidr") or "", choice.get("socket_ifname") or ""
    ifname = choice.get("ifname") or ""
    if wanted and wanted not in interfaces:
        return (
            f"{host}: interface {wanted} does not exist on {host} "
            f"(nccl_socket_ifname {wanted}); "
            f"its interfaces: {has}"
        )
    if ifname:
        inside = f" in nccl_fabric_cidr {cidr}" if cidr else ""
        return f"{host}: interface {ifname} has no address{inside}; its interfaces: {has}"
    if cidr:
        return f"{host}: no address in nccl_fabric_cidr {cidr}; its interfaces: {has}"
    reason = choice.get("reason") or "no route to the master"
    return f"{host}: no fabric interface: {reason}; its interfaces: {has}"


def _interfaces(facts: dict[str, Any]) -> dict[str, Any]:
    return ((facts or {}).get("nccl") or {}).get("interfaces") or {}


def fabric_networks(
    host: str,
    choices: dict[str, dict[str, Any] | None],
    facts: dict[str, dict[str, Any]],
) -> list[str]:
    """nccl_fabric_cidr (when set) and the networks the other hosts' fabric addresses are in."""
    own = choices.get(host) or {}
    networks = [own["cidr"]] if own.get("cidr") else []
    for peer, choice in choices.items():
        if peer == host or not choice or not choice.get("address"):
            continue
        interface = _interfaces(facts.get(peer) or {}).get(choice.get("ifname") or "") or {}
        network = fabric_network(interface, choice["address"])
        if network and network not in networks:
            networks.append(network)
    return networks


def _hint(host: str, choice: dict[str, Any] | None, candidate: str, networks: list[str]) -> str:
    if choice is None:
        return f"ansible {host} -m ansible.builtin.ping; see the play output above"
    if candidate:
        cidr = choice.get("cidr") or ""
        where = [f"nccl_fabric_cidr {cidr}"] if cidr else []
        peers = [n for n in networks if n != cidr]
        if peers:
            where.append(f"{', '.join(peers)}, the other hosts' fabric network")
        return (
            f"set nccl_socket_ifname for {host} to {candidate}: the one interface of {host} "
            f"with an address in {' or '.join(where)}"
        )
    if choice.get("socket_ifname"):
        return (
            f"ip -br addr show  (on {host}); set nccl_socket_ifname for {host} to the interface "
            "of the fabric"
        )
    return (
        f"ip -br addr show  (on {host}); set nccl_fabric_cidr to the network the fabric "
        "addresses above are in, or nccl_socket_ifname per host"
    )


def _fix(
    host: str,
    choices: dict[str, dict[str, Any] | None],
    facts: dict[str, dict[str, Any]],
) -> str:
    """The hint for a host whose environment could not be worked out: the interface to name
    when exactly one of its interfaces is in the fabric's network."""
    choice = choices.get(host)
    networks = fabric_networks(host, choices, facts) if choice is not None else []
    candidate = nccl_fabric_candidate(_interfaces(facts.get(host) or {}), networks)
    if choice is not None and candidate == (choice.get("ifname") or ""):
        candidate = ""
    return _hint(host, choice, candidate, networks)


def nccl_env_findings(
    choices: dict[str, dict[str, Any] | None],
    facts: dict[str, dict[str, Any]],
    order: list[str],
) -> dict[str, dict[str, str]]:
    """Every host's environment result when the run must stop here; {} when it goes on.

    ``choices``: host -> its interface choice (None or "": the environment stage did not run
    there);
    ``facts``: host -> its ansible_facts; ``order``: every host of the inventory, master first.
    """
    # A host without a choice ('' or None from hostvars) did not reach the environment stage.
    choices = {h: choices.get(h) or None for h in order}
    problems = {h: host_problem(h, choices[h], facts.get(h) or {}) for h in order}
    # A host that dropped out before (unreachable) is the launch's business, as ever; it only gets
    # an error here when the run stops anyway (no plan.json will then say it was unreachable).
    bad = [h for h in order if problems[h] and choices.get(h) is not None]
    if not bad:
        return {}
    master = order[0]
    results = {}
    for host in order:
        if problems[host]:
            extra = ""
            if host == master and choices.get(host) is not None:
                extra = "; without the master's fabric address there is no MASTER_ADDR"
            results[host] = _result(
                host,
                "error",
                problems[host] + extra + ". The run stopped at the environment stage: nothing "
                "was started on any host",
                _fix(host, choices, facts),
            )
        else:
            results[host] = _result(
                host,
                "skipped",
                f"{host}: not checked: the run stopped at the environment stage because of "
                f"{', '.join(bad)} (every host takes part in the rendezvous)",
            )
    return results


def nccl_env_stop_text(findings: dict[str, dict[str, str]]) -> str:
    """The message the play prints when the run stops at the environment stage."""
    bad = [r for r in findings.values() if r["status"] == "error"]
    lines = [f"  {r['message']}\n    fix: {r['hint']}" for r in bad]
    return "The environment of these hosts could not be worked out:\n" + "\n".join(lines)
