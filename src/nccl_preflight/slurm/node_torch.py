# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""node-check's torch reading: ``python -c PYTHON_PROBE`` (node/parse.py), bounded.

The same probe as the Ansible path's (node/listener.py run_python_probe: the same answer, the
same words when it cannot run), run in node-check's own process group so that Slurm's killpg
and Ctrl-C reach it, and remembering whether it was killed at node-check's deadline: that is
node-check's own slowness (a loaded node, a cold page cache), which never drains a node
(slurm/node_check.py). Standard library only (it runs in the node bundle).
"""

from __future__ import annotations

import subprocess
from typing import Any

from nccl_preflight.node.parse import PYTHON_PROBE


class TorchReading:
    """A callable ``(python, timeout) -> {rc, stdout, stderr, error}`` (what node/facts.py
    gather takes through ``shared["wait"]``); ``timed_out`` says whether it was killed."""

    def __init__(self) -> None:
        self.timed_out = False

    def __call__(self, python: str, timeout: float) -> dict[str, Any]:
        try:
            done = subprocess.run(
                [python, "-c", PYTHON_PROBE],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=max(0.0, timeout),
                check=False,
            )
        except subprocess.TimeoutExpired:
            self.timed_out = True
            error = (
                f"{python} -c <probe> (import torch) did not finish within {timeout:.0f} s; "
                "it was killed"
            )
            return {"rc": None, "stdout": "", "stderr": "", "error": error}
        except OSError as exc:
            error = f"cannot run {python}: {exc.strerror or exc}"
            return {"rc": None, "stdout": "", "stderr": "", "error": error}
        return {
            "rc": done.returncode,
            "stdout": done.stdout[-20000:],
            "stderr": done.stderr[-2000:],
            "error": "",
        }
