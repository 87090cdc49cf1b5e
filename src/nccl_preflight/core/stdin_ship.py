# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A node program sent on a command's stdin, for a node that has nothing of ours installed.

`python3 -c BOOT RUN_ID ARGS < stream`: the stream starts with one line, the byte count of a
zipapp, then the zipapp itself (:func:`stream_header`); BOOT (standard library only) reads
exactly that many bytes from fd 0, so what follows on stdin is left for the zipapp. It writes
the zipapp into `tempfile.mkdtemp(prefix="nccl-preflight-<run id>-")` (mode 0700), runs it with
the node's Python and removes the directory in a finally, also on SIGTERM/SIGINT/SIGHUP (which it
passes on to the zipapp first). Nothing is installed and nothing stays on the node.

Both front-ends send their node programs this way: the Slurm command's job steps (srun sends its
stdin to every task: slurm/ship.py) and the Ansible pre-flight's observation
(plugins/action/nccl_preflight_observe.py: node/observe_call.py without a module start).
"""

from __future__ import annotations

BOOT = r"""
import os, shutil, signal, subprocess, sys, tempfile
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
def stop(signum, frame):
    if child is not None and child.poll() is None:
        child.send_signal(signum)
        try:
            child.wait(1.0)
        except subprocess.TimeoutExpired:
            child.kill()
    raise SystemExit(128 + signum)
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, stop)
try:
    pyz = os.path.join(work, "nccl-preflight.pyz")
    with open(os.open(pyz, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(read_exactly(int(header)))
    child = subprocess.Popen([sys.executable, pyz] + sys.argv[2:])
    code = child.wait()
finally:
    shutil.rmtree(work, ignore_errors=True)
sys.exit(code)
"""


def stream_header(bundle: bytes) -> bytes:
    """What goes on the step's stdin before the bundle."""
    return f"{len(bundle)}\n".encode()
