# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Run files/nccl_check.py for real: under torchrun --standalone, or one process per rank."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "files" / "nccl_check.py"
# Small and quick on 2 CPU cores; --timeout bounds every phase, so nothing can hang the suite.
FAST = ["--max-bytes", "4K", "--factor", "4", "--iters", "2", "--warmup", "1"]
TIMEOUT_S = 20
# The wall clock a whole run may take: start-up (importing torch) plus the phases.
RUN_LIMIT_S = 150


def load_script() -> ModuleType:
    """files/nccl_check.py as a module, so tests use the script's own functions; files/ goes on
    sys.path, as the script's directory does when it runs, so its nccl_check_* modules import."""
    if str(SCRIPT.parent) not in sys.path:
        sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("nccl_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("nccl_check", module)
    spec.loader.exec_module(module)
    return sys.modules["nccl_check"]


def load_part(name: str) -> ModuleType:
    """One of the script's own modules (files/nccl_check_<part>.py), the copy the script uses."""
    load_script()
    return importlib.import_module(name)


def env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def env_without_numpy(tmp: Path) -> dict[str, str]:
    """env() for a Python where `import numpy` fails, as on a node with torch and nothing else
    (requirements-node.txt): a numpy.py that raises goes first on PYTHONPATH."""
    blocker = tmp / "no-numpy"
    blocker.mkdir(exist_ok=True)
    (blocker / "numpy.py").write_text(
        'raise ModuleNotFoundError("numpy is blocked here: a node has torch and the '
        'standard library")\n'
    )
    path = os.pathsep.join(filter(None, [str(blocker), os.environ.get("PYTHONPATH", "")]))
    return {**env(), "PYTHONPATH": path}


def torchrun_argv(nproc: int, script: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "--monitor_interval=0.2",
        str(script),
        *args,
    ]


def torchrun(nproc: int, *args: str, script: Path = SCRIPT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        torchrun_argv(nproc, script, *args),
        capture_output=True,
        text=True,
        env=env(),
        timeout=RUN_LIMIT_S,
        check=False,
    )


def start_rank(init_method: str, rank: int, world_size: int, *args: str) -> subprocess.Popen[str]:
    """One rank without torchrun (--init-method tcp://... or file://...)."""
    argv = [sys.executable, str(SCRIPT), "--init-method", init_method, "--rank", str(rank)]
    argv += ["--world-size", str(world_size), *args]
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env()
    )


def records(out_dir: Path) -> dict[int, dict[str, Any]]:
    """rank -> its rank-<R>.json."""
    return {
        int(path.stem.removeprefix("rank-")): json.loads(path.read_text())
        for path in sorted(out_dir.glob("rank-*.json"))
    }


def by_name(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in record["tests"]}


def current_test(path: Path) -> str | None:
    """The record's current_test, or None while the file does not exist yet."""
    try:
        return json.loads(path.read_text())["current_test"]
    except (OSError, ValueError):
        return None


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
