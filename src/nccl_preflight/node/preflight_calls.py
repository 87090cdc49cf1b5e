# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight's node side in two calls instead of four.

Every module call on a node is an SSH session and a Python start (0.4-0.7 s), so the pre-flight
rides on calls that run anyway:

- :func:`start` - make the run directory, look at MASTER_PORT, take the run lock, bind the
  listeners and start the torch probe in a detached process - runs inside the facts play's
  ``nccl_facts`` call (its ``preflight`` option, :data:`START_SPEC`), so importing torch overlaps
  the environment play and the probes;
- :func:`stop` - wait (bounded) until the listeners got every expected connection, stop them and
  return who connected, what torch reported and the clock, optionally removing the run directory -
  runs inside ``nccl_preflight_observe`` after its probes (its ``collect`` option,
  :data:`STOP_SPEC`).
  With ``leave_unfinished`` listeners still waiting for a peer's probe are not stopped: the result
  says ``pending`` and a later call (after every host's probes, however ``forks`` batched the
  hosts) stops them.

Their options are documented in those two modules' DOCUMENTATION. Both return a result dict;
``failed: True`` with ``msg`` where the pre-flight could not start or be collected (the calling
module reports it in its result and does not fail).
"""

from __future__ import annotations

import os
import re
import signal
import time
from typing import Any

from .fabric_choice import nccl_fabric_choice
from .listener import (
    PID_FILE,
    RESULT_FILE,
    bind_all,
    clear_previous,
    holds_probe,
    log_tail,
    python_facts,
    result_of,
    spawn_listener,
    stop_listener,
)
from .port_owner import port_owner
from .processes import is_alive, read_json, signal_recorded, write_json
from .read_only import probe_python_read_only, would_start
from .run_dir import (
    make_private_dir,
    parse_mode,
    private_dir_problem,
    remove_private_dir,
)
from .run_lock import look as look_at_lock
from .run_lock import take as take_lock
from .run_warden import WardenGone, warden_pass

LISTENER_SPEC = {
    "name": {"type": "str", "required": True},
    "address": {"type": "str", "required": True},
    "port": {"type": "int", "default": 0},
    "connections": {"type": "int", "default": 1},
    # FACTS_START_SPEC only: held only where this node uses that backend (node_backend).
    "backend": {"type": "str", "default": ""},
}
LOCK_SPEC = {
    "path": {"type": "path", "required": True},
    "lifetime": {"type": "float", "default": 3600.0},
    "run_id": {"type": "str", "required": True},
    "started_at": {"type": "str", "default": ""},
    "control_host": {"type": "str", "default": ""},
    "control_user": {"type": "str", "default": ""},
}
# The options of a start (library/nccl_preflight_start.py's preflight, node/start_call.py).
START_SPEC: dict[str, dict] = {
    "path": {"type": "path", "required": True},
    "run_dir": {"type": "path"},
    "run_dir_mode": {"type": "str", "default": "0700"},
    "python": {"type": "str"},
    "python_timeout": {"type": "float", "default": 60.0},
    "listeners": {"type": "list", "elements": "dict", "default": [], "options": LISTENER_SPEC},
    "check_port": {"type": "int"},
    "lock": {"type": "dict", "options": LOCK_SPEC},
    "timeout": {"type": "float", "default": 60.0},
    "stop_timeout": {"type": "float", "default": 10.0},
    # A launch follows: the torch probe holds on to become torchrun (node/warm_launch.py).
    "warm": {"type": "bool", "default": False},
    # The run's warden watches this node (node/run_warden.py): start nothing once it is gone.
    "warden": {"type": "bool", "default": False},
}
# A start and the settings the fabric address is chosen with, resolved by for_fabric from the
# node's facts: on the control machine (core/preflight/start.py), in the Slurm run step.
FACTS_START_SPEC: dict[str, dict] = {
    **START_SPEC,
    "fabric": {
        "type": "dict",
        "default": {},
        "options": {
            "socket_ifname": {"type": "str", "default": ""},
            "cidr": {"type": "str", "default": ""},
        },
    },
    # nccl_backend: a listener with a backend is held only where node_backend gives that one.
    "backend": {"type": "str", "default": "auto"},
}
# A listener address meaning "this host's fabric address", and the field of the lock path it
# fills: what roles/nccl_env will choose (the same nccl_fabric_choice, the same inputs), known on
# the node before the environment play runs.
FABRIC = "fabric"
FABRIC_FIELD = "{fabric_address}"
# The options of a stop (nccl_preflight_observe's collect option).
STOP_SPEC: dict[str, dict] = {
    "path": {"type": "path", "required": True},
    "wait": {"type": "float", "default": 0.0},
    "leave_unfinished": {"type": "bool", "default": False},
    "stop_timeout": {"type": "float", "default": 10.0},
    "remove_run_dir": {"type": "path"},
    "abandon": {"type": "bool", "default": False},
}
# How often an abandon looks whether the listener process is gone.
GONE_POLL_S = 0.05


def _failed(msg: str, **result: Any) -> dict:
    return {"failed": True, "msg": msg, **result}


def _make_dirs(path: str, run_dir: str | None, mode: int) -> str:
    """Make the run directory (when given) and the listener directory in it; -> error or ""."""
    try:
        if run_dir:
            make_private_dir(run_dir, mode)
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        return (
            f"cannot make the listener directory {path}"
            + (f" in the run directory {run_dir}" if run_dir else "")
            + f": {exc}; rerun with another run id"
        )
    return ""


def node_backend(facts: dict, requested: str) -> str:
    """The backend this node would use: ``requested`` unless it is auto, else what its own
    facts call for - nccl with NVIDIA GPUs, hccl with Ascend NPUs, else "" (xccl or gloo: no
    listener of its own). The order of nccl_backend_choice (core/preflight/backend_checks.py),
    which the environment play applies to the master's facts once every host's are in."""
    if requested != "auto":
        return requested
    if facts.get("gpus"):
        return "nccl"
    return "hccl" if (facts.get("accelerators") or {}).get("npus") else ""


def _for_backend(specs: list[dict], backend: str) -> list[dict]:
    """``specs`` without the listeners of another backend, and without the backend key."""
    return [
        {k: v for k, v in spec.items() if k != "backend"}
        for spec in specs
        if not spec.get("backend") or spec["backend"] == backend
    ]


def for_fabric(p: dict, facts: dict) -> dict:
    """``p`` (:data:`FACTS_START_SPEC`) with every :data:`FABRIC` listener address and the lock
    path's :data:`FABRIC_FIELD` filled in from this host's fabric choice; without a fabric
    address those listeners and the lock are left out (the environment play stops the run).
    A listener with a ``backend`` is kept only where :func:`node_backend` gives that backend."""
    fabric = p.get("fabric") or {}
    try:
        choice = nccl_fabric_choice(facts, fabric.get("socket_ifname", ""), fabric.get("cidr", ""))
    except ValueError as exc:  # a bad CIDR: validate_inputs names it before any call
        choice = {"address": "", "reason": str(exc)}
    address = choice["address"]
    listeners = [
        {**spec, "address": address} if spec["address"] == FABRIC else spec
        for spec in _for_backend(p["listeners"], node_backend(facts, p.get("backend") or "auto"))
        if spec["address"] != FABRIC or address
    ]
    lock = p["lock"]
    if lock and FABRIC_FIELD in lock["path"]:
        safe = re.sub(r"[^0-9A-Za-z.-]", "_", address)
        lock = {**lock, "path": lock["path"].replace(FABRIC_FIELD, safe)} if address else None
    return {**p, "listeners": listeners, "lock": lock, "fabric_address": address}


def start(p: dict, check_mode: bool, python_done: dict | None = None) -> dict:
    """Start the listeners and the torch probe as ``p`` (:data:`START_SPEC`) says; -> result.

    ``python_done``: the probe's run ({rc, stdout, stderr, error}) when the caller already ran
    it (nccl_facts, which reads torch.xpu through it): the listener process then only keeps it.
    With ``warden``, all of it under a pass of the run's warden (node/run_warden.py): refused,
    with nothing started, once the warden ended the run.
    """
    try:
        with warden_pass(p["run_dir"] or p["path"], bool(p.get("warden")) and not check_mode):
            return _start(p, check_mode, python_done)
    except WardenGone as exc:
        return _failed(str(exc), listeners=[], ports={}, warden_gone=True)


def _start(p: dict, check_mode: bool, python_done: dict | None) -> dict:
    """:func:`start`'s work."""
    path = p["path"]
    owner = port_owner(p["check_port"]) if p["check_port"] is not None else {}
    specs = p["listeners"]
    if owner and not owner["free"]:
        specs = [s for s in specs if s["port"] != p["check_port"]]
    run_dir, run_dir_mode = p["run_dir"], parse_mode(p["run_dir_mode"])
    if run_dir_mode is None:
        return _failed(
            f"run_dir_mode {p['run_dir_mode']!r} is not an octal mode such as 0700",
            port_owner=owner,
        )
    problem = private_dir_problem(run_dir) if run_dir else ""
    if problem:
        return _failed(problem, port_owner=owner, listeners=[], ports={})
    lock_spec, extra = p["lock"], {}
    if check_mode:
        if lock_spec:
            extra["lock"] = look_at_lock(lock_spec["path"])
        if p["python"]:
            extra["python"] = probe_python_read_only(p["python"], p["python_timeout"])
        return {
            "changed": False,
            "listeners": [],
            "ports": {},
            "port_owner": owner,
            "pid": None,
            "msg": would_start(p),
            **extra,
        }
    deadline = time.monotonic() + p["timeout"]
    error = _make_dirs(path, run_dir, run_dir_mode)
    if error:
        return _failed(error, port_owner=owner)
    if lock_spec and run_dir:
        owner_record = {k: lock_spec[k] for k in lock_spec if k not in ("path", "lifetime")}
        extra["lock"] = take_lock(lock_spec["path"], run_dir, lock_spec["lifetime"], owner_record)
        if extra["lock"]["refused"]:  # MASTER_PORT is the other run's: nobody probes it
            specs = [s for s in specs if s["port"] != p["check_port"]]
    clear_previous(path, p["stop_timeout"])
    entries, socks = bind_all(specs)
    ports = {e["name"]: {"port": e["port"], "error": e["error"]} for e in entries}
    result = {"listeners": entries, "ports": ports, "port_owner": owner, **extra}
    pid = None
    python = {"executable": p["python"], "timeout": p["python_timeout"]} if p["python"] else None
    if python and python_done is not None:
        python["done"] = python_done
    elif python:
        python["warm"] = bool(p.get("warm"))
    if socks or python:
        pid = spawn_listener(path, entries, socks, deadline, python)
        if not pid:
            return _failed(
                f"the listener process died while starting; its log: {log_tail(path)}", **result
            )
    else:
        write_json(os.path.join(path, RESULT_FILE), result_of(entries, "nothing bound", None))
    return {"changed": True, "pid": pid, **result}


