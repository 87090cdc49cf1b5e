# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A loopback TCP port for a server a test starts itself (a rendezvous store, a listener)."""

from __future__ import annotations

import random
import socket

EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
LOWEST = 20000


def ephemeral_low() -> int:
    """Where the kernel's range for outgoing connections starts (32768 when unreadable)."""
    try:
        with open(EPHEMERAL_RANGE, encoding="ascii") as ranges:
            return int(ranges.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port free on 127.0.0.1 now, below the ephemeral range. A port the kernel picks (a bind
    to port 0) lies in that range, and between this look and the server's own bind the kernel may
    give it to an outgoing connection of a test running beside (make test, once: "The server
    socket has failed to listen" for rank 0's store); below the range only another bind can."""
    top = ephemeral_low()
    candidates = random.sample(range(LOWEST, top), min(200, top - LOWEST)) if top > LOWEST else []
    for port in [*candidates, 0]:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise OSError("no free TCP port on 127.0.0.1")
