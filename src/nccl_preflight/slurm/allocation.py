# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The allocation a run uses: the caller's (SLURM_JOB_ID set, e.g. inside sbatch) or its own.

Its own: `salloc -N n --no-shell --job-name=nccl-preflight [salloc's options]`, the options
worked out and checked before (salloc_options.py), waited for in the background while the job
pends (pending.py: the job id and Slurm's reason said, the wait bounded), given back with
`scancel <id>` when the run ends, however it ends: Allocation is a context manager, and
SIGINT/SIGTERM/SIGHUP raise Interrupted inside it so that the same exit path runs, a job still
pending included. ``released`` says what became of the job, in words that are true. Node names
are Slurm's (`scontrol show hostnames <nodelist>`), the first is the master. Every command is an
argv list.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

from .pending import NotGranted, SallocRun
from .salloc_options import SallocRequest


class SlurmError(RuntimeError):
    """A Slurm command failed; the message has its argv and output."""


class Interrupted(Exception):
    """SIGINT, SIGTERM or SIGHUP reached the command."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def slurm(argv: list[str], env: Mapping[str, str] | None = None, timeout: float = 120) -> str:
    """Run a Slurm client command; -> its stdout (stderr appended). SlurmError when it fails."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmError(f"{' '.join(argv)}: {exc}") from None
    if done.returncode != 0:
        raise SlurmError(
            f"{' '.join(argv)} exited {done.returncode}: {(done.stderr or done.stdout).strip()}"
        )
    return done.stdout + done.stderr


def hostnames(nodelist: str, env: Mapping[str, str] | None = None) -> list[str]:
    """Slurm's node names of a node list (`scontrol show hostnames`), in its order."""
    return slurm(["scontrol", "show", "hostnames", nodelist], env).split()


def job_nodelist(job_id: str, env: Mapping[str, str] | None = None) -> str:
    """The NodeList of a job (`scontrol show job -o`)."""
    for field in slurm(["scontrol", "show", "job", "-o", job_id], env).split():
        if field.startswith("NodeList="):
            return field.split("=", 1)[1]
    raise SlurmError(f"scontrol show job {job_id} gave no NodeList")


def job_state(job_id: str, env: Mapping[str, str] | None = None) -> str:
    """The JobState of a job (`scontrol show job -o`): RUNNING, CANCELLED, ..."""
    for field in slurm(["scontrol", "show", "job", "-o", job_id], env).split():
        if field.startswith("JobState="):
            return field.split("=", 1)[1]
    raise SlurmError(f"scontrol show job {job_id} gave no JobState")


def ended_state(job_id: str, env: Mapping[str, str] | None = None, wait: float = 10.0) -> str:
    """The job's state; a job COMPLETING (its processes being ended) is waited for, at most
    ``wait`` seconds, so that the state says how it ended (CANCELLED, TIMEOUT, ...)."""
    deadline = time.monotonic() + wait
    state = job_state(job_id, env)
    while state == "COMPLETING" and time.monotonic() < deadline:
        time.sleep(0.5)
        state = job_state(job_id, env)
    return state


class Allocation:
    """`with Allocation(n, request) as alloc:` alloc.job_id, alloc.nodes, alloc.own."""

    def __init__(
        self,
        nodes: int,
        request: SallocRequest | None = None,
        environ: Mapping[str, str] | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.count = nodes
        self.request = request or SallocRequest(nodes)
        self.environ = dict(os.environ if environ is None else environ)
        self.say = say or (lambda line: print(line, flush=True))
        self.job_id = ""
        self.nodes: list[str] = []
        self.own = False
        self.pending: SallocRun | None = None
        self.released = ""  # what became of our own job, once given back
        self._previous: dict[int, Any] = {}

    def _salloc(self) -> str:
        """Our own allocation, waited for (pending.py); -> its job id."""
        argv = self.request.argv()
        self.say(f"nccl-preflight slurm: {shlex.join(argv)}")
        self.pending = SallocRun(argv, self._client_env(), self.request.wait_s, self.say)
        self.pending.start()
        try:
            return self.pending.granted()
        except NotGranted as exc:
            source = self.request.sources.get("--gpus-per-node")
            if exc.refused and "gres" in str(exc) and source:
                raise NotGranted(
                    f"{exc}; --gpus-per-node came from {source}: where Slurm has no GPU GRES, "
                    "--gpus-per-node 0 asks for none (nccl_backend gloo for a CPU run)",
                    refused=True,
                ) from None
            raise

    def _client_env(self) -> dict[str, str]:
        """The environment of the Slurm commands: without the caller's job when it is not ours
        to use (salloc inside a job would nest)."""
        if self.own:
            return {k: v for k, v in self.environ.items() if not k.startswith("SLURM_JOB")}
        return self.environ

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(signum)

    def __enter__(self) -> Allocation:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            self._previous[sig] = signal.signal(sig, self._on_signal)
        try:
            given = self.environ.get("SLURM_JOB_ID", "")
            if given:
                self.job_id = given
                nodelist = self.environ.get("SLURM_JOB_NODELIST") or job_nodelist(given)
                self.nodes = hostnames(nodelist, self.environ)
                if len(self.nodes) < self.count:
                    raise SlurmError(
                        f"job {given} has {len(self.nodes)} nodes ({', '.join(self.nodes)}); "
                        f"-N {self.count} asks for more"
                    )
                self.nodes = self.nodes[: self.count]
            else:
                self.own = True
                self.job_id = self._salloc()
                env = self._client_env()
                self.nodes = hostnames(job_nodelist(self.job_id, env), env)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def env(self) -> dict[str, str]:
        """The environment of srun steps in this allocation."""
        env = {k: v for k, v in self._client_env().items() if not k.startswith("PYTHON")}
        return env

    def release(self) -> None:
        """scancel our own allocation (idempotent), a job still pending included (checked in
        squeue); the caller's is left alone."""
        if self.pending is not None and not self.pending.done:
            self.released = self.pending.cancel()
        if self.own and self.job_id:
            job, self.job_id = self.job_id, ""
            try:
                slurm(["scancel", job], self._client_env())
                self.released = f"the allocation was given back (scancel {job})"
            except SlurmError as exc:
                self.released = f"job {job} could not be given back ({exc}): scancel {job}"

    def __exit__(self, *_: object) -> None:
        # no signal may interrupt the release itself
        for sig in self._previous:
            signal.signal(sig, signal.SIG_IGN)
        try:
            self.release()
        finally:
            for sig, previous in self._previous.items():
                signal.signal(sig, previous)
            self._previous = {}
