# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The ranks' NCCL logs (NCCL_DEBUG_FILE=<run dir>/results/nccl.%p.log) come back named by rank:
library/nccl_torchrun.py packs them as nccl-rank-<R>.log, the launch role's action plugin
unpacks them beside rank-<R>.json."""

from __future__ import annotations

import base64
import io
import json
import tarfile
from pathlib import Path

from ansible.module_utils.nccl_preflight.node import run_collect as nccl_run_collect

from tests.plugin_files import load_plugin

ROOT = Path(__file__).resolve().parents[3]
LOG = ROOT / "tests" / "fixtures" / "nccl_logs" / "roce-dgxh100.log"


def load_action():
    return load_plugin(
        "roles/launch/action_plugins/nccl_torchrun.py", "launch_action_nccl_torchrun_logs"
    )


def run_dir_with_logs(tmp_path: Path) -> Path:
    results = tmp_path / "run" / "results"
    results.mkdir(parents=True)
    for rank, pid in ((4, 460770), (5, 460771)):
        (results / f"rank-{rank}.json").write_text(json.dumps({"global_rank": rank, "pid": pid}))
    (results / "nccl.460770.log").write_bytes(LOG.read_bytes())
    (results / "nccl.460771.log").write_text("NCCL version 2.19.3+cuda12.3\n")
    # a process that wrote no rank result (crashed before check-in): kept under its pid
    (results / "nccl.999.log").write_text("x\n")
    # not NCCL's file name: never collected
    (results / "nccl.notapid.log").write_text("x\n")
    return tmp_path / "run"


def test_names_by_the_pid_in_the_rank_result(tmp_path: Path) -> None:
    run_dir = run_dir_with_logs(tmp_path)
    names = nccl_run_collect.nccl_log_names(run_dir / "results")
    assert sorted(names.values()) == ["nccl-pid-999.log", "nccl-rank-4.log", "nccl-rank-5.log"]


def test_packed_and_unpacked_beside_the_rank_results(tmp_path: Path) -> None:
    run_dir = run_dir_with_logs(tmp_path)
    archive, names, truncated = nccl_run_collect.pack_results(run_dir, 100)
    assert {"nccl-rank-4.log", "nccl-rank-5.log", "nccl-pid-999.log"} <= set(names)
    assert "nccl-rank-4.log" in truncated  # the collect bound applies to NCCL logs too
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        assert all("/" not in m.name for m in tar)
    dest = tmp_path / "reports" / "r1" / "node1"
    written = load_action().unpack_results(base64.b64decode(base64.b64encode(archive)), dest)
    assert (dest / "nccl-rank-5.log").read_text() == "NCCL version 2.19.3+cuda12.3\n"
    assert (dest / "nccl-rank-4.log").read_text().endswith("Using network IB\n")
    assert str(dest / "nccl-pid-999.log") in written
    assert not (dest / "nccl.notapid.log").exists()
