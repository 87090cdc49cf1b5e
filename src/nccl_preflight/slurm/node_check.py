# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""``nccl-preflight node-check``: this node's checks that need no peer, for Slurm's
HealthCheckProgram or Prolog (docs/slurm.md).

It observes this node as the Ansible path's facts call does (node/facts.py through a
SubprocessRunner, the torch probe started first so that its import overlaps the other reads),
chooses the fabric interface from nccl_socket_ifname / nccl_fabric_cidr as the environment stage
does (node/fabric_choice.py), builds the pre-flight observation (core/preflight/observation.py)
and judges it alone (core/preflight/judge.py judge_node: NODE_CHECKS). One line per finding,
``<check>: <status>: <message> [fix: <hint>]``; exit 0 healthy, 1 a check failed, 2 the config
was refused. With ``drain`` and SLURMD_NODENAME set (slurmd sets it for both programs), a failed
node drains itself: ``scontrol update nodename=<node> state=drain reason="nccl-preflight: <check>:
<value>"`` (Slurm does not drain on a failing HealthCheckProgram by itself). It never resumes a
node: that stays the operator's.

Every command and the torch probe end at one deadline (``timeout`` seconds from the start; Slurm
kills a HealthCheckProgram after 60 s). Imports only the standard library at run time (the node
bundle runs it with a Python that has nothing else).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from nccl_preflight.core.config import preflight_values
from nccl_preflight.core.layout import nccl_rank_layout
from nccl_preflight.core.preflight.backend_checks import nccl_backend_choice
from nccl_preflight.core.preflight.judge import judge_node
from nccl_preflight.core.preflight.observation import nccl_preflight_observation
from nccl_preflight.node.commands import CommandRunner
from nccl_preflight.node.fabric_choice import nccl_fabric_choice
from nccl_preflight.node.facts import gather
from nccl_preflight.node.listener import python_facts, run_python_probe
from nccl_preflight.node.runner import SubprocessRunner

HEALTHY, FAILED, REFUSED = 0, 1, 2
FAILING = ("failed", "error")
DEFAULT_TIMEOUT = 50.0  # below the 60 s after which Slurm kills a HealthCheckProgram
REASON_PREFIX = "nccl-preflight: "
REASON_MAX = 200  # characters of the drain reason: one line, readable in sinfo -R -o '%E'
SCONTROL_DIRS = ["/usr/bin", "/usr/local/bin", "/bin", "/opt/slurm/bin"]
NO_FABRIC = (
    "nccl_socket_ifname and nccl_fabric_cidr are both empty: a node check has no master to "
    "route to, so it cannot tell the fabric interface; set nccl_fabric_cidr (or "
    "nccl_socket_ifname) in the config"
)


class NodeCheckRefused(ValueError):
    """The configuration cannot drive a node check (exit 2, nothing drained)."""


def one_line(text: Any) -> str:
    """``text`` on one line: line breaks and tabs as spaces, other control characters gone."""
    flat = " ".join(str(text).split("\n"))
    flat = flat.replace("\r", " ").replace("\t", " ")
    return "".join(c for c in flat if c.isprintable()).strip()


def finding_line(result: dict[str, Any]) -> str:
    """``<check>: <status>: <message> [fix: <hint>]`` of one check result, on one line."""
    line = f"{result.get('check')}: {result.get('status')}: {result.get('message')}"
    if result.get("hint") and result.get("status") in FAILING:
        line += f" [fix: {result['hint']}]"
    return one_line(line)


def _value(result: dict[str, Any], host: str) -> str:
    """What a failed check found, without the host prefix its message starts with."""
    message = one_line(result.get("message") or "")
    return message[len(host) + 2 :] if message.startswith(f"{host}: ") else message


