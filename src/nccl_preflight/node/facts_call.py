# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A node's facts (library/nccl_facts.py's job: it only reads) as a plain function of its options,
and as a program that needs no Ansible on the node. The pre-flight's start is a call of its own
(node/start_call.py, library/nccl_preflight_start.py).

As node/observe_call.py: a module call costs a module start on the node (Ansible's payload, built
on the control machine and sent on every call, and the import of ``ansible.module_utils.basic``
compiled from source each time), and this is the first call of every run on every node. So the
action plugin of the same name runs this program instead where the inventory names the node's
Python (ansible_python_interpreter): a zipapp of this module and what it imports
(:data:`FACTS_ENTRY`), sent on the call's stdin through BOOT (core/stdin_ship.py); the options
follow on stdin as one JSON line (:func:`main`). The module calls :func:`read_facts` too,
with its own options, so both say the same. Standard library only.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from .commands import CommandRunner
from .facts import gather
from .runner import SubprocessRunner

# The module the zipapp of this program is built around (core/stdin_ship.py program_zipapp:
# its __main__ runs main() below).
FACTS_ENTRY = "nccl_preflight.node.facts_call"

# The options, in AnsibleModule's argument_spec form (the module's, and the action plugin checks
# them with the same spec on the control machine before it sends them).
FACTS_SPEC: dict[str, dict[str, Any]] = {
    "route_to": {"type": "str", "default": ""},
    "python": {"type": "str", "default": ""},
    "query_python": {"type": "bool", "default": True},
    "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
    "query_gpus": {"type": "bool", "default": True},
    "gpu_health": {"type": "bool", "default": True},
    "dcgm_diag_level": {"type": "int", "default": 0},
    "dcgm_diag_timeout": {"type": "int", "default": 300},
    "npu_smi": {"type": "str", "default": "npu-smi"},
    "query_xpu": {"type": "bool", "default": False},
}


def read_facts(params: dict[str, Any], commands: CommandRunner) -> dict[str, Any]:
    """Read the node's facts; -> the module's result (``failed`` and ``msg`` for options it
    refuses). Changes nothing on the node."""
    if params["route_to"].startswith("-"):
        return {
            "failed": True,
            "msg": f"route_to {params['route_to']!r} is not an address or a host name; "
            "set it to the master's address, e.g. route_to: 192.168.100.10",
            "route_to": params["route_to"],
        }
    return {"changed": False, "ansible_facts": {"nccl": gather(commands, params)}}


def facts_commands(params: dict[str, Any]) -> SubprocessRunner:
    """Commands as the facts run them, each bounded (dcgmi diag may take its own timeout)."""
    return SubprocessRunner(timeout=max(60.0, float(params["dcgm_diag_timeout"]) + 30))


def main(argv: list[str]) -> int:
    """The program: one JSON line on stdin, ``{"params": <validated options>, "check_mode":
    bool}``; prints the result as one JSON line. ``argv`` is unused (BOOT's arguments end with
    the run id)."""
    del argv
    request = json.loads(sys.stdin.readline())
    params = request["params"]
    result = read_facts(params, facts_commands(params))
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
