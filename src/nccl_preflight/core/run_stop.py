# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Which stage stopped a run before its ranks started, and the findings that stopped it.

Pure, over a RunData (src/nccl_preflight/core/run_data.py). The JUnit
(src/nccl_preflight/core/junit.py) gives every planned rank of a stopped run the error "never
started: the run stopped at <stage>: <cause>"; the verdict (src/nccl_preflight/core/verdict.py)
points those ranks at the causing findings.

- the environment stage: a host's ``environment`` check is an error (roles/nccl_env wrote it
  into preflight/<host>.json; nothing started on any host; plan.json is not written);
- the launch, when plan.json's ``launch_skipped`` says why and a host dropped out before it
  (static rendezvous needs every node): the causes are the unreachable hosts;
- the pre-flight, when the launch was skipped and a pre-flight check failed: the causes are the
  failed checks that are no consequence of another (``cause``: core/preflight/causes.py);
- otherwise, when the launch was skipped (check mode): the launch, with launch_skipped's words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from .run_data import RunData

ENVIRONMENT_CHECK = "environment"  # src/nccl_preflight/core/env_findings.py
UNREACHABLE_CHECK = "host reachable"  # the verdict's and the JUnit's test of such a host
# A run cut short from outside (plan.json's "interrupted"): the JUnit's nccl.run testcase and
# the verdict's finding (run/interrupted) name it so.
INTERRUPTED_TEST = "interrupted"
# The end of an environment finding's message (core/env_findings.py): the stop, not the cause.
_ENV_STOP_TAIL = ". The run stopped at the environment stage"
_CAUSE_TEXT_MAX = 300


class RunStop(NamedTuple):
    stage: str  # "the environment stage", "the pre-flight", "the launch"
    cause: str  # what stopped it, in words
    causes: list[tuple[str, str]]  # (host, check) of each causing finding, in host order


def _short(text: str) -> str:
    first = text.splitlines()[0] if text else ""
    return first if len(first) <= _CAUSE_TEXT_MAX else first[: _CAUSE_TEXT_MAX - 3] + "..."


def root_failures(run: RunData) -> list[dict[str, Any]]:
    """Every failed or erroneous pre-flight result that is no consequence of another, in host
    order."""
    return [
        item
        for host in run.hosts
        for item in (host.preflight or {}).get("results") or []
        if item.get("status") in ("failed", "error") and not item.get("cause")
    ]


def run_stop(run: RunData) -> RunStop | None:
    """The stage that stopped ``run`` before any rank started, or None (module docstring)."""
    env = [r for r in root_failures(run) if r.get("check") == ENVIRONMENT_CHECK]
    if env:
        text = "; ".join(_short(str(r.get("message") or "").split(_ENV_STOP_TAIL)[0]) for r in env)
        return RunStop(
            "the environment stage", text, [(str(r.get("host")), ENVIRONMENT_CHECK) for r in env]
        )
    skipped = str(run.plan.get("launch_skipped") or "")
    if not skipped:
        return None
    absent = [h.host for h in run.hosts if not h.reachable]
    if absent:
        return RunStop("the launch", skipped, [(h, UNREACHABLE_CHECK) for h in absent])
    roots = root_failures(run)
    if roots:
        text = "; ".join(
            f"{r.get('host')} {r.get('check')}: {_short(str(r.get('message') or ''))}"
            for r in roots
        )
        return RunStop(
            "the pre-flight", text, [(str(r.get("host")), str(r.get("check"))) for r in roots]
        )
    return RunStop("the launch", skipped, [])
