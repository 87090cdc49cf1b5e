# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The nodes a launch lost, and what Slurm says of them.

A node whose results never came back (cut off, dead, its task gone) gets a launch.json written
on the control machine (slurm/launch.py Watch.lost_record): the report then shows its ranks as
lost, and core/run_cause.py names the node as the cause when nothing else did. Slurm notices
such a node itself only after SlurmdTimeout (300 s by default) and then ends the job
(NODE_FAIL): that is a consequence of the node's fault, not a verdict of its own, so the run
goes on to its report with the node Slurm marked as the cause (node_words).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .allocation import SlurmError, slurm

# `scontrol show node -o`: one line per node, "Key=value" fields; a Reason holds spaces.
_FIELD = re.compile(r"(?:^|\s)(NodeName|State|Reason)=(.*?)(?=\s+[A-Za-z]+=|$)")
# A node Slurm stopped trusting: its state has one of these.
BAD_STATES = ("DOWN", "NOT_RESPONDING", "FAIL")
# How a job ends because of its nodes, not because someone ended it.
NODE_ENDED = ("NODE_FAIL",)


def node_words(nodes: list[str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """{node: what Slurm says of it} for the nodes of ``nodes`` that Slurm marked down or not
    responding (`scontrol show node -o`), e.g. "Slurm set it DOWN+NOT_RESPONDING (Not
    responding)"; {} when it cannot be asked."""
    try:
        out = slurm(["scontrol", "show", "node", "-o", ",".join(nodes)], env)
    except SlurmError:
        return {}
    return bad_nodes(out, nodes)


def bad_nodes(out: str, nodes: list[str]) -> dict[str, str]:
    """node_words of `scontrol show node -o`'s output ``out``."""
    found: dict[str, str] = {}
    for line in out.splitlines():
        fields = dict(_FIELD.findall(line))
        name, state = fields.get("NodeName", ""), fields.get("State", "")
        if name in nodes and any(bad in state for bad in BAD_STATES):
            reason = fields.get("Reason", "").strip()
            found[name] = f"Slurm set it {state}" + (f" ({reason})" if reason else "")
    return found


def lost_to_slurm(
    job_id: str, state: str, lost: dict[str, dict], said: dict[str, str]
) -> dict[str, dict]:
    """The launch.json of each lost node (``lost``: Watch.lost_record's, by node) with what Slurm
    said of it (``said``: node_words) and how the job ended (``state``)."""
    records = {}
    for node, record in lost.items():
        words = said.get(node)
        if words:
            why = f"{words} and ended job {job_id} ({state})"
            record = {**record, "lost": f"{record.get('lost')}; {why}", "slurm": why}
        records[node] = record
    return records
