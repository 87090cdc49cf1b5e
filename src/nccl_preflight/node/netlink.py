# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The kernel's interfaces, addresses and routes over rtnetlink, for a node without iproute2.

What ``ip -j -d addr show`` and ``ip -j route get ADDR`` print, asked of the kernel the way `ip`
asks it (an AF_NETLINK socket, NETLINK_ROUTE): RTM_GETLINK and RTM_GETADDR dumps, one
RTM_GETROUTE request. Minimal images (a VM, a container) often lack iproute2; the facts then
come from here, in the shape node/parse.py gives the `ip` output (``parse_ip_addr``,
``parse_route_get``). Linux only, standard library only, read-only: nothing is changed.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
from collections.abc import Iterator

NETLINK_ROUTE = 0
RTM_NEWLINK, RTM_GETLINK = 16, 18
RTM_NEWADDR, RTM_GETADDR = 20, 22
RTM_NEWROUTE, RTM_GETROUTE = 24, 26
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
IFLA_IFNAME, IFLA_MTU, IFLA_OPERSTATE, IFLA_LINKINFO = 3, 4, 16, 18
IFLA_INFO_KIND = 1
IFA_ADDRESS, IFA_LOCAL = 1, 2
RTA_DST, RTA_OIF, RTA_PREFSRC = 1, 4, 7
NLMSG_HEADER = struct.Struct("=IHHII")  # length, type, flags, sequence, port id
RTATTR = struct.Struct("=HH")  # length, type
IFINFOMSG = struct.Struct("=BxHiII")  # family, type, index, flags, change
IFADDRMSG = struct.Struct("=BBBBI")  # family, prefix length, flags, scope, index
RTMSG = struct.Struct(
    "=BBBBBBBBI"
)  # family, dst len, src len, tos, table, protocol, scope, type, flags
# IFLA_OPERSTATE's values (RFC 2863), as ip prints them
OPERSTATES = ("unknown", "notpresent", "down", "lowerlayerdown", "testing", "dormant", "up")
SCOPES = {0: "global", 200: "site", 253: "link", 254: "host"}


class NetlinkError(OSError):
    """The kernel refused the request (its errno), or the socket failed."""


def _align(length: int) -> int:
    return (length + 3) & ~3


def attributes(data: bytes, offset: int = 0) -> dict[int, bytes]:
    """The rtattr list from ``offset`` on: {type: payload} (a later one of a type wins)."""
    found = {}
    while offset + RTATTR.size <= len(data):
        length, kind = RTATTR.unpack_from(data, offset)
        if length < RTATTR.size:
            break
        found[kind & 0x3FFF] = data[offset + RTATTR.size : offset + length]
        offset += _align(length)
    return found


def _text(payload: bytes) -> str:
    return payload.split(b"\0", 1)[0].decode("utf-8", "replace")


def _messages(data: bytes) -> Iterator[tuple[int, bytes]]:
    offset = 0
    while offset + NLMSG_HEADER.size <= len(data):
        length, kind, _flags, _seq, _port = NLMSG_HEADER.unpack_from(data, offset)
        if length < NLMSG_HEADER.size:
            return
        yield kind, data[offset + NLMSG_HEADER.size : offset + length]
        offset += _align(length)


