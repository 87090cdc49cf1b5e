# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""One job step of the node program on every node of the allocation, from the control machine.

`srun --jobid J -N n --ntasks-per-node=1 --nodelist ... python3 -c BOOT RUN_ID ARGS`, its stdin
the bundle (ship.py) and then the control machine's messages, its stdout read line by line into
records (each names its node, SLURMD_NODENAME; ship.frame keeps every line short, since srun
interleaves the pieces of long lines of several tasks). srun runs in its own session: a Ctrl-C
of the command reaches the command alone, which ends its steps itself (end()).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from typing import Any

from .ship import BOOT, Unframer, stream_header

# After stdin's end the nodes end their runs (the supervisor's kill grace, 5 s), send their
# results and remove their directories; only then SIGTERM to srun.
END_GRACE_S = 20.0


class Step:
    """A running step: records() yields its records, say() broadcasts a message."""

    def __init__(
        self,
        job_id: str,
        nodes: list[str],
        python: str,
        run_id: str,
        args: list[str],
        bundle: bytes,
        env: Mapping[str, str],
    ) -> None:
        argv = [
            "srun",
            f"--jobid={job_id}",
            f"--nodes={len(nodes)}",
            f"--ntasks={len(nodes)}",
            "--ntasks-per-node=1",
            f"--nodelist={','.join(nodes)}",
            "--kill-on-bad-exit=0",
            f"--job-name=nccl-preflight-{args[0]}",
            python,
            "-c",
            BOOT,
            run_id,
            *args,
        ]
        self.proc = subprocess.Popen(
            argv,
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
        self.proc.stdin.write(stream_header(bundle) + bundle)
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
                self.queue.put(record)
        self.queue.put(None)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.errors.append(raw.decode("utf-8", errors="replace").rstrip("\n"))

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
    """Each node's first record of ``kind`` until every node sent one, the output ended or the
    deadline passed."""
    found: dict[str, dict] = {}
    while len(found) < len(nodes):
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


# ------------------------------------------------------------------------------------------------
# The run's node bundle, built on the control machine (ship.py runs on the nodes and imports the
# node room only). slurm/bundle.py builds node-check's bundle for an operator's nodes.
# ------------------------------------------------------------------------------------------------

BUNDLE_MAIN = (
    "import sys\nfrom nccl_preflight.slurm.node_step import main\nsys.exit(main(sys.argv[1:]))\n"
)


def bundle_sources() -> dict[str, bytes]:
    """What the bundle is built from: {path relative to the checkout: bytes} (the builder too)."""
    from pathlib import Path

    package = Path(__file__).resolve().parents[1]
    checkout = package.parents[1]
    paths = [package / "__init__.py", *sorted((package / "node").glob("*.py"))]
    paths += [package / "slurm" / name for name in ("__init__.py", "ship.py", "node_step.py")]
    paths += [package / "core" / "zipapp.py", *sorted((checkout / "files").glob("*.py"))]
    return {path.relative_to(checkout).as_posix(): path.read_bytes() for path in paths}


def bundle_key(sources: dict[str, bytes]) -> str:
    """The sources' content hash: equal sources, equal bundle (zip_bytes is deterministic)."""
    import hashlib

    digest = hashlib.sha256()
    for name in sorted(sources):
        digest.update(f"{name}\0{len(sources[name])}\0".encode())
        digest.update(sources[name])
    return digest.hexdigest()[:32]


def build_node_bundle(cache_dir: str | os.PathLike[str] | None = None) -> bytes:
    """A zipapp of the node room, the node step and the rank script's own zipapp.

    With ``cache_dir`` (e.g. the report root's .bundle/), the bundle is kept there by its
    sources' content hash and read back while the sources are unchanged: a run then reads the
    sources and hashes them (a few ms) instead of building (0.05-0.08 CPU s, 0.2-0.4 s at load
    15 on the lab machine). The file is written atomically, mode 0600, in a directory of mode
    0700: what the nodes run is never a file another user could have put there."""
    from pathlib import Path

    sources = bundle_sources()
    cached = None
    if cache_dir is not None:
        cached = Path(cache_dir) / f"node-bundle-{bundle_key(sources)}.pyz"
        if cached.is_file() and cached.stat().st_uid == os.getuid():
            return cached.read_bytes()
    bundle = _build(sources)
    if cached is not None:
        cached.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        from ..node.files import write_atomically

        write_atomically(cached, bundle, 0o600)
    return bundle


def _build(sources: dict[str, bytes]) -> bytes:
    from pathlib import Path

    from ..core.zipapp import build_zipapp, zip_bytes

    checkout = Path(__file__).resolve().parents[3]
    files: dict[str, bytes] = {"__main__.py": BUNDLE_MAIN.encode()}
    for name, data in sources.items():
        if name.startswith("src/nccl_preflight/") and not name.endswith("core/zipapp.py"):
            files[name.removeprefix("src/")] = data
    files["nccl_check.pyz"] = build_zipapp(checkout / "files" / "nccl_check.py")
    return zip_bytes(files)
