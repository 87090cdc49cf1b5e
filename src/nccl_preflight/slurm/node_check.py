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
or an option was refused, 3 it could not finish in its own time (UNFINISHED). With ``drain`` and
SLURMD_NODENAME set (slurmd sets it for both programs), a failed node drains itself: ``scontrol
update nodename=<node> state=drain reason="nccl-preflight: <check>: <value>"`` (Slurm does not
drain on a failing HealthCheckProgram by itself). It never resumes a node: that stays the
operator's.

It drains on findings about the node only, never on its own slowness: when the torch probe or a
command was killed at node-check's deadline (``timeout`` seconds from the start; Slurm kills a
HealthCheckProgram after 60 s), a failed check that what was killed may have failed is not
judged (``Unfinished.undecided``: every check when a command was killed, TORCH_CHECKS when the
probe was) and drains nothing; another failed check of that run is a finding and drains. With no
finding left the run is unfinished: it says what did not finish and exits UNFINISHED
(``unfinished_status``). How the command runs around this check
(one at a time per node, every process it starts ending with it, the exit statuses):
slurm/node_command.py. Imports only the standard library at run time (the node bundle runs it
with a Python that has nothing else).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from nccl_preflight.core.config import preflight_values
from nccl_preflight.core.metrics import write_node_check
from nccl_preflight.core.preflight.judge import judge_node
from nccl_preflight.core.preflight.observation import nccl_preflight_observation
from nccl_preflight.core.stage import node_environments, preflight_settings
from nccl_preflight.node.commands import CommandRunner
from nccl_preflight.node.fabric_choice import nccl_fabric_choice
from nccl_preflight.node.facts import gather
from nccl_preflight.node.listener import python_facts
from nccl_preflight.node.runner import SubprocessRunner
from nccl_preflight.slurm.node_options import (
    DEFAULT_TIMEOUT,
    HEALTHY,
    NodeCheckOptions,
    node_name,
    one_line,
    require_fabric,
    status_of,
    unfinished_status,
)
from nccl_preflight.slurm.node_torch import TorchReading

FAILING = ("failed", "error")
REASON_PREFIX = "nccl-preflight: "
REASON_MAX = 200  # characters of the drain reason: one line, readable in sinfo -R -o '%E'
SCONTROL_DIRS = ["/usr/bin", "/usr/local/bin", "/bin", "/opt/slurm/bin"]
DRAIN_TIMEOUT = 8.0  # scontrol's own bound, after the check's --timeout (50 s + 8 < Slurm's 60)
# The node checks that read the torch probe's answer (python_facts: torch's versions, whether it
# sees CUDA, its devices, torch_npu): a probe killed at the deadline leaves them undecided, and
# node-check drains on none of them then (tests/unit/slurm/test_node_check.py judges a node with and
# without the probe's answer: only these change).
TORCH_CHECKS = frozenset({"versions", "gpu", "gpu_visible", "npu"})


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
    # this node alone, its own master (core/stage.py, as a run's environment stage)
    knobs = {**config, "nccl_python": python}
    _, by_node = node_environments(knobs, ["node"], {}, {"node": facts}, {"node": choice})
    env = by_node["node"]
    started = {"python": python_facts({**run, "executable": python})}
    return nccl_preflight_observation(facts, env, started=started, clock_check=False)


def judge_settings(config: dict[str, Any], host: str) -> dict[str, Any]:
    """The judge's settings of one node alone (core/stage.py preflight_settings, as the run's;
    core/preflight/judge.py judge_node makes it its own master, with no clock and no mesh)."""
    knobs = {**config, **preflight_values(config, 1), "preflight_full_mesh": False}
    return preflight_settings(knobs, [host], host, {host: config.get("nccl_extra_env")})


