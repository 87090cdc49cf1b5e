# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The record every pre-flight check returns, and the cross-host comparison the judges share.

A check's result is ``{check, host, status: passed|failed|skipped|error, message, hint}``
(docs/design.md, "Pre-flight results"); the judges beside this file (host_checks.py,
fabric_checks.py, gpu_checks.py, npu_checks.py, backend_checks.py) and the environment stage's
findings (core/env_findings.py) build it here. A cross-host check compares one host with the
value most hosts have and shows the table host -> value. The judges share the hosts' rank order, the
results of a host without an observation, the appending of their checks to
judge_host_checks' results, and the rule of one device per rank.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
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


def rank_order(observations: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """The observed hosts in rank order (``settings["order"]``), any other observed host after."""
    order = [h for h in settings.get("order") or [] if h in observations]
    return order + [h for h in observations if h not in order]


def no_observation(checks: Iterable[str], host: str) -> list[dict[str, str]]:
    """Every one of ``checks`` failed for ``host``, which has no observation."""
    return [
        check_result(c, host, "failed", f"{host}: no observation (the host failed earlier)")
        for c in checks
    ]


def append_results(
    results_by_host: dict[str, list[dict] | None], more: Callable[[str], list[dict]]
) -> dict[str, list[dict] | None]:
    """``results_by_host`` (judge_host_checks') with ``more(host)`` appended to each host's
    list; a host without results (None: it dropped out before the pre-flight) stays None."""
    return {
        host: None if results is None else [*results, *more(host)]
        for host, results in results_by_host.items()
    }


def too_few_devices(
    check: str, host: str, have: int, want: int, devices: tuple[str, str, str]
) -> dict[str, str] | None:
    """Failed when ``host`` has fewer devices (``have``) than ranks planned (``want``, its
    nproc_per_node): every rank needs its own device. ``devices``: (plural, singular, the
    command that lists them), e.g. ("GPUs", "GPU", "nvidia-smi -L"). None when enough."""
    plural, singular, look = devices
    if have >= want:
        return None
    return check_result(
        check,
        host,
        "failed",
        f"{host} has {have} {plural}, {want} ranks planned",
        f"{look}  (on {host}); set nccl_slots / nccl_nproc_per_node for {host} to {have} or "
        f"fix the missing {singular}",
    )


class FilterModule:
    """No filter: shared code of the pre-flight judges (Ansible loads every file here)."""

    def filters(self) -> dict[str, Any]:
        return {}
