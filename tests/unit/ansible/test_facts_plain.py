# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""plugins/action/nccl_facts.py: every run's first call on a node as node/facts_call.py, a zipapp
sent on stdin through BOOT and run here for real (``/bin/sh -c`` stands in for the SSH
connection). It answers what the module returns, fails as the module fails, and leaves the call
to the module where the node's Python is not named or cannot run the program; the start's
program (plugins/action/nccl_preflight_start.py, node/preflight_start_call.py) starts the
pre-flight's detached listener that outlives it (and BOOT's directory). On loopback only."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import nccl_facts
import pytest

from nccl_preflight.node.listener import stop_listener
from nccl_preflight.node.processes import is_alive
from nccl_preflight.node.tcp_connect import tcp_connect
from tests.module_exit import run_module_main
from tests.plugin_files import load_plugin
from tests.program_shell import Shell, program_action, run_action

action_module = load_plugin("plugins/action/nccl_facts.py", "facts_action")
start_module = load_plugin("plugins/action/nccl_preflight_start.py", "start_action")

# The facts without their slow or GPU parts: no nvidia-smi, no torch import.
QUICK = {"route_to": "127.0.0.1", "query_python": False, "query_gpus": False, "gpu_health": False}


def facts_action(shell: Shell, check_mode: bool = False) -> Any:
    """The action with only what its program call uses: its task's check mode and the
    connection."""
    return program_action(action_module.ActionModule, "nccl_facts", shell, check_mode)


def start_action(shell: Shell, check_mode: bool = False) -> Any:
    """The start's action, as facts_action."""
    return program_action(start_module.ActionModule, "nccl_preflight_start", shell, check_mode)


def steady(facts: dict[str, Any]) -> dict[str, Any]:
    """The facts less what may change between two reads: the interface table (a lab test beside
    this one may add an interface; loopback stays) and the free bytes of /dev/shm."""
    fabric = facts["fabric"]
    limits = {**fabric["limits"], "shm": {**fabric["limits"]["shm"], "free_bytes": None}}
    return {
        **facts,
        "interfaces": {"lo": facts["interfaces"]["lo"]},
        "fabric": {**fabric, "limits": limits},
    }


def test_the_program_answers_the_facts_the_module_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    shell = Shell()
    args = {**QUICK, "program_python": sys.executable, "run_id": "f1"}
    plain, ran = run_action(facts_action(shell), args)
    module = run_module_main(monkeypatch, nccl_facts.main, QUICK)
    assert shell.calls == 1 and ran == [] and not module.failed
    assert plain["changed"] is False and "preflight" not in plain and "tether" not in plain
    assert steady(plain["ansible_facts"]["nccl"]) == steady(module.result["ansible_facts"]["nccl"])
    facts = plain["ansible_facts"]["nccl"]
    assert facts["module_python"] == sys.executable  # the Python the program ran with
    assert facts["route"]["interface"] == "lo" and facts["route_reason"] == ""
    assert not list(Path("/tmp").glob("nccl-preflight-f1-*"))  # BOOT's directory is gone


def test_the_start_program_starts_a_listener_that_outlives_it(tmp_path: Path) -> None:
    """plugins/action/nccl_preflight_start.py's program (node/preflight_start_call.py), the call
    after the facts (which only read)."""
    listen = tmp_path / "run" / "preflight"
    ring = {"name": "ring", "address": "127.0.0.1", "port": 0, "connections": 1}
    args = {"preflight": {"path": str(listen), "listeners": [ring]}}
    plain, ran = run_action(start_action(Shell()), {**args, "program_python": sys.executable})
    stopped: dict[str, Any] = {}
    try:
        assert ran == [] and plain["changed"] is True, plain
        preflight = plain["preflight"]
        assert "failed" not in preflight and preflight["ports"]["ring"]["error"] == ""
        record = json.loads((listen / "listener.pid").read_text(encoding="utf-8"))
        assert record["pid"] == preflight["pid"] and is_alive(record["pid"], record["start_time"])
        # The program and BOOT are gone; the listener still takes its connection.
        port = preflight["ports"]["ring"]["port"]
        assert tcp_connect("127.0.0.1", port, "127.0.0.1", 2.0, 1.0)["ok"] is True
    finally:
        if (listen / "listener.pid").exists():
            # The listener process first waits for its torch probe (this Python's torch).
            stopped = stop_listener(str(listen), 90)
    assert stopped["killed"] is False, stopped
    assert stopped["result"]["listeners"][0]["accepted"] == ["127.0.0.1"], stopped


def test_check_mode_reaches_the_start_program(tmp_path: Path) -> None:
    listen = tmp_path / "run" / "preflight"
    ring = {"name": "ring", "address": "127.0.0.1", "port": 0, "connections": 1}
    args = {"preflight": {"path": str(listen), "listeners": [ring]}}
    start = start_action(Shell(), check_mode=True)
    plain, ran = run_action(start, {**args, "program_python": sys.executable})
    assert ran == [] and plain["changed"] is False
    assert plain["preflight"]["pid"] is None and plain["preflight"]["listeners"] == []
    assert not listen.exists()  # check mode makes nothing


def test_an_option_like_route_fails_as_the_module_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    args = {**QUICK, "route_to": "-oProxyCommand=x"}
    plain, ran = run_action(facts_action(Shell()), {**args, "program_python": sys.executable})
    module = run_module_main(monkeypatch, nccl_facts.main, args)
    assert ran == [] and module.failed
    assert plain["failed"] is True and plain["msg"] == module.result["msg"]
    assert "is not an address or a host name" in plain["msg"]


@pytest.mark.parametrize("python", ["", "auto", "auto_silent"])
def test_without_a_named_python_the_module_runs(python: str) -> None:
    """No program is sent where the inventory leaves the Python to Ansible's discovery."""
    shell = Shell()
    args = {**QUICK, "program_python": python, "run_id": "r"}
    result, ran = run_action(facts_action(shell), args, {"ansible_facts": {"nccl": {}}})
    assert shell.calls == 0 and ran == [args]  # the module gets the task's options as given
    assert result["ansible_facts"] == {"nccl": {}}


def test_a_python_that_cannot_run_the_program_leaves_the_call_to_the_module() -> None:
    shell = Shell(rc=127)
    _, ran = run_action(
        facts_action(shell), {**QUICK, "program_python": "/nonexistent/python9", "run_id": "r"}
    )
    # The module gets the task's own options, less the action's.
    assert shell.calls == 1 and ran == [QUICK]


def test_options_the_spec_refuses_are_left_for_the_module_to_name() -> None:
    shell = Shell()
    args = {**QUICK, "dcgm_diag_level": "high"}
    _, ran = run_action(facts_action(shell), {**args, "program_python": sys.executable})
    assert shell.calls == 0  # nothing was sent: the module names what is wrong
    assert ran == [args]
