#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hold short-lived TCP listeners for the pre-flight reachability probes."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_preflight_listen
short_description: Hold short-lived TCP listeners that peers connect to during the pre-flight
description:
  - Binds one TCP listener per entry of O(listeners) (MASTER_PORT on the master, a port the
    kernel picks from C(net.ipv4.ip_local_port_range) on every host), writes the bound ports to
    O(port_file) as soon as all are listening, then accepts connections until each listener got
    its O(listeners[].expect) connections or O(timeout) seconds passed, and closes them all.
  - "Meant to run with C(async) and C(poll: 0) while the peers connect, then C(async_status)."
  - A listener that cannot bind (address not local, port in use) is reported in the result with
    its error; it does not fail the module, so the other checks still run.
version_added: "0.1.0"
options:
  listeners:
    description: The listeners to hold.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: A label for the listener (C(master), C(ring)).
        type: str
        required: true
      address:
        description: The literal local address to bind.
        type: str
        required: true
      port:
        description: The port; C(0) lets the kernel pick one from the ephemeral range.
        type: int
        default: 0
      expect:
        description: Stop this listener after this many accepted connections.
        type: int
        default: 1
  port_file:
    description:
      - "JSON file written (mode 0600) once every listener is bound: C({name: {port, error}})."
      - Put it in the run directory; nothing else is written.
    type: path
    required: true
  stop_file:
    description:
      - When this file appears (the probes are over), every listener is closed at once.
    type: path
  timeout:
    description: Seconds after which every listener is closed, whatever it received.
    type: float
    default: 20
attributes:
  check_mode:
    support: partial
    details: In check mode no listener is held and no port file is written.
author:
  - nccl-preflight contributors
"""

EXAMPLES = r"""
- name: Start the listeners
  nccl_preflight_listen:
    listeners:
      - {name: master, address: 10.0.0.11, port: 29500, expect: 4}
      - {name: ring, address: 10.0.0.11, port: 0, expect: 1}
    port_file: /tmp/nccl-preflight-RUN-node1/preflight-ports.json
    timeout: 20
  async: 35
  poll: 0
  register: listen_job
"""

RETURN = r"""
listeners:
  description: One entry per listener.
  returned: always
  type: list
  elements: dict
  sample:
    - name: master
      address: 10.0.0.11
      port: 29500
      error: ""
      accepted: ["10.0.0.12", "10.0.0.13"]
      complete: false
timed_out:
  description: True when the timeout or the stop file closed a listener before its expected
    connections came.
  returned: always
  type: bool
"""

import json
import os
import selectors
import socket
import time

from ansible.module_utils.basic import AnsibleModule


def bind_listener(address: str, port: int) -> tuple[socket.socket | None, int, str]:
    """-> (socket or None, bound port, error text)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    # As torch's TCPStore does: a port left in TIME_WAIT by an earlier run is free for the job.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((address, port))
        sock.listen(64)
    except OSError as exc:
        sock.close()
        return None, port, f"{exc.strerror or exc} (binding {address}:{port})"
    sock.setblocking(False)
    return sock, sock.getsockname()[1], ""


def write_port_file(path: str, entries: list[dict]) -> None:
    payload = {e["name"]: {"port": e["port"], "error": e["error"]} for e in entries}
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(payload, fh)
    os.replace(tmp, path)


def serve(
    entries: list[dict], socks: dict[str, socket.socket], deadline: float, stop_file: str | None
) -> bool:
    """Accept until every listener has its expected connections, the deadline passes or the
    stop file appears. Returns True when closed early with connections missing."""
    sel = selectors.DefaultSelector()
    by_name = {e["name"]: e for e in entries}
    for name, sock in socks.items():
        sel.register(sock, selectors.EVENT_READ, name)
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0 or (stop_file and os.path.exists(stop_file)):
                return True
            for key, _ in sel.select(timeout=min(left, 0.5)):
                entry = by_name[key.data]
                try:
                    conn, peer = key.fileobj.accept()
                except BlockingIOError:
                    continue
                conn.close()
                entry["accepted"].append(peer[0])
                if len(entry["accepted"]) >= entry["expect"]:
                    entry["complete"] = True
                    sel.unregister(key.fileobj)
        return False
    finally:
        sel.close()
        for sock in socks.values():
            sock.close()


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "listeners": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "name": {"type": "str", "required": True},
                    "address": {"type": "str", "required": True},
                    "port": {"type": "int", "default": 0},
                    "expect": {"type": "int", "default": 1},
                },
            },
            "port_file": {"type": "path", "required": True},
            "stop_file": {"type": "path"},
            "timeout": {"type": "float", "default": 20.0},
        },
        supports_check_mode=True,
    )
    if module.check_mode:
        module.exit_json(
            changed=False, listeners=[], timed_out=False, msg="check mode: no listener"
        )
    deadline = time.monotonic() + module.params["timeout"]
    entries, socks = [], {}
    for spec in module.params["listeners"]:
        sock, port, error = bind_listener(spec["address"], spec["port"])
        entry = {
            "name": spec["name"],
            "address": spec["address"],
            "port": port,
            "expect": spec["expect"],
            "error": error,
            "accepted": [],
            "complete": False,
        }
        entries.append(entry)
        if sock is not None:
            socks[spec["name"]] = sock
    try:
        write_port_file(module.params["port_file"], entries)
    except OSError as exc:
        for sock in socks.values():
            sock.close()
        module.fail_json(
            msg=f"cannot write the listener port file {module.params['port_file']}: {exc}",
            listeners=entries,
        )
    timed_out = serve(entries, socks, deadline, module.params["stop_file"])
    module.exit_json(changed=False, listeners=entries, timed_out=timed_out)


if __name__ == "__main__":
    main()
