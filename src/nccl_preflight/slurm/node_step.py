# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The node side of `nccl-preflight slurm`: what one task of a job step does on its node.

Runs inside the node bundle (stdin BOOT started it in its private temporary directory), with the
node's Python: standard library only (the node room), torch only in the ranks. Records go back
on stdout (ship.frame); the control machine's messages come on stdin, one JSON line each, and
stdin's end means the control machine is gone: whatever runs is ended.

The step's settings come first on stdin, one JSON line for every node (ship.settings_of takes
this node's part by its name), so that the command line stays short at any number of nodes.

    observe            the torch probe first (TorchProbe: it overlaps everything below), facts
                       (node/facts.py gather, with the options roles/facts gives nccl_facts),
                       fabric choice, listeners (this node's own, from the node order:
                       node/preflight_calls start) -> record "started"; then reads every
                       node's ports and fabric address from stdin, works out its own probe
                       plan (node/probe_plan.py, the Ansible path's function) and firewall
                       read, probes, stops the listeners, waits for the torch probe ->
                       "observed" (with the node's time.time() as it writes it: the clock
                       check)
    launch             torchrun under node/supervisor.py's Supervision, in the foreground;
                       every `interval` s a record "progress" (node/run_progress.read_progress,
                       the fabric link now); a stdin message {"stop": reason} ends the run,
                       {"diagnose": {node: spec}} is answered with a record "diagnosis" (the
                       stall's evidence: node/run_progress.stall_evidence); with
                       `watch_stale_s`, every message (the watch's heartbeat too) renews the
                       supervisor's watch file, so a node cut off from the control machine
                       ends its run and removes it by itself (node/supervisor.py);
                       at the end one record "results" (node/run_collect.pack_results, base64)
    run                observe, then waits for {"launch": <every node's launch settings>} (or
                       stdin's end: no launch) and launches in the same
                       process: its torch probe was started warm and becomes this node's
                       torchrun (node/warm_torchrun.py), so torch is imported once per node
                       before the ranks. The slurm command's main step; `launch` alone is the
                       pairwise relaunch's.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import signal
import socket
import sys
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

from ..node.fabric_choice import nccl_fabric_choice
from ..node.facts import gather
from ..node.facts_call import facts_commands
from ..node.listener import (
    finish_python_probe,
    python_facts,
    start_python_probe,
)
from ..node.observe_call import observe as observe_peers
from ..node.preflight_calls import for_fabric, start, stop
from ..node.probe_plan import nccl_preflight_probe_plan, preflight_listeners
from ..node.run_collect import pack_results
from ..node.run_progress import (
    LOST_RECORD,
    interface_state,
    rank_exits,
    read_progress,
    stall_evidence,
    touch_watch,
)
from ..node.run_start import build_argv
from ..node.supervisor import (
    LAUNCH_FILE,
    RESULTS_DIR,
    RESULTS_PLACEHOLDER,
    STOP_SIGNALS,
    TORCHRUN_LOG,
    WATCH_FILE,
    Stop,
    Supervision,
    _ignore_stop_signals,
    start_or_adopt,
)
from ..node.warm_torchrun import READY_NAME, RELEASE_WAIT_S, held, release
from .ship import frame, settings_of

RANK_SCRIPT = "nccl_check.pyz"  # the rank script's zipapp, a member of the node bundle
LOG_MAX_BYTES = 4 << 20  # launch_collect_log_max_bytes


def node_name() -> str:
    """This node as Slurm knows it."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def emit(record: dict[str, Any]) -> None:
    sys.stdout.write(frame({**record, "node": node_name()}, node_name()))
    sys.stdout.flush()


def work_dir() -> Path:
    """The private directory BOOT made: the bundle lies in it."""
    return Path(os.path.abspath(sys.argv[0])).parent


# ------------------------------------------------------------------------------------------------
# observe
# ------------------------------------------------------------------------------------------------


def listeners(settings: dict[str, Any], node: str) -> list[dict[str, Any]]:
    """This node's listeners, as roles/facts gives them (node/probe_plan.py): MASTER_PORT on the
    master, an ephemeral ring port where a peer will probe, HCCL's base port where the node may
    use hccl."""
    nodes = settings["nodes"]
    return preflight_listeners(
        nodes,
        node,
        nodes[0],
        settings["master_port"],
        bool(settings["full_mesh"]),
        settings.get("hccl_port"),
    )


def firewall_read(
    settings: dict[str, Any],
    node: str,
    facts: dict[str, Any],
    addresses: dict[str, str],
    hccl_port: int = 0,
) -> dict[str, Any] | None:
    """What this node's firewall read looks at (roles/preflight's firewall option); with
    ``hccl_port`` (the run's backend is hccl) HCCL_IF_BASE_PORT too."""
    fabric = settings["fabric"]
    choice = nccl_fabric_choice(facts, fabric["socket_ifname"], fabric["cidr"])
    if not choice["address"]:
        return None
    peers = [a for n, a in addresses.items() if n != node and a]
    low, high = (facts.get("ip_local_port_range") or [32768, 60999])[:2]
    ports = [{"label": "MASTER_PORT", "low": int(settings["master_port"])}]
    ports = ports if node == settings["nodes"][0] else []
    ports.append({"label": "ephemeral range", "low": int(low), "high": int(high)})
    if hccl_port:
        ports.append({"label": "HCCL_IF_BASE_PORT", "low": int(hccl_port)})
    return {
        "peers": peers or [choice["address"]],
        "address": choice["address"],
        "ifname": choice["ifname"],
        "ports": ports,
    }


def _wait_for(messages: queue.Queue, key: str) -> dict[str, Any] | None:
    """The control machine's next message with a dict under ``key`` (the same for every node);
    None when stdin ended (the control machine is gone, or nothing more comes)."""
    while True:
        message = messages.get()
        if message is None:
            return None
        if isinstance(message.get(key), dict):
            return message[key]


class TorchProbe:
    """The torch probe, started first and warm: importing torch is the step's longest part
    (seconds of CPU), so it runs while the facts are read, the listeners serve and the peers
    probe. This step's process owns it (not the listener process, as on the Ansible path);
    ``run()`` waits for its answer, killed at python_timeout. It then holds on and becomes this
    node's torchrun at the launch (node/warm_torchrun.py), so torch is imported once."""

    def __init__(self, python: str, timeout: float) -> None:
        self.python, self.dir = python, work_dir() / "probe"
        self.dir.mkdir(mode=0o700)
        self.deadline = time.monotonic() + timeout
        self.ready = str(self.dir / READY_NAME)
        self.process, self.error = start_python_probe(str(self.dir), python, self.ready)
        self._run: dict[str, Any] | None = None

    def run(self) -> dict[str, Any]:
        """{executable, rc, stdout, stderr, error} (node/listener.py finish_python_probe)."""
        if self._run is None:
            self._run = finish_python_probe(
                str(self.dir), self.python, self.process, self.error, self.deadline, self.ready
            )
        return self._run

    def agent(self) -> Any:
        """The held probe, ready to become torchrun; None when there is none."""
        return self.process if held(self.process, self.ready) else None

    def kill(self) -> None:
        """End it: a held probe by stdin's end, one still importing at once."""
        release(self.process, RELEASE_WAIT_S if self.agent() is not None else 0)


def observe(settings: dict[str, Any], messages: queue.Queue, probe: TorchProbe) -> int:
    """The pre-flight's node side of the run step; see the module docstring."""
    node, commands = node_name(), facts_commands(settings["facts"])
    python, python_timeout = settings["python"], float(settings["python_timeout"])
    # As library/nccl_facts.py: the XPU question and the pre-flight's versions are one torch
    # probe when both use the same Python (gather takes the probe's run through "wait").
    shared: dict[str, Any] = {"python": python, "timeout": python_timeout, "wait": probe.run}
    facts = gather(commands, settings["facts"], shared)
    listen_dir = str(work_dir() / "preflight")
    is_master = node == settings["nodes"][0]
    p = for_fabric(
        {
            "path": listen_dir,
            "run_dir": None,
            "run_dir_mode": "0700",
            "python": "",  # the listeners only: the probe is this step's (TorchProbe)
            "python_timeout": python_timeout,
            "listeners": listeners(settings, node),
            "check_port": int(settings["master_port"]) if is_master else None,
            "lock": None,
            "timeout": float(settings["listen_timeout"]),
            "stop_timeout": python_timeout + 10,
            "fabric": settings["fabric"],
            "backend": settings["backend"],
        },
        facts,
    )
    started = start(p, False)
    emit({"kind": "started", "facts": facts, "started": started})
    # every node's ports and fabric address: {"plan": {"ports", "addresses", "hccl_port"}}
    inputs = _wait_for(messages, "plan")
    if inputs is None:
        stop({"path": listen_dir, "wait": 0.0, "stop_timeout": 5.0, "remove_run_dir": None}, False)
        probe.kill()
        return 1
    nodes, addresses = settings["nodes"], inputs["addresses"]
    hccl_port = int(inputs.get("hccl_port") or 0)
    plan = nccl_preflight_probe_plan(
        inputs["ports"], node, nodes[0], nodes, addresses, bool(settings["full_mesh"]), hccl_port
    )
    # The Ansible path's observation (node/observe_call.py), with this step's options.
    observed = observe_peers(
        {
            "targets": plan["targets"],
            "source": p["fabric_address"],
            "timeout": float(settings["probe_timeout"]),
            "refused_retry": 2.0,
            "firewall": firewall_read(settings, node, facts, addresses, hccl_port) or None,
            "collect": {
                "path": listen_dir,
                "wait": float(settings["collect_wait"]),
                "leave_unfinished": False,
                "stop_timeout": python_timeout + 10,
                "remove_run_dir": None,
            },
        },
        False,
        commands,
    )
    stopped = observed["collect"]
    stopped["python"] = python_facts(probe.run())
    emit(
        {
            "kind": "observed",
            "probe": {"results": observed["results"], "firewall": observed["firewall"]},
            "stopped": stopped,
            "clock": time.time(),  # as late as possible: observe.py node_clocks
        }
    )
    return 0


# ------------------------------------------------------------------------------------------------
# launch
# ------------------------------------------------------------------------------------------------


def _rank_script(run_dir: Path) -> str:
    """The rank script's zipapp, out of the bundle into the run directory."""
    target = run_dir / RANK_SCRIPT
    with zipfile.ZipFile(sys.argv[0]) as bundle:
        target.write_bytes(bundle.read(RANK_SCRIPT))
    target.chmod(0o600)
    return str(target)


def _stop_message(
    messages: queue.Queue, results: Path, heard: Path | None = None
) -> tuple[str, dict | None] | None:
    """A stop asked for since the last look ({"stop": reason, "details": {...}}, or stdin's
    end), else None. A stall's diagnosis asked for on the way ({"diagnose": {node: spec}}) is
    answered at once: record "diagnosis" (node/run_progress.stall_evidence). Every message
    (the watch's heartbeat too) renews ``heard``, the supervisor's watch file: the run ends by
    itself when the control machine stays silent (node/run_progress.py watcher_gone)."""
    while True:
        try:
            message = messages.get_nowait()
        except queue.Empty:
            return None
        if message is None:
            return "the control machine went away (the step's stdin closed)", None
        if heard is not None:
            renew_watch(heard)
        if message.get("stop"):
            return str(message["stop"]), message.get("details")
        spec = (message.get("diagnose") or {}).get(node_name())
        if isinstance(spec, dict):
            evidence = stall_evidence(spec)
            emit({"kind": "diagnosis", "diagnosis": evidence, "progress": read_progress(results)})


def renew_watch(path: Path) -> None:
    """The control machine spoke: its watch file's time is now, its stale limit kept."""
    try:
        stale = float(json.loads(path.read_text(encoding="utf-8"))["stale_after_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    touch_watch(path, stale)


def _supervise(run: Supervision, settings: dict[str, Any], messages: queue.Queue) -> dict | None:
    """Watch torchrun in short slices, sending progress, until it ends, times out or is stopped."""
    deadline = time.monotonic() + int(settings["timeout"])
    results = run.run_dir / RESULTS_DIR
    every = float(settings.get("interval", 1.0))
    heard = run.run_dir / WATCH_FILE if settings.get("watch_stale_s") else None
    if heard is not None:
        touch_watch(heard, float(settings["watch_stale_s"]))
    while True:
        run.watch(min(deadline, time.monotonic() + every))
        if run.proc is not None and run.proc.poll() is not None:
            return None
        if time.monotonic() >= deadline:
            return None  # run.timed_out is set
        if run.stopped_by:  # no word from the control machine for watch_stale_s: cut off
            return None
        run.timed_out = False
        asked = _stop_message(messages, results, heard)
        if asked:
            run.stopped_by = asked[0]
            return asked[1]
        emit(
            {
                "kind": "progress",
                "progress": read_progress(results),
                "interface": interface_state(settings["ifname"]),
            }
        )


def _stop_once(signum: int, _frame: Any) -> None:
    """The first stop signal raises Stop; any later one (Slurm signals every process of the
    step and stdin BOOT passes its own on) is ignored, so the tree's end is never cut short."""
    _ignore_stop_signals()
    raise Stop(signal.Signals(signum).name)


def launch(settings: dict[str, Any], messages: queue.Queue, agent: Any = None) -> int:
    """torchrun of this node in the foreground; see the module docstring. ``agent``: the run
    step's held warm torch probe, which becomes torchrun."""
    run_dir = work_dir() / "run"
    (run_dir / RESULTS_DIR).mkdir(parents=True, mode=0o700)
    params = {**settings["torchrun"], "run_dir": str(run_dir), "script": _rank_script(run_dir)}
    params["script_args"] = [
        str(run_dir / RESULTS_DIR) if a == RESULTS_PLACEHOLDER else a for a in params["script_args"]
    ]
    env = {**os.environ, **settings["env"]}
    env["NCCL_DEBUG_FILE"] = settings["env"].get(
        "NCCL_DEBUG_FILE", str(run_dir / RESULTS_DIR / "nccl.%p.log")
    )
    run = Supervision(build_argv(params), run_dir, int(settings["timeout"]), settings["grace"])
    for sig in STOP_SIGNALS:
        signal.signal(sig, _stop_once)
    details = None
    try:
        run.write_pids()
        try:
            start_or_adopt(run, env, agent)
        except OSError as exc:
            run.write_launch(None, [], f"cannot start {params['python']}: {exc}")
        else:
            details = _supervise(run, settings, messages)
    except Stop as exc:
        # A signal (scancel, srun's SIGTERM): Slurm kills what is left after its KillWait and
        # nobody collects; end the tree at once, before this process is killed.
        run.stopped_by = str(exc)
        run.kill_grace = 0
    finally:
        _ignore_stop_signals()
    if run.proc is not None:
        run.end(int(settings["rank_offset"]))
    launch_path = run_dir / LAUNCH_FILE
    if not launch_path.is_file():  # the run ended unwatched and removed itself: nobody collects
        # ... unless the control machine was only slow: then it words the node's loss with this
        with contextlib.suppress(OSError):  # nobody reads: the control machine is gone indeed
            emit({"kind": LOST_RECORD, "why": run.stopped_by or "the run left no record"})
        return 1
    doc = json.loads(launch_path.read_text())
    doc["rank_exits"] = rank_exits(run_dir / TORCHRUN_LOG)
    if details:
        doc["stop"] = details
    launch_path.write_text(json.dumps(doc))
    archive, names, cut = pack_results(run_dir, LOG_MAX_BYTES)
    emit(
        {
            "kind": "results",
            "archive": base64.b64encode(archive).decode(),
            "names": names,
            "truncated": cut,
        }
    )
    return 0


# ------------------------------------------------------------------------------------------------
# run: observe, then the launch in the same process
# ------------------------------------------------------------------------------------------------


def run_step(settings: dict[str, Any], messages: queue.Queue) -> int:
    """observe, then, once the control machine judged every node, launch in this process, with
    the warm torch probe as this node's torchrun (node/warm_torchrun.py); see the module
    docstring."""
    probe = TorchProbe(settings["python"], float(settings["python_timeout"]))
    rc = observe(settings, messages, probe)
    # {"launch": <every node's launch settings, ship.shared_and_own>}; stdin's end: no launch
    every = _wait_for(messages, "launch") if rc == 0 else None
    if every is None:
        probe.kill()
        return rc
    return launch(settings_of(every, node_name()), messages, probe.agent())


# ------------------------------------------------------------------------------------------------
# entry
# ------------------------------------------------------------------------------------------------


def _read_messages(messages: queue.Queue) -> None:
    """stdin, one JSON object per line, into messages; None at its end."""
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            messages.put(message)
    messages.put(None)


def main(argv: list[str]) -> int:
    """`node-step run|launch` (run by the bundle's __main__); the settings are stdin's first
    line (ship.settings_of: this node's part)."""
    what = argv[0]
    try:
        settings = settings_of(json.loads(sys.stdin.readline()), node_name())
    except ValueError:
        sys.stderr.write(f"nccl-preflight: {node_name()}: no step settings on stdin\n")
        return 1
    messages: queue.Queue = queue.Queue()
    threading.Thread(target=_read_messages, args=(messages,), daemon=True).start()
    step = {"run": run_step, "launch": launch}[what]
    return step(settings, messages)
