# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What every benchmark shares: the work directory, timed ansible-playbook runs with per-phase
times (from bench/callbacks/bench_timer.py), CPU accounting, torchrun started by hand in lab hosts,
machine and version facts, medians.

Benchmarks measure; they never assert timings.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nccl_preflight.core.stage import check_timeout
from tests.lab.harness import Lab, LabHost

PROJECT_ROOT = Path(__file__).resolve().parents[1]
PLAYBOOK = PROJECT_ROOT / "playbooks" / "validate.yml"
CHECK_SCRIPT = PROJECT_ROOT / "files" / "nccl_check.py"
CALLBACK_DIR = Path(__file__).resolve().parent / "callbacks"
PYTHON = sys.executable
VENV_BIN = Path(sys.executable).parent
CGROUP_CPUACCT = Path("/sys/fs/cgroup/cpuacct")

# The phases of validate.yml, in flow order (docs/design.md), with the time before the first play
# (interpreter start, inventory) and after the last (stats, exit).
PHASES = (
    "startup+inventory",
    "inputs",
    "facts",
    "environment",
    "pre-flight",
    "launch",
    "collect",
    "cleanup",
    "report",
    "exit",
)


@dataclass(frozen=True)
class Row:
    """One benchmark's goal and current figure: its row of BENCHMARKS.md's summary table and the
    opening of its section, so that each section starts with its goal and where it stands."""

    name: str
    goal: str
    measured: str
    met: str  # "**met**", "**not met**" or "not measured", with an optional note after it

    def markdown(self) -> str:
        return f"| {self.name} | {self.goal} | {self.measured} | {self.met} |"

    def opening(self) -> list[str]:
        if not self.goal:
            return [f"- **Now:** {self.measured} ({self.met})", ""]
        return [
            f"- **Goal:** {self.goal}",
            f"- **Now:** {self.measured}",
            f"- **Goal met:** {self.met}",
            "",
        ]


