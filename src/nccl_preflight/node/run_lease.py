# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The lease between a run's warden on a node (node/run_warden.py) and the control machine's tether
(core/tether.py): the tether writes a line on the warden's stdin every :data:`HEARTBEAT_S`, and
``release`` when ansible-playbook ran to its end; the warden's :class:`Lease` says when the
controller is gone. Standard library only, and nothing else: the tether, one process per node on
the control machine, imports this alone.
"""

from __future__ import annotations

# The warden program's module (the zipapp core/stdin_ship.py program_zipapp builds around it).
WARDEN_ENTRY = "nccl_preflight.node.run_warden"
# The control machine's tether writes a line this often.
HEARTBEAT_S = 1.0
# The controller is gone once no line came for this long: six heartbeats, so a loaded control
# machine that stalls its tether for a few seconds ends nothing (BENCHMARKS.md, "Warden").
LEASE_S = 6.0
# What the tether writes when ansible-playbook ended by itself: keep the run directory.
RELEASE = b"release"


class Lease:
    """The heartbeats on the warden's stdin: when the last one came, and what ended them."""

    def __init__(self, lease_s: float, now: float) -> None:
        self.lease_s = lease_s
        self.last = now
        self.longest_gap = 0.0
        self.pending = b""

    def feed(self, data: bytes, now: float) -> str | None:
        """Some of stdin (``b""``: its end); -> "release", "eof" or None (a heartbeat)."""
        if not data:
            return "eof"
        self.longest_gap = max(self.longest_gap, now - self.last)
        self.last = now
        lines = (self.pending + data).split(b"\n")
        self.pending = lines.pop()[-64:]
        return "release" if any(line.strip() == RELEASE for line in lines) else None

    def left(self, now: float) -> float:
        """Seconds until the lease runs out (0 once it did)."""
        return max(0.0, self.last + self.lease_s - now)

    def why_gone(self, ended: str | None, now: float) -> str | None:
        """Why the controller is gone ("" for a release), or None while it is there."""
        if ended == "release":
            return ""
        if ended == "eof":
            return "the control machine's session closed (Ctrl-C, a kill or a lost connection)"
        if self.left(now) <= 0:
            return (
                f"no heartbeat from the control machine for {now - self.last:.1f} s "
                f"(the lease is {self.lease_s:g} s): the connection was cut or the machine is gone"
            )
        return None
