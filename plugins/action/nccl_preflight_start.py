# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Action plugin of library/nccl_preflight_start.py: the run's warden, then the pre-flight's start
without a module start.

With O(tether) (this ansible-playbook run makes a run directory on the node), the node's warden
comes first: a tether (src/nccl_preflight/core/tether.py) opens one more session to the node,
built as this task's connection builds its commands (ssh with the inventory's options, or a local
shell), that lasts until ansible-playbook ends, and runs src/nccl_preflight/node/run_warden.py
there: whichever way the control machine goes away, the node ends the run by itself within
seconds. The start below then holds the warden's pass (``preflight.warden``). Where no tether can
be started (another connection type, a password the session would have to type) the result says
why, in a warning, and the run goes on as before.

With O(program_python) (the node's Python as the inventory names it), the options are checked
here with the module's own argument spec and the call runs on the node as
src/nccl_preflight/node/preflight_start_call.py: a zipapp of it and what it imports, sent on the
call's stdin through BOOT (core/stdin_ship.py), the options after it as one JSON line: no module
payload is built on the control machine and Ansible's module start is not paid on the node; the
result is the module's. Options the spec refuses, a
program that could not run or did not answer JSON, and no O(program_python): the module runs, as
it would without this plugin (with Ansible's interpreter discovery where that is on).
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from nccl_preflight.core.stdin_ship import action_program_or_module, named_python
from nccl_preflight.core.tether import start_tether, warden_command
from nccl_preflight.core.zipapp import user_cache_dir
from nccl_preflight.node.preflight_start_call import PREFLIGHT_START_ENTRY, START_CALL_SPEC


class ActionModule(ActionBase):
    """Start the node's warden; run the start as a plain program when the node's Python is named,
    else the module."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        tether = self.tether(
            args.pop("tether", None), named_python(args), str(args.get("run_id") or "")
        )
        if tether is not None and isinstance(args.get("preflight"), dict):
            args["preflight"] = {**args["preflight"], "warden": bool(tether.get("ready"))}
        validator = ArgumentSpecValidator(START_CALL_SPEC)
        entry = PREFLIGHT_START_ENTRY
        result.update(action_program_or_module(self, validator, args, task_vars, entry, "start"))
        if tether is not None:
            result["tether"] = tether
            if not tether.get("ready"):
                result.setdefault("warnings", []).append(
                    f"no warden watches this node ({tether.get('error')}): if this run is "
                    "interrupted, what it started there ends only at its own timeouts"
                )
        return result

    def tether(
        self, options: dict[str, Any] | None, program_python: str, run_id: str
    ) -> dict[str, Any] | None:
        """Start the node's warden for ``options["run_dir"]`` with ``program_python`` (named_python:
        "" for none), else O(tether.python); None without O(tether) or in check mode (nothing
        starts on the node)."""
        if not options or not options.get("run_dir") or self._task.check_mode:
            return None
        python = program_python or str(options.get("python") or "") or "python3"
        command = self.session_command(shlex.join(warden_command(python, run_id or "warden")))
        if isinstance(command, str):
            return {"ready": False, "error": command}
        note = str(options.get("note") or "") or None  # where the tether keeps the warden's word
        return start_tether(
            command, str(options["run_dir"]), run_id, os.getppid(), user_cache_dir(), note=note
        )

    def session_command(self, command: str) -> list[str] | str:
        """The argv that runs ``command`` on the node as this task's connection would, with the
        task's environment and ``become``; or why there is none."""
        env = self._compute_environment_string()
        command = f"{env} {command}" if env else command
        if self._connection.become:
            if self.get_become_option("become_pass"):
                return "become needs a password, which the warden's session cannot give"
            command = self._connection.become.build_become_command(command, self._connection._shell)
        executable = self._play_context.executable
        if self._connection.allow_executable and executable:
            command = f"{executable} -c {shlex.quote(command)}"
        transport = str(self._connection.transport).rsplit(".", 1)[-1]
        if transport == "local":
            return ["/bin/sh", "-c", command]
        if transport != "ssh":
            return f"connection {transport} is not one the warden's session can use (ssh, local)"
        connection = self._connection
        if connection.get_option("password") or self._play_context.password:
            return "the connection uses a password, which the warden's session cannot give"
        connection.host = connection.get_option("host") or self._play_context.remote_addr
        argv = connection._build_command(  # the ssh command line of this task's own calls
            connection.get_option("ssh_executable"), "ssh", connection.host, command
        )
        return [os.fsdecode(arg) for arg in argv]
