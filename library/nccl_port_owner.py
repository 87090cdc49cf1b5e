#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Name the processes listening on a TCP port (reads /proc only)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_port_owner
short_description: Tell whether a TCP port is free and name the process that holds it
description:
  - Reads C(/proc/net/tcp) and C(/proc/net/tcp6) of the host's network namespace for sockets in
    LISTEN state on O(port), then C(/proc/<pid>/fd) to find the processes owning them.
  - Processes of other users are only visible to root; their sockets are still reported, with
    C(pid) null.
version_added: "0.1.0"
options:
  port:
    description: The TCP port to look at.
    type: int
    required: true
attributes:
  check_mode:
    support: full
    details: Only reads /proc.
author:
  - nccl-preflight contributors
"""

EXAMPLES = r"""
- name: Look for a process already holding MASTER_PORT
  nccl_port_owner:
    port: 29500
  register: owner
"""

RETURN = r"""
free:
  description: True when nothing listens on the port.
  returned: always
  type: bool
  sample: false
listeners:
  description: The listening sockets on the port and their owners.
  returned: always
  type: list
  elements: dict
  sample:
    - address: 0.0.0.0
      port: 29500
      inode: 33531
      pid: 4242
      comm: python3
      cmdline: python3 -m http.server 29500
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nccl_preflight_proc import listeners_on_port, parse_proc_net_tcp


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


def main() -> None:
    module = AnsibleModule(
        argument_spec={"port": {"type": "int", "required": True}},
        supports_check_mode=True,
    )
    port = module.params["port"]
    rows = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        if os.path.exists(name):
            with open(name, encoding="ascii") as fh:
                rows += parse_proc_net_tcp(fh.read())
    found = listeners_on_port(rows, port)
    owners = socket_owners({r["inode"] for r in found})
    listeners = []
    for row in found:
        pid = owners.get(row["inode"])
        comm, cmdline = describe_pid(pid) if pid else ("", "")
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
    module.exit_json(changed=False, free=not listeners, listeners=listeners)


if __name__ == "__main__":
    main()
