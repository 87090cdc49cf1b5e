# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The node side of `nccl-preflight slurm`: what one task of a job step does on its node.

Runs inside the node bundle (ship.BOOT started it in its private temporary directory), with the
node's Python: standard library only (the node room), torch only in the ranks. Records go back
on stdout (ship.frame); the control machine's messages come on stdin, one JSON line each, and
stdin's end means the control machine is gone: whatever runs is ended.

    observe SETTINGS   facts, fabric choice, listeners and the torch probe (node/preflight_calls
                       start) -> record "started"; then reads the probe plan from stdin, probes
                       its peers, reads the firewall, stops the listeners -> record "observed"
    launch SETTINGS    torchrun under node/supervisor.py's Supervision, in the foreground;
                       every `interval` s a record "progress" (node/run_observe.read_progress,
                       the fabric link now); a stdin message {"stop": reason} ends the run,
                       {"diagnose": {node: spec}} is answered with a record "diagnosis" (the
                       stall's evidence: node/run_observe.stall_evidence);
                       at the end one record "results" (node/run_collect.pack_results, base64)
"""

from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

from ..node.fabric_facts import gather_fabric
from ..node.firewall_read import read_firewall
from ..node.parse import (
    empty_python_facts,
    find_rdma_devices,
    parse_ip_addr,
    read_port_range,
    read_speed_mbps,
    unique_addresses,
)
from ..node.preflight_calls import for_fabric, start, stop
from ..node.run_collect import pack_results
from ..node.run_observe import interface_state, rank_exits, read_progress, stall_evidence
from ..node.run_start import build_argv
from ..node.supervisor import (
    LAUNCH_FILE,
    RESULTS_DIR,
    STOP_SIGNALS,
    TORCHRUN_LOG,
    Stop,
    Supervision,
    _ignore_stop_signals,
)
from .ship import frame

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
# Running commands without Ansible (node/commands.py CommandRunner)
# ------------------------------------------------------------------------------------------------


class Runner:
    """get_bin_path and run_command as the node readers call them, with subprocess."""

    def get_bin_path(
        self, arg: str, required: bool = False, opt_dirs: list[str] | None = None
    ) -> str | None:
        if os.sep in arg:
            return arg if os.access(arg, os.X_OK) else None
        path = os.pathsep.join([os.environ.get("PATH", "/usr/bin:/bin"), *(opt_dirs or [])])
        return shutil.which(arg, path=path)

    def run_command(
        self, args: list[str], environ_update: dict[str, str] | None = None, **_: Any
    ) -> tuple[int, str, str]:
        env = {**os.environ, **(environ_update or {})}
        try:
            done = subprocess.run(
                list(args), capture_output=True, text=True, env=env, timeout=60, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return 127, "", str(exc)
        return done.returncode, done.stdout, done.stderr


def _interfaces(runner: Runner) -> tuple[dict[str, Any], str]:
    ip = runner.get_bin_path("ip", opt_dirs=["/usr/sbin", "/sbin"])
    if ip is None:
        return {}, "ip (iproute2) not found on PATH, /usr/sbin or /sbin; install iproute2"
    rc, out, err = runner.run_command([ip, "-j", "-d", "addr", "show"])
    if rc != 0:
        return {}, f"ip -j -d addr show failed (rc={rc}): {(err or out).strip()[-400:]}"
    interfaces = parse_ip_addr(out)
    rdma = find_rdma_devices("/sys")
    for name, interface in interfaces.items():
        interface["speed_mbps"] = read_speed_mbps(name, "/sys")
        interface["rdma_devices"] = rdma.get(name, [])
    return interfaces, ""


def gather_facts(settings: dict[str, Any]) -> dict[str, Any]:
    """This node's facts (the keys of ansible_facts.nccl the judgement reads).

    Until node/facts.py (the facts without Ansible) lands, the network and fabric part only: no
    GPU or NPU query (gpus_reason says so); the torch probe runs in the listener process."""
    hostname = socket.gethostname()
    try:
        addresses = unique_addresses(socket.getaddrinfo(hostname, None, proto=socket.IPPROTO_TCP))
        hostname_reason = ""
    except (OSError, UnicodeError) as exc:
        addresses, hostname_reason = [], f"hostname {hostname!r} does not resolve: {exc}"
    interfaces, interfaces_reason = _interfaces(Runner())
    try:
        port_range = read_port_range("/proc")
    except (OSError, ValueError):
        port_range = []
    return {
        "hostname": hostname,
        "hostname_addresses": addresses,
        "hostname_reason": hostname_reason,
        "module_python": sys.executable,
        "interfaces": interfaces,
        "interfaces_reason": interfaces_reason,
        "route": {},
        "route_reason": "not read under Slurm",
        "ip_local_port_range": port_range,
        "gpus": [],
        "gpus_reason": "not queried: the Slurm front-end reads no GPU yet",
        "gpu_health": {},
        "accelerators": {},
        "python": empty_python_facts("read by the pre-flight's torch probe", settings["python"]),
        "fabric": gather_fabric("/sys", "/proc"),
    }


# ------------------------------------------------------------------------------------------------
# observe
# ------------------------------------------------------------------------------------------------


def tcp_connect(address: str, port: int, source: str, timeout: float, retry: float) -> dict:
    """One connection attempt, retried while refused, as nccl_preflight_observe's probe says it."""
    started = time.monotonic()
    while True:
        sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET)
        sock.settimeout(timeout)
        try:
            if source:
                sock.bind((source, 0))
            sock.connect((address, port))
            ok, error, kind = True, "", ""
        except TimeoutError:
            ok, error, kind = False, f"timed out after {timeout:g} s", "timeout"
        except OSError as exc:
            ok, error = False, exc.strerror or str(exc)
            kind = {111: "refused", 113: "unreachable", 101: "unreachable", 99: "source"}.get(
                exc.errno or 0, "error"
            )
        finally:
            sock.close()
        if ok or kind != "refused" or time.monotonic() >= started + retry:
            break
        time.sleep(0.2)
    elapsed = int((time.monotonic() - started) * 1000)
    return {"ok": ok, "error": error, "error_kind": kind, "elapsed_ms": elapsed}


