# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A node program sent on a command's stdin, for a node that has nothing of ours installed.

`python3 -c BOOT RUN_ID ARGS < stream`: the stream starts with one line, the byte count of a
zipapp, then the zipapp itself (:func:`stream_header`); BOOT (standard library only) reads
exactly that many bytes from fd 0, so what follows on stdin is left for the zipapp. It writes
the zipapp into `tempfile.mkdtemp(prefix="nccl-preflight-<run id>-")` (mode 0700), runs it with
the node's Python and removes the directory in a finally, also on SIGTERM/SIGINT/SIGHUP (which it
passes on to the zipapp first). When whoever reads its output goes away (the SSH session of a
control machine that was interrupted, killed or cut off closed its end of the pipe) it sends
SIGHUP to the zipapp, kills it after BOOT_GONE_WAIT_S and removes the directory: a call whose
caller is gone ends at once. Nothing is installed and nothing stays on the node.

Both front-ends send their node programs this way: the Slurm command's job steps (srun sends its
stdin to every task: slurm/ship.py) and, without a module start, the Ansible pre-flight's
observation (node/observe_call.py) and torchrun's start (node/start_call.py), from their action
plugins (:func:`program_call`).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .zipapp import (
    cached_build,
    folder_sources,
    package_closure,
    user_cache_dir,
    with_bytecode,
    zip_bytes,
)

# The folder that holds the nccl_preflight package (src/).
SOURCE_ROOT = Path(__file__).resolve().parents[2]

# Seconds a program whose reader went away has, after BOOT's SIGHUP, before it is killed: room
# for the run's warden (node/run_warden.py) to end the run it watched.
BOOT_GONE_WAIT_S = 10

BOOT = rf"""
import os, select, shutil, signal, subprocess, sys, tempfile
GONE_WAIT_S = {BOOT_GONE_WAIT_S}
def read_exactly(n):
    parts = []
    while n > 0:
        chunk = os.read(0, min(n, 1 << 20))
        if not chunk:
            sys.exit("nccl-preflight: the bundle on stdin ended early")
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)
header = b""
while not header.endswith(b"\n"):
    byte = os.read(0, 1)
    if not byte:
        sys.exit("nccl-preflight: no bundle on stdin")
    header += byte
work = tempfile.mkdtemp(prefix="nccl-preflight-" + sys.argv[1] + "-")
child = None
def end_child(signum, wait):
    if child is not None and child.poll() is None:
        child.send_signal(signum)
        try:
            child.wait(wait)
        except subprocess.TimeoutExpired:
            child.kill()
def stop(signum, frame):
    end_child(signum, 1.0)
    raise SystemExit(128 + signum)
def wait_child():
    watch = select.poll()
    watch.register(1, 0)
    try:
        pidfd = os.pidfd_open(child.pid)
        watch.register(pidfd, select.POLLIN)
    except (AttributeError, OSError):
        pidfd = None
    while child.poll() is None:
        for fd, event in watch.poll(None if pidfd is not None else 200):
            if fd == 1 and event & select.POLLNVAL:
                watch.unregister(1)
            elif fd == 1 and event & (select.POLLERR | select.POLLHUP):
                end_child(signal.SIGHUP, GONE_WAIT_S)
    return child.wait()
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, stop)
try:
    pyz = os.path.join(work, "nccl-preflight.pyz")
    with open(os.open(pyz, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(read_exactly(int(header)))
    child = subprocess.Popen([sys.executable, pyz] + sys.argv[2:])
    code = wait_child()
finally:
    shutil.rmtree(work, ignore_errors=True)
sys.exit(code)
"""


def stream_header(bundle: bytes) -> bytes:
    """What goes on stdin before the bundle (BOOT reads the count, then the bundle)."""
    return f"{len(bundle)}\n".encode()


def program_main(entry: str) -> str:
    """The __main__ of a program's zipapp: ``entry``'s main() with the arguments after the
    zipapp's name, its return the exit status."""
    return f"import sys\n\nfrom {entry} import main\n\nsys.exit(main(sys.argv[1:]))\n"


def program_zipapp(entry: str, cache_dir: str | None) -> bytes:
    """The zipapp of the module ``entry`` (``nccl_preflight.node.<name>``) and the modules of the
    package it imports (core/zipapp.py package_closure), run by :func:`program_main`; built once
    and kept in ``cache_dir`` (core/zipapp.py user_cache_dir: between runs), keyed by the
    sources of ``entry``'s room, the package's __init__ and the __main__."""
    path = SOURCE_ROOT.joinpath(*entry.split(".")).with_suffix(".py")

    def build() -> bytes:
        files = {
            found.relative_to(SOURCE_ROOT).as_posix(): found.read_bytes()
            for found in package_closure(SOURCE_ROOT, entry)
        }
        files["__main__.py"] = program_main(entry).encode("utf-8")
        return zip_bytes(with_bytecode(files, f"{path.stem}.pyz"))

    sources = {
        **folder_sources(path),
        # What the zipapp holds beside the room: the package's __init__ and this __main__.
        "\0package": (SOURCE_ROOT / "nccl_preflight" / "__init__.py").read_bytes(),
        "\0main": program_main(entry).encode("utf-8"),
    }
    return cached_build(cache_dir, f"{path.stem}.pyz", sources, build)


