# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight observation of one host: what it showed, in one dict. The contract.

roles/preflight keeps it as the fact ``preflight_observation``; the verdicts
(core/preflight/judge.py: host_checks.py, then gpu_checks.py,
fabric_checks.py and npu_checks.py) read every host's, keyed by inventory name (the judge
adds ``host``). Built on the control machine by ``nccl_preflight_observation`` from the host's
facts, its nccl_env values and the results its module calls registered (in
roles/preflight/tasks/main.yml); each result is an argument of its own, so which call returns
what can change without touching the keys.

    facts          ansible_facts.nccl ({} when the facts call did not run)
    ifname         the fabric interface (nccl_env_ifname), "" when none was chosen
    ifname_reason  why that interface, or why none (nccl_env_ifname_reason)
    address        this host's fabric address (nccl_env_address), "" when none
    master_addr    the master's fabric address (nccl_env_master_addr), "" when none
    master_port    MASTER_PORT (int)
    nproc_per_node this host's ranks (int, nccl_env_nproc_per_node: the rank layout)
    backend        the run's backend (nccl_env_backend), ""
    python         the node's Python for torch (nccl_env_python), ""
    port_owner     the master's MASTER_PORT owners {free, listeners} (the start's check_port);
                   {} elsewhere or when it did not run
    run_lock       the master's run lock {path, refused, took_over, holder, stale, message}
                   (the start's lock); {} elsewhere
    listeners      what the listeners saw: the stop's result ({listeners: [{name, address,
                   port, error, accepted, complete}], timed_out, waited, ...}) when it lists
                   listeners, else the start's result when that has a listener list (at least
                   the bind errors), else {}
    probes         nccl_preflight_observe's results ([{name, ...}]), [] when it did not run
    probe_skip     {master, ring}: why a target was not probed (roles/preflight/vars/main.yml
                   preflight_probe_plan.skip); in check mode both say no listener was started
    firewall       {findings, tools} read by nccl_preflight_observe's firewall option; {} when
                   the call failed or read no firewall
    firewall_skip  why there is no firewall reading: the probe call's failure message, "no
                   fabric address" when it read none, "" when it read one
    python_facts   what the torch probe reported (the shape of ansible_facts.nccl.python): the
                   stop's python, else the start's (check mode runs the probe in the
                   foreground), else {executable, reason: "the torch probe gave no
                   result: <why>"}
    clock          the node's time.time() at the stop (float), None when the clock check
                   is off or the stop gave no clock
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CHECK_MODE_SKIP = "check mode: no listener is started, so nothing to connect to"
ENV_STRINGS = ("ifname", "ifname_reason", "address", "master_addr", "backend", "python")


def _int(value: Any) -> int:
    """Jinja's int filter: a whole number, else 0."""
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


def _float(value: Any) -> float:
    """Jinja's float filter: a number, else 0.0."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def _result(value: Any) -> Mapping[str, Any]:
    """A registered result, or {} when the task did not register one."""
    return value if isinstance(value, Mapping) else {}


def _listeners(started: Mapping, stopped: Mapping) -> Mapping[str, Any]:
    if stopped.get("listeners"):
        return stopped
    return started if "listeners" in started else {}


def _firewall_skip(probe: Mapping) -> str:
    if probe.get("failed"):
        return probe.get("msg", "the probe and firewall read failed")
    return "" if probe.get("firewall") else "no fabric address"


def _python_facts(started: Mapping, stopped: Mapping, python: str) -> Any:
    for result in (stopped, started):
        if "python" in result:
            return result["python"]
    why = stopped.get("msg", "the listeners did not stop")
    return {"executable": python, "reason": f"the torch probe gave no result: {why}"}


def nccl_preflight_observation(
    facts: Any,
    env: Mapping[str, Any] | None = None,
    started: Any = None,
    probe: Any = None,
    stopped: Any = None,
    probe_skip: Mapping[str, str] | None = None,
    check_mode: bool = False,
    clock_check: bool = True,
) -> dict[str, Any]:
    """One host's observation; the module docstring describes every key.

    ``facts``: ansible_facts.nccl; ``env``: the nccl_env values without their prefix (ifname,
    ifname_reason, address, master_addr, master_port, nproc_per_node, backend, python);
    ``started``: the pre-flight's start, nccl_facts' RV preflight (port_owner, lock, listeners,
    python); ``probe``: nccl_preflight_observe's result (results, firewall); ``stopped``: the
    pre-flight's stop, nccl_preflight_observe's RV collect (listeners, python, clock, waited;
    failed and msg when it could not collect); ``probe_skip``: preflight_probe_plan.skip. The
    start and the stop are src/nccl_preflight/node/preflight_calls.py's start and stop.
    """
    env = env or {}
    started, probe, stopped = _result(started), _result(probe), _result(stopped)
    python = str(env.get("python") or "")
    strings = {key: str(env.get(key) or "") for key in ENV_STRINGS}
    return {
        "facts": facts if isinstance(facts, Mapping) else {},
        **{key: strings[key] for key in ("ifname", "ifname_reason", "address", "master_addr")},
        "master_port": _int(env.get("master_port")),
        "nproc_per_node": _int(env.get("nproc_per_node")),
        "backend": strings["backend"],
        "python": python,
        "port_owner": started.get("port_owner", {}),
        "run_lock": started.get("lock", {}),
        "listeners": _listeners(started, stopped),
        "probes": probe.get("results", []),
        "probe_skip": (
            {"master": CHECK_MODE_SKIP, "ring": CHECK_MODE_SKIP} if check_mode else probe_skip
        ),
        "firewall": {} if probe.get("failed") else probe.get("firewall", {}),
        "firewall_skip": _firewall_skip(probe),
        "python_facts": _python_facts(started, stopped, python),
        "clock": _float(stopped["clock"]) if clock_check and "clock" in stopped else None,
    }
