# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The torch probe that becomes torchrun: one torch import per node instead of two.

Importing torch is the longest part of the pre-flight on a node (seconds of CPU), and torchrun's
own process imports it again at the launch. Where one process on the node lives from the
pre-flight to the launch (the Slurm front-end's run step, slurm/node_step.py), the probe is
started *warm*: ``python -c PYTHON_PROBE + WARM_TAIL READY`` prints the probe's JSON as the plain
probe does, marks READY, imports ``torch.distributed.run`` and waits on its stdin.

- stdin's end (or an empty line): it exits 0; nothing was launched.
- one JSON line ``{"cwd", "log", "env", "args"}`` (``go``): it becomes what
  ``python -m torch.distributed.run ARGS`` started in ``cwd`` would be: its streams to ``log``
  (appended), stdin from /dev/null, ``env`` (the variables the launch sets, nccl.env's) laid over
  its own environment, then ``sys.exit(torch.distributed.run.main())``, which is what the
  ``torchrun`` command runs: the same argument parsing, exit status and error report, its ranks
  started as fresh processes. (``runpy.run_module`` of the module already imported would run it
  a second time, and says so in torchrun.log: a RuntimeWarning, seen on the H100.)
  Its own environment is kept underneath, as the Python set it up: a wrapper script named as
  the Python (one that exports PYTHONPATH, say) reaches the ranks as in a cold start.

What differs from a cold start: torchrun's own process (the rendezvous store and the ranks'
parent; it runs no collective) imported torch under the environment of the step, not the ranks'
(nccl.env's variables reach every rank, which imports torch itself). The probe is started in its
own session, as the supervisor starts torchrun, so the supervisor ends its tree the same way.
Standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

READY_NAME = "python-probe.ready"

# Appended to PYTHON_PROBE (node/parse.py), whose last line printed the probe's JSON and whose
# ``torch`` is None when it could not be imported (then nothing is held: the probe just ends).
WARM_TAIL = r"""
sys.stdout.flush()
if torch is not None and len(sys.argv) > 1:
    import os
    open(sys.argv[1], "w").close()
    try:
        import torch.distributed.run
    except Exception:
        pass  # run_module below raises it again, as python -m would
    line = sys.stdin.readline()
    if line.strip():
        go = json.loads(line)
        os.chdir(go["cwd"])
        fd = os.open(go["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(fd, 0)
        os.close(fd)
        os.environ.update(go["env"])
        sys.argv = ["torchrun"] + go["args"]
        import torch.distributed.run
        sys.exit(torch.distributed.run.main())
"""


def warm_argv(python: str, probe: str, ready: str) -> list[str]:
    """The warm probe's command line: the probe's code with WARM_TAIL, READY's path."""
    return [python, "-c", probe + WARM_TAIL, ready]


def wait_ready(process: subprocess.Popen, ready: str, deadline: float) -> int | None:
    """Until the probe ended (-> its exit status) or marked READY (-> 0: its JSON is printed
    and it holds on); None at the deadline (monotonic)."""
    while True:
        rc = process.poll()
        if rc is not None:
            return rc
        if os.path.exists(ready):
            return 0
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            return process.wait(timeout=min(0.02, left))
        except subprocess.TimeoutExpired:
            continue


def held(process: subprocess.Popen | None, ready: str) -> bool:
    """The warm probe marked READY and still waits for its go."""
    return process is not None and process.poll() is None and os.path.exists(ready)


def go(process: subprocess.Popen, cwd: str, log: str, env: dict[str, str], args: list[str]) -> None:
    """Turn the held probe into torchrun with ``args`` (those after ``-m torch.distributed.run``),
    ``env`` laid over its own environment. OSError: it is gone (its stdin is closed)."""
    assert process.stdin is not None
    message = {"cwd": cwd, "log": log, "env": env, "args": args}
    process.stdin.write((json.dumps(message) + "\n").encode())
    process.stdin.close()


RELEASE_WAIT_S = 0.5


def release(process: subprocess.Popen | None, wait: float = RELEASE_WAIT_S) -> None:
    """No launch: end the held probe (stdin's end; killed when it does not end within ``wait``
    s: it may still be importing torch.distributed.run, and reads stdin only after)."""
    if process is None or process.poll() is not None:
        return
    try:
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=wait)
    except (OSError, subprocess.TimeoutExpired):
        process.kill()
        process.wait()
