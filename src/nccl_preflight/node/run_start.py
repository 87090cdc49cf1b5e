# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""How library/nccl_torchrun.py starts torchrun on a node: nccl.env, the command line, the port.

Standard library only: shipped to the nodes inside library/nccl_torchrun.py.
"""

from __future__ import annotations

import os
import shlex
import socket
import time
from typing import Any

from .supervisor import LOGS_DIR


def parse_env_file(text: str, path: str = "nccl.env") -> dict[str, str]:
    """KEY=value lines with shell-quoted values (optionally `export KEY=...`, # comments)."""
    env: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        words = shlex.split(line, comments=True)
        if words[:1] == ["export"]:
            words = words[1:]
        if not words:
            continue
        if len(words) != 1 or "=" not in words[0] or words[0].startswith("="):
            raise ValueError(f"{path}:{number}: expected KEY=value, got {line!r}")
        key, value = words[0].split("=", 1)
        env[key] = value
    return env


def build_argv(params: dict[str, Any]) -> list[str]:
    """python -m torch.distributed.run with static rendezvous, per-rank logs under logs/."""
    run_dir = params["run_dir"]
    return [
        params["python"],
        "-m",
        "torch.distributed.run",
        "--nnodes",
        str(params["nnodes"]),
        "--node-rank",
        str(params["node_rank"]),
        "--nproc-per-node",
        str(params["nproc_per_node"]),
        "--master-addr",
        str(params["master_addr"]),
        "--master-port",
        str(params["master_port"]),
        "--local-addr",
        str(params["local_addr"]),
        "--rdzv-id",
        str(params["rdzv_id"]),
        "--max-restarts",
        "0",
        "--log-dir",
        os.path.join(run_dir, LOGS_DIR),
        "--redirects",
        "3",
        params["script"],
        *[str(arg) for arg in params["script_args"]],
    ]


def port_in_use(host: str, port: int, timeout: float = 1.0) -> bool:
    """Something accepts TCP connections on host:port (as wait_for state=stopped looks)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_port_free(host: str, port: int, timeout: float, every: float = 0.2) -> bool:
    """True once nothing accepts connections on host:port; False after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while port_in_use(host, port):
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)
    return True
