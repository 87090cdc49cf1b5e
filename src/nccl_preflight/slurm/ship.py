# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The Slurm job steps' stream: the node program comes through a job step's stdin, its answers
back through stdout.

`srun ... python3 -c BOOT RUN_ID ARGS < stream`: srun sends its stdin to every task. The stream
starts with BOOT's bundle (core/stdin_ship.py: one line with its byte count, then the zipapp);
what follows on stdin is left for the bundle: first the step's settings, one JSON line for all
nodes (what every node shares once, and per node only what differs: shared_and_own; each node
takes its own with settings_of), then the control machine's later messages, one JSON line each.
ARGS stay short and do not grow with the nodes (Linux refuses one argument of 128 KiB: E2BIG).

Every record a node sends back is its JSON in stdout lines of at most PIECE characters (frame);
Unframer puts them together again. Anything else on the step's output (warnings, tracebacks) is
kept as text.
"""

from __future__ import annotations

import json
from typing import Any

FRAME = "NCCL-PREFLIGHT-JSON "
PIECE = 900  # characters of JSON per output line


def frame(record: dict[str, Any], node: str) -> str:
    """One record of ``node`` as output lines of at most PIECE characters of JSON each:
    `FRAME + "+" + node + " " + piece` for every piece but the last, `"="` for the last.

    srun passes a long line on in pieces, and the pieces of two tasks' lines interleave (seen
    with 5 kB records on 3 nodes); short whole lines of each task come through whole."""
    text = json.dumps(record, separators=(",", ":"))
    pieces = [text[at : at + PIECE] for at in range(0, len(text), PIECE)] or [""]
    last = len(pieces) - 1
    return "".join(
        f"{FRAME}{'=' if i == last else '+'}{node} {piece}\n" for i, piece in enumerate(pieces)
    )


class Unframer:
    """Reassembles each node's records from the output lines (any order across nodes)."""

    def __init__(self) -> None:
        self.partial: dict[str, list[str]] = {}

    def line(self, line: str) -> dict[str, Any] | bool | None:
        """A whole record; None while one is incomplete; False for a line that is no frame."""
        at = line.find(FRAME)
        if at < 0:
            return False
        body = line[at + len(FRAME) :].rstrip("\n")
        node, _, piece = body[1:].partition(" ")
        self.partial.setdefault(node, []).append(piece)
        if body[:1] != "=":
            return None
        try:
            record = json.loads("".join(self.partial.pop(node)))
        except ValueError:
            return False
        return record if isinstance(record, dict) else False


# ------------------------------------------------------------------------------------------------
# The step's settings: what every node shares, once, and per node only what differs
# ------------------------------------------------------------------------------------------------

_ABSENT = object()


def _split(values: list[Any]) -> tuple[Any, list[Any]]:
    """(what all ``values`` share, each one's own rest); _ABSENT for nothing. Dicts are split
    key by key, at any depth; other values are shared only when all are equal."""
    first = values[0]
    if all(v == first for v in values[1:]):
        return first, [_ABSENT] * len(values)
    if not all(isinstance(v, dict) for v in values):
        return _ABSENT, list(values)
    shared: dict[str, Any] = {}
    owns: list[Any] = [{} for _ in values]
    for key in dict.fromkeys(k for v in values for k in v):
        column = [v.get(key, _ABSENT) for v in values]
        if any(c is _ABSENT for c in column):
            common, rest = _ABSENT, column
        else:
            common, rest = _split(column)
        if common is not _ABSENT:
            shared[key] = common
        for i, value in enumerate(rest):
            # {} left by a split dict adds nothing to the shared part: not sent
            if value is not _ABSENT and not (value == {} and isinstance(common, dict)):
                owns[i][key] = value
    return shared, owns


def shared_and_own(by_node: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every node's settings as {"shared": what they all have in common, "own": {node: what
    differs}}: its size grows with what differs, not with nodes x settings."""
    nodes = list(by_node)
    if not nodes:
        return {"shared": {}, "own": {}}
    shared, owns = _split([by_node[n] for n in nodes])
    shared = {} if shared is _ABSENT else shared
    own = {n: owns[i] for i, n in enumerate(nodes) if owns[i] is not _ABSENT and owns[i] != {}}
    return {"shared": shared, "own": own}


def _merge(shared: Any, own: Any) -> Any:
    if isinstance(shared, dict) and isinstance(own, dict):
        out = dict(shared)
        for key, value in own.items():
            out[key] = _merge(shared[key], value) if key in shared else value
        return out
    return own


def settings_of(doc: dict[str, Any], node: str) -> dict[str, Any]:
    """One node's settings out of shared_and_own's document."""
    return _merge(doc.get("shared") or {}, (doc.get("own") or {}).get(node) or {})


def settings_line(doc: dict[str, Any]) -> bytes:
    """The settings' line on the step's stdin, after the bundle."""
    return (json.dumps(doc, separators=(",", ":")) + "\n").encode()
