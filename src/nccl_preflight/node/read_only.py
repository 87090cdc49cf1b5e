# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What the pre-flight does on a node when it may only read (``ansible-playbook --check``).

Named for what it does, not for Ansible's word: "check" in this project is the rank script
(files/nccl_check.py) and a pre-flight result (core/preflight/result.py).

The torch probe runs in the foreground (``python -B``: no bytecode written) instead of beside
listeners, and the steps that would change the node are described instead of done.
"""

from __future__ import annotations

import subprocess
from typing import Any

from .parse import (
    PYTHON_PROBE,
    empty_python_facts,
    python_facts_from_run,
)


def probe_python_read_only(python: str, timeout: float) -> dict[str, Any]:
    """The python fact (as nccl_facts returns it) from ``python -B -c <probe>``, run here."""
    try:
        run = subprocess.run(
            [python, "-B", "-c", PYTHON_PROBE],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except OSError as exc:
        return empty_python_facts(f"cannot run {python}: {exc.strerror or exc}", python)
    except subprocess.TimeoutExpired:
        return empty_python_facts(
            f"{python} -c <probe> (import torch) did not finish in {timeout:g} s", python
        )
    return python_facts_from_run(python, run.returncode, run.stdout, run.stderr[-2000:])


def would_start(params: dict[str, Any]) -> str:
    """What state=started would change on the node, in one sentence."""
    steps = []
    if params.get("run_dir"):
        steps.append(f"make the run directory {params['run_dir']} (mode {params['run_dir_mode']})")
    if params.get("lock"):
        steps.append(f"take the run lock {params['lock']['path']}")
    steps += [
        f"listen on {s['address']}:{s['port'] or '<an ephemeral port>'} ({s['name']})"
        for s in params.get("listeners") or []
    ]
    if params.get("python"):
        steps.append(f"run the torch probe with {params['python']} beside them (done, read only)")
    return "check mode: would " + ("; ".join(steps) if steps else "do nothing")
