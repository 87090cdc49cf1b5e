# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""plugins/action/nccl_preflight_observe.py's plain path: node/observe_call.py as a zipapp sent on
stdin through BOOT, run here for real (``/bin/sh -c`` stands in for the SSH connection), answers
what the module returns; the action falls back to the module where that program cannot answer,
and runs the module where no Python is named (core/stdin_ship.py action_program_or_module).
On loopback only."""

from __future__ import annotations

import ast
import io
import socket
import sys
import zipfile
from pathlib import Path
from typing import Any

import nccl_preflight_observe
import pytest

from nccl_preflight.core.stdin_ship import program_answer, program_zipapp
from nccl_preflight.node.observe_call import OBSERVE_ENTRY
from tests.module_exit import run_module_main
from tests.plugin_files import load_plugin
from tests.ports import free_port
from tests.program_shell import Shell, program_action, run_action

action_module = load_plugin("plugins/action/nccl_preflight_observe.py", "observe_action")


def plain_action(shell: Shell, check_mode: bool = False) -> Any:
    """The action with only what its program call uses: its task's check mode and the
    connection."""
    return program_action(action_module.ActionModule, "nccl_preflight_observe", shell, check_mode)


def without_times(result: dict[str, Any]) -> dict[str, Any]:
    """The result less what differs between two runs of the same observation: times, clocks."""
    results = [{k: v for k, v in r.items() if k != "elapsed_ms"} for r in result["results"]]
    collect = {k: v for k, v in result.get("collect", {}).items() if k != "clock"}
    return {**result, "results": results, "collect": collect}


@pytest.fixture
def listening() -> Any:
    with socket.socket() as server:
        server.bind(("127.0.0.1", free_port()))
        server.listen(8)
        yield server.getsockname()[1]


def observation(open_port: int, tmp_path: Path) -> dict[str, Any]:
    closed = free_port()
    return {
        "targets": [
            {"name": "master", "host": "node1", "address": "127.0.0.1", "port": open_port},
            {"name": "ring", "host": "node2", "address": "127.0.0.1", "port": closed},
        ],
        "source": "127.0.0.1",
        "timeout": 2,
        "refused_retry": 0,
        "collect": {"path": str(tmp_path / "no-listeners" / "preflight")},
    }


def test_the_program_answers_what_the_module_returns(
    monkeypatch: pytest.MonkeyPatch, listening: int, tmp_path: Path
) -> None:
    args = observation(listening, tmp_path)
    shell = Shell()
    plain, ran = run_action(
        plain_action(shell), {**args, "program_python": sys.executable, "run_id": "t1"}
    )
    module = run_module_main(monkeypatch, nccl_preflight_observe.main, args)
    assert shell.calls == 1 and ran == [] and not module.failed
    assert without_times(plain) == without_times(module.result)
    assert [r["ok"] for r in plain["results"]] == [True, False]
    assert plain["results"][1]["error_kind"] == "refused"
    # No listeners were started there: both say so, and neither fails the task for it.
    assert plain["collect"]["failed"] is True and "were not started" in plain["collect"]["msg"]
    # BOOT's private directory is gone.
    assert not list(Path("/tmp").glob("nccl-preflight-t1-*"))


def test_check_mode_reaches_the_program(listening: int, tmp_path: Path) -> None:
    (tmp_path / "listeners").mkdir()
    args = {**observation(listening, tmp_path), "collect": {"path": str(tmp_path / "listeners")}}
    plain, ran = run_action(
        plain_action(Shell(), check_mode=True), {**args, "program_python": sys.executable}
    )
    assert ran == []
    assert plain["collect"] == {
        "changed": False,
        "clock": plain["collect"]["clock"],
        "listeners": [],
        "pid": None,
        "msg": "check mode",
    }


def test_a_program_that_cannot_start_leaves_the_call_to_the_module(tmp_path: Path) -> None:
    shell = Shell(rc=127)
    args = {"targets": [], "program_python": "/nonexistent/python9", "run_id": "r"}
    _, ran = run_action(plain_action(shell), args)
    assert shell.calls == 1
    # What the module is then given has no option of the action's own left in it.
    assert ran == [{"targets": []}]


@pytest.mark.parametrize("python", ["", "auto", "auto_legacy_silent"])
def test_without_a_named_python_the_module_runs(python: str) -> None:
    """As nccl_facts' and the start's: no program is sent where the Python is left to Ansible's
    interpreter discovery (it used to try to start a program named 'auto')."""
    shell = Shell()
    args = {"targets": [], "program_python": python, "run_id": "r"}
    result, ran = run_action(plain_action(shell), args, {"changed": False, "results": []})
    assert shell.calls == 0 and ran == [args] and result["results"] == []


def test_options_the_spec_refuses_are_left_for_the_module_to_name(tmp_path: Path) -> None:
    shell = Shell()
    args = {"targets": [{"name": "master", "port": 1}]}
    _, ran = run_action(plain_action(shell), {**args, "program_python": sys.executable})
    assert shell.calls == 0  # nothing was sent: the module names what is wrong
    assert ran == [args]


@pytest.mark.parametrize(
    ("stdout", "answer"),
    [
        (
            'warning: something\n{"changed": false, "results": []}\n',
            {"changed": False, "results": []},
        ),
        ("Traceback (most recent call last):\n", None),
        ("[1, 2]\n", None),
        ("", None),
    ],
)
def test_the_answer_is_the_last_line_as_a_json_object(stdout: str, answer: Any) -> None:
    assert program_answer(stdout) == answer


def test_the_zipapp_holds_the_observation_and_the_node_modules_it_imports_only() -> None:
    data = program_zipapp(OBSERVE_ENTRY, None)
    names = set(zipfile.ZipFile(io.BytesIO(data)).namelist())
    assert "__main__.py" in names and "nccl_preflight/node/observe_call.py" in names
    assert "nccl_preflight/node/tcp_connect.py" in names
    assert "nccl_preflight/node/firewall_read.py" in names
    rooms = {name.split("/")[1] for name in names if name.count("/") >= 2}
    assert rooms == {"node"}, names  # nothing of the control machine's rooms
    # Every module it holds imports only the standard library and the modules beside it (each
    # source has its bytecode beside it: core/zipapp.py with_bytecode).
    assert {n for n in names if n.endswith(".pyc")} == {f"{n}c" for n in names if n.endswith(".py")}
    allowed = set(sys.stdlib_module_names) | {"nccl_preflight"}
    for name in (n for n in names if n.endswith(".py")):
        tree = ast.parse(zipfile.ZipFile(io.BytesIO(data)).read(name))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                assert node.module.split(".")[0] in allowed | {"__future__"}, (name, node.module)
            elif isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] in allowed for a in node.names), name
