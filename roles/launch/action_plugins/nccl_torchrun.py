# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Action plugin for library/nccl_torchrun.py: unpack the results the node sent back.

With ``watch`` (state=finished), the wait is a series of short looks instead of one call as
long as the run (docs/design.md, "Watching a run"): between looks this plugin prints the
progress of the host's ranks, writes what it saw to ``<report dir>/<host>/progress.json``,
reads every other host's, and ends the run early when another host's run failed or when no rank
advanced for the stall timeout (after a diagnose call on every host). The judging is pure and
lives in src/nccl_preflight/core/run_watch.py.

With ``start`` (the options of state=started, as a dict), the start is this plugin's: state=started
takes its options from it, and state=finished first starts torchrun with them, then waits, in the
one task and on the one connection: the launch's start and wait are one call per node where every
host runs the task at once (not more hosts than forks). A node whose start failed says so in its
``progress.json`` (``not_started``): every other host's watch ends its run at its next look.

A wait (state=finished) that finds the run directory gone (the module's ``lost``: the run's
warden, or its supervisor when no look came in time, ended the run and left nothing) fails the
task with why, in the warden's words where its tether kept them (``tether``: the start call's
``tether`` result, with its ``note``; core/tether.py), and writes the host's ``launch.json`` in
``collect_to`` as lost (core/run_watch.py lost_record): its ranks are errors that say why, never
a wait that ended "ok" with nothing.

With ``collect_to``, the module (state=finished or state=stopped) packs the run's results into a
gzip tar archive in its result; this plugin, on the control machine, takes the archive out of the
result (so it is never shown or kept in a registered variable) and writes its files into
``collect_to``. The files come back in the same SSH round trip that waited for the run: no fetch
per file, no stat, no second session.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import shlex
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from nccl_preflight.core import run_watch as watch_rules
from nccl_preflight.core.results_archive import unpack_results
from nccl_preflight.core.stdin_ship import program_call
from nccl_preflight.core.tether import NOTE_WAIT_S, read_note, warden_ended
from nccl_preflight.core.zipapp import (
    BundleError,
    build_zipapp,
    cached_build,
    folder_sources,
    user_cache_dir,
    with_bytecode,
    zip_bytes,
)
from nccl_preflight.node.files import write_atomically
from nccl_preflight.node.run_look import LOOK_ZIPAPP, zipapp_files
from nccl_preflight.node.start_call import START_ENTRY, TORCHRUN_EXCLUSIVE, TORCHRUN_SPEC

display = Display()

# The least time without a look before the supervisor ends the run (the control machine is
# gone), where no warden watches the node. Between two looks a loaded control machine takes a
# module's return and the next start: 8-10 s on 2 cores at load 25, more than 30 s at load 50
# (16 and 32 lab hosts); a diagnosis adds its call and run_watch.DIAGNOSE_WAIT_S. Where the
# run's warden watches the node (the start call's tether is ready) the looks leave no mark at
# all: the warden ends the run within seconds when the control machine is really gone, and a
# slow look ends nothing (docs/design.md, "Watching a run").
WATCH_STALE_MIN_S = 30.0


