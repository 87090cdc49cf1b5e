# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Choose a host's fabric interface and its address on it, from its nccl_facts.

One function for both sides: roles/nccl_env (node/fabric_choice.py, on the control
machine) and the facts play's call on the node (src/nccl_preflight/node/preflight_calls.py), which
binds the pre-flight's listeners to the address the environment play will choose, before it runs.
Only the standard library.
"""

from __future__ import annotations

import ipaddress
from typing import Any


def _addresses(interface: dict[str, Any]) -> list[str]:
    return [entry["address"] for entry in interface.get("ipv4", []) + interface.get("ipv6", [])]


def nccl_fabric_choice(
    facts: dict[str, Any], socket_ifname: str = "", fabric_cidr: str = ""
) -> dict[str, str]:
    """Choose this host's fabric interface and its address on it.

    In order: an explicit interface name; else the interface holding an address inside the fabric
    CIDR; else an interface with an RDMA device under it and a routable address (the one that
    routes to the master when several do); else the interface the host routes through to the
    master. Returns
    {"ifname", "address", "reason"}; "ifname" is "" (and "reason" says why) when nothing fits.
    """
    interfaces: dict[str, dict[str, Any]] = facts.get("interfaces") or {}
    network = ipaddress.ip_network(fabric_cidr, strict=True) if fabric_cidr else None

    def address_on(name: str) -> str:
        addresses = _addresses(interfaces.get(name, {}))
        if network is not None:
            addresses = [a for a in addresses if ipaddress.ip_address(a) in network]
        link_local = [a for a in addresses if ipaddress.ip_address(a).is_link_local]
        usable = [a for a in addresses if a not in link_local]
        return (usable or link_local or [""])[0]

    if socket_ifname:
        if socket_ifname not in interfaces:
            present = ", ".join(sorted(interfaces)) or "none"
            return {
                "ifname": socket_ifname,
                "address": "",
                "reason": f"interface {socket_ifname} (nccl_socket_ifname) does not exist; "
                f"present: {present}",
            }
        return {"ifname": socket_ifname, "address": address_on(socket_ifname), "reason": ""}

    if network is not None:
        for name in sorted(interfaces):
            address = address_on(name)
            if address:
                return {"ifname": name, "address": address, "reason": ""}
        return {
            "ifname": "",
            "address": "",
            "reason": f"no interface holds an address in nccl_fabric_cidr {fabric_cidr}",
        }

    route = facts.get("route") or {}
    rdma_backed = [
        name
        for name in sorted(interfaces)
        if interfaces[name].get("rdma_devices")
        and interfaces[name].get("state") != "down"
        and address_on(name)
        and not ipaddress.ip_address(address_on(name)).is_link_local
    ]
    if rdma_backed:
        name = route.get("interface") if route.get("interface") in rdma_backed else rdma_backed[0]
        return {"ifname": name, "address": address_on(name), "reason": ""}
    destination = route.get("destination")
    # On the master itself the route to its own address goes through lo: the interface that
    # holds the address is the one the other hosts reach it on.
    for name in sorted(interfaces):
        if destination and name != "lo" and destination in _addresses(interfaces[name]):
            return {"ifname": name, "address": destination, "reason": ""}
    if route.get("interface"):
        return {
            "ifname": route["interface"],
            "address": route.get("source") or address_on(route["interface"]),
            "reason": "",
        }
    reason = facts.get("route_reason") or "no route to the master"
    return {"ifname": "", "address": "", "reason": reason}


def fabric_network(interface: dict[str, Any], address: str) -> str:
    """The network (CIDR) of ``address`` as ``interface`` holds it ('10.0.1.0/24'); "" if not."""
    for entry in interface.get("ipv4", []) + interface.get("ipv6", []):
        if entry.get("address") == address and entry.get("prefixlen") is not None:
            return str(ipaddress.ip_interface(f"{address}/{entry['prefixlen']}").network)
    return ""


def nccl_fabric_candidate(interfaces: dict[str, dict[str, Any]], networks: list[str]) -> str:
    """The one interface holding a routable address inside any of ``networks``; "" when no
    interface or more than one does (then no interface can be named for certain)."""
    wanted = [ipaddress.ip_network(n, strict=False) for n in networks if n]
    found = [
        name
        for name in sorted(interfaces)
        if any(
            not (ip := ipaddress.ip_address(address)).is_link_local
            and not ip.is_loopback
            and any(ip.version == net.version and ip in net for net in wanted)
            for address in _addresses(interfaces[name] or {})
        )
    ]
    return found[0] if len(found) == 1 else ""
