# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Under Slurm (issue 27 item 6): `bin/nccl-preflight slurm` on the lab's real Slurm
(tests/lab/slurm.py, `Lab(n, slurm=True)`).

- slurm_overhead: the slurm command against torchrun launched by hand with `srun` on the same
  lab, in turns (by hand, then the command), 2 ranks per node and the project's default check
  (as section 1). Goal: <= 1.2x.
- slurm_cpu: the control machine's CPU of a whole run (QUICK check, 1 rank per node) at 2, 4 and
  8 nodes through both front-ends on the same lab: validate.yml over SSH (bin/nccl-preflight -i)
  and the slurm command. Goal: <= 0.05 CPU s per node under Slurm.

CPU is read two ways: getrusage of the command and its waited-for descendants (os.wait4: under
Slurm that is the command and its srun/salloc/scontrol processes; the tasks on the nodes run under
slurmd, not here), and a cgroup around the command (which also holds what daemonizes, such as
ssh's ControlPersist masters under Ansible).
Each run of the slurm command goes through bench/slurm_timer.py, which times its stages.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import (
    PROJECT_ROOT,
    VENV_BIN,
    CpuGroup,
    ansible_env,
    check_timeout_for,
    lab_session,
    log,
    median,
)
from tests.lab.harness import Lab

OVERHEAD_GOAL = 1.2
CPU_GOAL_PER_NODE = 0.05
NPROC = 2  # ranks per node in the overhead turns (section 1's layout)
RUN_TIMEOUT = 300
QUICK = ["--max-bytes", "16K", "--iters", "2", "--warmup", "1"]  # tests/lab/runs.py QUICK
CPU_SIZES = (2, 4, 8)
OVERHEAD_NODES = 2
PORT = 29500


def command_env(lab: Lab) -> dict[str, str]:
    """The control machine's environment for both front-ends: this checkout's src first."""
    env = {k: v for k, v in ansible_env().items() if not k.startswith(("SLURM_", "SBATCH_"))}
    env.update(lab.slurm_env())
    env["PYTHONPATH"] = str(PROJECT_ROOT / "src")
    for name in ("ANSIBLE_CALLBACKS_ENABLED", "ANSIBLE_CALLBACK_PLUGINS"):
        env.pop(name, None)  # no bench_timer: ansible.cfg's callbacks, as a user's run has
    return env  # ansible_env: a user's Python, keeping its bytecode (users_python)


def timed_process(
    argv: list[str], env: dict[str, str], log_path: Path, label: str, timeout: float = 900
) -> dict[str, Any]:
    """Run argv from the project root; -> rc, wall_s, rusage_cpu_s (os.wait4: it and its waited
    descendants), cgroup_cpu_s (everything it started, daemons included)."""
    cpu = CpuGroup(f"ctl-{label}")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as out:
        out.write(f"$ {shlex.join(argv)}\n".encode())
        out.flush()
        started = time.monotonic()
        proc = subprocess.Popen(
            argv, cwd=PROJECT_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, preexec_fn=cpu.preexec(), start_new_session=True,
        )  # fmt: skip
        deadline = started + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.killpg(proc.pid, 9)
            time.sleep(0.05)
        wall = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    cgroup = cpu.usage_s()
    cpu.close()
    return {
        "rc": proc.returncode,
        "wall_s": wall,
        "rusage_cpu_s": usage.ru_utime + usage.ru_stime,
        "maxrss_kib": usage.ru_maxrss,  # the largest process of it and its waited descendants
        "cgroup_cpu_s": cgroup,
        "log": str(log_path),
    }


def write_config(
    lab: Lab, path: Path, nproc: int, check_args: list[str], extra: dict[str, Any] | None = None
) -> Path:
    """The slurm command's --config: the lab inventory's values (as the lab tests write it),
    then ``extra``."""
    values = {
        "nccl_fabric_cidr": lab.fabric_cidr,
        "nccl_backend": "gloo",
        "nccl_require_gpu": False,  # the lab has no GPU: a CPU run, said so
        "nccl_python": lab.python,
        "nccl_run_timeout": RUN_TIMEOUT,
        "nccl_nproc_per_node": nproc,
        "nccl_check_args": check_args,
        **(extra or {}),
    }
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items()))
    return path


