# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""library/nccl_torchrun.py's state=started as a plain function of its options, and as a program
that needs no Ansible on the node.

The start makes the private run directory (or takes the one the pre-flight made), writes nccl.env
and the rank script's zipapp into it, waits on the master until MASTER_PORT is free and starts
torchrun: in the pre-flight's held torch probe when one waits (node/warm_launch.py), else cold
under a detached supervisor (node/supervisor.py); it returns once torchrun runs. As the
pre-flight's observation (node/observe_call.py), the launch's action plugin
(roles/launch/action_plugins/nccl_torchrun.py) runs it as a program where it knows the node's
Python: a zipapp of this module and what it imports, on the call's stdin through BOOT
(core/stdin_ship.py), the options after it as one JSON line; a module start costs 0.35-0.45 CPU s
on a lab node. The module calls :func:`start_run` too, so both say the same; what refuses the
start is :class:`StartRefused`, which the module turns into its failure and the program prints
as one (``failed``, ``msg`` and the details).
Standard library only.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import os
import socket
import sys
import zipfile
from pathlib import Path
from typing import Any

from .files import write_atomically
from .run_dir import bad_file_name, make_private_dir, parse_mode, private_dir_problem
from .run_look import LOOK_ZIPAPP
from .run_start import build_argv, parse_env_file, wait_port_free
from .run_warden import WardenGone, warden_pass
from .supervisor import LAUNCH_FILE, PIDS_FILE, RESULTS_DIR, TORCHRUN_LOG, start_supervisor
from .warm_launch import launch_in_holder

# The module the zipapp of this program is built around (core/stdin_ship.py program_zipapp:
# its __main__ runs main() below).
START_ENTRY = "nccl_preflight.node.start_call"

# library/nccl_torchrun.py's options, in AnsibleModule's argument_spec form (the module's; the
# action plugin checks a start's options with it on the control machine before it sends them).
TORCHRUN_SPEC: dict[str, dict[str, Any]] = {
    "state": {"type": "str", "choices": ["started", "finished", "stopped"], "default": "finished"},
    "run_dir": {"type": "path", "required": True},
    "python": {"type": "path"},
    "script": {"type": "path"},
    "script_content": {"type": "str", "no_log": True},
    "script_zipapp": {"type": "str", "no_log": True},
    "script_src": {"type": "path"},
    "look_zipapp": {"type": "str", "no_log": True},
    "script_args": {"type": "list", "elements": "str", "default": []},
    "nnodes": {"type": "int"},
    "node_rank": {"type": "int"},
    "nproc_per_node": {"type": "int"},
    "rank_offset": {"type": "int", "default": 0},
    "master_addr": {"type": "str"},
    "master_port": {"type": "int"},
    "local_addr": {"type": "str"},
    "rdzv_id": {"type": "str", "default": "nccl-preflight"},
    "run_dir_mode": {"type": "str", "default": "0700"},
    "env_file": {"type": "path"},
    "env_content": {"type": "str"},
    "env_file_mode": {"type": "str", "default": "0600"},
    "environment": {"type": "dict", "default": {}},
    "timeout": {"type": "int", "default": 300},
    "kill_grace": {"type": "int", "default": 5},
    "port_wait_timeout": {"type": "int", "default": 30},
    "stop_reason": {"type": "str", "default": ""},
    "warm_dir": {"type": "path"},
    "warden": {"type": "bool", "default": False},
    "collect": {"type": "bool", "default": False},
    "collect_log_max_bytes": {"type": "int", "default": 4 * 1024 * 1024},
    "collect_to": {"type": "path"},
    "remove_run_dir": {"type": "bool", "default": False},
    "watch_s": {"type": "float", "default": 0.0},
    "watch_stale_s": {"type": "float", "default": 30.0},
    "watch_ifname": {"type": "str"},
    "diagnose": {"type": "dict"},
    "stop_details": {"type": "dict"},
}
TORCHRUN_EXCLUSIVE = [("script_content", "script_zipapp")]


class StartRefused(Exception):
    """Why the start cannot go on (nothing started), and the details the failure carries."""

    def __init__(self, msg: str, **details: Any) -> None:
        super().__init__(msg)
        self.msg, self.details = msg, details


