# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""node-check's options, exit statuses and the small helpers both its command
(slurm/node_command.py: the lock, the guard) and its check (slurm/node_check.py) use; standard
library only, so that a busy node-check imports nothing heavy."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from nccl_preflight.core.exit_classes import NODE_CHECK

# the codes' one home is core/exit_classes.py (README "Exit codes", nccl-preflight --help)
HEALTHY, FAILED, REFUSED, UNFINISHED = (c.code for c in NODE_CHECK)
DEFAULT_TIMEOUT = 50.0  # below the 60 s after which Slurm kills a HealthCheckProgram
# SLURM_SCRIPT_CONTEXT of the programs whose non-zero exit makes Slurm drain the node itself
DRAINING_CONTEXTS = frozenset({"prolog_slurmd", "epilog_slurmd"})
NO_FABRIC = (
    "nccl_socket_ifname and nccl_fabric_cidr are both empty: a node check has no master to "
    "route to, so it cannot tell the fabric interface; set nccl_fabric_cidr (or "
    "nccl_socket_ifname) in the config"
)


class NodeCheckRefused(ValueError):
    """The configuration cannot drive a node check (exit 2, nothing drained)."""


@dataclass
class NodeCheckOptions:
    """node-check's command line (slurm/cli.py checks each value's range)."""

    config: str
    drain: bool = False
    json: bool = False
    timeout: float = DEFAULT_TIMEOUT
    state_dir: str = ""  # empty: slurm/node_lock.py default_state_dir()
    torch_max_age: float = 0.0  # seconds a torch reading is reused (slurm/node_torch.py)
    textfile: str = ""  # node_exporter's textfile directory (core/metrics.py); empty: none


def one_line(text: Any) -> str:
    """``text`` on one line: line breaks and tabs as spaces, other control characters gone."""
    flat = " ".join(str(text).split("\n"))
    flat = flat.replace("\r", " ").replace("\t", " ")
    return "".join(c for c in flat if c.isprintable()).strip()


def node_name() -> str:
    """This node's name as Slurm knows it (SLURMD_NODENAME), else its short host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def require_fabric(config: dict[str, Any]) -> None:
    """NodeCheckRefused when the config names no fabric (nothing to choose the interface by)."""
    if not config.get("nccl_socket_ifname") and not config.get("nccl_fabric_cidr"):
        raise NodeCheckRefused(NO_FABRIC)


def unfinished_status() -> int:
    """UNFINISHED, or 0 as a Prolog or Epilog (Slurm drains a node whose one fails)."""
    return HEALTHY if os.environ.get("SLURM_SCRIPT_CONTEXT") in DRAINING_CONTEXTS else UNFINISHED


def status_of(verdict: str) -> int:
    """The exit status of a verdict word (healthy, failed, unfinished) here and now."""
    return {"failed": FAILED, "unfinished": unfinished_status()}.get(verdict, HEALTHY)