def program_command(python: str, run_id: str, what: str) -> list[str]:
    """The argv that runs a program sent on stdin (BOOT) with the node's ``python``; ``run_id``
    names BOOT's temporary directory, ``what`` says in `ps` what runs."""
    return [python, "-c", BOOT, run_id, what]


def program_stream(zipapp: bytes, request: dict[str, Any]) -> bytes:
    """What goes on the program's stdin: the zipapp, then ``request`` as one JSON line."""
    return stream_header(zipapp) + zipapp + json.dumps(request).encode("utf-8") + b"\n"


def program_answer(stdout: str) -> dict[str, Any] | None:
    """A program's result: its last line of output, a JSON object; None otherwise (it could not
    run, or it died before it answered)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def program_call(
    execute: Callable[[str, bytes], dict[str, Any]],
    environment: str,
    python: str,
    run_id: str,
    entry: str,
    request: dict[str, Any],
    cache_dir: str | None,
) -> dict[str, Any] | None:
    """Run the node program ``entry`` with ``python`` through BOOT, ``request`` on its stdin;
    -> its answer, None when it could not run or answered no JSON object (the caller's module
    runs then). ``execute(command, stdin)`` runs a shell command on the node ({rc, stdout});
    ``environment`` goes before the command (the task's, as Ansible's shell plugin writes it,
    so that the program gets what a module call would)."""
    argv = program_command(python, run_id, entry.rsplit(".", 1)[-1])
    command = f"{environment} {shlex.join(argv)}" if environment else shlex.join(argv)
    ran = execute(command, program_stream(program_zipapp(entry, cache_dir), request))
    if ran.get("rc") != 0:
        return None
    return program_answer(str(ran.get("stdout") or ""))


# Interpreter settings (ansible_python_interpreter) that ask Ansible to discover the node's
# Python: no program can be started with them, so the module runs and finds it.
DISCOVERY = ("auto", "auto_legacy", "auto_silent", "auto_legacy_silent")


def named_python(args: dict[str, Any]) -> str:
    """The Python an action's O(program_python) names to start its node program with; "" when
    it names none: empty, or an interpreter-discovery setting (DISCOVERY)."""
    python = str(args.get("program_python") or "")
    return "" if python in DISCOVERY else python


def action_program_or_module(
    action: Any, validator: Any, args: dict[str, Any], task_vars: Any, entry: str, name: str
) -> dict[str, Any]:
    """An action plugin's answer (``action``: its ActionModule; ``args``: the task's options):
    the node program ``entry`` (:func:`action_program_call`) where O(program_python) names a
    Python (:func:`named_python`), else, or where the program did not answer, the task's module
    as it runs without the action. The program's call takes O(program_python) and O(run_id) out
    of ``args`` (the action's options: the module's spec takes them, the program's does not), so
    a module that runs after it gets the task's options less those; ``name`` names BOOT's
    directory when O(run_id) is empty."""
    python = named_python(args)
    answer = None
    if python:
        run_id = str(args.pop("run_id", "") or name)
        args.pop("program_python", None)
        answer = action_program_call(action, validator, args, python, run_id, entry)
    if answer is None:
        answer = action._execute_module(
            module_name=action._task.action, module_args=args, task_vars=task_vars
        )
    return answer


def action_program_call(
    action: Any, validator: Any, args: dict[str, Any], python: str, run_id: str, entry: str
) -> dict[str, Any] | None:
    """An action plugin's call (``action``: its ActionModule) of the node program ``entry`` in
    place of its module: ``args`` checked by ``validator`` (the module's ArgumentSpecValidator),
    then :func:`program_call` with the task's environment and check mode, through the task's
    own connection (become included). None where the module must run: options the spec
    refuses (the module names what is wrong), a program that could not run or answered no JSON.
    """
    checked = validator.validate(args)
    if checked.error_messages:
        return None
    request = {"params": checked.validated_parameters, "check_mode": bool(action._task.check_mode)}
    return program_call(
        lambda command, stdin: action._low_level_execute_command(
            command, sudoable=True, in_data=stdin
        ),
        action._compute_environment_string(),
        python,
        run_id,
        entry,
        request,
        user_cache_dir(),
    )
