# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Read /proc: who listens on a TCP port (a process's identity:
src/nccl_preflight/node/processes.py).

The parsers are pure functions; the readers take the /proc root as an argument so tests can hand
them a fake tree. Used by the pre-flight's start (src/nccl_preflight/node/preflight_calls.py).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct

TCP_LISTEN = "0A"


def _hex_address(text: str) -> str:
    """/proc/net/tcp writes addresses as host-order 32-bit words in hex."""
    raw = bytes.fromhex(text)
    words = [raw[i : i + 4] for i in range(0, len(raw), 4)]
    packed = b"".join(struct.pack("@I", struct.unpack(">I", w)[0]) for w in words)
    family = socket.AF_INET if len(packed) == 4 else socket.AF_INET6
    return str(ipaddress.ip_address(socket.inet_ntop(family, packed)))


def parse_proc_net_tcp(text: str) -> list[dict]:
    """Rows of /proc/net/tcp or /proc/net/tcp6 as dicts.

    Each: {"local_address", "local_port", "remote_address", "remote_port", "state" (hex, "0A"
    is LISTEN), "uid", "inode"}.
    """
    rows = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10:
            continue
        local, remote = fields[1], fields[2]
        laddr, lport = local.split(":")
        raddr, rport = remote.split(":")
        rows.append(
            {
                "local_address": _hex_address(laddr),
                "local_port": int(lport, 16),
                "remote_address": _hex_address(raddr),
                "remote_port": int(rport, 16),
                "state": fields[3].upper(),
                "uid": int(fields[7]),
                "inode": int(fields[9]),
            }
        )
    return rows


def listeners_on_port(rows: list[dict], port: int) -> list[dict]:
    """The LISTEN rows on ``port`` (any local address)."""
    return [r for r in rows if r["state"] == TCP_LISTEN and r["local_port"] == port]


def socket_owners(inodes: set[int], proc: str = "/proc") -> dict[int, int]:
    """inode -> pid, by reading the ``socket:[inode]`` links under /proc/<pid>/fd."""
    owners: dict[int, int] = {}
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        fd_dir = os.path.join(proc, entry, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:  # gone, or another user's process
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                inode = int(target[8:-1])
                if inode in inodes:
                    owners.setdefault(inode, int(entry))
    return owners


def describe_pid(pid: int, proc: str = "/proc") -> tuple[str, str]:
    """-> (comm, cmdline) of a pid; empty strings when it vanished."""
    try:
        with open(os.path.join(proc, str(pid), "comm"), encoding="utf-8") as fh:
            comm = fh.read().strip()
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as fh:
            cmdline = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return "", ""
    return comm, cmdline


def port_owner(port: int, proc: str = "/proc") -> dict:
    """Who listens on TCP ``port`` in this network namespace.

    -> {"free": bool, "listeners": [{address, port, inode, uid, pid, comm, cmdline}]}; pid is
    None (comm, cmdline empty) for a socket of a process this user cannot see.
    """
    rows: list[dict] = []
    for name in ("net/tcp", "net/tcp6"):
        path = os.path.join(proc, name)
        if os.path.exists(path):
            with open(path, encoding="ascii") as fh:
                rows += parse_proc_net_tcp(fh.read())
    found = listeners_on_port(rows, port)
    owners = socket_owners({r["inode"] for r in found}, proc)
    listeners = []
    for row in found:
        pid = owners.get(row["inode"])
        comm, cmdline = describe_pid(pid, proc) if pid else ("", "")
        listeners.append(
            {
                "address": row["local_address"],
                "port": port,
                "inode": row["inode"],
                "uid": row["uid"],
                "pid": pid,
                "comm": comm,
                "cmdline": cmdline,
            }
        )
    return {"free": not listeners, "listeners": listeners}
