# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What library/nccl_torchrun.py brings back from a node: one flat gzip tar of a run's results.

The files are those docs/design.md lists under ``reports/<run-id>/<host>/``; the action plugin of
roles/launch accepts exactly these names when it unpacks the archive on the control machine.
Standard library only: shipped to the nodes inside library/nccl_torchrun.py.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from pathlib import Path

from .processes import read_tail
from .supervisor import LAUNCH_FILE, RESULTS_DIR, TORCHRUN_LOG

# The files a run leaves for the control machine (docs/design.md, reports/<run-id>/<host>/).
COLLECTED_NAME = re.compile(
    r"^(rank-\d+\.(json|log)|torchrun\.log|launch\.json|nccl-(rank|pid)-\d+\.log)$"
)
# NCCL_DEBUG_FILE of the ranks (core/env_file.py debug_file): results/nccl.<pid>.log.
NCCL_DEBUG_LOG = re.compile(r"^nccl\.(\d+)\.log$")


def nccl_log_names(results: Path) -> dict[Path, str]:
    """results/nccl.<pid>.log -> nccl-rank-<R>.log (the rank whose rank-<R>.json has that pid),
    else nccl-pid-<pid>.log."""
    rank_of: dict[int, int] = {}
    for path in results.glob("rank-*.json"):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            rank_of[int(doc["pid"])] = int(doc["global_rank"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    names = {}
    for path in sorted(results.glob("nccl.*.log")):
        match = NCCL_DEBUG_LOG.match(path.name)
        if match:
            pid = int(match.group(1))
            names[path] = (
                f"nccl-rank-{rank_of[pid]}.log" if pid in rank_of else f"nccl-pid-{pid}.log"
            )
    return names


def pack_results(run_dir: Path, log_max_bytes: int) -> tuple[bytes, list[str], list[str]]:
    """A gzip tar of results/rank-*.{json,log}, torchrun.log, launch.json and the ranks' NCCL
    logs (nccl-rank-<R>.log), flat; -> (archive, names, names of the logs whose end only was
    kept)."""
    results = run_dir / RESULTS_DIR
    paths = sorted(results.glob("rank-*.json")) + sorted(results.glob("rank-*.log"))
    paths += [p for p in (run_dir / TORCHRUN_LOG, run_dir / LAUNCH_FILE) if p.is_file()]
    arcnames = nccl_log_names(results) if results.is_dir() else {}
    paths += list(arcnames)
    names: list[str] = []
    truncated: list[str] = []
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        for path in paths:
            name = arcnames.get(path, path.name)
            if not path.is_file() or not COLLECTED_NAME.match(name):
                continue
            if path.suffix == ".log":
                data, cut = read_tail(path, log_max_bytes)
            else:
                data, cut = path.read_bytes(), False
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = int(path.stat().st_mtime)
            tar.addfile(info, io.BytesIO(data))
            names.append(name)
            if cut:
                truncated.append(name)
    return buffer.getvalue(), names, truncated
