# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""`nccl-preflight slurm -N NODES --config FILE [salloc's options] [--drain] [-- ARGS]`.

On an allocation (the caller's or its own, allocation.py), one run step on every node
(node_step.run_step): it observes and the core judges (observe.py: the pre-flight; the
environment stage's findings, core/env_findings.py; the one rank layout, core/layout.py), then
the same step launches (launch.py; its torch probe becomes torchrun, node/warm_torchrun.py) or
ends when the launch is skipped; the pairwise relaunch is a launch step of its own. Then the
report in reports/<run-id>/ through the Ansible path's report build (core/report_run.py: JUnit
per rank and merged, summary.md, report.html, verdict.json) and its exit code
(core/exit_classes.py).
--drain drains the nodes the run names as bad (drain.py), never for a cluster-wide cause.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from ..core.config import node_values, preflight_values
from ..core.content import TREE
from ..core.env_findings import nccl_env_findings
from ..core.exit_classes import BY_NAME
from ..core.launch_hosts import plan_host
from ..core.pairwise_relaunch import nccl_pairwise_relaunch
from ..core.preflight.backend_checks import nccl_backend_choice
from ..core.preflight.fabric_checks import nccl_expect_net
from ..core.preflight.host_checks import nccl_preflight_failed_hosts
from ..core.preflight.judge import judge_preflight
from ..core.report_run import run_report
from ..core.run_watch import watch_hosts
from ..core.stage import (
    RESULTS_DIR,
    kill_grace,
    knob,
    node_environments,
    pair_triggers,
    plan_document,
    preflight_settings,
    rank_args,
    relaunch_rank_args,
    relaunch_timeout,
    skip_reason,
)
from ..node.files import write_atomically
from ..node.supervisor import FINISH_MARGIN_S
from .allocation import Allocation, Interrupted, SlurmError, ended_state
from .bundle import build_node_bundle
from .drain import drain, drain_targets
from .launch import WATCH_STALE_S, Watch
from .lost import NODE_ENDED, lost_to_slurm, node_words
from .observe import Observed, observations, observe_on, step_settings
from .pending import NotGranted
from .ship import shared_and_own
from .step import END_GRACE_S, LOST_END_GRACE_S, Step

RANK_SCRIPT = TREE.rank_script


def new_run_id() -> str:
    """YYYYmmddTHHMMSS-<6 hex>, as roles/validate_inputs makes it."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(data, indent=2, sort_keys=True).encode(), 0o644)


class SlurmRun:
    """One run: its settings, allocation, directories and what each stage found."""

    def __init__(self, config: dict[str, Any], alloc: Allocation, report_root: Path) -> None:
        self.config = config
        self.alloc = alloc
        self.nodes = alloc.nodes
        self.run_id = str(config.get("nccl_run_id") or new_run_id())
        self.run_dir = report_root / self.run_id
        self.python = str(config.get("nccl_python") or "python3")
        # nccl_node_vars laid over the run's values, once per node (core/config.py node_values)
        self.node_config = {node: node_values(config, node) for node in self.nodes}
        self.bundle = build_node_bundle(report_root / ".bundle")
        self.env_by_node: dict[str, dict[str, Any]] = {}
        self.layout: dict[str, Any] = {}
        self.results: dict[str, Any] = {}
        self.pair_triggers: list[dict[str, Any]] = []
        self.job_ended = ""  # the job's state when Slurm ended it because of a node (lost)
        self.started = time.time()  # the run's duration in its metrics (core/metrics.py)

    def say(self, line: str) -> None:
        print(line, flush=True)

    # ------------------------------------------------------------------ stages
    def environment(self, obs: Observed) -> dict[str, dict[str, str]]:
        """Fabric choice, backend, layout and environment of every node (core/stage.py
        node_environments, as roles/nccl_env's); -> the environment findings."""
        findings = nccl_env_findings(
            {n: obs.choices.get(n) for n in self.nodes},
            {n: {"nccl": facts} for n, facts in obs.facts.items()},  # as ansible_facts holds them
            self.nodes,
        )
        # no run directory: the node points NCCL_DEBUG_FILE into its own (node_step.launch)
        self.layout, self.env_by_node = node_environments(
            self.config,
            self.nodes,
            self.node_config,
            {n: obs.facts.get(n) for n in self.nodes},
            {n: obs.choices.get(n) for n in self.nodes},
        )
        return findings

    def preflight(self, obs: Observed) -> list[str]:
        """The core's judgement of every node; writes preflight/<node>.json; -> failed nodes."""
        present = [n for n in self.nodes if n in obs.facts]
        settings = judge_settings(self.config, self.nodes)
        by_node = judge_preflight(
            observations(obs, self.nodes, self.env_by_node, settings["clock_check"]),
            present,
            settings,
        )
        self.results["preflight"] = by_node
        for node, results in by_node.items():
            if results is not None:
                write_json(
                    self.run_dir / "preflight" / f"{node}.json", {"host": node, "results": results}
                )
        return nccl_preflight_failed_hosts(by_node)

    def plan_hosts(self, obs: Observed) -> list[dict[str, Any]]:
        """plan.json's host rows (core/launch_hosts.py plan_host, as roles/launch's)."""
        requested = str(self.config.get("nccl_backend") or "auto")
        expect_net = str(self.config.get("nccl_expect_net") or "auto")
        rows = []
        for row in self.layout["hosts"]:
            node, env = row["host"], self.env_by_node[row["host"]]
            facts = obs.facts.get(node) or {}
            rows.append(
                plan_host(
                    row,
                    address=env["address"] or None,
                    ifname=env["ifname"] or None,
                    facts=facts,
                    extra_env=self.node_config[node].get("nccl_extra_env") or {},
                    reachable=node in obs.facts,
                    backend_choice=nccl_backend_choice(facts, requested) if facts else None,
                    expect_net=nccl_expect_net(facts, env["ifname"], expect_net) if facts else None,
                )
            )
        return rows

    def plan(self, obs: Observed, skipped: str) -> None:
        """plan.json (core/stage.py plan_document, as roles/launch/tasks/plan.yml's)."""
        env = self.env_by_node[self.nodes[0]]
        hosts = self.plan_hosts(obs)
        self.pair_triggers = pair_triggers(self.config, hosts)
        plan = plan_document(
            self.config,
            run_id=self.run_id,
            hosts=hosts,
            layout=self.layout,
            master_addr=env["master_addr"],
            master_port=env["master_port"],
            backend=env["backend"],
            skipped=skipped,
            report_root=str(self.run_dir.parent),
            front_end="slurm",
        )
        write_json(self.run_dir / "plan.json", plan)

    def script_args(self, pairwise_only: bool = False) -> tuple[int, list[str]]:
        """The launch's bound and the rank script's argv (core/stage.py, as roles/launch's
        run.yml and pairwise_run.yml): the main launch, or the pairwise-only relaunch."""
        backend = self.env_by_node[self.nodes[0]]["backend"]
        if pairwise_only:
            args = relaunch_rank_args(self.config, self.layout, backend, RESULTS_DIR)
            return relaunch_timeout(self.config), args
        args = rank_args(self.config, self.layout, backend, RESULTS_DIR, self.pair_triggers)
        return int(knob(self.config, "nccl_run_timeout")), args

    def launch_settings(self, args: list[str], timeout: int, rdzv_id: str) -> dict[str, Any]:
        """Every node's launch settings, sent once for all (ship.shared_and_own: what differs
        by node is its rank, address and interface)."""
        by_node = {}
        for node in self.nodes:
            env, row = self.env_by_node[node], self.layout["by_host"][node]
            by_node[node] = {
                "torchrun": {
                    "python": self.python,
                    "nnodes": len(self.nodes),
                    "node_rank": row["node_rank"],
                    "nproc_per_node": row["nproc_per_node"],
                    "master_addr": env["master_addr"],
                    "master_port": env["master_port"],
                    "local_addr": env["address"],
                    "rdzv_id": rdzv_id,
                    "script_args": args,
                },
                "env": env["env"],
                "timeout": timeout,
                "grace": kill_grace(self.config),
                "rank_offset": row["rank_offset"],
                "ifname": env["ifname"],
                "interval": 1.0,
                "watch_stale_s": WATCH_STALE_S,
            }
        return shared_and_own(by_node)

    def launch(self, obs: Observed, held: Step | None = None, pairwise_only: bool = False) -> None:
        """The ranks, watched: in ``held``, the run step that observed (its nodes launch in the
        same process, their warm torch probe as torchrun: node/warm_torchrun.py), else in a
        launch step of its own. With pairwise_only the relaunch of roles/launch/tasks/
        pairwise_run.yml: only the pairwise rounds (and barrier), a small payload, bounded by
        core/stage.py relaunch_timeout, no stall watch (a slow pair must not be ended as a
        stall), the results into <node>/pairwise/."""
        timeout, args = self.script_args(pairwise_only)
        if pairwise_only:
            rdzv_id, subdir, stall_timeout = (
                f"nccl-preflight-{self.run_id}-pairwise",
                "pairwise",
                0.0,
            )
        else:
            rdzv_id, subdir = f"nccl-preflight-{self.run_id}", ""
            stall_timeout = float(self.config.get("nccl_stall_timeout") or 0)
        settings = self.launch_settings(args, timeout, rdzv_id)
        if held is not None:
            step = held
            step.say({"launch": settings})
        else:
            step = self.step("launch", settings)
        hosts = watch_hosts(self.layout, self.env_by_node, obs.facts)
        watch = Watch(step, self.run_dir, hosts, stall_timeout, self.say, subdir)
        try:
            missing = watch.run(timeout + kill_grace(self.config) + FINISH_MARGIN_S)
        finally:
            # a node cut off never lets srun end: it is not waited for
            step.end(LOST_END_GRACE_S if watch.silent() else END_GRACE_S)
        self.lost(watch, missing, subdir)

    def lost(self, watch: Watch, missing: list[str], subdir: str) -> None:
        """The nodes whose results never came back get their launch.json (Watch.lost_record).
        A job Slurm ended because of its nodes (NODE_FAIL) is a consequence of the node it
        marked down (slurm/lost.py), the cause; a job ended from outside (scancel, its time
        limit) cut the run short: no verdict."""
        state = ended_state(self.alloc.job_id, self.alloc.env())
        lost = {node: watch.lost_record(node) for node in missing}
        slurm_said = node_words(self.nodes, self.alloc.env()) if state != "RUNNING" else {}
        for node in slurm_said:
            if node not in lost and not (self.run_dir / node / subdir / "launch.json").is_file():
                lost[node] = watch.lost_record(node)
        if state != "RUNNING" and state not in NODE_ENDED and not watch.named():
            raise SlurmError(
                f"job {self.alloc.job_id} ended ({state}) while the ranks ran: no verdict"
            )
        for node, record in lost_to_slurm(self.alloc.job_id, state, lost, slurm_said).items():
            self.say(f"{node}: lost: {record['lost']}")
            write_json(self.run_dir / node / subdir / "launch.json", record)
        if state != "RUNNING":
            self.job_ended = state
            self.say(
                f"job {self.alloc.job_id} ended ({state}): Slurm ended it because of "
                f"{', '.join(slurm_said) or 'the fault named above'}, a consequence, no verdict "
                "of its own"
            )

    def relaunch_reason(self) -> str:
        """Why the pairwise rounds run again alone (core/pairwise_relaunch.py), "" when not:
        from every node's launch.json, as roles/launch/tasks/pairwise.yml reads the launch's."""
        rows = []
        for node in self.nodes:
            try:
                ended = json.loads((self.run_dir / node / "launch.json").read_text())
            except (OSError, ValueError):
                ended = {}
            keys = ("timed_out", "stopped_by", "stop", "rank_exits")
            rows.append({"host": node, **{k: ended.get(k) for k in keys}})
        mode = str(self.config.get("nccl_pairwise") or "auto")
        if self.job_ended:  # no job to launch in any more
            return ""
        return nccl_pairwise_relaunch(rows, mode, len(self.nodes))

    # ------------------------------------------------------------------ the whole run
    def run(self) -> dict[str, Any]:
        self.say(f"nccl-preflight slurm: run {self.run_id} on job {self.alloc.job_id}: "
                 f"{', '.join(self.nodes)}")  # fmt: skip
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            ranks_launched = self.stages()
        except Interrupted as exc:
            self.cut_short(f"the slurm command was interrupted by {exc}")
            raise
        except SlurmError as exc:
            self.cut_short(str(exc))
            raise
        return self.report(ranks_launched)

    def step(self, what: str, settings: dict[str, Any]) -> Step:
        """A job step of node_step ``what`` on every node (step.py)."""
        return Step(
            self.alloc.job_id,
            self.nodes,
            self.python,
            self.run_id,
            what,
            settings,
            self.bundle,
            self.alloc.env(),
        )

    def stages(self) -> bool:
        """The run step: observe, then (on the control machine) environment, pre-flight and
        plan, then the launch in the same step (and the pairwise relaunch in a step of its own);
        -> whether the report expects ranks."""
        settings = step_settings(self.config, self.nodes, self.python)
        step = self.step("run", settings)
        try:
            return self.judged_stages(
                step, observe_on(step, self.config, self.nodes, settings["shared"])
            )
        finally:
            step.end()

    def judged_stages(self, step: Step, obs: Observed) -> bool:
        """What follows the observations: the nodes of ``step`` wait for the launch (or the
        step's end, when there is none)."""
        if obs.problem:
            self.say(f"the observe step: {obs.problem}")
        findings = self.environment(obs)
        if findings:
            for node, result in findings.items():
                write_json(
                    self.run_dir / "preflight" / f"{node}.json",
                    {"host": node, "results": [result], "layout": self.layout["by_host"][node]},
                )
            return False
        failed = self.preflight(obs)
        absent = [n for n in self.nodes if n not in obs.facts]
        skipped = skip_reason(self.nodes, absent, failed)
        self.plan(obs, skipped)
        if not skipped:
            self.launch(obs, held=step)
            reason = self.relaunch_reason()
            if reason:
                self.say(f"{reason}: running only the pairwise rounds to name the node")
                self.launch(obs, pairwise_only=True)
        return True

    def cut_short(self, why: str) -> None:
        """Ctrl-C, scancel or a Slurm error ended the run early: the report still shows every
        planned rank (a rank whose node sent nothing back is an error that says why) and what
        came back before, under a verdict of no_verdict (core/verdict.py _interruption)."""
        path = self.run_dir / "plan.json"
        try:
            plan = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # before the launch: the nodes, as the allocation has them
            hosts = [{"host": node, "reachable": True} for node in self.nodes]
            plan = {"run_id": self.run_id, "front_end": "slurm", "hosts": hosts}
            plan["launch_skipped"] = why
        plan["interrupted"] = why
        write_json(path, plan)
        if not plan.get("launch_skipped"):
            for node in self.nodes:
                launch = self.run_dir / node / "launch.json"
                if not launch.is_file():
                    write_json(launch, {"stopped_by": why, "cut_short": True, "rc": None})
        self.report(ranks_launched=True)

    def report(self, ranks_launched: bool) -> dict[str, Any]:
        result = run_report(
            {
                "report_root": str(self.run_dir.parent),
                "run_id": self.run_id,
                "fallback_to_latest": False,
                "ranks_launched": ranks_launched,
                "update_latest": True,
                "html": True,
                "run_check_mode": False,
                "verdict_copy": "",
                "textfile_dir": str(self.config.get("nccl_report_textfile_dir") or ""),
                "started": self.started,
            },
            False,
        )
        lines = result.get("console") or [result.get("msg", "")]
        for line in result.get("warnings", []) + lines:
            self.say(line)
        return result


def judge_settings(config: dict[str, Any], nodes: list[str]) -> dict[str, Any]:
    """The pre-flight judge's settings (core/stage.py preflight_settings, as roles/preflight's):
    the pre-flight's variables worked out for the run (core/config.py preflight_values), every
    node's own nccl_extra_env from nccl_node_vars."""
    knobs = {**config, **preflight_values(config, len(nodes))}
    by_node = {node: node_values(config, node).get("nccl_extra_env") for node in nodes}
    return preflight_settings(knobs, nodes, nodes[0], by_node)


def drain_named(run: SlurmRun) -> None:
    """--drain: drain the nodes the verdict names as bad (drain.py says which, never for a
    cluster-wide cause); a node scontrol refuses is said, the others still drained."""
    try:
        verdict = json.loads((run.run_dir / "verdict.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        run.say(f"--drain: no verdict to read ({exc}); nothing drained")
        return
    targets = drain_targets(verdict.get("findings") or [], run.nodes)
    if not targets:
        run.say("--drain: no node-level finding; nothing drained")
    for node, reason in targets.items():
        done = drain(node, reason)
        run.say(f"--drain: {done['message']}" if done["drained"] else
                f"--drain: {node} not drained: {done['message']}")  # fmt: skip


def run_command(args: Any, config: dict[str, Any]) -> int:
    """The `slurm` subcommand with parsed args and the loaded config; -> exit code."""
    if args.check_args:
        config = {**config, "nccl_check_args": list(args.check_args)}
    if args.textfile:
        config = {**config, "nccl_report_textfile_dir": args.textfile}
    report_root = Path(args.report_root or config.get("nccl_report_root") or "reports")
    alloc = Allocation(args.nodes, getattr(args, "salloc", None))
    try:
        with alloc:
            run = SlurmRun(config, alloc, report_root.absolute())
            result = run.run()
            if args.drain and not result.get("failed"):
                drain_named(run)
    except Interrupted as exc:
        given_back = alloc.released or "the caller's allocation was left as it is"
        print(f"nccl-preflight slurm: interrupted by {exc}; {given_back}", file=sys.stderr)
        return BY_NAME["no_verdict"].code
    except NotGranted as exc:
        chosen = BY_NAME["bad_input" if exc.refused else "no_verdict"]
        print(f"nccl-preflight slurm: {exc} ({chosen.name}, exit {chosen.code})", file=sys.stderr)
        return chosen.code
    except SlurmError as exc:
        print(f"nccl-preflight slurm: {exc}", file=sys.stderr)
        return BY_NAME["no_verdict"].code
    if result.get("failed"):
        return BY_NAME["no_verdict"].code
    return int(result["exit_code"])
