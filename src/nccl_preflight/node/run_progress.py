# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What the launch looks at on a node while a run goes on (docs/design.md, "Watching a run").

The ranks' progress (their rank-<R>.json), how a rank died (torchrun's failure report, the
kernel's OOM killer), the fabric interface's state and carrier, and a quick TCP probe of a peer.
The parsers are pure; the readers around them are thin and never change anything.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from .processes import write_json

RANK_FILE = re.compile(r"^rank-(\d+)\.json$")

# ------------------------------------------------------------------------------------------------
# Progress: rank-<R>.json as files/nccl_check.py writes it (before every test and every size)
# ------------------------------------------------------------------------------------------------


# /proc/<pid>/stat's state of a process that does not run until it is continued: T (a stop
# signal: SIGSTOP, SIGTSTP, ...) or t (stopped by a tracer: a debugger, strace).
STOPPED_STATES = {"T": "stopped by a signal", "t": "held by a tracer"}


def process_state(pid: Any, proc: str = "/proc") -> str | None:
    """The one-letter state of process ``pid`` (R, S, D, T, t, Z, ...), None when it is gone or
    cannot be read. Read-only."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    try:
        text = Path(f"{proc}/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # "pid (comm) S ...": comm may hold spaces and parentheses; the state follows the last ')'
    fields = text.rsplit(")", 1)[-1].split()
    return fields[0] if fields else None


def rank_progress(
    rank: int, doc: dict[str, Any], age_s: float, proc: str = "/proc"
) -> dict[str, Any]:
    """One rank's place in the run: the progress contract of docs/design.md.

    age_s: seconds since the file was written, i.e. since the rank reached this place. A rank
    still running whose process (the file's ``pid``) is stopped (STOPPED_STATES) gets
    ``stopped``: {pid, state}, the evidence that names it when the run stalls."""
    size = doc.get("current_size")
    index = doc.get("test_index")
    count = doc.get("test_count")
    found = {
        "rank": rank,
        "status": str(doc.get("status") or "running"),
        "test": doc.get("current_test"),
        "size": size if isinstance(size, int) else None,
        "index": index if isinstance(index, int) else None,
        "count": count if isinstance(count, int) else None,
        "age_s": round(max(0.0, age_s), 3),
    }
    if found["status"] == "running":
        state = process_state(doc.get("pid"), proc)
        if state in STOPPED_STATES:
            found["stopped"] = {"pid": doc["pid"], "state": state}
    return found


def read_progress(results_dir: Path, now: float | None = None) -> list[dict[str, Any]]:
    """Every rank file's progress (a file caught mid-rename is skipped: the next look has it)."""
    now = time.time() if now is None else now
    found: list[dict[str, Any]] = []
    with contextlib.suppress(OSError):
        for entry in sorted(os.scandir(results_dir), key=lambda e: e.name):
            match = RANK_FILE.match(entry.name)
            if not match:
                continue
            try:
                mtime = entry.stat().st_mtime
                doc = json.loads(Path(entry.path).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(doc, dict):
                found.append(rank_progress(int(match.group(1)), doc, now - mtime))
    return found


# ------------------------------------------------------------------------------------------------
# How a rank died: torchrun's failure report, the exit code, the kernel's OOM killer
# ------------------------------------------------------------------------------------------------

# torchrun's ChildFailedError report (torch/distributed/elastic/multiprocessing/errors):
#   rank      : 1 (local_rank: 1)
#   exitcode  : -9 (pid: 4242)
_FAILURE_BLOCK = re.compile(
    r"rank\s*:\s*(?P<rank>\d+)\s*\(local_rank:\s*(?P<local>\d+)\)\s*\n"
    r"\s*exitcode\s*:\s*(?P<code>-?\d+)\s*\(pid:\s*(?P<pid>\d+)\)"
)
_ROOT_CAUSE = "Root Cause (first observed failure):"

# What files/nccl_check.py's own exit codes mean (docs/design.md, "Rank result").
_CHECK_EXITS = {
    1: "a check failed",
    2: "bad arguments",
    124: "its watchdog ended it (a phase outlived --timeout)",
}


def describe_exit(exitcode: int) -> dict[str, Any]:
    """{exitcode, signal (name or None), text}: a negative code is the signal that killed it."""
    sig_name = None
    if exitcode < 0:
        number = -exitcode
        with contextlib.suppress(ValueError):
            sig_name = signal.Signals(number).name
        text = f"killed by {sig_name or 'signal'} (signal {number})"
    elif exitcode > 128 and exitcode - 128 < 65:
        number = exitcode - 128
        with contextlib.suppress(ValueError):
            sig_name = signal.Signals(number).name
        text = f"exited {exitcode} after {sig_name or f'signal {number}'}"
    else:
        text = f"exited {exitcode}"
        if exitcode in _CHECK_EXITS:
            text += f" ({_CHECK_EXITS[exitcode]})"
    return {"exitcode": exitcode, "signal": sig_name, "text": text}


def parse_torchrun_failures(text: str) -> list[dict[str, Any]]:
    """Every rank torchrun reported as failed: {rank, local_rank, pid, exitcode, signal, text,
    root_cause}; the root cause (torchrun's first observed failure) first."""
    failures: dict[int, dict[str, Any]] = {}
    root = text.rfind(_ROOT_CAUSE)
    root_rank = None
    for match in _FAILURE_BLOCK.finditer(text):
        rank = int(match.group("rank"))
        entry = {
            "rank": rank,
            "local_rank": int(match.group("local")),
            "pid": int(match.group("pid")),
            **describe_exit(int(match.group("code"))),
            "root_cause": False,
        }
        if root >= 0 and match.start() > root and root_rank is None:
            root_rank = rank
        failures[rank] = entry
    if root_rank is not None:
        failures[root_rank]["root_cause"] = True
    return sorted(failures.values(), key=lambda f: (not f["root_cause"], f["rank"]))


# The kernel's OOM killer, as every kernel since 4.x writes it:
#   Out of memory: Killed process 4242 (python) total-vm:..., anon-rss:...
#   Memory cgroup out of memory: Killed process 4242 (python) ...
#   oom-kill:constraint=CONSTRAINT_MEMCG,...,task=python,pid=4242,uid=0
_OOM_KILLED = re.compile(r"\bKilled process (\d+) \(")
_OOM_KILL = re.compile(r"oom-kill:.*\bpid=(\d+)\b")


def find_oom_line(kernel_log: str, pid: int) -> str | None:
    """The kernel log's OOM-killer line about `pid` (the last one), else None."""
    killed = summary = None
    for line in kernel_log.splitlines():
        match = _OOM_KILLED.search(line)
        if match and int(match.group(1)) == pid:
            killed = line.strip()
        match = _OOM_KILL.search(line)
        if match and int(match.group(1)) == pid:
            summary = line.strip()
    return killed or summary


def oom_lookup_hint(pid: int) -> str:
    return (
        f"look for it as root on this host: dmesg -T | grep -E 'Killed process {pid} |pid={pid},' "
        f"(or journalctl -k | grep -E 'Killed process {pid} ')"
    )


def _kmsg_text(path: str = "/dev/kmsg", max_bytes: int = 8 << 20) -> str:
    """The kernel ring buffer through /dev/kmsg (read-only, non-blocking: stops at its end)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    lines: list[str] = []
    total = 0
    try:
        while total < max_bytes:
            try:
                record = os.read(fd, 8192)
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    break
                if exc.errno == errno.EPIPE:  # a record was overwritten while reading: go on
                    continue
                raise
            if not record:
                break
            total += len(record)
            # "<prio>,<seq>,<usec>,<flags>;message"
            lines.append(record.decode("utf-8", errors="replace").split(";", 1)[-1].rstrip("\n"))
    finally:
        os.close(fd)
    return "\n".join(lines)


def read_kernel_log(timeout: float = 5.0) -> tuple[str, str]:
    """(text, where it came from) or ("", why it could not be read). Never writes anything."""
    reasons = []
    try:
        return _kmsg_text(), "/dev/kmsg"
    except OSError as exc:
        reasons.append(f"/dev/kmsg: {exc.strerror or exc}")
    for argv in (["dmesg"], ["journalctl", "-k", "-q", "--no-pager", "-o", "short"]):
        if shutil.which(argv[0]) is None:
            reasons.append(f"{argv[0]}: not found")
            continue
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            reasons.append(f"{argv[0]}: {exc}")
            continue
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout, " ".join(argv)
        reasons.append(f"{argv[0]}: {(done.stderr.strip() or f'rc {done.returncode}')[:200]}")
    return "", "; ".join(reasons)


def describe_rank_exits(torchrun_log: str, kernel_log: tuple[str, str] | None) -> list[dict]:
    """torchrun's failures, each SIGKILL with the kernel's OOM-killer line or how to look for it.

    kernel_log: read_kernel_log()'s answer, or None to not look (no SIGKILL among them).
    """
    exits = parse_torchrun_failures(torchrun_log)
    for entry in exits:
        if entry["signal"] != "SIGKILL":
            continue
        text, source = kernel_log or ("", "the kernel log was not read")
        line = find_oom_line(text, entry["pid"]) if text else None
        entry["oom"] = line
        if line:
            entry["text"] += f": the kernel's OOM killer ended it ({source}: {line})"
        elif text:
            entry["text"] += (
                f" (not by the OOM killer: {source} has no OOM line for pid {entry['pid']}; "
                "someone or something else sent it)"
            )
        else:
            entry["text"] += (
                f" (could the OOM killer have done it? the kernel log is not readable here: "
                f"{source}; {oom_lookup_hint(entry['pid'])})"
            )
    return exits


# ------------------------------------------------------------------------------------------------
# A stall's evidence: the fabric interface and a quick TCP probe of a peer
# ------------------------------------------------------------------------------------------------


def interface_state(ifname: str, sys_net: str = "/sys/class/net") -> dict[str, Any]:
    """{ifname, state (operstate, lower case), carrier (bool or None), reason}."""
    base = Path(sys_net) / ifname
    if not base.exists():
        return {"ifname": ifname, "state": "absent", "carrier": None, "reason": f"no {base}"}
    state = "unknown"
    with contextlib.suppress(OSError):
        state = (base / "operstate").read_text().strip().lower()
    carrier: bool | None = None
    with contextlib.suppress(OSError, ValueError):  # EINVAL while the interface is down
        carrier = (base / "carrier").read_text().strip() == "1"
    return {"ifname": ifname, "state": state, "carrier": carrier, "reason": ""}


def tcp_probe(
    address: str, port: int, timeout: float = 2.0, source: str | None = None
) -> dict[str, Any]:
    """Does the peer's TCP stack answer? Connected or refused both mean it is reachable."""
    started = time.monotonic()
    answer, ok, timed_out = "connected", True, False
    try:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            if source:
                sock.bind((source, 0))
            sock.connect((address, port))
    except ConnectionRefusedError:
        answer = "refused (the host answers)"
    except TimeoutError:
        answer, ok, timed_out = f"no answer in {timeout:g} s", False, True
    except OSError as exc:
        answer, ok = exc.strerror or str(exc), False
    return {
        "address": address,
        "port": port,
        "ok": ok,
        "answer": answer,
        # No answer in time: a peer that is gone, or a link too slow to carry the SYN in time.
        "timed_out": timed_out,
        "seconds": round(time.monotonic() - started, 3),
    }


def stall_evidence(spec: dict[str, Any]) -> dict[str, Any]:
    """A stall's evidence on this node: {interface (its fabric interface now), probes (a TCP
    probe of each target)}. spec: {ifname, probes [{host, address, port}], probe_timeout,
    source (this node's fabric address)}."""
    probes = [
        {
            "host": target.get("host"),
            **tcp_probe(
                str(target["address"]),
                int(target["port"]),
                float(spec.get("probe_timeout") or 2.0),
                spec.get("source") or None,
            ),
        }
        for target in spec.get("probes") or []
    ]
    ifname = spec.get("ifname")
    return {"interface": interface_state(str(ifname)) if ifname else {}, "probes": probes}


# ------------------------------------------------------------------------------------------------
# The control machine's looks: watch.json in the run directory (docs/design.md)
# ------------------------------------------------------------------------------------------------


# The start of watcher_gone's reason: the supervisor then also removes the run directory.
WATCHER_GONE = "the control machine stopped watching the run"
# The kind of the Slurm launch step's record that says why its run ended without results (the
# supervisor removed it, WATCHER_GONE): the control machine's watch words the node's loss with it.
LOST_RECORD = "lost"


def touch_watch(path: Path, stale_s: float) -> None:
    """Say that the control machine still watches: the supervisor ends the run when this file
    is older than stale_s (Ctrl-C or a lost connection between two looks). ``stale_s`` 0: no
    mark (the run's warden, node/run_warden.py, watches the control machine instead)."""
    if stale_s <= 0 or not path.parent.is_dir():
        return
    write_json(path, {"stale_after_s": stale_s, "at": time.time()})


def watcher_gone(path: Path, now: float | None = None) -> str | None:
    """Why the supervisor must end the run because nobody watches it any more, else None."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        age = (time.time() if now is None else now) - float(doc["at"])
        stale = float(doc["stale_after_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if age <= stale:
        return None
    return f"{WATCHER_GONE} (no look for {age:.0f} s: Ctrl-C or a lost connection)"


def rank_exits(torchrun_log: Path) -> list[dict[str, Any]]:
    """How torchrun's failed ranks ended; a SIGKILL with the kernel's OOM-killer line if any."""
    try:
        text = torchrun_log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    exits = parse_torchrun_failures(text)
    kernel = read_kernel_log() if any(e["signal"] == "SIGKILL" for e in exits) else None
    return describe_rank_exits(text, kernel)
