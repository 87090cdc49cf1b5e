# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""roles/launch/action_plugins/nccl_torchrun.py's start without a module start: node/start_call.py
as a zipapp on stdin through BOOT, run here for real (``/bin/sh -c`` stands in for the SSH
connection). A real torchrun starts and ends as the module's start does, a refusal is the
module's failure word for word, and options the spec refuses never reach the node."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

from tests.builders.torchrun import finish, finished_args, module_args, start_module
from tests.plugin_files import load_plugin
from tests.program_shell import Shell

action_module = load_plugin(
    "roles/launch/action_plugins/nccl_torchrun.py", "launch_action_nccl_torchrun_start"
)


def plain_start(shell: Shell, environment: str = "") -> object:
    """The action with only what start_plain uses; ``environment``: the task's `environment`
    as Ansible's shell plugin writes it before a command."""
    action = object.__new__(action_module.ActionModule)
    action._task = SimpleNamespace(action="nccl_torchrun")
    action._low_level_execute_command = shell
    action._compute_environment_string = lambda: environment
    return action


def test_the_program_starts_torchrun_as_the_module_does(tmp_path: Path, run_dir: Path) -> None:
    (run_dir / "check.py").write_text(
        "import os, sys\nprint('hello from rank', os.environ['RANK'], flush=True)\n"
        "print('task environment:', os.environ.get('NCCL_PREFLIGHT_TASK_ENV'), flush=True)\n"
        "sys.exit(3 if os.environ['RANK'] == '1' else 0)\n"
    )
    args = module_args(
        run_dir, Path(sys.executable), rank_offset=0, master_port=29563, script_args=[], timeout=60
    )
    shell = Shell()
    environment = "NCCL_PREFLIGHT_TASK_ENV=" + shlex.quote("a play's value")
    started = plain_start(shell, environment).start_plain(dict(args))
    assert shell.calls == 1 and started is not None, started
    assert started["changed"] is True and started["warm_start"] is False
    assert started["supervisor_pid"] and started["torchrun_pid"]
    assert started["cmd"][:3] == [sys.executable, "-m", "torch.distributed.run"]
    # The wait (the module here) finds the run the program started, and its end.
    result = finish(start_module(finished_args(run_dir, rank_offset=0), tmp_path, "wait"), 120)
    assert result["timed_out"] is False and result["torchrun_rc"] == 1
    log = (run_dir / "results" / "rank-1.log").read_text()
    assert "hello from rank 1" in log
    # The task's environment reached torchrun's ranks, as it reaches a module's.
    assert "task environment: a play's value" in log


def test_a_refusal_is_the_modules_failure_word_for_word(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    link = tmp_path / "nccl-preflight-run-link"
    link.symlink_to(target)
    args = module_args(link, Path(sys.executable), env_file=None, env_content="A=1\n")
    plain = plain_start(Shell()).start_plain(dict(args))
    module = finish(start_module(dict(args), tmp_path))
    assert plain is not None and plain["failed"] is True and module["failed"] is True
    assert plain["msg"] == module["msg"] and "symbolic link" in plain["msg"]
    assert not list(target.iterdir())  # nothing was written through the link


def test_options_the_spec_refuses_never_reach_the_node(run_dir: Path) -> None:
    shell = Shell()
    args = module_args(run_dir, Path(sys.executable), script_content="x", script_zipapp="eA==")
    assert plain_start(shell).start_plain(args) is None  # mutually exclusive: the module says so
    assert shell.calls == 0


def test_a_python_that_cannot_run_leaves_the_start_to_the_module(run_dir: Path) -> None:
    shell = Shell(rc=127)
    assert plain_start(shell).start_plain(module_args(run_dir, Path("/nonexistent/py"))) is None
    assert shell.calls == 1
