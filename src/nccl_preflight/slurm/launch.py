# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The ranks under Slurm: one launch step, torchrun on every node (node_step.launch), watched
from the control machine.

Each node runs torchrun in the foreground under node/supervisor.py's Supervision (bounded by
nccl_run_timeout, its tree ended on a stop), with the environment the Ansible path writes into
nccl.env (roles/nccl_env/templates/nccl.env.j2) and the rank script's arguments of roles/launch.
The control machine reads each node's records: "progress" (printed), then "results" (the gzip tar
of node/run_collect.pack_results, written into reports/<run-id>/<node>/). When a node's run ended
with a rank killed by a signal or was stopped, every other node is told to stop at once with the
reason core/run_watch.failure_elsewhere words, as the Ansible path's watch does.
"""

from __future__ import annotations

import base64
import io
import json
import queue
import tarfile
import time
from pathlib import Path
from typing import Any

from ..core.run_watch import adopted_stop, failure_elsewhere, progress_line
from ..node.files import write_atomically
from ..node.run_collect import COLLECTED_NAME
from .step import Step

KILL_GRACE_S = 5  # launch_kill_grace
MARGIN_S = 30  # FINISH_MARGIN_S: the step's bound beyond timeout + grace


def rank_env(config: dict[str, Any], env: dict[str, Any], row: dict[str, Any]) -> dict[str, str]:
    """nccl.env of one node (roles/nccl_env/templates/nccl.env.j2), without the run directory's
    NCCL_DEBUG_FILE (the node puts it into its own)."""
    extra = {str(k): str(v) for k, v in (config.get("nccl_extra_env") or {}).items()}
    out = {
        "NCCL_SOCKET_IFNAME": env["ifname"],
        "GLOO_SOCKET_IFNAME": env["ifname"],
        "MASTER_ADDR": env["master_addr"],
        "MASTER_PORT": str(env["master_port"]),
        "NNODES": str(env["nnodes"]),
        "NODE_RANK": str(row["node_rank"]),
        "NPROC_PER_NODE": str(row["nproc_per_node"]),
    }
    if env["backend"] == "hccl":
        out.update({"HCCL_SOCKET_IFNAME": env["ifname"], "HCCL_IF_IP": env["address"]})
    debug = str(extra.get("NCCL_DEBUG", config.get("nccl_debug") or "INFO"))
    out["NCCL_DEBUG"] = debug
    subsys = config.get("nccl_debug_subsys")
    if debug.upper() in ("INFO", "TRACE") and subsys and "NCCL_DEBUG_SUBSYS" not in extra:
        out["NCCL_DEBUG_SUBSYS"] = str(subsys)
    return {**out, **extra}


def check_timeout(run_timeout: int) -> int:
    """launch_check_timeout: the ranks' own watchdog, a little under nccl_run_timeout."""
    return run_timeout - max(5, int(run_timeout * 0.1))


def unpack(archive: bytes, dest: Path) -> list[str]:
    """The node's files into dest: only flat, known result files (as roles/launch's plugin)."""
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar:
            stream = tar.extractfile(member) if member.isfile() else None
            if stream is None or not COLLECTED_NAME.match(member.name):
                raise ValueError(f"unexpected member {member.name!r} in a node's results")
            write_atomically(dest / member.name, stream.read(), 0o644)
            written.append(member.name)
    return written


class Watch:
    """The launch step's records, by node: progress lines, results, stops elsewhere."""

    def __init__(self, step: Step, run_dir: Path, layout: dict[str, Any], say: Any) -> None:
        self.step, self.run_dir, self.layout, self.say = step, run_dir, layout, say
        self.states: dict[str, dict[str, Any]] = {}
        self.shown: dict[str, str] = {}
        self.stop_sent = False

    def progress(self, node: str, record: dict[str, Any]) -> None:
        ranks = self.layout["by_host"][node]["ranks"]
        line, key = progress_line(node, ranks, record.get("progress") or [])
        if self.shown.get(node) != key:
            self.shown[node] = key
            self.say(line)

    def results(self, node: str, record: dict[str, Any]) -> None:
        dest = self.run_dir / node
        unpack(base64.b64decode(record.get("archive") or ""), dest)
        launch_path = dest / "launch.json"
        launch = json.loads(launch_path.read_text()) if launch_path.is_file() else {}
        self.states[node] = {"ended": launch, "updated": time.time()}
        if self.stop_sent:
            return
        for other in self.layout["by_host"]:
            if other in self.states:
                continue
            reason = failure_elsewhere(other, self.states)
            if reason:
                self.say(f"{other}: ending the run: {reason}")
                self.step.say({"stop": reason, "details": adopted_stop(reason, self.states)})
                self.stop_sent = True
                return

    def run(self, nodes: list[str], bound: float) -> list[str]:
        """Until every node sent its results or the bound; -> the nodes that sent none."""
        deadline = time.monotonic() + bound
        while len(self.states) < len(nodes):
            try:
                record = self.step.next_record(max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if record is None:
                break
            node = record.get("node")
            if node not in nodes:
                continue
            if record.get("kind") == "progress":
                self.progress(node, record)
            elif record.get("kind") == "results":
                self.results(node, record)
            if time.monotonic() > deadline:
                break
        return [n for n in nodes if n not in self.states]
