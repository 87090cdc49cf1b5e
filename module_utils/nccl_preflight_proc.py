# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse /proc/net/tcp{,6} to find who listens on a TCP port (pure functions, no I/O)."""

from __future__ import annotations

import ipaddress
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
