# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Ansible's own floor on the overhead lab: what validate.yml's shape costs with no work in it.

validate.yml runs once per repeat (recorded by bench/callbacks/bench_timer.py), and a *mirror*
playbook is written from that record: the same plays on the same hosts, the same tasks in the same
order, each with the same run_once, delegate_to, loop length and the same hosts running or
skipping it; only the work is gone. A task that calls a module on a node (or on the control
machine through delegate_to) becomes ansible.builtin.ping there (AnsiballZ, SSH with the project's
ansible.cfg: pipelining, ControlPersist); a task that runs only in the controller (set_fact,
assert, group_by, the argument-spec checks, the report's action) becomes ansible.builtin.set_fact.
So the mirror pays Ansible's start, inventory, one worker per task and host, one SSH session and
one module start per node call, the result loop and the exit, and nothing of this project's code.

Each repeat, on a fresh lab each, in turns: torchrun by hand (bench/overhead.py's floor),
validate.yml, the empty mirror, and the mirror with its launch wait replaced by the same torchrun
by hand (ansible.builtin.command on every node at once). The last is the fastest validate.yml
this lab allows with this many plays and calls: its ratio to torchrun by hand is what the
overhead goal (1.3x) can reach here.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from bench.common import (
    PHASES,
    check_timeout_for,
    fmt,
    lab_session,
    log,
    median,
    run_by_hand,
    run_playbook,
    torchrun_argv,
    torchrun_env,
)
from bench.overhead import CHECK_ARGS, GOAL, NPROC, RUN_TIMEOUT

# Actions that run only in the controller's worker (no module on any host).
CONTROLLER = {
    "assert", "debug", "fail", "group_by", "set_fact", "meta", "validate_argument_spec",
    "include_tasks", "include_role", "import_tasks", "import_role", "add_host", "nccl_report",
    "nccl_report_file",
}  # fmt: skip
# Actions that run a module on the host they target (or on localhost through delegate_to).
MODULE = {
    "nccl_facts", "nccl_preflight_start", "nccl_preflight_observe", "nccl_torchrun", "file",
    "command", "stat", "copy",
    "template", "ping", "slurp",
}  # fmt: skip
RUN_ENV = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_DEBUG", "PATH")
WAIT_TASK = "wait on this node until it ended"  # roles/launch/tasks/run.yml's wait (and start)
MIRROR_VAR = "bench_floor_noop"


def short_action(action: str) -> str:
    return action.rsplit(".", 1)[-1]


def recorded_tasks(events: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    """The plays of a bench_timer record, each with its tasks and who ran or skipped them.

    A lab host is written as its position, ``@<rank>`` (``names``: the recorded lab's inventory
    names in rank order), so the mirror runs on any lab of the same size."""
    alias = {name: f"@{rank}" for rank, name in enumerate(names)}
    plays: list[dict[str, Any]] = []
    for event in events:
        kind = event["kind"]
        if kind == "play_start":
            plays.append({"name": event["play"], "pattern": event.get("hosts"), "tasks": []})
        elif kind == "task_start":
            plays[-1]["tasks"].append(
                {
                    "name": event["task"],
                    "action": short_action(event["action"]),
                    "run_once": event.get("run_once", False),
                    "delegate_to": event.get("delegate_to"),
                    "results": {},
                    "items": Counter(),
                }
            )
        elif kind in ("ok", "failed", "skipped", "unreachable") and plays and plays[-1]["tasks"]:
            plays[-1]["tasks"][-1]["results"][alias.get(event["host"], event["host"])] = kind
        elif kind.startswith("item_") and plays and plays[-1]["tasks"]:
            plays[-1]["tasks"][-1]["items"][alias.get(event["host"], event["host"])] += 1
    return plays


def mirror_task(
    task: dict[str, Any], play_hosts: list[str], run: bool, names: list[str]
) -> dict[str, Any]:
    """The no-op standing for one recorded task (or, with ``run``, the launch wait's torchrun)."""
    action = task["action"]
    if action not in CONTROLLER | MODULE:
        raise ValueError(f"bench/ansible_floor.py: no mirror for action {action!r} (task "
                         f"{task['name']!r}): add it to CONTROLLER or MODULE")  # fmt: skip
    is_wait = action == "nccl_torchrun" and WAIT_TASK in task["name"].lower()
    stands_for = "node call" if action in MODULE else "controller"
    out: dict[str, Any] = {"name": f"{task['name']} ({stands_for})"}
    if run and is_wait:
        out["name"] = f"{task['name']} (torchrun by hand)"
        out["ansible.builtin.command"] = {"argv": "{{ bench_floor_argv[inventory_hostname] }}"}
        out["environment"] = "{{ bench_floor_env[inventory_hostname] }}"
        out["changed_when"] = False
    elif action in MODULE:
        out["ansible.builtin.ping"] = {}
    elif action == "meta":
        # A meta task runs in the main process, no worker per host (roles/cleanup's and
        # roles/launch's end_play): a noop, with nothing that would make it a worker's task.
        out["ansible.builtin.meta"] = "noop"
        return out
    else:
        out["ansible.builtin.set_fact"] = {MIRROR_VAR: True}
    ran = sorted(host_name(h, names) for h, k in task["results"].items() if k != "skipped")
    if task["items"]:
        out["loop"] = f"{{{{ range({max(task['items'].values())}) | list }}}}"
    if task["run_once"]:
        out["run_once"] = True
    if task["delegate_to"]:
        out["delegate_to"] = task["delegate_to"]
    if not ran:
        out["when"] = False
    elif not task["run_once"] and set(ran) != set(play_hosts):
        out["when"] = f"inventory_hostname in {ran!r}"
    return out


def host_name(alias: str, names: list[str]) -> str:
    """A recorded host (``@<rank>`` or a name such as localhost) on the lab of ``names``."""
    return names[int(alias[1:])] if alias.startswith("@") else alias


def mirror_playbook(
    plays: list[dict[str, Any]], run: bool, names: list[str]
) -> list[dict[str, Any]]:
    """The mirror of ``plays`` for the lab whose inventory names are ``names`` (rank order)."""
    out = []
    for play in plays:
        hosts = sorted({host_name(h, names) for t in play["tasks"] for h in t["results"]})
        if play["pattern"] == "localhost" or hosts == ["localhost"]:
            hosts = ["localhost"]
        out.append(
            {
                "name": f"{play['name']} (mirror)",
                "hosts": ",".join(hosts) if hosts else "localhost",
                "gather_facts": False,
                "tasks": [mirror_task(t, hosts, run, names) for t in play["tasks"]],
            }
        )
    return out


def shape(plays: list[dict[str, Any]]) -> dict[str, Any]:
    """How many plays, tasks, node calls per node and controller tasks the record holds."""
    tasks = [t for p in plays for t in p["tasks"]]
    node_calls: Counter[str] = Counter()
    controller = 0
    for t in tasks:
        ran = [h for h, k in t["results"].items() if k != "skipped"]
        if t["action"] in MODULE:
            for h in ran:
                node_calls["localhost" if t["delegate_to"] else h] += max(1, t["items"][h])
        else:
            controller += 1
    return {
        "plays": len(plays),
        "tasks": len(tasks),
        "controller_tasks": controller,
        "module_calls": dict(node_calls),
    }


def write_mirror(path: Path, plays: list[dict[str, Any]], run: bool, lab: Any, out: Path) -> Path:
    """The mirror playbook; with ``run``, each host's torchrun argv and environment as vars."""
    book = mirror_playbook(plays, run, [h.inventory_name for h in lab.hosts])
    if run:
        argv, env = {}, {}
        for rank, host in enumerate(lab.hosts):
            out_dir = out / host.name
            out_dir.mkdir(parents=True, exist_ok=True)
            argv[host.inventory_name] = torchrun_argv(
                lab, host, rank, len(lab.hosts), NPROC, 29500, str(out_dir), CHECK_ARGS,
                check_timeout_for(RUN_TIMEOUT),
            )  # fmt: skip
            full = torchrun_env(host)
            env[host.inventory_name] = {k: full[k] for k in RUN_ENV}
        for play in book:
            play["vars"] = {"bench_floor_argv": argv, "bench_floor_env": env}
    path.write_text(yaml.safe_dump(book, sort_keys=False, width=200))
    return path


def by_kind(tasks: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds of the mirror's tasks by what they stand for."""
    sums: Counter[str] = Counter()
    for t in tasks:
        name = t["task"] or ""
        kind = "node call" if name.endswith("(node call)") else "controller"
        if name.endswith("(torchrun by hand)"):
            kind = "torchrun by hand"
        sums[kind] += t["seconds"]
    return dict(sums)


def bare_plays(n_hosts: int) -> list[dict[str, Any]]:
    """The least Ansible can do here: one play whose one task is torchrun by hand on every node."""
    wait = {
        "name": f"{WAIT_TASK} (the only task)",
        "action": "nccl_torchrun",
        "run_once": False,
        "delegate_to": None,
        "results": {f"@{rank}": "ok" for rank in range(n_hosts)},
        "items": Counter(),
    }
    return [{"name": "torchrun on every node at once", "pattern": None, "tasks": [wait]}]


def one_repeat(workdir: Path, i: int, plays: list[dict[str, Any]] | None) -> dict[str, Any]:
    base = workdir / "ansible_floor"
    with lab_session(2, slots=NPROC) as (lab, _cpu):
        hand = run_by_hand(lab, base, f"r{i}", nproc=NPROC, check_args=CHECK_ARGS,
                           check_timeout=check_timeout_for(RUN_TIMEOUT))  # fmt: skip
    log(f"ansible_floor: floor {hand.wall_s:.1f}s rcs {hand.rcs}; validate.yml")
    with lab_session(2, slots=NPROC) as (lab, cpu):
        validate_names = [h.inventory_name for h in lab.hosts]
        pb = run_playbook(lab, cpu, base, f"validate-r{i}",
                          ["-e", f"nccl_run_timeout={RUN_TIMEOUT}",
                           "-e", json.dumps({"nccl_check_args": CHECK_ARGS})])  # fmt: skip
    if plays is None:
        events = json.loads((base / f"timer-validate-r{i}.json").read_text())["events"]
        plays = recorded_tasks(events, validate_names)
    log(f"ansible_floor: validate.yml {pb.wall_s:.1f}s rc {pb.rc}; empty mirror")
    mirrors = {}
    for label, shaped, run in (("empty", plays, False), ("run", plays, True),
                               ("bare", bare_plays(len(validate_names)), True)):  # fmt: skip
        with lab_session(2, slots=NPROC) as (lab, cpu):
            book = write_mirror(base / f"mirror-{label}-r{i}.yml", shaped, run, lab,
                                base / f"mirror-{label}-r{i}")  # fmt: skip
            mirrors[label] = run_playbook(lab, cpu, base, f"mirror-{label}-r{i}", playbook=book)
        log(f"ansible_floor: mirror {label} {mirrors[label].wall_s:.1f}s rc {mirrors[label].rc}")
    empty, with_run, bare = mirrors["empty"], mirrors["run"], mirrors["bare"]
    return {
        "plays": plays,
        "load": [round(x, 2) for x in os.getloadavg()],
        "hand_s": hand.wall_s,
        "hand_rcs": hand.rcs,
        "validate_s": pb.wall_s,
        "validate_rc": pb.rc,
        "validate_control_cpu_s": pb.control_cpu_s,
        "empty_s": empty.wall_s,
        "empty_rc": empty.rc,
        "empty_control_cpu_s": empty.control_cpu_s,
        "empty_node_cpu_s": empty.node_cpu_s,
        "empty_phases": empty.phases,
        "empty_by_kind": by_kind(empty.tasks),
        "run_s": with_run.wall_s,
        "run_rc": with_run.rc,
        "run_by_kind": by_kind(with_run.tasks),
        "bare_s": bare.wall_s,
        "bare_rc": bare.rc,
    }


def run(workdir: Path, repeats: int) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    plays = None
    for i in range(repeats):
        log(f"ansible_floor: repeat {i + 1}/{repeats}: floor (torchrun by hand)")
        result = one_repeat(workdir, i, plays)
        plays = result.pop("plays")
        runs.append(result)
    return summarize(runs, plays or [])


def summarize(runs: list[dict[str, Any]], plays: list[dict[str, Any]]) -> dict[str, Any]:
    def med(key: str) -> float | None:
        return median([r[key] for r in runs])

    run_ratio = median([r["run_s"] / r["hand_s"] for r in runs])
    sum_ratio = median([(r["hand_s"] + r["empty_s"]) / r["hand_s"] for r in runs])
    kinds = {k for r in runs for k in r["empty_by_kind"]}
    return {
        "name": "ansible_floor",
        # Judged on torchrun by hand + the empty mirror of the same turn: the mirror with torchrun
        # in it runs torchrun under another moment's load (its ratio spread 0.97-1.49x in turns).
        "goal": f"{GOAL}x reachable: torchrun by hand + Ansible's floor <= {GOAL}x by hand",
        "met": sum_ratio is not None and sum_ratio <= GOAL,
        "shape": shape(plays),
        "hand_s": med("hand_s"),
        "validate_s": med("validate_s"),
        "validate_ratio": median([r["validate_s"] / r["hand_s"] for r in runs]),
        "empty_s": med("empty_s"),
        "empty_control_cpu_s": med("empty_control_cpu_s"),
        "empty_node_cpu_s": med("empty_node_cpu_s"),
        "empty_phases": {p: median([r["empty_phases"].get(p, 0.0) for r in runs]) for p in PHASES},
        "empty_by_kind": {k: median([r["empty_by_kind"].get(k, 0.0) for r in runs]) for k in kinds},
        "run_s": med("run_s"),
        "run_ratio": run_ratio,
        "bare_s": med("bare_s"),
        "bare_ratio": median([r["bare_s"] / r["hand_s"] for r in runs]),
        # The same turn's torchrun by hand plus the empty mirror: the reachable ratio, estimated
        # from two runs instead of measured in one (less exposed to a load spike inside a run).
        "sum_ratio": sum_ratio,
        "all_passed": all(
            r["validate_rc"] == 0
            and r["empty_rc"] == 0
            and r["run_rc"] == 0
            and not any(r["hand_rcs"])
            for r in runs
        ),
        "runs": runs,
        "repeats": len(runs),
    }


def line(r: dict[str, Any]) -> str:
    return (
        f"Ansible's floor (validate.yml's shape, no work) {fmt(r['empty_s'])} s; by hand "
        f"{fmt(r['hand_s'])} s + floor = {fmt(r.get('sum_ratio'), 2)}x (the mirror with torchrun "
        f"by hand in it {fmt(r['run_ratio'], 2)}x; one play, one task "
        f"{fmt(r.get('bare_ratio'), 2)}x; validate.yml in the same turns "
        f"{fmt(r['validate_ratio'], 2)}x)"
    )


def section(r: dict[str, Any], header: list[str]) -> list[str]:
    s = r["shape"]
    calls = ", ".join(f"{h} {n}" for h, n in sorted(s["module_calls"].items()))
    out = [
        "## 1b. Ansible's floor: validate.yml's shape with no work in it",
        "",
        *header,
        "bench/ansible_floor.py. Every repeat, each on a fresh 2-host lab (2 ranks per host), in "
        "turns: torchrun by hand (section 1's floor), validate.yml, its *mirror*, the mirror "
        "with torchrun by hand, and the *bare* playbook (one play, one task: torchrun by hand on "
        "both nodes). The mirror is written from validate.yml's own record (bench_timer): the "
        "same plays on the same hosts, the same tasks in order with their run_once, delegate_to, "
        "loops and skipped hosts; a module call becomes ansible.builtin.ping on the same host, a "
        "controller-only task (set_fact, assert, group_by, argument specs, the report's action) "
        "ansible.builtin.set_fact. With torchrun, the launch's wait task is the by-hand torchrun "
        "command (ansible.builtin.command on both nodes at once, the start task stays a ping). "
        "Same ansible.cfg (pipelining, ControlPersist, forks).",
        "",
        f"- validate.yml's shape: {s['plays']} plays, {s['tasks']} tasks, "
        f"{s['controller_tasks']} controller-only; module calls by host: {calls}",
        f"- torchrun by hand: **{fmt(r['hand_s'])} s**; validate.yml: **{fmt(r['validate_s'])} s** "
        f"({fmt(r['validate_ratio'], 2)}x)",
        f"- empty mirror (Ansible's floor for this shape): **{fmt(r['empty_s'])} s** (control CPU "
        f"{fmt(r.get('empty_control_cpu_s'))} s, in-host CPU {fmt(r.get('empty_node_cpu_s'))} s); "
        f"torchrun by hand + the empty mirror, same turn: **{fmt(r.get('sum_ratio'), 2)}x**",
        f"- mirror with torchrun by hand: **{fmt(r['run_s'])} s** = **{fmt(r['run_ratio'], 2)}x** "
        "torchrun by hand: the best a playbook of this shape does on this lab",
        f"- bare (one play, one task): **{fmt(r.get('bare_s'))} s** = "
        f"**{fmt(r.get('bare_ratio'), 2)}x**: the least a playbook that starts torchrun does here",
        f"- every run passed: {r.get('all_passed')}",
        "",
        "The empty mirror's time, by what its tasks stand for (median seconds):",
        "",
        "| part | seconds |",
        "|---|---|",
        f"| startup+inventory | {fmt(r['empty_phases'].get('startup+inventory'), 2)} |",
        *[f"| {k} tasks | {fmt(v, 2)} |" for k, v in sorted(r["empty_by_kind"].items())],
        f"| exit | {fmt(r['empty_phases'].get('exit'), 2)} |",
        "",
        "Each turn (seconds; load: 1-, 5-, 15-minute load average at the turn's end):",
        "",
        "| by hand | validate.yml | empty mirror | mirror + torchrun | bare | mirror + torchrun "
        "ratio | validate ratio | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    out += [
        f"| {fmt(t['hand_s'])} | {fmt(t['validate_s'])} | {fmt(t['empty_s'])} | {fmt(t['run_s'])} "
        f"| {fmt(t.get('bare_s'))} | {fmt(t['run_s'] / t['hand_s'], 2)}x "
        f"| {fmt(t['validate_s'] / t['hand_s'], 2)}x | {t.get('load', 'n/a')} |"
        for t in r["runs"]
    ]
    return [*out, ""]