def drain_reason(failed: Sequence[dict[str, Any]], host: str) -> str:
    """``nccl-preflight: <check>: <value>`` of the first failed check (with how many more
    failed), one line of at most REASON_MAX characters."""
    first = failed[0]
    more = ""
    if len(failed) > 1:
        more = f" (+{len(failed) - 1} more: {', '.join(r['check'] for r in failed[1:])})"
    head = f"{REASON_PREFIX}{first['check']}: "
    value = _value(first, host)
    room = REASON_MAX - len(head) - len(more)
    if len(value) > room:
        value = value[: max(0, room - 3)].rstrip() + "..."
    return (head + value + more)[:REASON_MAX]


def drain_argv(scontrol: str, node: str, reason: str) -> list[str]:
    return [scontrol, "update", f"nodename={node}", "state=drain", f"reason={reason}"]


def drain(runner: CommandRunner, node: str, reason: str) -> dict[str, Any]:
    """Drain ``node`` with ``reason`` through scontrol; {node, reason, drained, message}."""
    scontrol = runner.get_bin_path("scontrol", opt_dirs=SCONTROL_DIRS)
    if scontrol is None:
        message = "scontrol not found on PATH or in " + ", ".join(SCONTROL_DIRS)
        return {"node": node, "reason": reason, "drained": False, "message": message}
    argv = drain_argv(scontrol, node, reason)
    rc, out, err = runner.run_command(argv)
    if rc != 0:
        message = f"scontrol update nodename={node} state=drain failed (rc={rc}): "
        return {**_drained(node, reason, False), "message": message + one_line(err or out)}
    return {**_drained(node, reason, True), "message": f"drained {node}: {reason}"}


def _drained(node: str, reason: str, done: bool) -> dict[str, Any]:
    return {"node": node, "reason": reason, "drained": done}


def require_fabric(config: dict[str, Any]) -> None:
    """NodeCheckRefused when the config names no fabric (nothing to choose the interface by)."""
    if not config.get("nccl_socket_ifname") and not config.get("nccl_fabric_cidr"):
        raise NodeCheckRefused(NO_FABRIC)