START_NEEDS = (
    "python",
    "script",
    "nnodes",
    "node_rank",
    "nproc_per_node",
    "master_addr",
    "master_port",
    "local_addr",
)


# Where O(script_zipapp) goes without O(script): the one file of the rank script and its modules.
ZIPAPP_NAME = "nccl_check.pyz"


def script_payload(params: dict[str, Any]) -> bytes | str | None:
    """What state=started writes to ``script``: the decoded zipapp, script_content, or None
    (the script is there already). Sets ``script`` to <run_dir>/nccl_check.pyz for a zipapp
    without one. Fails before anything is written."""
    if params["script_zipapp"] is None:
        if params["script_src"] is not None:
            raise StartRefused(
                msg=f"script_src {params['script_src']} is a path on the control machine: the "
                "action plugin of roles/launch bundles it into script_zipapp, so run this module "
                "through the role's action plugin, or pass script_zipapp yourself"
            )
        return params["script_content"]
    try:
        data = base64.b64decode(params["script_zipapp"], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise StartRefused(msg=f"script_zipapp is not base64: {exc}") from None
    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise StartRefused(
            msg="script_zipapp is not a zip file (build it with src/nccl_preflight/core/zipapp.py)"
        )
    if params["script"] is None:
        params["script"] = os.path.join(params["run_dir"], ZIPAPP_NAME)
    return data


def check_start_params(params: dict[str, Any]) -> tuple[int, int, str | None]:
    """Fail on what state=started cannot use, before anything is written; -> (run_dir mode,
    env_file mode, the environment file to write or read)."""
    run_dir = params["run_dir"]
    missing = [k for k in START_NEEDS if params[k] is None]
    if missing:
        raise StartRefused(msg=f"nccl_torchrun state=started needs {', '.join(missing)}")
    dir_mode = parse_mode(params["run_dir_mode"])
    file_mode = parse_mode(params["env_file_mode"])
    for name, mode in (("run_dir_mode", dir_mode), ("env_file_mode", file_mode)):
        if mode is None:
            raise StartRefused(
                msg=f"{name} {params[name]!r} is not an octal mode such as 0700", run_dir=run_dir
            )
    env_file = params["env_file"]
    if params["env_content"] is not None:
        env_file = env_file or os.path.join(run_dir, "nccl.env")
        inside = os.path.dirname(os.path.normpath(env_file)) == os.path.normpath(run_dir)
        if not inside or bad_file_name(os.path.basename(os.path.normpath(env_file))):
            raise StartRefused(
                msg=(
                    f"env_file {env_file} must be a file directly inside the run directory "
                    f"{run_dir} when env_content is given"
                ),
                run_dir=run_dir,
            )
    return dir_mode, file_mode, env_file  # type: ignore[return-value]


def prepare_run_dir(params: dict[str, Any]) -> tuple[bool, str | None]:
    """state=started, before anything runs: make the private run directory when it is missing
    (refusing one somebody else could control), write nccl.env from env_content.

    Returns (whether the directory was made now, the environment file to read or None).
    """
    run_dir = params["run_dir"]
    dir_mode, file_mode, env_file = check_start_params(params)
    problem = private_dir_problem(run_dir)
    if problem:
        raise StartRefused(msg=f"cannot use the run directory: {problem}", run_dir=run_dir)
    if os.path.exists(os.path.join(run_dir, PIDS_FILE)):
        raise StartRefused(
            msg=(
                f"{run_dir} already holds a run ({PIDS_FILE} exists); every run needs its own "
                f"run directory (a new nccl_run_id)"
            ),
            run_dir=run_dir,
        )
    try:
        created = make_private_dir(run_dir, dir_mode)
    except FileExistsError as exc:
        raise StartRefused(
            msg=f"cannot use the run directory: {exc} (it appeared while this module was making "
            "it); rerun with another run id",
            run_dir=run_dir,
        ) from None
    if params["env_content"] is not None:
        write_atomically(env_file, params["env_content"], file_mode)
    elif env_file is not None and not os.path.isfile(env_file):
        raise StartRefused(
            msg=(
                f"environment file {env_file} does not exist on this host; pass its text as "
                f"env_content (roles/launch does), or write it there first"
            ),
            env_file=env_file,
        )
    return created, env_file


def run_environment(params: dict[str, Any], env_file: str | None) -> dict[str, str]:
    """This process's environment, nccl.env, then the `environment` option, then the run tag."""
    env = dict(os.environ)
    if env_file is not None:
        text = Path(env_file).read_text(encoding="utf-8")
        try:
            env.update(parse_env_file(text, env_file))
        except ValueError as exc:
            raise StartRefused(
                msg=f"cannot read the environment file: {exc}; re-render it with "
                f"ansible-playbook playbooks/validate.yml --tags launch",
                env_file=env_file,
            ) from None
    env.update({str(k): str(v) for k, v in params["environment"].items()})
    env["NCCL_PREFLIGHT_RUN_DIR"] = str(params["run_dir"])
    return env


def wait_master_port(params: dict[str, Any]) -> None:
    """On node rank 0: wait until a previous run's store let go of MASTER_PORT, or fail."""
    master, port = params["master_addr"], params["master_port"]
    wait_s = params["port_wait_timeout"]
    if params["node_rank"] == 0 and wait_s > 0 and not wait_port_free(master, port, wait_s):
        raise StartRefused(
            msg=(
                f"{socket.gethostname()}: MASTER_PORT {port} on {master} is still in use after "
                f"{wait_s} s, so the rendezvous store cannot start. Find the holder with "
                f"`ss -ltnp 'sport = :{port}'` on this host and stop it, or choose another port: "
                f"-e nccl_master_port=<port>"
            ),
            master_addr=master,
            master_port=port,
        )


def start_run(params: dict[str, Any]) -> dict[str, Any]:
    """state=started with the module's validated options (``params``; ``script`` is set when a
    zipapp comes without one): -> the module's result once torchrun runs. StartRefused before
    torchrun runs. With ``warden``, all of it under a pass of the run's warden
    (node/run_warden.py): refused, with nothing started, once the warden ended the run."""
    try:
        with warden_pass(params["run_dir"], bool(params.get("warden"))):
            return _start_run(params)
    except WardenGone as exc:
        raise StartRefused(msg=str(exc), run_dir=params["run_dir"], warden_gone=True) from None


def _start_run(params: dict[str, Any]) -> dict[str, Any]:
    """:func:`start_run`'s work."""
    run_dir = Path(params["run_dir"])
    script = script_payload(params)
    created, env_file = prepare_run_dir(params)
    env = run_environment(params, env_file)
    if script is not None:
        write_atomically(params["script"], script, 0o600)
    if params["look_zipapp"]:  # the watch's looks run it without a module start
        look = base64.b64decode(params["look_zipapp"], validate=True)
        write_atomically(str(run_dir / LOOK_ZIPAPP), look, 0o600)
    wait_master_port(params)
    argv = build_argv(params)
    (run_dir / RESULTS_DIR).mkdir(exist_ok=True)
    bounds = (params["timeout"], params["kill_grace"], params["rank_offset"])
    warm = params["warm_dir"] and launch_in_holder(params["warm_dir"], argv, env, run_dir, *bounds)
    ready = warm or start_supervisor(argv, env, run_dir, *bounds)
    if "error" in ready:
        raise StartRefused(
            msg=(
                f"torchrun did not start on this host: {ready['error']} "
                f"(see {run_dir / TORCHRUN_LOG})"
            ),
            cmd=argv,
            run_dir=str(run_dir),
        )
    return {
        "changed": True,
        "run_dir_created": created,
        "env_file": env_file,
        "script": params["script"],
        "cmd": argv,
        "supervisor_pid": ready["supervisor_pid"],
        "torchrun_pid": ready["torchrun_pid"],
        "warm_start": bool(warm),
        "torchrun_rc": None,
        "timed_out": False,
        "stopped_by": None,
        "killed_pids": [],
        "launch_json": str(run_dir / LAUNCH_FILE),
    }


def main(argv: list[str]) -> int:
    """The program: one JSON line on stdin, ``{"params": <validated options>}``; prints the
    start's result, or its refusal (``failed``, ``msg``, details), as one JSON line. ``argv`` is
    unused (BOOT's arguments end with the run id)."""
    del argv
    request = json.loads(sys.stdin.readline())
    try:
        result = start_run(request["params"])
    except StartRefused as refused:
        result = {"failed": True, "msg": refused.msg, **refused.details}
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