def wait_for_end(path: str, wait: float) -> bool:
    """Wait up to ``wait`` s for the listener process to end by itself (every expected connection
    came, or its own timeout); -> whether it did."""
    pid_info = read_json(os.path.join(path, PID_FILE)) or {}
    pid, start_time = pid_info.get("pid"), pid_info.get("start_time")
    deadline = time.monotonic() + wait
    while pid is not None and is_alive(pid, start_time):
        if holds_probe(path):
            return True  # it ended its listening and holds the warm probe
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _end(result: dict, run_dir: str | None, check_mode: bool) -> dict:
    """Remove ``run_dir`` when asked: the stop is then the pre-flight's last call on the host."""
    if run_dir and not check_mode:
        problem = remove_private_dir(run_dir)
        result["run_dir_removed"] = not problem
        if problem:
            result["remove_error"] = problem
    return result


def stop(p: dict, check_mode: bool) -> dict:
    """Stop the listeners of ``p["path"]`` (:data:`STOP_SPEC`) once they ended by themselves or
    ``p["wait"]`` s passed, and collect what they saw; -> result (with this host's clock).

    ``leave_unfinished``: listeners still waiting after ``p["wait"]`` s are left running with the
    run directory, and the result is only ``{pending: True, clock, waited}``."""
    clock = time.time()
    path, run_dir = p["path"], p["remove_run_dir"]
    if run_dir and os.path.commonpath([run_dir, path]) != run_dir:
        return _failed(
            f"remove_run_dir {run_dir} does not hold the listener directory {path}", clock=clock
        )
    if check_mode:
        return {"changed": False, "clock": clock, "listeners": [], "pid": None, "msg": "check mode"}
    if p.get("abandon"):
        return abandon(path, run_dir, p["stop_timeout"], clock)
    if not os.path.isdir(path):
        return _end(
            _failed(
                f"no listener directory {path}: the listeners were not started",
                clock=clock,
                listeners=[],
                pid=None,
            ),
            run_dir,
            check_mode,
        )
    leave = p.get("leave_unfinished", False)
    ended_alone = wait_for_end(path, p["wait"]) if p["wait"] > 0 or leave else False
    if leave and not ended_alone:  # a peer's probe is still to come: a later stop collects them
        waited = {"seconds": p["wait"], "ended_alone": False}
        return {"changed": False, "clock": clock, "pending": True, "waited": waited}
    outcome = stop_listener(path, p["stop_timeout"])
    result = outcome["result"]
    if result is None:
        return _end(
            _failed(
                outcome["error"],
                clock=clock,
                listeners=[],
                pid=outcome["pid"],
                killed=outcome["killed"],
            ),
            run_dir,
            check_mode,
        )
    extra = {"python": python_facts(result["python_run"])} if result.get("python_run") else {}
    if p["wait"] > 0:
        extra["waited"] = {"seconds": p["wait"], "ended_alone": ended_alone}
    return _end(
        {
            "changed": True,
            "clock": clock,
            "listeners": result["listeners"],
            "pid": result["pid"],
            "ended": result["ended"],
            "timed_out": result["timed_out"],
            "killed": outcome["killed"],
            **extra,
        },
        run_dir,
        check_mode,
    )


def abandon(path: str, run_dir: str | None, stop_timeout: float, clock: float) -> dict:
    """The run ended on this host before its pre-flight was collected (the environment stage
    stopped it): remove ``run_dir``, on which the listener process lets its torch probe go and
    ends at once, then wait up to ``stop_timeout`` s until that process is gone (SIGKILL after
    that), so that nothing of the run outlives this call; nothing is collected."""
    if not run_dir:
        return _failed("abandon needs remove_run_dir: the directory whose removal ends the run")
    record = read_json(os.path.join(path, PID_FILE)) or {}
    pid, started = record.get("pid"), record.get("start_time")
    result = _end({"changed": True, "clock": clock, "pid": pid}, run_dir, False)
    deadline = time.monotonic() + stop_timeout
    while pid is not None and is_alive(pid, started):
        if time.monotonic() >= deadline:
            result["killed"] = signal_recorded(pid, started, signal.SIGKILL)
            break
        time.sleep(GONE_POLL_S)
    result["ended"] = "killed" if result.get("killed") else "run directory removed"
    return result