def check_node(
    config: dict[str, Any],
    timeout: float = DEFAULT_TIMEOUT,
    runner: SubprocessRunner | None = None,
    probe: Callable[[str, float], dict] | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """(node name, the results of its NODE_CHECKS); NodeCheckRefused for a config that cannot
    name the fabric. ``probe``: the torch reading (default: slurm/node_torch.py's)."""
    runner = runner or SubprocessRunner(timeout=timeout, deadline=time.monotonic() + timeout)
    host = node_name()
    observation = observe(config, runner, probe or TorchReading())
    return host, judge_node(host, observation, judge_settings(config, host))


@dataclass
class Unfinished:
    """What was killed at node-check's own deadline: its own slowness, not a finding."""

    probe: bool = False  # the torch probe (import torch)
    commands: list[str] = field(default_factory=list)  # each killed command's line

    @classmethod
    def of(cls, runner: SubprocessRunner, probe: Any) -> Unfinished:
        killed = [one_line(" ".join(argv))[:80] for argv in runner.killed]
        return cls(bool(getattr(probe, "timed_out", False)), killed)

    def parts(self) -> list[str]:
        return ["the torch probe (import torch)"] * self.probe + self.commands

    def undecided(self, failed: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The failed checks that what was killed may have failed: every one when a command
        was killed (its output feeds many checks), those reading torch when the probe was."""
        if self.commands:
            return list(failed)
        return [r for r in failed if r.get("check") in TORCH_CHECKS] if self.probe else []


def _summary(
    findings: list[dict[str, Any]],
    undecided: list[dict[str, Any]],
    unfinished: Unfinished,
    checks: int,
    seconds: float,
    options: NodeCheckOptions,
    torch_age: float | None = None,
) -> tuple[str, str]:
    """(verdict word, the verdict line's words after '<node>: ')."""
    reused = "" if torch_age is None else f"; torch read {torch_age:.0f} s ago"
    tail = f" ({checks} checks, {seconds:.1f} s{reused})"
    parts = unfinished.parts()
    if not parts:
        if findings:
            return "failed", f"{len(findings)} check(s) failed{tail}"
        return "healthy", f"healthy{tail}"
    verb = "was" if len(parts) == 1 else "were"
    killed = (
        f"{', '.join(parts)} did not finish within --timeout {options.timeout:g} s and {verb} "
        "killed"
    )
    names = ", ".join(str(r.get("check")) for r in undecided)
    if findings:
        text = f"{len(findings)} check(s) failed; unfinished: {killed}"
        return "failed", text + (f", so {names} not judged" if names else "") + tail
    text = f"unfinished: {killed}: node-check's own slowness, not a finding about the node"
    text += "; nothing drained"
    if undecided:
        text += f" ({len(undecided)} check(s) failed, possibly for that: {names})"
    if unfinished_status() == HEALTHY:
        text += "; exit 0 as a Prolog/Epilog (Slurm would drain the node on another)"
    return "unfinished", text + tail


def _drain_or_note(
    want: bool,
    findings: list[dict[str, Any]],
    undecided: list[dict[str, Any]],
    runner: CommandRunner,
    host: str,
) -> tuple[dict[str, Any] | None, str]:
    """(the drain's outcome, or a note saying why none happened)."""
    if not want or not (findings or undecided):
        return None, ""
    if not findings:
        return None, "not drained: this node-check could not finish in its own time (see above)"
    if os.environ.get("SLURMD_NODENAME"):
        return drain(runner, os.environ["SLURMD_NODENAME"], drain_reason(findings, host)), ""
    note = "--drain does nothing here: SLURMD_NODENAME is not set (slurmd sets it for a "
    return None, note + "HealthCheckProgram or Prolog); no node was drained"


def report(
    host: str,
    results: list[dict[str, Any]],
    options: NodeCheckOptions,
    runner: CommandRunner,
    seconds: float,
    unfinished: Unfinished | None = None,
    torch_age: float | None = None,
) -> dict[str, Any]:
    """Print the findings and drain on a finding when asked (never on a check that what was
    killed may have failed: ``Unfinished.undecided``); -> the verdict {exit, verdict, summary,
    drained}."""
    unfinished = unfinished or Unfinished()
    failed = [r for r in results if r.get("status") in FAILING]
    undecided = unfinished.undecided(failed)
    findings = [r for r in failed if r not in undecided]
    drained, note = _drain_or_note(options.drain, findings, undecided, runner, host)
    word, summary = _summary(
        findings, undecided, unfinished, len(results), seconds, options, torch_age
    )
    status = status_of(word)
    if options.json:
        doc = {"host": host, "exit": status, "seconds": round(seconds, 2), "results": results}
        doc["drain"] = drained or ({"drained": False, "message": note} if note else None)
        doc["unfinished"] = unfinished.parts()
        doc["not_judged"] = [r.get("check") for r in undecided]
        doc["torch_read_s_ago"] = None if torch_age is None else round(torch_age, 1)
        print(json.dumps(doc, indent=1, sort_keys=True))
    else:
        for result in results:
            print(finding_line(result))
        print(f"node-check: {one_line(host)}: {summary}")
    for line in ([drained["message"]] if drained else []) + ([note] if note else []):
        print(f"node-check: {one_line(line)}", file=sys.stderr)
    sys.stdout.flush()
    done = bool(drained and drained["drained"])
    not_judged = [str(r.get("check")) for r in undecided]
    return {
        "exit": status,
        "verdict": word,
        "summary": summary,
        "drained": done,
        "not_judged": not_judged,
    }


def check_and_report(
    config: dict[str, Any], options: NodeCheckOptions, start: float, keep: str | None = None
) -> dict:
    """Check this node within ``options.timeout`` of ``start`` (time.monotonic()), print, drain
    when asked and finished; -> the verdict (report's, with its seconds). ``keep``: where the
    torch reading is kept for ``options.torch_max_age`` s (slurm/node_torch.py)."""
    runner = SubprocessRunner(timeout=options.timeout, deadline=start + options.timeout)
    probe = TorchReading(keep, options.torch_max_age)
    host, results = check_node(config, options.timeout, runner, probe)
    seconds = time.monotonic() - start
    unfinished = Unfinished.of(runner, probe)
    # the drain has its own bound: the check's deadline may have passed (a probe killed at it)
    drainer = SubprocessRunner(timeout=DRAIN_TIMEOUT)
    verdict = report(host, results, options, drainer, seconds, unfinished, probe.reused_age)
    if options.textfile:
        write_metrics(options.textfile, host, results, verdict, seconds)
    return {**verdict, "seconds": round(seconds, 2)}


def write_metrics(
    directory: str,
    host: str,
    results: list[dict[str, Any]],
    verdict: dict[str, Any],
    seconds: float,
) -> None:
    """--textfile: this node-check's metrics in ``directory``/nccl_preflight.prom
    (core/metrics.py); a file that cannot be written is said on stderr, the exit status stays
    the verdict's."""
    try:
        write_node_check(
            directory,
            host,
            results,
            str(verdict["verdict"]),
            seconds,
            time.time(),
            verdict.get("not_judged") or (),
        )
    except OSError as exc:
        print(f"node-check: --textfile {directory}: not written: {one_line(exc)}", file=sys.stderr)