def request(kind: int, flags: int, body: bytes) -> list[tuple[int, bytes]]:
    """Send one request, read every answer up to its end: [(message type, payload)]. A dump
    ends with NLMSG_DONE; a plain request with its one answer. NetlinkError: the kernel's."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
    try:
        sock.bind((0, 0))
        header = NLMSG_HEADER.pack(NLMSG_HEADER.size + len(body), kind, NLM_F_REQUEST | flags, 1, 0)
        sock.sendall(header + body)
        answers: list[tuple[int, bytes]] = []
        while True:
            for message, payload in _messages(sock.recv(1 << 16)):
                if message == NLMSG_DONE:
                    return answers
                if message == NLMSG_ERROR:
                    code = -struct.unpack_from("=i", payload)[0]
                    if code:
                        raise NetlinkError(code, os.strerror(code))
                    return answers  # an acknowledgement
                answers.append((message, payload))
                if not flags & NLM_F_DUMP:
                    return answers
    finally:
        sock.close()


def links() -> dict[int, dict]:
    """{index: {name, state, mtu, kind}} of every interface (RTM_GETLINK)."""
    found = {}
    for message, payload in request(RTM_GETLINK, NLM_F_DUMP, IFINFOMSG.pack(0, 0, 0, 0, 0)):
        if message != RTM_NEWLINK:
            continue
        _family, _type, index, _flags, _change = IFINFOMSG.unpack_from(payload)
        attrs = attributes(payload, IFINFOMSG.size)
        if IFLA_IFNAME not in attrs:
            continue
        state = attrs.get(IFLA_OPERSTATE, b"\0")[0]
        kind = (
            attributes(attrs[IFLA_LINKINFO]).get(IFLA_INFO_KIND) if IFLA_LINKINFO in attrs else None
        )
        found[index] = {
            "name": _text(attrs[IFLA_IFNAME]),
            "state": OPERSTATES[state] if state < len(OPERSTATES) else "unknown",
            "mtu": struct.unpack("=I", attrs[IFLA_MTU])[0] if IFLA_MTU in attrs else None,
            "kind": _text(kind) if kind else None,
        }
    return found


def addresses() -> list[dict]:
    """Every address (RTM_GETADDR): [{index, family, address, prefixlen, scope}]."""
    found = []
    for message, payload in request(RTM_GETADDR, NLM_F_DUMP, IFADDRMSG.pack(0, 0, 0, 0, 0)):
        if message != RTM_NEWADDR:
            continue
        family, prefixlen, _flags, scope, index = IFADDRMSG.unpack_from(payload)
        attrs = attributes(payload, IFADDRMSG.size)
        raw = attrs.get(IFA_LOCAL) or attrs.get(IFA_ADDRESS)
        if raw is None or family not in (socket.AF_INET, socket.AF_INET6):
            continue
        found.append(
            {
                "index": index,
                "family": "inet" if family == socket.AF_INET else "inet6",
                "address": socket.inet_ntop(family, raw),
                "prefixlen": prefixlen,
                "scope": SCOPES.get(scope, str(scope)),
            }
        )
    return found


def interfaces() -> dict[str, dict]:
    """What node/parse.py's parse_ip_addr makes of `ip -j -d addr show`, from the kernel."""
    by_index = links()
    out = {}
    for link in by_index.values():
        out[link["name"]] = {
            "name": link["name"],
            "state": link["state"],
            "mtu": link["mtu"],
            "speed_mbps": None,
            "kind": link["kind"],
            "ipv4": [],
            "ipv6": [],
            "rdma_devices": [],
        }
    for address in addresses():
        link = by_index.get(address["index"])
        if link is None:
            continue
        entry = {"address": address["address"], "prefixlen": address["prefixlen"]}
        if address["family"] == "inet":
            out[link["name"]]["ipv4"].append(entry)
        else:
            out[link["name"]]["ipv6"].append({**entry, "scope": address["scope"]})
    return out


def route_get(destination: str) -> dict:
    """What parse_route_get makes of `ip -j route get DESTINATION` (an address): {destination,
    interface, source}. NetlinkError: the kernel's answer, such as ENETUNREACH."""
    family = socket.AF_INET6 if ":" in destination else socket.AF_INET
    raw = socket.inet_pton(family, destination)
    attr = RTATTR.pack(RTATTR.size + len(raw), RTA_DST) + raw
    body = RTMSG.pack(family, len(raw) * 8, 0, 0, 0, 0, 0, 0, 0) + attr
    for message, payload in request(RTM_GETROUTE, 0, body):
        if message != RTM_NEWROUTE:
            continue
        attrs = attributes(payload, RTMSG.size)
        if RTA_OIF not in attrs:
            break
        index = struct.unpack("=i", attrs[RTA_OIF])[0]
        source = attrs.get(RTA_PREFSRC)
        return {
            "destination": destination,
            "interface": socket.if_indextoname(index),
            "source": socket.inet_ntop(family, source) if source else "",
        }
    raise NetlinkError(
        errno.EHOSTUNREACH, f"the kernel gave no route with a device to {destination}"
    )
