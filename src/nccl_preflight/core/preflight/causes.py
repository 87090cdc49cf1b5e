# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Which pre-flight failure is a consequence of another: one cause, its consequences under it.

A failed TCP probe (tcp_master_port, tcp_ring, tcp_hccl_port) says that a connection did not
get through; it does not say whose fault that was. When another failed check explains it, the
probe's result is a consequence of that check and carries ``cause: {host, check}``, the pointer
to the causing result. Every failed probe of the result must be explained; the first
explanation is the cause. What explains a probe from host A to host B (at B's address and port,
from A's source address), in this order:

- B dropped out before the pre-flight (its results are None): ``{B, "host reachable"}``, the
  report's finding for an unreachable host;
- B's interface check failed (the interface is missing or down, or carries no fabric address):
  ``{B, "interface"}``; and A's, when the probe could not even bind A's source address;
- B's firewall check failed with a certain finding that drops or rejects B's port from A's
  source address: ``{B, "firewall"}`` (B may be A itself: the master probes its own
  MASTER_PORT);
- the probe timed out and A's firewall check failed with a certain finding that drops the
  ephemeral range from B's address: the replies to A's own ephemeral ports are dropped,
  ``{A, "firewall"}``.

A cause is never a probe itself, so there are no chains. Pure: the observations are the
pre-flight's (core/preflight/observation.py), the results those of judge_host_checks and
the judges appended after it. src/nccl_preflight/core/verdict.py turns the pointer into
verdict.json's ``cause``; the JUnit, summary.md and report.html say what a consequence is a
consequence of.
"""

from __future__ import annotations

from typing import Any

# The probe checks and the nccl_preflight_observe target name each one judges.
PROBE_CHECKS = {"tcp_master_port": "master", "tcp_ring": "ring", "tcp_hccl_port": "hccl"}
UNREACHABLE_CHECK = "host reachable"  # src/nccl_preflight/core/verdict.py's finding of such a host
EPHEMERAL_LABEL = "ephemeral range"  # roles/preflight's firewall query of the ephemeral range


def _failed(results: list[dict[str, Any]] | None, check: str) -> bool:
    return any(r.get("check") == check and r.get("status") == "failed" for r in results or [])


def _drops(obs: dict[str, Any], port: int | None, source: str, label: str = "") -> bool:
    """Whether a certain firewall finding of ``obs`` drops ``port`` (any port of the finding
    when None) from ``source``, for the query ``label`` (any when "")."""
    for found in (obs.get("firewall") or {}).get("findings") or []:
        if not found.get("certain", True) or source not in (found.get("peers") or []):
            continue
        if label and found.get("label") != label:
            continue
        if port is None or any(lo <= port <= hi for lo, hi in found.get("ports") or []):
            return True
    return False


def probe_cause(
    results_by_host: dict[str, list[dict[str, Any]] | None],
    observations: dict[str, dict[str, Any]],
    host: str,
    probe: dict[str, Any],
) -> dict[str, str] | None:
    """The failed check that explains ``host``'s failed ``probe``, or None (module docstring)."""
    target = str(probe.get("host") or "")
    if target in results_by_host and results_by_host[target] is None:
        return {"host": target, "check": UNREACHABLE_CHECK}
    mine, theirs = observations.get(host) or {}, observations.get(target) or {}
    if _failed(results_by_host.get(target), "interface"):
        return {"host": target, "check": "interface"}
    if probe.get("error_kind") == "source" and _failed(results_by_host.get(host), "interface"):
        return {"host": host, "check": "interface"}
    source = str(probe.get("source") or mine.get("address") or "")
    port = probe.get("port")
    if _failed(results_by_host.get(target), "firewall") and _drops(
        theirs, int(port) if port is not None else None, source
    ):
        return {"host": target, "check": "firewall"}
    if (
        probe.get("error_kind") == "timeout"
        and _failed(results_by_host.get(host), "firewall")
        and _drops(mine, None, str(probe.get("address") or ""), EPHEMERAL_LABEL)
    ):
        return {"host": host, "check": "firewall"}
    return None


def result_cause(
    results_by_host: dict[str, list[dict[str, Any]] | None],
    observations: dict[str, dict[str, Any]],
    result: dict[str, Any],
) -> dict[str, str] | None:
    """The cause of one failed probe check's result: every failed probe explained, else None."""
    name = PROBE_CHECKS.get(str(result.get("check")))
    if name is None or result.get("status") != "failed":
        return None
    host = str(result.get("host"))
    probes = (observations.get(host) or {}).get("probes") or []
    bad = [p for p in probes if p.get("name") == name and not p.get("ok")]
    causes = [probe_cause(results_by_host, observations, host, p) for p in bad]
    if not causes or None in causes:
        return None
    return causes[0]


def nccl_preflight_causes(
    results_by_host: dict[str, list[dict[str, Any]] | None],
    observations: dict[str, dict[str, Any]],
) -> dict[str, list[dict[str, Any]] | None]:
    """``results_by_host`` with ``cause: {host, check}`` on every result another failed check
    explains (module docstring); the others unchanged."""
    observations = {h: o or {} for h, o in observations.items()}
    linked: dict[str, list[dict[str, Any]] | None] = {}
    for host, results in results_by_host.items():
        if results is None:
            linked[host] = None
            continue
        causes = [result_cause(results_by_host, observations, r) for r in results]
        linked[host] = [{**r, "cause": c} if c else r for r, c in zip(results, causes, strict=True)]
    return linked