def met_text(value: bool | None) -> str:
    return {True: "**met**", False: "**not met**"}.get(value, "not measured")  # type: ignore[arg-type]


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def median(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def fmt(value: float | None, digits: int = 1, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


def check_timeout_for(run_timeout: int) -> int:
    """The --timeout both front-ends give nccl_check.py (core/stage.py check_timeout)."""
    return check_timeout({"nccl_run_timeout": run_timeout})


# ---------------------------------------------------------------------------------------- CPU
class CpuGroup:
    """A cgroup-v1 cpuacct group: CPU seconds used by every process put in it and their children.

    Unavailable (usage None) where cgroup v1 cpuacct is not mounted writable.
    """

    def __init__(self, label: str) -> None:
        self.path: Path | None = CGROUP_CPUACCT / f"nccl-bench-{os.getpid()}-{label}"
        try:
            self.path.mkdir(exist_ok=True)
        except OSError:
            self.path = None

    def add(self, pid: int) -> None:
        if self.path:
            with contextlib.suppress(OSError):
                (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def preexec(self) -> Callable[[], None] | None:
        """A Popen preexec_fn that moves the child into this group (so every descendant counts).

        It runs before exec, in the root mount namespace: `ip netns exec` remounts /sys, so a
        command inside a lab host could no longer see the cgroup file system.
        """
        if not self.path:
            return None
        procs = str(self.path / "cgroup.procs")

        def join() -> None:
            with contextlib.suppress(OSError), open(procs, "w") as f:
                f.write(f"{os.getpid()}\n")

        return join

    def usage_s(self) -> float | None:
        if not self.path:
            return None
        try:
            return int((self.path / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        if not self.path:
            return
        parent = self.path.parent / "cgroup.procs"
        for _ in range(50):
            with contextlib.suppress(OSError):
                for pid in (self.path / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        parent.write_text(pid + "\n")
            try:
                self.path.rmdir()
                break
            except OSError:
                time.sleep(0.1)
        self.path = None


@contextlib.contextmanager
def lab_session(n_hosts: int, **kwargs: Any) -> Iterator[tuple[Lab, CpuGroup]]:
    """A fresh lab (always torn down) whose sshd processes (and so every module) are CPU-counted."""
    cpu = CpuGroup(f"nodes{n_hosts}")
    lab = Lab(n_hosts=n_hosts, **kwargs)
    try:
        lab.up()
        for pid in lab._state.get("sshd_pids", {}).values():
            cpu.add(int(pid))
        yield lab, cpu
    finally:
        lab.down()
        cpu.close()


# ---------------------------------------------------------------------------------------- playbook
@dataclass
class PlaybookRun:
    """One timed ansible-playbook run."""

    rc: int
    wall_s: float
    phases: dict[str, float]
    tasks: list[dict[str, Any]]
    control_cpu_s: float | None
    node_cpu_s: float | None
    log_path: str
    report_dir: str
    started: float = 0.0
    ended: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


PYCACHE = Path("/tmp/nccl-bench-pycache")


def users_python(env: dict[str, str]) -> dict[str, str]:
    """``env`` as a user's Python runs: it keeps its bytecode. This machine's sessions set
    PYTHONDONTWRITEBYTECODE, which made every run compile each module again (0.8 CPU s of the
    slurm command's 2.4); the bytecode goes to a directory of the bench's own, never into the
    venv. Both sides of every comparison (the tool's and torchrun by hand) get it."""
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def ansible_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = users_python(dict(os.environ))
    env.update(
        {
            "ANSIBLE_CONFIG": str(PROJECT_ROOT / "ansible.cfg"),
            # bench_timer beside the project's own callbacks (ansible.cfg's callback_plugins).
            "ANSIBLE_CALLBACK_PLUGINS": f"{CALLBACK_DIR}:{PROJECT_ROOT / 'plugins' / 'callback'}",
            "ANSIBLE_CALLBACKS_ENABLED": "bench_timer",
            "ANSIBLE_NOCOLOR": "1",
            "PATH": f"{VENV_BIN}:{env.get('PATH', '')}",
        }
    )
    env.update(extra or {})
    return env


def start_playbook(
    lab: Lab,
    workdir: Path,
    label: str,
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    playbook: Path = PLAYBOOK,
) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """Start validate.yml (or ``playbook``) against the lab in the background (reports go under
    workdir)."""
    workdir.mkdir(parents=True, exist_ok=True)
    report_root = workdir / f"reports-{label}"
    timer_out = workdir / f"timer-{label}.json"
    log_path = workdir / f"ansible-{label}.log"
    cpu = CpuGroup(f"control-{label}")
    argv = [
        str(VENV_BIN / "ansible-playbook"),
        "-i",
        str(lab.inventory_dir),
        str(playbook),
        "-e",
        f"nccl_report_root={report_root}",
        *args,
    ]
    full_env = ansible_env({"BENCH_TIMER_OUT": str(timer_out), **(env or {})})
    with open(log_path, "wb") as out:
        out.write(f"$ {shlex.join(argv)}\n".encode())
        out.flush()
        started = time.monotonic()
        proc = subprocess.Popen(
            argv,
            preexec_fn=cpu.preexec(),
            cwd=PROJECT_ROOT,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    ctx = {
        "started": started,
        "timer_out": timer_out,
        "log_path": log_path,
        "report_root": report_root,
        "cpu": cpu,
    }
    return proc, ctx


def finish_playbook(
    proc: subprocess.Popen[bytes],
    ctx: dict[str, Any],
    node_cpu: CpuGroup | None,
    node_cpu_before: float | None,
    timeout: float,
) -> PlaybookRun:
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        rc = proc.wait(timeout=30)
    ended = time.monotonic()
    cpu: CpuGroup = ctx["cpu"]
    control_cpu = cpu.usage_s()
    cpu.close()
    node_cpu_s = None
    if node_cpu is not None and node_cpu_before is not None:
        after = node_cpu.usage_s()
        node_cpu_s = None if after is None else after - node_cpu_before
    events: list[dict[str, Any]] = []
    with contextlib.suppress(OSError, ValueError):
        events = json.loads(Path(ctx["timer_out"]).read_text())["events"]
    phases, tasks = phase_times(events, ctx["started"], ended)
    return PlaybookRun(
        rc=rc,
        wall_s=ended - ctx["started"],
        phases=phases,
        tasks=tasks,
        control_cpu_s=control_cpu,
        node_cpu_s=node_cpu_s,
        log_path=str(ctx["log_path"]),
        report_dir=str(ctx["report_root"]),
        started=ctx["started"],
        ended=ended,
    )


def run_playbook(
    lab: Lab,
    node_cpu: CpuGroup | None,
    workdir: Path,
    label: str,
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    timeout: float = 900,
    playbook: Path = PLAYBOOK,
) -> PlaybookRun:
    """validate.yml (or ``playbook``) against the lab, timed from process start to process end."""
    before = node_cpu.usage_s() if node_cpu else None
    proc, ctx = start_playbook(lab, workdir, label, args, env, playbook)
    return finish_playbook(proc, ctx, node_cpu, before, timeout)


def phase_of(event: dict[str, Any]) -> str:
    """Which phase of the flow a play/task event belongs to (by role, then by play name)."""
    role = event.get("role") or ""
    path = event.get("path") or ""
    if role == "validate_inputs":
        return "inputs"
    if role == "facts":
        return "facts"
    if role == "nccl_env":
        return "environment"
    if role == "preflight":
        return "pre-flight"
    if role == "launch":
        # The wait call (state=finished) also brings the results back: that task is "collect"
        # only in name; its time is the run itself plus the transfer, so it stays in launch.
        return "collect" if "collect.yml" in path else "launch"
    if role == "cleanup":
        return "cleanup"
    if role == "report":
        return "report"
    play = (event.get("play") or "").lower()
    for words, phase in (
        (("validate the inventory", "validate"), "inputs"),
        (("gather", "facts"), "facts"),
        (("environment",), "environment"),
        (("pre-flight", "preflight"), "pre-flight"),
        (("launch",), "launch"),
        (("remove", "run directory"), "cleanup"),
        (("junit", "report", "verdict"), "report"),
    ):
        if any(w in play for w in words):
            return phase
    return "other"


def phase_times(
    events: list[dict[str, Any]], started: float, ended: float
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Wall time per phase, and per task (start to the next play/task start).

    The linear strategy runs a task on every host before the next starts, so the segments between
    consecutive play/task starts add up to the wall time.
    """
    phases = dict.fromkeys(PHASES, 0.0)
    tasks: list[dict[str, Any]] = []
    marks = [e for e in events if e["kind"] in ("play_start", "task_start", "stats")]
    if not marks:
        phases["startup+inventory"] = ended - started
        return phases, tasks
    phases["startup+inventory"] = marks[0]["t"] - started
    for cur, nxt in zip(marks, [*marks[1:], None], strict=True):
        if cur["kind"] == "stats":
            phases["exit"] += ended - cur["t"]
            continue
        end = nxt["t"] if nxt is not None else ended
        phase = phase_of(cur)
        phases[phase] = phases.get(phase, 0.0) + (end - cur["t"])
        if cur["kind"] == "task_start":
            tasks.append(
                {
                    "phase": phase,
                    "play": cur.get("play"),
                    "task": cur.get("task"),
                    "role": cur.get("role"),
                    "seconds": end - cur["t"],
                }
            )
    return phases, tasks


# ---------------------------------------------------------------------------------------- torchrun
def torchrun_argv(
    lab: Lab,
    host: LabHost,
    node_rank: int,
    nnodes: int,
    nproc: int,
    port: int,
    out_dir: str,
    check_args: Sequence[str],
    check_timeout: int,
) -> list[str]:
    """The torchrun command roles/launch runs (library/nccl_torchrun.py build_argv), by hand."""
    master = lab.hosts[0].fabric_addr
    return [
        PYTHON, "-m", "torch.distributed.run",
        "--nnodes", str(nnodes), "--node-rank", str(node_rank),
        "--nproc-per-node", str(nproc),
        "--master-addr", master, "--master-port", str(port),
        "--local-addr", host.fabric_addr,
        "--rdzv-id", f"bench-{os.getpid()}", "--max-restarts", "0",
        str(CHECK_SCRIPT), "--out-dir", out_dir, "--timeout", str(check_timeout), *check_args,
    ]  # fmt: skip


def torchrun_env(host: LabHost) -> dict[str, str]:
    env = users_python(dict(os.environ))
    env.update(
        {
            "GLOO_SOCKET_IFNAME": host.fabric_ifname,
            "NCCL_SOCKET_IFNAME": host.fabric_ifname,
            "NCCL_DEBUG": "WARN",
            "PATH": f"{VENV_BIN}:{env.get('PATH', '')}",
        }
    )
    return env


@dataclass
class HandRun:
    """torchrun started by hand in every host at once."""

    wall_s: float
    rcs: list[int]
    out_dirs: list[Path]
    cpu_s: float | None


def run_by_hand(
    lab: Lab,
    workdir: Path,
    label: str,
    nproc: int,
    check_args: Sequence[str],
    check_timeout: int,
    port: int = 29500,
    timeout: float = 600,
) -> HandRun:
    """The floor: the same nccl_check run started with torchrun in every lab host at once."""
    cpu = CpuGroup(f"hand-{label}")
    procs: list[subprocess.Popen[bytes]] = []
    out_dirs: list[Path] = []
    logs = []
    started = time.monotonic()
    try:
        for rank, host in enumerate(lab.hosts):
            out_dir = workdir / f"hand-{label}" / host.name
            out_dir.mkdir(parents=True, exist_ok=True)
            out_dirs.append(out_dir)
            argv = torchrun_argv(
                lab, host, rank, len(lab.hosts), nproc, port, str(out_dir), check_args,
                check_timeout,
            )  # fmt: skip
            log_f = open(out_dir / "torchrun.log", "wb")  # noqa: SIM115 - closed below
            logs.append(log_f)
            procs.append(
                lab.popen(
                    host,
                    argv,
                    preexec_fn=cpu.preexec(),
                    stdout=log_f,
                    stderr=subprocess.STDOUT,
                    env=torchrun_env(host),
                    cwd=str(out_dir),
                )
            )
        deadline = started + timeout
        rcs = []
        for proc in procs:
            try:
                rcs.append(proc.wait(timeout=max(1.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                rcs.append(proc.wait(timeout=10))
        wall = time.monotonic() - started
    finally:
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        for f in logs:
            f.close()
    usage = cpu.usage_s()
    cpu.close()
    return HandRun(wall_s=wall, rcs=rcs, out_dirs=out_dirs, cpu_s=usage)


def rank_records(dirs: Sequence[Path]) -> list[dict[str, Any]]:
    records = []
    for d in dirs:
        for path in sorted(Path(d).rglob("rank-*.json")):
            with contextlib.suppress(OSError, ValueError):
                records.append(json.loads(path.read_text()))
    return records


# ---------------------------------------------------------------------------------------- machine
def _cmd_version(argv: Sequence[str]) -> str:
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "n/a"
    return out.strip().splitlines()[0] if out.strip() else "n/a"


def machine_info() -> dict[str, Any]:
    cpu_model = "n/a"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    mem_gib = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = int(line.split()[1]) / 1024 / 1024
    return {
        "nproc": os.cpu_count(),
        "memory_gib": mem_gib,
        "kernel": platform.release(),
        "cpu_model": cpu_model,
        "loadavg": os.getloadavg(),
    }


def versions() -> dict[str, str]:
    torch_v = _cmd_version([PYTHON, "-c", "import torch; print(torch.__version__)"])
    ansible_v = _cmd_version(
        [PYTHON, "-c", "from ansible.release import __version__; print(__version__)"]
    )
    return {
        "python": platform.python_version(),
        "torch": torch_v,
        "ansible-core": ansible_v,
        "openssh": _cmd_version(["sh", "-c", "ssh -V 2>&1"]),
        "iperf3": _cmd_version(["iperf3", "--version"]),
    }
