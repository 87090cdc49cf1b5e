# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The rank script on a node with torch and nothing else (requirements-node.txt): numpy cannot
be imported, so nothing may pickle through it (all_gather_object and its kin, tensor.numpy()).
Issue 25: every rank crashed in the pairwise set-up with "Numpy is not available". (The pairwise
rounds themselves on nodes without numpy: test_pairwise_lab's healthy run, on the lab's nodes,
whose Python has torch and nothing else.)
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.check.json_gather_worker import sent_by
from tests.check.support import (
    RUN_LIMIT_S,
    SCRIPT,
    env_without_numpy,
    torchrun_argv,
)

WORKER = Path(__file__).with_name("json_gather_worker.py")

# Calls that need numpy in torch 2.13: the object collectives pickle through it.
NEEDS_NUMPY = re.compile(
    r"\b(all_gather_object|broadcast_object_list|gather_object|scatter_object_list"
    r"|send_object_list|recv_object_list|from_numpy|numpy)\(|^\s*(import|from) numpy\b"
)


def test_all_gather_json_gives_every_rank_every_object_in_rank_order(tmp_path: Path) -> None:
    run = subprocess.run(
        torchrun_argv(3, WORKER, str(tmp_path)),
        capture_output=True,
        text=True,
        env=env_without_numpy(tmp_path),
        timeout=RUN_LIMIT_S,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    want = [json.loads(json.dumps(sent_by(r))) for r in range(3)]  # tuples come back as lists
    for rank in range(3):
        got = json.loads((tmp_path / f"gather-{rank}.json").read_text())
        assert got["numpy"] is False  # the node of the issue: no numpy here
        assert "Numpy is not available" in got["object_collective"]  # what crashed every rank
        assert got["everyone"] == want


def test_the_rank_script_calls_nothing_that_needs_numpy() -> None:
    found = [
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted(SCRIPT.parent.glob("nccl_check*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if NEEDS_NUMPY.search(line) and not line.lstrip().startswith("#")
    ]
    assert found == []


def test_the_numpy_blocker_blocks(tmp_path: Path) -> None:
    """The environment the tests above run in: `import numpy` fails, torch still imports."""
    code = "import torch\ntry:\n import numpy\nexcept ImportError as e:\n print('blocked', e)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env_without_numpy(tmp_path),
        timeout=RUN_LIMIT_S,
        check=True,
    )
    assert out.stdout.startswith("blocked numpy is blocked here"), out.stdout