def slurm_command(
    lab: Lab,
    workdir: Path,
    label: str,
    nproc: int,
    check_args: list[str],
    profile: bool | str = False,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One `bin/nccl-preflight slurm -N n` run (its own salloc) through bench/slurm_timer.py.
    ``profile``: True, cProfile on the wall clock; "cpu", on the main thread's CPU clock."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = write_config(lab, workdir / f"{label}.yml", nproc, check_args, extra)
    reports = workdir / f"reports-{label}"
    timer = workdir / f"{label}-timer.json"
    argv = [str(VENV_BIN / "python"), "-m", "bench.slurm_timer", str(timer)]
    if profile:
        flag = "--cpu-profile" if profile == "cpu" else "--profile"
        argv += [flag, str(workdir / f"{label}.prof")]
    argv += ["slurm", "-N", str(len(lab.hosts)), "--config", str(config)]
    argv += ["--report-root", str(reports)]
    result = timed_process(argv, command_env(lab), workdir / f"{label}.log", label)
    stages: dict[str, Any] = {}
    if timer.exists():
        stages = json.loads(timer.read_text())
    result["class"] = verdict_class(reports)
    result["stages"] = stages
    result["reports"] = str(reports)
    return result


def verdict_class(reports: Path) -> str | None:
    """The class in the one run's verdict.json under a report root of its own."""
    for verdict in sorted(reports.glob("*/verdict.json")):
        if verdict.parent.name != "latest":
            return str(json.loads(verdict.read_text())["class"])
    return None


def srun_by_hand(
    lab: Lab, workdir: Path, label: str, nproc: int, check_args: list[str]
) -> dict[str, Any]:
    """torchrun on every node through one `srun` (one task per node), as an operator would: the
    same rank script, arguments and layout; static rendezvous on the first node's fabric
    address, GLOO_SOCKET_IFNAME set."""
    out = workdir / f"hand-{label}"
    out.mkdir(parents=True, exist_ok=True)
    n = len(lab.hosts)
    script = (
        'exec "$0" -m torch.distributed.run --nnodes "$NNODES" --node-rank "$SLURM_NODEID" '
        '--nproc-per-node "$NPROC" --master-addr "$MASTER" --master-port "$PORT" '
        '--max-restarts 0 "$@" --out-dir "$OUT/$SLURMD_NODENAME"'
    )
    argv = [
        "srun", f"--nodes={n}", f"--ntasks={n}", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
        "sh", "-c", script, lab.python,
        str(PROJECT_ROOT / "files" / "nccl_check.py"),
        "--timeout", str(check_timeout_for(RUN_TIMEOUT)), *check_args,
    ]  # fmt: skip
    env = command_env(lab)
    ifname = lab.hosts[0].fabric_ifname
    env.update(
        {
            "NNODES": str(n), "NPROC": str(nproc), "MASTER": lab.hosts[0].fabric_addr,
            "PORT": str(PORT), "OUT": str(out), "GLOO_SOCKET_IFNAME": ifname,
            "NCCL_SOCKET_IFNAME": ifname, "NCCL_DEBUG": "INFO",
        }
    )  # fmt: skip
    result = timed_process(argv, env, workdir / f"hand-{label}.log", f"hand-{label}")
    result["ranks"] = len(list(out.rglob("rank-*.json")))
    return result


def ansible_command(lab: Lab, workdir: Path, label: str, check_args: list[str]) -> dict[str, Any]:
    """validate.yml over SSH through bin/nccl-preflight -i (the user's command)."""
    run_id = f"bench-{label}-{os.getpid()}"
    reports = workdir / "reports"
    variables = {
        "nccl_run_id": run_id,
        "nccl_report_root": str(reports),
        "nccl_run_timeout": RUN_TIMEOUT,
        "nccl_check_args": check_args,
    }
    argv = [str(VENV_BIN / "python"), str(PROJECT_ROOT / "bin" / "nccl-preflight")]
    argv += ["-i", str(lab.inventory_dir), "-e", json.dumps(variables)]
    result = timed_process(argv, command_env(lab), workdir / f"{label}.log", label)
    verdict = reports / run_id / "verdict.json"
    result["class"] = json.loads(verdict.read_text())["class"] if verdict.exists() else None
    return result


def stage_totals(stages: dict[str, Any], key: str = "") -> dict[str, float]:
    """Seconds per stage (summed over its calls); key "cpu_s": the process's CPU seconds."""
    totals: dict[str, float] = {}
    for event in stages.get("events", []):
        spent = event.get(key, 0.0) if key else event["end"] - event["start"]
        totals[event["stage"]] = totals.get(event["stage"], 0.0) + spent
    return totals


def run_overhead(workdir: Path, repeats: int) -> dict[str, Any]:
    """The slurm command against srun + torchrun by hand, in turns on one lab."""
    turns = []
    with lab_session(OVERHEAD_NODES, slots=NPROC, slurm=True) as (lab, _cpu):
        for i in range(repeats):
            hand = srun_by_hand(lab, workdir / "slurm-overhead", f"r{i}", NPROC, [])
            log(f"slurm_overhead: by hand {hand['wall_s']:.1f}s rc {hand['rc']}")
            cmd = slurm_command(
                lab, workdir / "slurm-overhead", f"r{i}", NPROC, [], profile=(i == 0)
            )
            log(f"slurm_overhead: command {cmd['wall_s']:.1f}s rc {cmd['rc']} {cmd['class']}")
            turns.append(
                {
                    "hand": hand,
                    "command": cmd,
                    "ratio": cmd["wall_s"] / hand["wall_s"],
                    "load": os.getloadavg(),
                }
            )
    ratio = median([t["ratio"] for t in turns])
    return {
        "name": "slurm_overhead",
        "goal": f"the slurm command's wall time <= {OVERHEAD_GOAL}x torchrun by hand with srun",
        "met": ratio is not None and ratio <= OVERHEAD_GOAL,
        "nodes": OVERHEAD_NODES,
        "nproc_per_node": NPROC,
        "hand_s": median([t["hand"]["wall_s"] for t in turns]),
        "command_s": median([t["command"]["wall_s"] for t in turns]),
        "ratio": ratio,
        "stages": {
            stage: median([stage_totals(t["command"]["stages"]).get(stage, 0.0) for t in turns])
            for stage in stage_totals(turns[0]["command"]["stages"])
        }
        if turns
        else {},
        "all_passed": all(t["hand"]["rc"] == 0 and t["command"]["rc"] == 0 for t in turns),
        "turns": turns,
        "repeats": len(turns),
    }


def slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares CPU seconds per extra node."""
    pts = [(x, y) for x, y in points if y is not None]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


def brief(run: dict[str, Any]) -> str:
    return f"{run['wall_s']:.1f}s, CPU {run['rusage_cpu_s']:.2f} s, rc {run['rc']}"


def run_cpu(workdir: Path, repeats: int, sizes: tuple[int, ...] = CPU_SIZES) -> dict[str, Any]:
    """Both front-ends on the same lab at each size, QUICK check, 1 rank per node."""
    rows = []
    for n in sizes:
        with lab_session(n, slots=1, slurm=True) as (lab, _cpu):
            for i in range(repeats):
                where = workdir / "slurm-cpu"
                ans = ansible_command(lab, where, f"ansible-{n}-r{i}", QUICK)
                log(f"slurm_cpu: {n} nodes validate.yml {brief(ans)}")
                cmd = slurm_command(lab, where, f"slurm-{n}-r{i}", 1, QUICK)
                log(f"slurm_cpu: {n} nodes slurm {brief(cmd)}")
                rows.append({"nodes": n, "repeat": i, "ansible": ans, "slurm": cmd,
                             "load": os.getloadavg()})  # fmt: skip
    return summarize_cpu(rows, sizes)


def summarize_cpu(rows: list[dict[str, Any]], sizes: tuple[int, ...]) -> dict[str, Any]:
    """Medians per size (keys: the size as text, as results.json keeps them) and the slopes."""
    by_size: dict[str, dict[str, Any]] = {}
    for n in sizes:
        mine = [r for r in rows if r["nodes"] == n]
        entry: dict[str, Any] = {}
        for front in ("ansible", "slurm"):
            for key in ("wall_s", "rusage_cpu_s", "cgroup_cpu_s"):
                entry[f"{front}_{key}"] = median([r[front][key] for r in mine])
            entry[f"{front}_rc"] = [r[front]["rc"] for r in mine]
            entry[f"{front}_class"] = [r[front]["class"] for r in mine]
        entry["slurm_stages"] = {
            stage: median([stage_totals(r["slurm"]["stages"]).get(stage, 0.0) for r in mine])
            for stage in stage_totals(mine[0]["slurm"]["stages"])
        }
        by_size[str(n)] = entry
    slopes = {
        f"{front}_{key}": slope([(n, by_size[str(n)][f"{front}_{key}"]) for n in sizes])
        for front in ("ansible", "slurm")
        for key in ("rusage_cpu_s", "cgroup_cpu_s")
    }
    slurm_slope = slopes["slurm_rusage_cpu_s"]
    return {
        "name": "slurm_cpu",
        "goal": f"control-machine CPU <= {CPU_GOAL_PER_NODE} s per node under Slurm (read as "
        "the slope: CPU per extra node)",
        "met": slurm_slope is not None and slurm_slope <= CPU_GOAL_PER_NODE,
        "sizes": list(sizes),
        "by_size": by_size,
        "slopes": slopes,
        "rows": rows,
        "repeats": max((r["repeat"] for r in rows), default=-1) + 1,
    }
