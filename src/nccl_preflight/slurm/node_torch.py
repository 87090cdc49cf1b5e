# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""node-check's torch reading: ``python -c PYTHON_PROBE`` (node/parse.py), bounded, and reused
for a while.

The Ansible path's probe (node/listener.py probe_python: the same answer, the same words when
it cannot run), run in node-check's own process group so that Slurm's killpg
and Ctrl-C reach it, and remembering whether it was killed at node-check's deadline: that is
node-check's own slowness (a loaded node, a cold page cache), which never drains a node
(slurm/node_check.py).

Importing torch is nearly all of node-check's time and CPU (BENCHMARKS.md "node-check as
HealthCheckProgram"): at a short HealthCheckInterval, or a Prolog before every job, a node would
import torch every few seconds to read versions that do not change. So a reading that answered
(rc 0) is kept in the state directory (slurm/node_lock.py) with its time and the Python's
identity (its path, and the inode, size and mtime of the file it resolves to), and reused for
``max_age`` seconds (``--torch-max-age``; 0: always import) by node-check with the same Python;
a reading without a torch version (torch not importable, the probe failed or was killed) is
never kept. The GPUs themselves are read afresh every
time (nvidia-smi, sysfs): only torch's own view (its versions, the devices it saw) can be up to
``max_age`` old. Standard library only (it runs in the node bundle).
"""

from __future__ import annotations

import os
import time
from typing import Any

from nccl_preflight.node.listener import probe_python
from nccl_preflight.node.parse import python_facts_from_run
from nccl_preflight.node.processes import read_json, write_json

DEFAULT_MAX_AGE = 60.0  # seconds a torch reading is reused (at most one import a minute)


def python_identity(python: str) -> dict[str, Any] | None:
    """The Python's path and the inode, size and mtime of the file it resolves to; None when it
    cannot be read (then nothing is reused)."""
    try:
        info = os.stat(os.path.realpath(python))
    except OSError:
        return None
    return {"python": python, "ino": info.st_ino, "size": info.st_size, "mtime": info.st_mtime_ns}


def read_torch(python: str, run: dict[str, Any]) -> bool:
    """Whether the run read a torch version (only such a reading is kept)."""
    if run["rc"] != 0:
        return False
    return bool(
        python_facts_from_run(python, run["rc"], run["stdout"], run["stderr"]).get("torch_version")
    )


class TorchReading:
    """A callable ``(python, timeout) -> {rc, stdout, stderr, error}`` (what node/facts.py
    gather takes through ``shared["wait"]``). ``timed_out``: the probe was killed;
    ``reused_age``: the seconds since the reading it reused (None: it ran the probe)."""

    def __init__(self, keep: str | None = None, max_age: float = 0.0) -> None:
        self.keep, self.max_age = keep, max_age
        self.timed_out = False
        self.reused_age: float | None = None

    def _kept(self, identity: dict[str, Any] | None) -> dict[str, Any] | None:
        if not self.keep or self.max_age <= 0 or identity is None:
            return None
        try:
            doc = read_json(self.keep)
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict) or doc.get("identity") != identity:
            return None
        age = time.time() - float(doc.get("read") or 0)
        run = doc.get("run")
        if not (0 <= age <= self.max_age) or not isinstance(run, dict):
            return None
        self.reused_age = age
        return run

    def __call__(self, python: str, timeout: float) -> dict[str, Any]:
        identity = python_identity(python)
        kept = self._kept(identity)
        if kept is not None:
            return kept
        run, self.timed_out = probe_python(python, timeout)
        if self.keep and identity is not None and read_torch(python, run):
            write_json(self.keep, {"identity": identity, "read": time.time(), "run": run})
        return run
