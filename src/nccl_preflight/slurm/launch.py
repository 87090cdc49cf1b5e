# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The ranks under Slurm: one launch step, torchrun on every node (node_step.launch), watched
from the control machine.

Each node runs torchrun in the foreground under node/supervisor.py's Supervision (bounded by
nccl_run_timeout, its tree ended on a stop), with the environment the Ansible path writes into
nccl.env (core/stage.py node_environment) and the rank script's arguments of roles/launch.
The control machine reads each node's records: "progress" (printed), then "results" (the gzip tar
of node/run_collect.pack_results, written into reports/<run-id>/<node>/). When a node's run ended
with a rank killed by a signal or was stopped, every other node is told to stop at once with the
reason core/run_watch.failure_elsewhere words; when no rank advanced for nccl_stall_timeout
(core/run_watch.stall_due), every node is asked for the stall's evidence and the run is ended
with core/run_watch.stall_message's words, as the Ansible path's watch does.
"""

from __future__ import annotations

import base64
import json
import queue
import time
from pathlib import Path
from typing import Any

from ..core.results_archive import unpack_results
from ..core.run_watch import (
    DIAGNOSE_WAIT_S,
    adopted_stop,
    advance,
    failure_elsewhere,
    link_down,
    lost_record,
    new_watch_state,
    progress_line,
    stall_due,
    stall_message,
)
from ..core.stage import KILL_GRACE_S
from ..node.files import write_atomically
from ..node.run_progress import LOST_RECORD
from .step import ENDED, Step

# A running node sends a record every second (node_step.launch's `interval`): one heard of for
# this long while another node was heard of is silent (core/run_watch.is_silent): cut off from
# the control machine (its links down, the node dead) or its task gone without srun saying so.
SILENT_S = 10.0
# After a stop, how long the nodes still answering get to end their ranks (the kill grace) and
# send their results; a silent node is not waited for.
STOPPED_RESULTS_S = KILL_GRACE_S + 25.0
# Every HEARTBEAT_S the watch says {"alive": true} to every node; a node that hears nothing from
# the control machine for WATCH_STALE_S (its links cut, the control machine gone without closing
# the step's stdin) ends its run and removes it by itself (node_step's watch file, as the
# Ansible path's looks renew it: roles/launch's WATCH_STALE_MIN_S).
HEARTBEAT_S = 5.0
WATCH_STALE_S = 30.0
# Every node sends a progress record a second: at 1,024 nodes a thousand records a second. The
# run is judged at most once a second on progress alone (a stall's limit is tens of seconds,
# SILENT_S ten); a node's end, its diagnosis, srun's word of its task or a quiet second is judged
# at once. A node's progress.json is written when its test or its link changes, when it speaks
# again after a silence, and otherwise at most every WRITE_EVERY_S (BENCHMARKS.md, section 7).
JUDGE_EVERY_S = 1.0
WRITE_EVERY_S = 5.0


class Watch:
    """The launch step's records, by node, judged as roles/launch's watch judges its looks
    (core/run_watch.py): progress lines, a dead rank or a stopped run elsewhere, a stall (its
    diagnosis: every node's link and a TCP probe of its ring peer) end every other node's run
    with the same words. Each node's state goes to reports/<run-id>/<node>/progress.json."""

    def __init__(
        self,
        step: Step,
        run_dir: Path,
        hosts: list[dict[str, Any]],
        stall_timeout: float,
        say: Any,
        subdir: str = "",
    ) -> None:
        self.step, self.run_dir, self.hosts, self.say = step, run_dir, hosts, say
        self.subdir = subdir  # where in reports/<run-id>/<node>/ the results go ("pairwise")
        self.stall_timeout = stall_timeout
        now = time.time()
        self.states = {h["host"]: new_watch_state(h["host"], now) for h in hosts}
        self.ranks = {h["host"]: h["ranks"] for h in hosts}
        self.heard = {h["host"]: now for h in hosts}  # when each node's last record came
        self.spoke: set[str] = set()  # the nodes that sent a record (only they can go silent)
        self.shown: dict[str, str] = {}
        self.written: dict[str, float] = {}  # node -> when its progress.json was last written
        self.judged = float("-inf")  # when judge() last ran (time.monotonic())
        self.stop_sent: tuple[str, dict[str, Any]] | None = None  # (reason, details) once sent
        self.stop_at = 0.0
        self.diagnosing: tuple[float, tuple[float, float, str]] | None = None
        # node -> why its step ended its run without results (its "lost" record: nothing came
        # from the control machine for its watch_stale_s), for lost_record's words
        self.lost_words: dict[str, str] = {}

    # ------------------------------------------------------------------ records
    def note(self, node: str, record: dict[str, Any]) -> None:
        """A progress or diagnosis record folded into the node's state."""
        now = time.time()
        state = self.states[node]
        was_silent = state.get("silent")
        state["silent"] = None
        progress = record.get("progress") or state["progress"]
        history, moved = advance(state["history"], progress, now)
        state.update(history=history, progress=progress, updated=now)
        if record.get("interface") is not None:
            state["interface"] = record["interface"]
        if record.get("diagnosis") is not None:
            state["diagnosis"] = record["diagnosis"]
        if moved:
            latest = max((item["since"] for item in history.values()), default=now)
            state["last_advance"] = max(float(state["last_advance"]), min(now, latest))
        changed = self.show(node)  # its test or its link changed
        due = time.monotonic() - self.written.get(node, float("-inf")) >= WRITE_EVERY_S
        if changed or due or was_silent or record.get("diagnosis") is not None:
            self.write_state(node)

    def show(self, node: str) -> bool:
        """Say the node's line when its group (its ranks' tests, its link) changed: -> whether."""
        state = self.states[node]
        line, group = progress_line(node, self.ranks[node], state["progress"])
        if link_down(state):
            iface = state["interface"]
            line += f" [{iface['ifname']} {str(iface['state']).upper()}]"
            group += " link-down"
        if self.shown.get(node) == group:
            return False
        self.shown[node] = group
        self.say(line)
        return True

    def write_state(self, node: str) -> None:
        target = self.run_dir / node / self.subdir / "progress.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, json.dumps(self.states[node], indent=1, sort_keys=True) + "\n")
        self.written[node] = time.monotonic()

    def results(self, node: str, record: dict[str, Any]) -> None:
        dest = self.run_dir / node / self.subdir
        unpack_results(base64.b64decode(record.get("archive") or ""), dest)
        launch_path = dest / "launch.json"
        launch = json.loads(launch_path.read_text()) if launch_path.is_file() else {}
        now = time.time()
        self.states[node].update(
            ended=launch, running=False, updated=now, last_advance=now, silent=None
        )
        self.write_state(node)

    def listen(self, now: float) -> None:
        """Which running nodes went silent: srun said its task ended, or no record for SILENT_S
        since its first one while another node's came (when none came from any node the step
        or the control machine is slow, not a node)."""
        latest = max(self.heard.values(), default=now)
        gone = getattr(self.step, "ended", {})  # srun said the node's task ended
        for node, state in self.states.items():
            quiet = now - self.heard[node]
            silent = state["running"] and (
                node in gone
                or (node in self.spoke and quiet > SILENT_S and now - latest <= SILENT_S)
            )
            was = state.get("silent")
            state["silent"] = (
                {"since": self.heard[node], "for_s": round(quiet, 1)} if silent else None
            )
            if bool(was) != silent:
                self.write_state(node)
                if silent:
                    self.say(f"{node}: silent: no record from its task for {quiet:.0f} s")

    def silent(self) -> list[str]:
        """The running nodes the watch hears nothing from (listen)."""
        return [n for n, s in self.states.items() if s["running"] and s.get("silent")]

    def awaited(self) -> list[str]:
        """The nodes whose results the watch still waits for: every running node; once a stop
        was sent, not a silent one (nothing more will come from it)."""
        silent = set(self.silent()) if self.stop_sent else set()
        return [n for n, s in self.states.items() if s["running"] and n not in silent]

    def named(self) -> bool:
        """Whether the watch named what ended the run: a stall with a named cause (a link down,
        a rank stopped, a node cut off: core/run_watch.cause_named) or a silent node."""
        details = (self.stop_sent or ("", {}))[1] or {}
        return bool(details.get("cause_named") or self.silent())

    def lost_record(self, node: str) -> dict[str, Any]:
        """launch.json for a node whose results never came back: the run was cut short there,
        why (the stop's words), and that the node was silent (core/run_cause.py reads it)."""
        state = self.states[node]
        reason, details = self.stop_sent or ("", {})
        silent = state.get("silent") or {}
        why = (
            f"{node} was silent for {float(silent.get('for_s') or 0):.0f} s: no results came "
            "back from it"
            if silent
            else f"no results came back from {node}"
        )
        if self.lost_words.get(node):  # its step said why it ended its run without them
            why = f"{why}; its launch step ended the run there: {self.lost_words[node]}"
        return lost_record(why, reason, details, silent)

    # ------------------------------------------------------------------ judging
    def stop(self, reason: str, details: dict[str, Any]) -> None:
        """Every node still running ends its run with this reason (srun: stdin to every task)."""
        running = [n for n, s in self.states.items() if s["running"]]
        self.say(f"{', '.join(running)}: ending the run: {reason}")
        for node in running:
            self.states[node]["ending"] = {"stopped_by": reason, "stop": details}
            self.write_state(node)
        self.step.say({"stop": reason, "details": details})
        self.stop_sent = (reason, details)
        self.stop_at = time.monotonic()

    def judge(self) -> None:
        """At most once a second on progress, at once on any other record or a quiet second
        (run): end the run when a node's run ended badly or the run stalled (first a diagnosis
        on every node that still answers, then the stall's words)."""
        self.judged = time.monotonic()
        self.listen(time.time())
        if self.stop_sent:
            return
        failed = failed_states(self.states)
        for node, state in self.states.items() if failed else ():
            reason = failure_elsewhere(node, failed) if state["running"] else None
            if reason:
                self.stop(reason, adopted_stop(reason, self.states))
                return
        if self.diagnosing is not None:
            deadline, (quiet_s, limit, why) = self.diagnosing
            pending = [
                n
                for n, s in self.states.items()
                if s["running"] and not s["diagnosis"] and not s.get("silent")
            ]
            if pending and time.time() < deadline:
                return
            message, details = stall_message(self.hosts, self.states, quiet_s, limit, why)
            self.stop(f"stalled: {message}", details)
            return
        due = stall_due(self.hosts, self.states, self.stall_timeout, time.time())
        if due is not None:
            spec = {
                h["host"]: {
                    "ifname": h["ifname"],
                    "probes": h["probes"],
                    "probe_timeout": 2.0,
                    "source": h["address"],
                }
                for h in self.hosts
            }
            self.step.say({"diagnose": spec})
            self.diagnosing = (time.time() + DIAGNOSE_WAIT_S, due)

    def run(self, bound: float) -> list[str]:
        """Until every node sent its results (after a stop: every node not silent, within
        STOPPED_RESULTS_S) or the bound; -> the nodes that sent none."""
        deadline = time.monotonic() + bound
        beat = time.monotonic()
        awaited = bool(self.awaited())  # changes only on a node's results or a judgement
        while awaited:
            if time.monotonic() - beat >= HEARTBEAT_S:
                self.step.say({"alive": True})
                beat = time.monotonic()
            if self.stop_sent:
                deadline = min(deadline, self.stop_at + STOPPED_RESULTS_S)
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                record = self.step.next_record(min(1.0, left))
            except queue.Empty:
                record = {}
            if record is None:
                break
            node, kind = record.get("node"), record.get("kind")
            if node in self.states:
                if kind != ENDED:
                    self.heard[node] = time.time()
                    self.spoke.add(node)
                if kind in ("progress", "diagnosis"):
                    self.note(node, record)
                elif kind == "results":
                    self.results(node, record)
                elif kind == LOST_RECORD:
                    self.lost_words[node] = str(record.get("why") or "")
            if kind != "progress" or time.monotonic() - self.judged >= JUDGE_EVERY_S:
                self.judge()  # a node's results are judged at once: awaited changes only here
                awaited = bool(self.awaited())
        missing = [n for n, s in self.states.items() if s["running"]]
        for node in missing:
            self.write_state(node)  # its last look, which the write's pace may have held back
        return missing


def failed_states(states: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The states failure_elsewhere names a failure from: the hosts whose run ended badly, is
    being stopped or never started. It reads each host's own state alone (and skips the asking
    host's), so failure_elsewhere(me, failed_states(s)) == failure_elsewhere(me, s) for every
    host: one pass over the hosts per judgement instead of one per running host (at 1,024 nodes
    a million states a judgement). "" is no node's name: each state is asked about alone."""
    return {host: state for host, state in states.items() if failure_elsewhere("", {host: state})}
