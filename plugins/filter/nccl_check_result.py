# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The record every pre-flight check returns, and the cross-host comparison the judges share.

A check's result is ``{check, host, status: passed|failed|skipped|error, message, hint}``
(docs/design.md, "Pre-flight"); the judges (nccl_preflight.py, nccl_fabric.py,
nccl_gpu_checks.py, nccl_npu_checks.py, nccl_backends.py) and the environment stage's findings
(nccl_env_findings.py) build it here. A cross-host check compares one host with the value most
hosts have and shows the table host -> value.

Ansible loads a filter file by its path, not as a package, so a judge finds this file by putting
its own folder on ``sys.path`` (tests/conftest.py puts the same folder there under pytest). This
file has no filter of its own.
"""

from __future__ import annotations

from collections import Counter
from typing import Any


def check_result(
    check: str, host: str, status: str, message: str, hint: str = ""
) -> dict[str, str]:
    """One check's result for one host: what was found (``message``) and the fix (``hint``)."""
    return {"check": check, "host": host, "status": status, "message": message, "hint": hint}


def reference_value(values: dict[str, Any], order: list[str], prefer: Any = None) -> Any:
    """The value most hosts have; a tie goes to ``prefer``, then to the earliest host in rank
    order."""
    counts = Counter(values.values())
    best = max(counts.values())
    if prefer is not None and counts.get(prefer) == best:
        return prefer
    for host in order:
        if host in values and counts[values[host]] == best:
            return values[host]
    return next(iter(values.values()))


def host_table(values: dict[str, Any], order: list[str]) -> str:
    """host -> value, one a line in rank order, the values aligned; None reads 'unknown'."""
    width = max(len(h) for h in values)
    return "\n".join(
        f"  {h.ljust(width)}  {values[h] if values[h] is not None else 'unknown'}"
        for h in order
        if h in values
    )


class FilterModule:
    """No filter: shared code of the pre-flight judges (Ansible loads every file here)."""

    def filters(self) -> dict[str, Any]:
        return {}
