# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The rank script on a node with torch and nothing else (requirements-node.txt): numpy cannot
be imported, so nothing may pickle through it (all_gather_object and its kin, tensor.numpy()).
Issue 25: every rank crashed in the pairwise set-up with "Numpy is not available".
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
    by_name,
    env_without_numpy,
    records,
    torchrun_argv,
)
from tests.ports import free_port

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


def test_pairwise_rounds_run_where_numpy_cannot_be_imported(tmp_path: Path) -> None:
    port, nodes = free_port(), 3
    procs = []
    for rank in range(nodes):
        argv = [sys.executable, str(SCRIPT), "--init-method", f"tcp://127.0.0.1:{port}"]
        argv += ["--rank", str(rank), "--world-size", str(nodes), "--out-dir", str(tmp_path)]
        argv += ["--timeout", "60", "--tests", "all_reduce_sum", "--pairwise", "always"]
        argv += ["--pair-bytes", "64K", "--pair-iters", "2"]
        env = {**env_without_numpy(tmp_path), "NODE_RANK": str(rank), "LOCAL_WORLD_SIZE": "1"}
        procs.append(
            subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
            )
        )
    outputs = [p.communicate(timeout=RUN_LIMIT_S)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * nodes, outputs
    assert not any("Numpy is not available" in out for out in outputs)
    found = records(tmp_path)
    assert sorted(found) == list(range(nodes))
    for record in found.values():
        pairwise = by_name(record)["pairwise"]
        assert pairwise["status"] == "passed", pairwise
        pairs = {(r["node"], r["peer_node"]) for r in pairwise["details"]["rows"]}
        assert len(pairs) == nodes - 1  # each node met both others
    assert "# pairwise, 3 nodes" in outputs[0]


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
