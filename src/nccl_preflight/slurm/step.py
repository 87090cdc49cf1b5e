# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""One job step of the node program on every node of the allocation, from the control machine.

`srun --jobid J -N n --ntasks-per-node=1 --nodelist ... python3 -c BOOT RUN_ID node-step WHAT`,
its stdin the bundle (ship.py; slurm/bundle.py builds it), the step's settings (one line: what
every node shares, once, and per node only what differs: ship.shared_and_own) and then the
control machine's messages, its stdout read line by line into records (each names its node,
SLURMD_NODENAME; ship.frame keeps every line short, since srun interleaves the pieces of long
lines of several tasks). A node whose task ended (srun's "task N: Exited ..." on its stderr) is
no longer waited for. srun runs in its own session: a Ctrl-C of the command reaches the command
alone, which ends its steps itself (end()).
"""

from __future__ import annotations

import contextlib
import json
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from typing import Any

from ..core.stdin_ship import BOOT, stream_header
from .ship import Unframer, settings_line

# After stdin's end the nodes end their runs (the supervisor's kill grace, 5 s), send their
# results and remove their directories; only then SIGTERM to srun.
END_GRACE_S = 20.0
# The same when a node of the step is cut off (its task never ends, so neither does srun): the
# nodes that answer sent their results and end at once; srun is ended soon after.
LOST_END_GRACE_S = 3.0
NODE_STEP = "node-step"  # the bundle's __main__ runs slurm/node_step.py main for it
ENDED = "task ended"  # the record collect() gets when srun says a node's task ended
# Each record's key for the control machine's time.time() when it read the record's last line
# (observe.py node_clocks: the clock check).
RECEIVED = "received_at"


class Step:
    """A running step: records() yields its records, say() broadcasts a message."""

    def __init__(
        self,
        job_id: str,
        nodes: list[str],
        python: str,
        run_id: str,
        what: str,
        settings: dict[str, Any],
        bundle: bytes,
        env: Mapping[str, str],
    ) -> None:
        """``settings``: ship.shared_and_own's document (every node takes its own part)."""
        self.nodes = nodes
        self.ended: dict[str, str] = {}  # node -> srun's line saying its task ended
        self.proc = subprocess.Popen(
            step_argv(job_id, nodes, python, run_id, what),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            start_new_session=True,
        )
        self.queue: queue.Queue = queue.Queue()
        self.text: list[str] = []
        self.errors: list[str] = []
        self._readers = [
            threading.Thread(target=self._read_out, daemon=True),
            threading.Thread(target=self._read_err, daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):  # srun gone at once: its stderr says why
            self.proc.stdin.write(step_input(bundle, settings))
            self.proc.stdin.flush()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        unframer = Unframer()
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", errors="replace")
            record = unframer.line(line)
            if record is False:
                self.text.append(line.rstrip("\n"))
            elif record is not None:
                record[RECEIVED] = time.time()
                self.queue.put(record)
        self.queue.put(None)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            self.errors.append(line)
            for node in ended_nodes(line, self.nodes):
                if node not in self.ended:
                    self.ended[node] = line
                    self.queue.put({"kind": ENDED, "node": node, "line": line})

    def next_record(self, timeout: float | None) -> dict[str, Any] | None:
        """The next record; None when the step's output ended. queue.Empty after timeout."""
        return self.queue.get(timeout=timeout)

    def say(self, message: dict[str, Any]) -> None:
        """One message to every node (srun sends its stdin to every task)."""
        if self.proc.stdin is None or self.proc.stdin.closed:
            return
        with contextlib.suppress(OSError):
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()

    def close_input(self) -> None:
        """End of the messages: a node still running ends its run and cleans up."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        for reader in self._readers:
            reader.join(5)
        return rc

    def end(self, grace: float = END_GRACE_S) -> int | None:
        """Stop the step: stdin's end first (the nodes clean up), then SIGTERM to srun (it
        passes it to every task), then SIGKILL."""
        self.close_input()
        rc = self.wait(grace)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if rc is not None:
                return rc
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)
            rc = self.wait(grace)
        return rc

    def diagnostics(self) -> str:
        """The step's own output (srun's messages, tracebacks), for an error message."""
        return "\n".join([*self.errors[-20:], *self.text[-20:]]).strip()


def collect(step: Step, nodes: list[str], kind: str, deadline: float) -> dict[str, dict]:
    """Each node's first record of ``kind`` until every node sent one or its task ended
    (step.ended: srun said so), the output ended or the deadline passed."""
    found: dict[str, dict] = {}
    while len(found) + len(set(step.ended).intersection(nodes).difference(found)) < len(nodes):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            record = step.next_record(left)
        except queue.Empty:
            break
        if record is None:
            break
        if record.get("kind") == kind and record.get("node") in nodes:
            found.setdefault(record["node"], record)
    return found


def step_argv(job_id: str, nodes: list[str], python: str, run_id: str, what: str) -> list[str]:
    """srun's command line: the settings are not on it (step_input), so only the node list
    grows with the nodes (about 15 bytes a node)."""
    return [
        "srun",
        f"--jobid={job_id}",
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes)}",
        "--ntasks-per-node=1",
        f"--nodelist={','.join(nodes)}",
        "--kill-on-bad-exit=0",
        f"--job-name=nccl-preflight-{what}",
        python,
        "-c",
        BOOT,
        run_id,
        NODE_STEP,
        what,
    ]


def step_input(bundle: bytes, settings: dict[str, Any]) -> bytes:
    """What the step's stdin starts with: the bundle, then the settings' one line."""
    return stream_header(bundle) + bundle + settings_line(settings)


# srun's words for a task that ended (Slurm 22.05 src/plugins/launch/slurm/launch_slurm.c
# _task_finish): "srun: error: HOSTS: task(s) IDS: Exited with exit code N" or a signal's name.
TASK_ENDED = re.compile(r"^srun: error: (?P<hosts>\S+): tasks? [0-9,\-]+: (?P<how>.+)$")


def ended_nodes(line: str, nodes: list[str]) -> list[str]:
    """The nodes of the step that srun's stderr ``line`` says their task ended (a hostlist such
    as h[1-3,5] expanded)."""
    match = TASK_ENDED.match(line.strip())
    if not match:
        return []
    named = set(expand_hostlist(match["hosts"]))
    return [n for n in nodes if n in named]


def expand_hostlist(text: str) -> list[str]:
    """Slurm's hostlist ("a1,b[01-03,7]x") as names; one bracket group per name."""
    names: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,]*)?|\[[^\]]*\][^,]*", text):
        group = re.fullmatch(r"(?P<head>[^\[]*)\[(?P<ranges>[^\]]*)\](?P<tail>.*)", part)
        if group is None:
            names.append(part)
            continue
        for item in group["ranges"].split(","):
            low, _, high = item.partition("-")
            if not high:
                names.append(f"{group['head']}{low}{group['tail']}")
                continue
            if not (low.isdigit() and high.isdigit()):
                continue
            for number in range(int(low), int(high) + 1):
                names.append(f"{group['head']}{number:0{len(low)}d}{group['tail']}")
    return names