def fabric_choice(facts: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """This node's fabric interface and address, chosen as roles/nccl_env chooses them."""
    ifname = str(config.get("nccl_socket_ifname") or "")
    cidr = str(config.get("nccl_fabric_cidr") or "")
    return {**nccl_fabric_choice(facts, ifname, cidr), "cidr": cidr, "socket_ifname": ifname}


def facts_params(config: dict[str, Any], python: str) -> dict[str, Any]:
    """nccl_facts' options as the facts play sets them (roles/facts), no route (no master)."""
    return {
        "route_to": "",
        "python": python,
        "query_python": False,
        "query_xpu": config.get("nccl_backend", "auto") == "auto",
        "gpu_health": bool(config.get("nccl_gpu_health", True)),
        "dcgm_diag_level": int(config.get("nccl_dcgm_diag_level") or 0),
        "dcgm_diag_timeout": int(config.get("nccl_dcgm_diag_timeout") or 300),
    }


def observe(
    config: dict[str, Any], runner: SubprocessRunner, probe: Callable[[str, float], dict]
) -> dict[str, Any]:
    """This node's pre-flight observation (core/preflight/observation.py) and its facts.

    ``probe(python, timeout)``: the torch probe's run (node/listener.py run_python_probe), started
    in a thread before the facts are read."""
    require_fabric(config)
    python = str(config.get("nccl_python") or sys.executable)
    with ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(probe, python, runner.seconds_left())
        shared = {"python": python, "timeout": runner.seconds_left(), "wait": running.result}
        facts = gather(runner, facts_params(config, python), shared)
        run = running.result()
    choice = fabric_choice(facts, config)
    requested = str(config.get("nccl_backend") or "auto")
    backend = nccl_backend_choice(facts, requested)
    layout = nccl_rank_layout(
        ["node"], devices=[backend["devices"]], default=config.get("nccl_nproc_per_node") or 1
    )
    env = {
        "ifname": choice["ifname"],
        "ifname_reason": choice["reason"],
        "address": choice["address"],
        "master_addr": choice["address"],
        "master_port": config.get("nccl_master_port"),
        "nproc_per_node": layout["by_host"]["node"]["nproc_per_node"],
        "backend": backend["backend"],
        "python": python,
    }
    started = {"python": python_facts({**run, "executable": python})}
    return nccl_preflight_observation(facts, env, started=started, clock_check=False)


def judge_settings(config: dict[str, Any], host: str) -> dict[str, Any]:
    extra_env = dict(config.get("nccl_extra_env") or {})
    return {
        "require_gpu": bool(config.get("nccl_require_gpu", True)),
        "gpus_per_node": int(config.get("nccl_gpus_per_node") or 0),
        "expected_versions": dict(preflight_values(config, 1)["preflight_expected_versions"]),
        "full_mesh": False,
        "extra_env": extra_env,
        "extra_env_by_host": {host: extra_env},
        "requested_backend": str(config.get("nccl_backend") or "auto"),
    }


def node_name() -> str:
    """This node's name as Slurm knows it (SLURMD_NODENAME), else its short host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def check_node(
    config: dict[str, Any],
    timeout: float = DEFAULT_TIMEOUT,
    runner: SubprocessRunner | None = None,
    probe: Callable[[str, float], dict] = run_python_probe,
) -> tuple[str, list[dict[str, Any]]]:
    """(node name, the results of its NODE_CHECKS); NodeCheckRefused for a config that cannot
    name the fabric."""
    runner = runner or SubprocessRunner(timeout=timeout, deadline=time.monotonic() + timeout)
    host = node_name()
    observation = observe(config, runner, probe)
    return host, judge_node(host, observation, judge_settings(config, host))


def report(
    host: str,
    results: list[dict[str, Any]],
    want_drain: bool,
    runner: CommandRunner,
    as_json: bool,
    seconds: float,
) -> int:
    """Print the findings (and drain on a failure when asked); the exit status."""
    failed = [r for r in results if r.get("status") in FAILING]
    drained: dict[str, Any] | None = None
    note = ""
    if want_drain and failed:
        if os.environ.get("SLURMD_NODENAME"):
            drained = drain(runner, os.environ["SLURMD_NODENAME"], drain_reason(failed, host))
        else:
            note = "--drain does nothing here: SLURMD_NODENAME is not set (slurmd sets it for a "
            note += "HealthCheckProgram or Prolog); no node was drained"
    status = FAILED if failed else HEALTHY
    if as_json:
        doc = {"host": host, "exit": status, "seconds": round(seconds, 2), "results": results}
        doc["drain"] = drained or ({"drained": False, "message": note} if note else None)
        print(json.dumps(doc, indent=1, sort_keys=True))
    else:
        for result in results:
            print(finding_line(result))
        verdict = f"{len(failed)} check(s) failed" if failed else "healthy"
        print(f"node-check: {one_line(host)}: {verdict} ({len(results)} checks, {seconds:.1f} s)")
    for line in ([drained["message"]] if drained else []) + ([note] if note else []):
        print(f"node-check: {one_line(line)}", file=sys.stderr)
    return status


def run_node_check(config_path: str, want_drain: bool, as_json: bool, timeout: float) -> int:
    """The command: load the config, check this node, print, drain when asked; exit status."""
    from nccl_preflight.core.config import ConfigError, load_config, node_values

    start = time.monotonic()
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        print(f"node-check: {one_line(exc)}", file=sys.stderr)
        return REFUSED
    config = node_values(config, node_name())  # nccl_node_vars' values for this node
    runner = SubprocessRunner(timeout=timeout, deadline=start + timeout)
    try:
        host, results = check_node(config, timeout, runner)
    except NodeCheckRefused as exc:
        print(f"node-check: {config_path}: {one_line(exc)}", file=sys.stderr)
        return REFUSED
    return report(host, results, want_drain, runner, as_json, time.monotonic() - start)