def observe(settings: dict[str, Any], messages: queue.Queue) -> int:
    """The pre-flight's node side in one step; see the module docstring."""
    facts = gather_facts(settings)
    listen_dir = str(work_dir() / "preflight")
    p = for_fabric(
        {
            "path": listen_dir,
            "run_dir": None,
            "run_dir_mode": "0700",
            "python": settings["python"],
            "python_timeout": float(settings["python_timeout"]),
            "listeners": settings["listeners"],
            "check_port": settings.get("check_port"),
            "lock": None,
            "timeout": float(settings["listen_timeout"]),
            "stop_timeout": float(settings["python_timeout"]) + 10,
            "fabric": settings["fabric"],
            "backend": settings["backend"],
        },
        facts,
    )
    started = start(p, False)
    emit({"kind": "started", "facts": facts, "started": started})
    message = messages.get()
    plan = (message or {}).get("by_node", {}).get(node_name())
    if plan is None:  # the control machine is gone
        stop({"path": listen_dir, "wait": 0.0, "stop_timeout": 5.0, "remove_run_dir": None}, False)
        return 1
    source = p["fabric_address"]
    results = [
        {**t, "source": source, **tcp_connect(t["address"], t["port"], source, 3.0, 2.0)}
        for t in plan.get("targets", [])
    ]
    firewall: dict[str, Any] = {}
    if plan.get("firewall"):
        fw = plan["firewall"]
        firewall = read_firewall(Runner(), fw["peers"], fw["ports"], fw["address"], fw["ifname"])
    collect = {
        "path": listen_dir,
        "wait": float(plan.get("collect_wait", 8.0)),
        "leave_unfinished": False,
        "stop_timeout": float(settings["python_timeout"]) + 10,
        "remove_run_dir": None,
    }
    stopped = stop(collect, False)
    emit(
        {
            "kind": "observed",
            "probe": {"results": results, "firewall": firewall},
            "stopped": stopped,
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


def _stop_message(messages: queue.Queue, results: Path) -> tuple[str, dict | None] | None:
    """A stop asked for since the last look ({"stop": reason, "details": {...}}, or stdin's
    end), else None. A stall's diagnosis asked for on the way ({"diagnose": {node: spec}}) is
    answered at once: record "diagnosis" (node/run_observe.stall_evidence)."""
    while True:
        try:
            message = messages.get_nowait()
        except queue.Empty:
            return None
        if message is None:
            return "the control machine went away (the step's stdin closed)", None
        if message.get("stop"):
            return str(message["stop"]), message.get("details")
        spec = (message.get("diagnose") or {}).get(node_name())
        if isinstance(spec, dict):
            evidence = stall_evidence(spec)
            emit({"kind": "diagnosis", "diagnosis": evidence, "progress": read_progress(results)})


def _supervise(run: Supervision, settings: dict[str, Any], messages: queue.Queue) -> dict | None:
    """Watch torchrun in short slices, sending progress, until it ends, times out or is stopped."""
    deadline = time.monotonic() + int(settings["timeout"])
    results = run.run_dir / RESULTS_DIR
    every = float(settings.get("interval", 1.0))
    while True:
        run.watch(min(deadline, time.monotonic() + every))
        if run.proc is not None and run.proc.poll() is not None:
            return None
        if time.monotonic() >= deadline:
            return None  # run.timed_out is set
        run.timed_out = False
        asked = _stop_message(messages, results)
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
    step and ship.BOOT passes its own on) is ignored, so the tree's end is never cut short."""
    _ignore_stop_signals()
    raise Stop(signal.Signals(signum).name)


def launch(settings: dict[str, Any], messages: queue.Queue) -> int:
    """torchrun of this node in the foreground; see the module docstring."""
    run_dir = work_dir() / "run"
    (run_dir / RESULTS_DIR).mkdir(parents=True, mode=0o700)
    params = {**settings["torchrun"], "run_dir": str(run_dir), "script": _rank_script(run_dir)}
    params["script_args"] = [
        str(run_dir / RESULTS_DIR) if a == "{results}" else a for a in params["script_args"]
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
            run.start(env)
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
    """`node-step observe|launch SETTINGS-JSON` (run by the bundle's __main__)."""
    what, settings = argv[0], json.loads(argv[1])["by_node"][node_name()]
    messages: queue.Queue = queue.Queue()
    threading.Thread(target=_read_messages, args=(messages,), daemon=True).start()
    step = {"observe": observe, "launch": launch}[what]
    return step(settings, messages)
