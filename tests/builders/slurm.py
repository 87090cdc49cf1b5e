# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The slurm command's options as a user gives them (refused ones with exit 12) and the watch's
progress and results of a run under Slurm."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from nccl_preflight.core.run_watch import watch_hosts
from nccl_preflight.slurm.launch import Watch
from tests.playbook_run import ROOT

CPU = {"nccl_backend": "gloo", "nccl_require_gpu": False}


def command(
    tmp_path: Path, *argv: str, env: dict[str, str] | None = None, **config: Any
) -> subprocess.CompletedProcess[str]:
    """bin/nccl-preflight slurm with a --config of ``config`` (CPU run), ``env`` over a copy of
    this environment without any SLURM_/SALLOC_ variable."""
    cfg = tmp_path / "nccl.yml"
    cfg.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in {**CPU, **config}.items()))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SALLOC_"))}
    argv_full = [sys.executable, str(ROOT / "bin" / "nccl-preflight"), "slurm"]
    return subprocess.run(
        [*argv_full, "--config", str(cfg), "--report-root", str(tmp_path / "r"), *argv],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=120,
        check=False,
    )


def refused(done: subprocess.CompletedProcess[str]) -> str:
    """The one line of a refusal (exit 12, nothing on stdout, no traceback)."""
    assert done.returncode == 12, done.stdout + done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.splitlines()[-1:]
    return line


def progress(node: str, rank: int, test: str, size: int, iface: str = "up") -> dict[str, Any]:
    entry = {
        "rank": rank,
        "status": "running",
        "test": test,
        "size": size,
        "index": 5,
        "count": 9,
        "age_s": 0.0,
    }
    return {
        "kind": "progress",
        "node": node,
        "progress": [entry],
        "interface": {"ifname": "fab0", "state": iface, "carrier": iface == "up"},
    }


def results(node: str, launch: dict[str, Any]) -> dict[str, Any]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = json.dumps(launch).encode()
        info = tarfile.TarInfo("launch.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return {"kind": "results", "node": node, "archive": base64.b64encode(buf.getvalue()).decode()}


class FakeStep:
    """The records a launch step would bring, and what the watch said to every node."""

    def __init__(self) -> None:
        self.said: list[dict[str, Any]] = []

    def say(self, message: dict[str, Any]) -> None:
        self.said.append(message)


LAYOUT = {
    "hosts": [{"host": "a", "ranks": [0]}, {"host": "b", "ranks": [1]}],
    "by_host": {"a": {"ranks": [0]}, "b": {"ranks": [1]}},
}
ENV = {
    "a": {"ifname": "fab0", "address": "10.0.0.1", "master_port": 29500},
    "b": {"ifname": "fab0", "address": "10.0.0.2", "master_port": 29500},
}
FACTS = {n: {"interfaces": {"fab0": {"state": "UP"}}} for n in "ab"}


def make_watch(tmp_path: Path, shown: list[str]) -> tuple[Watch, FakeStep]:
    step = FakeStep()
    hosts = watch_hosts(LAYOUT, ENV, FACTS)
    return Watch(step, tmp_path, hosts, 30.0, shown.append), step  # type: ignore[arg-type]