def read_states(report_dir: Path, hosts: list[str]) -> dict[str, dict[str, Any]]:
    """Every host's progress.json (a host that wrote none yet is absent)."""
    states = {}
    for host in hosts:
        try:
            doc = json.loads((report_dir / host / "progress.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            states[host] = doc
    return states


def write_state(report_dir: Path, state: dict[str, Any]) -> None:
    target = report_dir / state["host"] / "progress.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(target, json.dumps(state, indent=1, sort_keys=True) + "\n")


def stdout_is_terminal() -> bool:
    """Whether ansible-playbook prints to a terminal. This runs in a worker process, whose own
    stdout is never the terminal: look at the standard output of its parent, the main process."""
    if sys.stdout.isatty():
        return True
    try:
        target = os.readlink(f"/proc/{os.getppid()}/fd/1")
    except OSError:
        return False
    return target.startswith(("/dev/pts/", "/dev/tty"))


class RunWatch:
    """The short looks of one host's wait, on the control machine (one per Ansible worker).

    The task's ``watch`` keys: ``host`` (this inventory host), ``report_dir`` (reports/<run-id>:
    every host's progress.json is under <host>/), ``hosts`` (every host of the run in node-rank
    order: {host, ranks, ifname, address, preflight_state, probes [{host, address, port}]}),
    ``interval`` (seconds per look), ``stall_timeout`` (0: no stall detection),
    ``progress`` (auto, terminal, log, off), ``progress_interval`` (seconds, terminal only).
    """

    def __init__(
        self,
        action: ActionModule,
        args: dict[str, Any],
        spec: dict[str, Any],
        warden: bool = False,
    ):
        self.action, self.args = action, args
        self.host = str(spec["host"])
        self.report_dir = Path(os.path.expanduser(str(spec["report_dir"])))
        self.hosts: list[dict[str, Any]] = list(spec.get("hosts") or [])
        self.interval = float(spec.get("interval", 2))
        self.stall_timeout = float(spec.get("stall_timeout", 30))
        self.show_every = float(spec.get("progress_interval", 5))
        mode = str(spec.get("progress", "auto")).lower()
        self.terminal = stdout_is_terminal() if mode == "auto" else mode == "terminal"
        self.quiet = mode in ("off", "false", "no")
        # The node's Python for the looks through look.pyz (none: every look is a module call).
        self.python = spec.get("python") or None
        self.mine = next((h for h in self.hosts if h["host"] == self.host), {"ranks": []})
        # No mark where the run's warden watches the node (WATCH_STALE_MIN_S).
        self.stale_s = 0.0 if warden else max(WATCH_STALE_MIN_S, 4 * self.interval)
        # The longest time between two looks' answers (a lost run's words say it).
        self.longest_gap = 0.0
        self.answered: float | None = None
        # The Ansible watch also keeps the look's workers_exited (exit_barrier_wait reads it).
        self.state: dict[str, Any] = {
            **watch_rules.new_watch_state(self.host, time.time()),
            "workers_exited": False,
        }
        self.shown: dict[str, Any] = {}

    def call(self, task_vars: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """A look (or the stop, or a diagnosis) on the node: a look through look.pyz when the
        watch has the node's Python, else, and when that fails, a call of the module."""
        if self.python and not extra.get("stop_reason") and "diagnose" not in extra:
            looked = self.plain_look({**self.args, **extra})
            if looked is not None:
                return looked
        return self.action._execute_module(
            module_name=self.action._task.action,
            module_args={**self.args, **extra},
            task_vars=task_vars,
        )

    def plain_look(self, args: dict[str, Any]) -> dict[str, Any] | None:
        """``python -I -S <run dir>/look.pyz '<args>'`` on the node (no module start); its result,
        or None when it did not answer one (no look.pyz there, say)."""
        zipapp = f"{args['run_dir']}/{LOOK_ZIPAPP}"
        cmd = shlex.join([str(self.python), "-I", "-S", zipapp, json.dumps(args, default=str)])
        ran = self.action._low_level_execute_command(cmd, sudoable=False)
        if ran.get("rc") != 0:
            return None
        try:
            result = json.loads(ran.get("stdout") or "")
        except ValueError:
            return None
        return result if isinstance(result, dict) else None

    def run(self, task_vars: dict[str, Any]) -> dict[str, Any]:
        look = {
            "watch_s": self.interval,
            "watch_stale_s": self.stale_s,
            "watch_ifname": self.mine.get("ifname") or None,
        }
        while True:
            result = self.call(task_vars, **look)
            if result.get("failed") or result.get("unreachable"):
                return result
            now = time.monotonic()
            if self.answered is not None:
                self.longest_gap = max(self.longest_gap, now - self.answered)
            self.answered = now
            if result.get("lost"):
                result["lost"] = self.action.lost_reason(str(result["lost"]), self.gap_words())
                result["lost_explained"] = True
                display.display(f"{self.host}: lost: {result['lost']}", color="red")
            self.note(result)
            if not result.get("running"):
                return result
            stop = self.judge(task_vars)
            if stop is not None:
                reason, details = stop
                # Said before the stop call, which takes the kill grace and the collect.
                display.display(f"{self.host}: ending the run: {reason}", color="red")
                # The other hosts' watches end theirs at their next look, not after this call.
                self.state["ending"] = {"stopped_by": reason, "stop": details}
                write_state(self.report_dir, self.state)
                result = self.call(task_vars, stop_reason=reason, stop_details=details)
                self.note(result)
                return result

    def gap_words(self) -> str:
        """Why a run without a warden may have been ended by its supervisor: no look came in
        time (the looks' longest gap against the mark's bound), else ""."""
        if not self.stale_s or self.longest_gap <= self.stale_s:
            return ""
        return (
            f"its supervisor ended the run: no look came from the control machine for up to "
            f"{self.longest_gap:.0f} s (it ends a run after {self.stale_s:.0f} s without one)"
        )

    def note(self, result: dict[str, Any]) -> None:
        """Fold a look into this host's state, write it for the others, show the line."""
        now = time.time()
        state = self.state
        # A look that read no rank file (the run directory going away) keeps what was seen.
        progress = result.get("progress") or state["progress"]
        history, moved = watch_rules.advance(state["history"], progress, now)
        state.update(history=history, progress=progress, updated=now)
        state["workers_exited"] = bool(result.get("workers_exited"))
        # What a loaded control machine did to the looks (the watch mark's bound is measured
        # against it: WATCH_STALE_MIN_S).
        state["longest_look_gap_s"] = round(self.longest_gap, 1)
        if result.get("interface") is not None:
            state["interface"] = result["interface"]
        if moved:
            # When the rank got there (the file's age), not when this look saw it.
            latest = max((item["since"] for item in history.values()), default=now)
            state["last_advance"] = max(float(state["last_advance"]), min(now, latest))
        if not result.get("running", True):
            state["last_advance"] = now
        if not result.get("running", True):
            state["running"] = False
            state["ended"] = {
                key: result.get(key)
                for key in ("torchrun_rc", "timed_out", "stopped_by", "stop", "rank_exits")
            }
            state["ended"]["rc"] = result.get("torchrun_rc")
            if result.get("lost"):  # the other hosts end their runs: this one cannot take part
                state["ended"]["stopped_by"] = f"lost: {result['lost']}"
        write_state(self.report_dir, state)
        self.show(now)

    def show(self, now: float) -> None:
        if self.quiet:
            return
        line, group = watch_rules.progress_line(
            self.host, self.mine.get("ranks") or [], self.state["progress"]
        )
        if watch_rules.link_down(self.state):
            iface = self.state["interface"]
            line += f" [{iface['ifname']} {str(iface['state']).upper()}]"
            group += " link-down"  # news for a log too
        if watch_rules.should_show(self.terminal, line, group, self.shown, now, self.show_every):
            display.display(line)
            self.shown = {"line": line, "group": group, "at": now}

    def judge(self, task_vars: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """(why this host's run ends now, details for launch.json), or None to look again."""
        names = [h["host"] for h in self.hosts] or [self.host]
        states = read_states(self.report_dir, names)
        states[self.host] = self.state
        reason = watch_rules.failure_elsewhere(self.host, states)
        if reason:
            return reason, watch_rules.adopted_stop(reason, states)
        waiting = watch_rules.exit_barrier_wait(self.host, self.hosts, states)
        if waiting is not None:
            return waiting
        due = watch_rules.stall_due(self.hosts, states, self.stall_timeout, time.time())
        if due is None:
            return None
        quiet_s, limit, why = due
        return self.diagnose(task_vars, names, quiet_s, limit, why)

    def diagnose(
        self,
        task_vars: dict[str, Any],
        names: list[str],
        quiet_s: float,
        limit: float,
        why: str,
    ) -> tuple[str, dict[str, Any]]:
        """Read this host's evidence, wait a little for the others', word the stall."""
        spec = self.args.get("diagnose") or {}
        mine = self.mine
        probe = {
            "ifname": mine.get("ifname"),
            "probes": mine.get("probes") or [],
            "probe_timeout": 2.0,
            "source": mine.get("address"),
            **spec,
        }
        # A look too: the node's supervisor must not take the wait for the others' evidence and
        # the stop call after it for a control machine that is gone.
        stale = self.stale_s + watch_rules.DIAGNOSE_WAIT_S if self.stale_s else 0.0
        answer = self.call(task_vars, diagnose=probe, watch_stale_s=stale)
        self.state["diagnosis"] = answer.get("diagnosis") or {"error": answer.get("msg")}
        write_state(self.report_dir, self.state)
        deadline = time.time() + watch_rules.DIAGNOSE_WAIT_S
        while True:
            states = read_states(self.report_dir, names)
            states[self.host] = self.state
            pending = [
                h for h in names if (states.get(h) or {}).get("running", True)
                and not (states.get(h) or {}).get("diagnosis")
            ]  # fmt: skip
            if not pending or time.time() >= deadline:
                break
            time.sleep(0.2)
        message, details = watch_rules.stall_message(self.hosts, states, quiet_s, limit, why)
        return f"stalled: {message}", details


def zipapp_argument(src: str, cache_dir: str | None = None) -> str:
    """state=started's ``script_src`` (the rank script on this machine) as ``script_zipapp``:
    base64 of the zipapp of it and the modules beside it that it imports
    (src/nccl_preflight/core/zipapp.py). BundleError names a file that cannot be read or parsed.
    With ``cache_dir`` it is built once, for every host and run, while the sources stay the same."""
    data = cached_build(cache_dir, "nccl_check.pyz", folder_sources(src), lambda: build_zipapp(src))
    return base64.b64encode(data).decode("ascii")


def look_argument(cache_dir: str | None = None) -> str:
    """state=started's ``look_zipapp``: base64 of look.pyz (node/run_look.py), built once for
    every host and run with ``cache_dir``, keyed by the node room's sources."""
    sources = folder_sources(Path(sys.modules[zipapp_files.__module__].__file__ or "").resolve())
    data = cached_build(
        cache_dir, "look.pyz", sources, lambda: zip_bytes(with_bytecode(zipapp_files(), "look.pyz"))
    )
    return base64.b64encode(data).decode("ascii")


class ActionModule(ActionBase):
    """Run nccl_torchrun on the node; unpack its collected archive on the control machine."""

    TRANSFERS_FILES = False
    _supports_check_mode = False
    _supports_async = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp
        module_args = dict(self._task.args)
        collect_to = module_args.pop("collect_to", None)
        watch = module_args.pop("watch", None)
        tether = module_args.pop("tether", None)
        self.tether = tether if isinstance(tether, dict) else {}
        self.host_name = str((task_vars or {}).get("inventory_hostname") or "this host")
        start = module_args.pop("start", None)
        state = module_args.get("state", "finished")
        if state == "started":
            module_args = {**(start or {}), **module_args}
            start = None
        if module_args.get("script_src") and state == "started":
            error = self.bundle_script(module_args)
            if error:
                return {**result, "failed": True, "msg": error}
        if collect_to:
            module_args["collect"] = True
        watching = bool(watch) and state == "finished" and not module_args.get("stop_reason")
        try:
            started = self.start_first(start, watch, task_vars) if start else None
            if started is not None and (started.get("failed") or started.get("unreachable")):
                return {**result, **started}
            if watching:
                warden = bool(self.tether.get("ready"))
                module_result = RunWatch(self, module_args, watch, warden).run(task_vars or {})
            elif state == "started":
                module_result = self.start(module_args, task_vars)
            else:
                module_result = self._execute_module(
                    module_name=self._task.action, module_args=module_args, task_vars=task_vars
                )
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        if started is not None:
            module_result["start"] = started
        if module_result.get("lost"):
            return {**result, **self.lost(module_result, collect_to)}
        archive = module_result.pop("collected_archive", None)
        result.update(module_result)
        if not collect_to or archive is None or result.get("failed"):
            return result
        dest = Path(os.path.expanduser(to_text(collect_to)))
        try:
            data = base64.b64decode(archive, validate=True)
            result["collected_files"] = unpack_results(data, dest)
        except (ValueError, binascii.Error, tarfile.TarError, OSError) as exc:
            result.update(
                failed=True,
                msg=f"cannot unpack the results from the node into {dest}: {exc}",
                collected_to=str(dest),
            )
            return result
        result["collected_to"] = str(dest)
        return result

    def lost_reason(self, found: str, gap_words: str = "") -> str:
        """Why the run on this host ended without its results: its warden's words (the note its
        tether kept, waited for a while: the warden answers after it ended the run), else the
        watch's (``gap_words``), else the node's (``found``: its run directory is gone)."""
        host = self.host_name
        note = self.tether.get("note")
        wait = NOTE_WAIT_S if self.tether.get("ready") else 0.0
        word = read_note(note, wait) if note else None
        return warden_ended(host, word) or gap_words or f"{found} ({host})"

    def lost(self, module_result: dict[str, Any], collect_to: Any) -> dict[str, Any]:
        """A wait that found the run directory gone: fail with why and write the host's
        launch.json as lost in ``collect_to`` (every planned rank of it is then an error that
        says why: core/junit.py, core/run_cause.py)."""
        why = str(module_result["lost"])
        if not module_result.pop("lost_explained", False):
            why = self.lost_reason(why)
        if collect_to:
            dest = Path(os.path.expanduser(to_text(collect_to)))
            dest.mkdir(parents=True, exist_ok=True)
            record = json.dumps(watch_rules.lost_record(why), indent=1, sort_keys=True)
            write_atomically(dest / "launch.json", record + "\n", 0o644)
        module_result.pop("start", None)  # it worked; the loss is what the task says
        return {**module_result, "lost": why, "failed": True, "msg": f"lost: {why}"}

    def bundle_script(self, module_args: dict[str, Any]) -> str | None:
        """state=started's ``script_src`` as ``script_zipapp``, and ``look_zipapp``, in place;
        -> why not (a file that cannot be read or parsed), before anything is written on the
        node."""
        try:
            module_args["script_zipapp"] = zipapp_argument(
                self.script_path(module_args), user_cache_dir()
            )
        except BundleError as exc:
            return f"script_src (launch_script): {exc}"
        del module_args["script_src"]
        # The watch's looks, as a plain program in the run directory (node/run_look.py).
        module_args["look_zipapp"] = look_argument(user_cache_dir())
        return None

    def start_first(
        self, start: dict[str, Any], watch: dict[str, Any] | None, task_vars: dict[str, Any] | None
    ) -> dict[str, Any]:
        """state=started with ``start`` before the wait of the same task; -> its result. One
        that failed (or could not reach the node) is written for the other hosts' watches."""
        args = {**start, "state": "started"}
        error = self.bundle_script(args) if args.get("script_src") else None
        try:
            started = {"failed": True, "msg": error} if error else self.start(args, task_vars)
        except AnsibleConnectionFailure as exc:
            self.say_not_started(watch, str(exc))
            raise
        if started.get("failed") or started.get("unreachable"):
            self.say_not_started(watch, str(started.get("msg") or "the start failed"))
        return started

    def start(self, args: dict[str, Any], task_vars: dict[str, Any] | None) -> dict[str, Any]:
        """state=started: node/start_call.py as a program on the node with the run's Python
        (``python``), without a module start; the module where that program cannot answer."""
        started = self.start_plain(args) if args.get("python") else None
        if started is None:
            started = self._execute_module(
                module_name=self._task.action, module_args=args, task_vars=task_vars
            )
        return started

    def start_plain(self, args: dict[str, Any]) -> dict[str, Any] | None:
        """The start through BOOT (core/stdin_ship.py), its options checked here with the
        module's own spec; None where the module must run: options the spec refuses (the module
        names them), a program that could not run or answered no JSON object."""
        checked = ArgumentSpecValidator(
            TORCHRUN_SPEC, mutually_exclusive=TORCHRUN_EXCLUSIVE
        ).validate(args)
        if checked.error_messages:
            return None
        # BOOT's temporary directory: nccl-preflight-<run id>-*, as the run's own directory.
        run_id = str(args.get("rdzv_id") or "launch").removeprefix("nccl-preflight-")
        # The task's `environment` (a play's LD_LIBRARY_PATH, say) goes before the command, as
        # a module call gets it: torchrun and its ranks inherit it.
        return program_call(
            lambda command, stdin: self._low_level_execute_command(
                command, sudoable=True, in_data=stdin
            ),
            self._compute_environment_string(),
            str(args["python"]),
            run_id,
            START_ENTRY,
            {"params": checked.validated_parameters},
            user_cache_dir(),
        )

    @staticmethod
    def say_not_started(watch: dict[str, Any] | None, why: str) -> None:
        """This host's progress.json: torchrun never started here (run_watch.failure_elsewhere)."""
        if not watch:
            return
        state = watch_rules.new_watch_state(str(watch["host"]), time.time())
        state.update(running=False, not_started=why)
        write_state(Path(os.path.expanduser(str(watch["report_dir"]))), state)

    def script_path(self, module_args: dict[str, Any]) -> str:
        """script_src on this machine: as it is when absolute, else found as
        lookup('file') finds it (the role's and the playbook's files/ folders)."""
        src = os.path.expanduser(to_text(module_args["script_src"]))
        if os.path.isabs(src):
            return src
        try:
            return self._find_needle("files", src)
        except AnsibleError as exc:
            raise BundleError(f"cannot find the rank script {src}: {exc.message}") from None
