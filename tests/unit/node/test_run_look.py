# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The watch's looks without a module start: the launch's start writes src/nccl_preflight/node/
run_look.py and what it imports into <run dir>/look.pyz, and a plain ``python -I -S look.pyz
'<options>'`` answers a look, and the run's end, as the module's state=finished does; the action
plugin runs it when the watch has the node's Python, and calls the module when it cannot."""

from __future__ import annotations

import base64
import io
import json
import stat
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from nccl_preflight.core.zipapp import zip_bytes
from nccl_preflight.node.run_look import LOOK_ZIPAPP, zipapp_files
from tests.builders.launch import FakeNode, look, watch
from tests.builders.torchrun import (
    finish,
    finished_args,
    module_args,
    rank_file,
    start_module,
    tagged_processes,
)
from tests.polling import wait_or_fail


def plain_look(options: dict[str, Any]) -> dict[str, Any]:
    """The look as the watch runs it on a node: isolated, no site-packages, no Ansible."""
    zipapp = Path(options["run_dir"]) / LOOK_ZIPAPP
    argv = [sys.executable, "-I", "-S", str(zipapp), json.dumps(options)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def start(tmp_path: Path, python: Path, run_dir: Path, mode: str) -> dict[str, Any]:
    look_zipapp = base64.b64encode(zip_bytes(zipapp_files())).decode()
    args = module_args(run_dir, python, timeout=120, environment={"FAKE_MODE": mode},
                       look_zipapp=look_zipapp)  # fmt: skip
    return finish(start_module(args, tmp_path))


def test_look_pyz_holds_the_look_and_what_it_imports_only() -> None:
    names = set(zipapp_files())
    assert {
        "__main__.py",
        "nccl_preflight/node/run_look.py",
        "nccl_preflight/node/supervisor.py",
        "nccl_preflight/node/run_collect.py",
    } <= names
    assert "nccl_preflight/node/listener.py" not in names  # the pre-flight's: not needed here


def test_a_plain_look_sees_the_running_ranks_and_ends_nothing(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    started = start(tmp_path, fake_python, run_dir, "hang")
    assert started.get("failed") is not True, started
    assert stat.S_IMODE((run_dir / LOOK_ZIPAPP).stat().st_mode) == 0o600
    shown = started["invocation"]["module_args"]["look_zipapp"]
    assert shown == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"  # never echoed
    wait_or_fail(lambda: len(tagged_processes(run_dir)) == 5)
    rank_file(run_dir, 4, current_test="bandwidth_all_reduce", current_size=4096, test_index=3,
              test_count=9)  # fmt: skip
    seen = plain_look(finished_args(run_dir, watch_s=0.3, watch_ifname="lo"))
    assert seen["running"] is True and seen["changed"] is False
    assert seen["progress"][0]["rank"] == 4 and seen["progress"][0]["size"] == 4096
    assert seen["interface"]["ifname"] == "lo"
    assert len(tagged_processes(run_dir)) == 5 and (run_dir / "watch.json").is_file()
    stop = finish(start_module(finished_args(run_dir, stop_reason="test over"), tmp_path, "s"))
    assert stop["running"] is False and tagged_processes(run_dir) == []


def test_the_plain_look_that_sees_the_end_brings_the_results_and_removes_the_run(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    assert start(tmp_path, fake_python, run_dir, "ok").get("failed") is not True
    ended = plain_look(finished_args(run_dir, watch_s=20, collect=True, remove_run_dir=True))
    assert ended["running"] is False and ended["torchrun_rc"] == 0 and ended["changed"] is True
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(ended["collected_archive"]))) as tar:
        assert "launch.json" in tar.getnames() and "launch.json" in ended["collected"]
    assert ended["run_dir_removed"] is True and not run_dir.exists()


class PlainNode(FakeNode):
    """A node that also answers plain commands: the looks through look.pyz."""

    def __init__(self, looks: list[dict[str, Any]], rc: int = 0):
        super().__init__(looks)
        self.rc, self.commands = rc, []

    def _low_level_execute_command(self, cmd: str, sudoable: bool = True) -> dict[str, Any]:
        self.commands.append(cmd)
        answer = self.looks.pop(0) if len(self.looks) > 1 else self.looks[0]
        return {"rc": self.rc, "stdout": json.dumps(answer), "stderr": ""}


def test_with_the_nodes_python_every_look_is_a_plain_program_not_a_module(
    tmp_path: Path,
) -> None:
    ended = {"running": False, "torchrun_rc": 0, "progress": []}
    node = PlainNode([look("all_reduce", 1024, 0.1), ended])
    result = watch(node, tmp_path, python="/opt/py/bin/python3").run({})
    assert result["torchrun_rc"] == 0 and node.calls == []
    assert len(node.commands) == 2
    assert node.commands[0].startswith("/opt/py/bin/python3 -I -S /tmp/x/look.pyz ")
    assert '"watch_s": 0.01' in node.commands[0]


def test_a_look_the_plain_program_cannot_answer_is_a_module_call(tmp_path: Path) -> None:
    node = PlainNode([{"running": False, "torchrun_rc": 0, "progress": []}], rc=2)
    result = watch(node, tmp_path, python="/opt/py/bin/python3").run({})
    assert result["torchrun_rc"] == 0
    assert len(node.commands) == 1 and len(node.calls) == 1
    # Without the node's Python: module calls only, as before.
    node = PlainNode([{"running": False, "torchrun_rc": 0, "progress": []}])
    watch(node, tmp_path).run({})
    assert node.commands == [] and len(node.calls) == 1
