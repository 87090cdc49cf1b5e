# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight's observation on a node (library/nccl_preflight_observe.py's job) as a plain
function of its options, and as a program that needs no Ansible on the node.

A module call costs a module start on the node: Ansible's payload, sent on every call, and the
import of ``ansible.module_utils.basic`` and of this room from it, compiled from source each time
(0.35-0.45 CPU s measured on the lab, against 0.1 s for this program). So the action plugin of
the same name runs this program instead, where the role names the node's Python: the payload is
a zipapp of this module and what it imports (:data:`OBSERVE_ENTRY`), sent on the call's stdin
through BOOT (core/stdin_ship.py, the Slurm steps' too), which unpacks it into a private
temporary directory it removes; the options follow on stdin as one JSON line (:func:`main`). The
module calls :func:`observe` too, with its own options, so both say the same.
Standard library only.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from .commands import CommandRunner
from .firewall_read import PORTS_SPEC, read_firewall
from .preflight_calls import STOP_SPEC, stop
from .runner import SubprocessRunner
from .tcp_connect import tcp_connect

# The module the zipapp of this program is built around (core/stdin_ship.py program_zipapp:
# its __main__ runs main() below).
OBSERVE_ENTRY = "nccl_preflight.node.observe_call"

# The options, in AnsibleModule's argument_spec form (the module's, and the action plugin checks
# them with the same spec on the control machine before it sends them).
OBSERVE_SPEC: dict[str, dict[str, Any]] = {
    "targets": {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": {
            "name": {"type": "str", "required": True},
            "host": {"type": "str", "default": ""},
            "address": {"type": "str", "required": True},
            "port": {"type": "int", "required": True},
        },
    },
    "source": {"type": "str", "default": ""},
    "timeout": {"type": "float", "default": 3.0},
    "refused_retry": {"type": "float", "default": 2.0},
    "firewall": {
        "type": "dict",
        "options": {
            "peers": {"type": "list", "elements": "str", "required": True},
            "ports": {"type": "list", "elements": "dict", "required": True, "options": PORTS_SPEC},
            "address": {"type": "str", "default": ""},
            "ifname": {"type": "str", "default": ""},
        },
    },
    "collect": {"type": "dict", "options": STOP_SPEC},
}


def observe(params: dict[str, Any], check_mode: bool, commands: CommandRunner) -> dict[str, Any]:
    """Connect to ``targets``, read the firewall, collect the listeners (each when its option is
    given, in that order); -> the module's result (changed, results, firewall, collect)."""
    results = []
    for target in params["targets"]:
        outcome = tcp_connect(
            target["address"],
            target["port"],
            params["source"],
            params["timeout"],
            params["refused_retry"],
        )
        results.append({**target, "source": params["source"], **outcome})
    firewall = {}
    if params["firewall"] is not None:
        fw = params["firewall"]
        firewall = read_firewall(commands, fw["peers"], fw["ports"], fw["address"], fw["ifname"])
    extra = {}
    if params["collect"] is not None:  # the pre-flight's listeners, after this host's own probes
        extra["collect"] = stop(params["collect"], check_mode)
    changed = bool(extra.get("collect", {}).get("changed"))
    return {"changed": changed, "results": results, "firewall": firewall, **extra}


def main(argv: list[str]) -> int:
    """The program: one JSON line on stdin, ``{"params": <validated options>, "check_mode":
    bool}``; prints the result as one JSON line. ``argv`` is unused (BOOT's arguments end with
    the run id)."""
    del argv
    request = json.loads(sys.stdin.readline())
    result = observe(request["params"], bool(request["check_mode"]), SubprocessRunner())
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
