# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Waiting for the run's own allocation: `salloc --no-shell` in the background, the job id as
soon as salloc says it ("Pending job allocation <id>", "job <id> queued and waiting for
resources", "Granted job allocation <id>"), Slurm's pending reason while it waits (`squeue -h -j
<id> -o %r`: at once, every REPEAT_S seconds and whenever it changes), a bound on the wait
(--wait-allocation), and the job cancelled on every way out with the cancel checked in squeue.

salloc runs in a session of its own, so a Ctrl-C at the terminal reaches the command alone and
the command cancels the job by its id (`scancel <id>`), then ends salloc; when salloc had not yet
said its id, SIGINT to salloc makes it give its request up itself (Slurm's salloc cancels the job
it waits for on SIGINT/SIGTERM) and its last words name the job. Every command is an argv list.
"""

from __future__ import annotations

import contextlib
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping

GRANTED = re.compile(r"Granted job allocation (\d+)")
JOB_ID = re.compile(r"[Jj]ob(?: allocation)? (\d+)\b")
FIRST_S = 2.0  # a job granted this soon after salloc said it pends is not reported pending
POLL_S = 5.0  # how often squeue is asked for the reason while the job pends
REPEAT_S = 30.0  # the reason is said again after this long even when it did not change
END_S = 10.0  # how long salloc gets to end after the job was cancelled (then SIGKILL)
GONE_S = 15.0  # how long squeue gets to stop listing a cancelled job
LIVE_STATES = {
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "SUSPENDED",
    "RESIZING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "SIGNALING",
    "STAGE_OUT",
    "STOPPED",
}
# A few of Slurm's pending reasons (squeue(1), JOB REASON CODES), with where to look.
REASON_HINTS = (
    ("ReqNodeNotAvail", "a node it needs is down, drained or reserved: sinfo -R -o '%n %E'"),
    ("Nodes required for job are DOWN", "a node it needs is down or drained: sinfo -R"),
    ("Resources", "the nodes it needs are busy with other jobs"),
    ("Priority", "jobs of higher priority are queued ahead of it"),
    ("Partition", "the request exceeds a limit of the partition: scontrol show partition"),
    ("QOS", "a QOS limit holds it: sacctmgr show qos"),
    ("Assoc", "an account limit holds it: sacctmgr show assoc"),
    ("Reservation", "it waits for its reservation: scontrol show reservation"),
)
# salloc's words when Slurm refused the request itself (a partition, account, QOS, reservation,
# feature, GRES or node name it does not know, a request no node can meet): bad input.
REFUSED = ("Job submit/allocate failed", "Invalid", "invalid", "not available")


class NotGranted(RuntimeError):
    """No allocation: salloc refused the request (``refused``: bad input), failed, or the job
    still pended after the wait (``timed_out``). The message says which, and what became of the
    job (cancelled, checked in squeue)."""

    def __init__(self, message: str, refused: bool = False, timed_out: bool = False) -> None:
        super().__init__(message)
        self.refused = refused
        self.timed_out = timed_out


def reason_text(reason: str) -> str:
    """Slurm's reason with a hint of where to look, when it is one of the common ones."""
    for key, hint in REASON_HINTS:
        if key in reason.replace("_", " "):
            return f"{reason} ({hint})"
    return reason


def _command(argv: list[str], env: Mapping[str, str], timeout: float = 30) -> tuple[int, str]:
    """(exit status, stdout + stderr) of a Slurm client command; 127 when it could not run."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return done.returncode, (done.stdout + done.stderr).strip()


class SallocRun:
    """One salloc --no-shell: start(), then granted() -> the job id; cancel() on any way out
    before it was granted (idempotent)."""

    def __init__(
        self,
        argv: list[str],
        env: Mapping[str, str],
        wait_s: float,
        say: Callable[[str], None],
        poll_s: float = POLL_S,
        repeat_s: float = REPEAT_S,
    ) -> None:
        self.argv, self.env, self.wait_s, self.say = argv, dict(env), wait_s, say
        self.poll_s, self.repeat_s = poll_s, repeat_s
        self.job_id = ""
        self.reason = ""
        self.lines: list[str] = []
        self.done = False  # granted, or cancelled and salloc ended
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._proc: subprocess.Popen[str] | None = None
        self._started = 0.0

    def start(self) -> None:
        self._started = time.monotonic()
        self._proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.env,
            start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _take(self, line: str) -> bool:
        """Read one line of salloc's; -> whether it says the allocation was granted."""
        self.lines.append(line)
        found = JOB_ID.search(line)
        if found and not self.job_id:
            self.job_id = found.group(1)
        return bool(GRANTED.search(line))

    def waited(self) -> float:
        return time.monotonic() - self._started

    def granted(self) -> str:
        """Wait for the grant; -> the job id. NotGranted when salloc ends without one or the
        job still pends after wait_s (then it is cancelled first)."""
        said_at, check_at = -self.repeat_s, FIRST_S
        while True:
            timeout = max(0.0, check_at - self.waited())
            if self.wait_s > 0:
                timeout = min(timeout, max(0.0, self.wait_s - self.waited()))
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                line = ""
            if line is None:
                return self._ended()
            if line and self._take(line):
                return self._grant()
            if self.waited() >= check_at:
                if self.job_id:
                    said_at = self._report(said_at)
                check_at = self.waited() + self.poll_s
            if 0 < self.wait_s <= self.waited():
                raise self._give_up()

    def _grant(self) -> str:
        assert self._proc is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=END_S)  # --no-shell: salloc ends once it is granted
        self.done = True
        if self.reason:
            self.say(f"nccl-preflight slurm: job {self.job_id} granted after {self.waited():.0f} s")
        return self.job_id

    def _ended(self) -> str:
        """salloc ended without saying it was granted."""
        assert self._proc is not None
        rc = self._proc.wait()
        self.done = True
        said = " / ".join(line.strip() for line in self.lines if line.strip()) or "(no output)"
        if self.job_id:
            gone = self._gone()
            raise NotGranted(
                f"salloc exited {rc} while job {self.job_id} was pending: {said}; {gone}"
            )
        refused = any(words in said for words in REFUSED)
        raise NotGranted(f"{' '.join(self.argv)} exited {rc}: {said}", refused=refused)

    def _report(self, said_at: float) -> float:
        """Slurm's reason for the pending job, said when new or REPEAT_S after the last time."""
        rc, out = _command(["squeue", "-h", "-j", self.job_id, "-o", "%T|%r"], self.env)
        state, _, reason = out.partition("|") if rc == 0 else ("", "", "")
        if state.strip() != "PENDING":
            return said_at
        reason = reason.strip()
        reason = "no reason yet" if reason in ("", "None") else reason
        now = self.waited()
        if reason != self.reason or now - said_at >= self.repeat_s:
            first = not self.reason
            self.reason = reason
            if not first:
                what = f"still pending after {now:.0f} s: {reason_text(reason)}"
            elif self.wait_s > 0:
                what = (
                    f"is pending ({reason_text(reason)}); waiting up to {self.wait_s:g} s for its "
                    "nodes (--wait-allocation; 0 waits for ever); Ctrl-C cancels it"
                )
            else:
                what = (
                    f"is pending ({reason_text(reason)}); waiting for its nodes for ever "
                    "(--wait-allocation 0); Ctrl-C cancels it"
                )
            self.say(f"nccl-preflight slurm: job {self.job_id} {what}")
            return now
        return said_at

    def _give_up(self) -> NotGranted:
        reason = f": {reason_text(self.reason)}" if self.reason else ""
        what = f"job {self.job_id}" if self.job_id else "salloc's request (no job id said yet)"
        waited = self.waited()
        gone = self.cancel()
        return NotGranted(
            f"{what} still pending after {waited:.0f} s (--wait-allocation {self.wait_s:g})"
            f"{reason}; {gone}; no node was tested",
            timed_out=True,
        )

    def cancel(self) -> str:
        """Cancel the job (scancel), end salloc, and check in squeue that the job is gone;
        -> what became of it, in words that are true."""
        if self.done:
            return f"job {self.job_id} was already given back" if self.job_id else ""
        self.done = True
        if not self.job_id:
            self._stop_salloc(signal.SIGINT)  # salloc gives its own request up
            if not self.job_id:
                return "salloc was stopped before it named its job"
        rc, out = _command(["scancel", self.job_id], self.env)
        self._stop_salloc(signal.SIGTERM)
        gone = self._gone()
        if rc != 0 and not gone.startswith(f"job {self.job_id} cancelled"):
            return f"{gone} (scancel {self.job_id}: {out})"
        return gone

    def _stop_salloc(self, signum: int) -> None:
        """Signal salloc and wait for it to end (reading its last lines), SIGKILL after END_S."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            self._drain(0.5)
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)
        try:
            proc.wait(timeout=END_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self._drain(2.0)

    def _drain(self, wait: float) -> None:
        """Read what salloc still said (its last lines name the job it gave up)."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            if line is None:
                return
            self._take(line)

    def _gone(self) -> str:
        """Whether squeue still lists the job as live, waited for up to GONE_S."""
        deadline = time.monotonic() + GONE_S
        while True:
            rc, out = _command(["squeue", "-h", "-j", self.job_id, "-o", "%T"], self.env)
            if rc == 0 and not (set(out.split()) & LIVE_STATES):
                return f"job {self.job_id} cancelled (squeue no longer lists it)"
            if rc != 0 and "Invalid job id" in out:
                return f"job {self.job_id} cancelled (squeue no longer knows it)"
            if time.monotonic() > deadline:
                shown = out or f"squeue exited {rc}"
                return (
                    f"job {self.job_id} may still be queued (squeue: {shown}): "
                    f"cancel it by hand: scancel {self.job_id}"
                )
            time.sleep(0.5)
