# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight's start on a node (library/nccl_preflight_start.py's job) as a plain function of
its options, and as a program that needs no Ansible on the node.

As node/facts_call.py: the action plugin of the same name runs this program where the inventory
names the node's Python (a zipapp of this module and what it imports,
:data:`PREFLIGHT_START_ENTRY`, sent on the call's stdin through BOOT, core/stdin_ship.py; the
options follow as one JSON line), else the module runs and calls :func:`start_call` too, so
both say the same. The fabric address and the listeners this node holds were worked out on the
control machine from its facts (core/preflight/start.py nccl_preflight_start,
node/preflight_calls.py for_fabric): this call only starts. Standard library only.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from .preflight_calls import START_SPEC
from .preflight_calls import start as start_preflight

# The module the zipapp of this program is built around (core/stdin_ship.py program_zipapp).
PREFLIGHT_START_ENTRY = "nccl_preflight.node.preflight_start_call"

# The options, in AnsibleModule's argument_spec form (the module's; the action plugin checks them
# with the same spec before it sends them). ``preflight``: a start (node/preflight_calls.py
# START_SPEC) whose fabric listeners already hold this host's fabric address, and that address.
START_CALL_SPEC: dict[str, dict[str, Any]] = {
    "preflight": {
        "type": "dict",
        "options": {**START_SPEC, "fabric_address": {"type": "str", "default": ""}},
    },
}


def start_call(params: dict[str, Any], check_mode: bool, this_python: str) -> dict[str, Any]:
    """Start the pre-flight as ``params["preflight"]`` says (nothing without it); -> the module's
    result. ``this_python``: the interpreter running this code (the torch probe's Python when
    none is named)."""
    pre = params.get("preflight")
    if pre is None:
        return {"changed": False}
    pre = dict(pre)
    address = pre.pop("fabric_address", "") or ""
    pre["python"] = pre.get("python") or this_python
    preflight = {**start_preflight(pre, check_mode), "fabric_address": address}
    return {"changed": bool(preflight.get("changed")), "preflight": preflight}


def main(argv: list[str]) -> int:
    """The program: one JSON line on stdin, ``{"params": <validated options>, "check_mode":
    bool}``; prints the result as one JSON line. ``argv`` is unused (BOOT's arguments end with
    the run id)."""
    del argv
    request = json.loads(sys.stdin.readline())
    result = start_call(request["params"], bool(request["check_mode"]), sys.executable)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
