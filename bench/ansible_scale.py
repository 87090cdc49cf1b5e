# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The Ansible path at size (issue 37 item 7): the control machine's CPU per host of a whole
validate.yml run at 2 to 32 lab hosts, taken apart, against Ansible's own floor for the same
shape. Goal: <= 1 CPU s per host (read as the slope: the CPU of one more host).

At each size a fresh lab (`Lab(n, slots=1)`: a network namespace and an sshd per host), then in
turn on the same lab:

- validate.yml, the QUICK check (`--max-bytes 16K --iters 2 --warmup 1`, 1 rank per host), with
  the project's ansible.cfg as committed (or ``env``'s ANSIBLE_* on top: the knobs), run through
  bench/ansible_timer.py (ansible-playbook in its own process, its CPU taken apart by worker);
- its *mirror* (bench/ansible_floor.py, written from this run's own bench_timer record): the same
  plays, tasks, hosts, run_once, delegate_to and loops, every node call an
  ansible.builtin.ping and every controller task an ansible.builtin.set_fact: Ansible's floor for
  this shape, without any of the project's code.

CPU = os.wait4's rusage of ansible-playbook and every descendant it waited for (its workers and
their ssh clients), user + sys; the cgroup column also holds what daemonizes (ssh's ControlPersist
masters). Per worker (one per task and host): its own CPU (Ansible's task executor, templating,
the project's action plugins and filters) and its children's (ssh). The main process: the
strategy loop, the variables of every task and host, results, callbacks. CPU is the primary
figure; wall time moves with the machine's load (given beside every wall figure).

    .venv/bin/python -m bench.run --only ansible_scale [--sizes 2,4,8,16,32] [--repeats 1]
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.ansible_floor import CONTROLLER, MODULE, recorded_tasks, short_action, write_mirror
from bench.common import (
    CALLBACK_DIR,
    PLAYBOOK,
    PROJECT_ROOT,
    VENV_BIN,
    ansible_env,
    lab_session,
    log,
    median,
)
from bench.under_slurm import QUICK, slope, timed_process
from tests.lab.harness import Lab

SIZES = (2, 4, 8, 16, 32)
GOAL_PER_HOST = 1.0
# The lab's hosts share this machine's 2 cores: 32 torch imports at once under other sessions'
# load take minutes, not the role's 60 s (preflight_python_timeout), and the run its time; a
# 32-rank all_to_all step there outlasts the 30 s stall bound (nccl_stall_timeout) now and then.
LAB_TIMEOUTS = {
    "preflight_python_timeout": 600,
    "nccl_run_timeout": 600,
    "nccl_stall_timeout": 300,
}
PLAYBOOK_TIMEOUT_S = 2400  # a whole run of 32 lab hosts at load 40-70 took 15 min and more


def playbook_env(timer_out: Path, extra: dict[str, str] | None) -> dict[str, str]:
    """ansible.cfg as committed, bench_timer beside the project's callbacks (the mirror needs
    its record), bytecode kept as on a user's machine; ``extra``: knobs on top."""
    env = ansible_env({"BENCH_TIMER_OUT": str(timer_out)})
    env["ANSIBLE_CALLBACK_PLUGINS"] = f"{CALLBACK_DIR}:{PROJECT_ROOT / 'plugins' / 'callback'}"
    env["PYTHONPATH"] = str(PROJECT_ROOT / "src")
    env.update(extra or {})
    return env


def timed_playbook(
    lab: Lab, workdir: Path, label: str, playbook: Path, args: list[str],
    extra_env: dict[str, str] | None = None, profile: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """ansible-playbook through bench/ansible_timer.py: -> rc, wall, CPU (rusage, cgroup), the
    main process's CPU and one row per worker."""
    out = workdir / f"{label}-cpu.json"
    argv = [str(VENV_BIN / "python"), "-m", "bench.ansible_timer", str(out)]
    if profile:
        argv += ["--profile", str(workdir / f"{label}-prof")]
    argv += ["-i", str(lab.inventory_dir), str(playbook), *args]
    timer = workdir / f"{label}-timer.json"
    env = playbook_env(timer, extra_env)
    result = timed_process(argv, env, workdir / f"{label}.log", label, timeout=PLAYBOOK_TIMEOUT_S)
    parts = json.loads(out.read_text()) if out.exists() else {}
    workers = []
    side = Path(parts.get("workers") or out.with_suffix(".workers.jsonl"))
    if side.exists():
        workers = [json.loads(line) for line in side.read_text().splitlines() if line.strip()]
    result.update(
        cpu_main_s=parts.get("cpu_main_s"),
        maxrss_main_mib=(parts.get("maxrss_main_kib") or 0) / 1024,
        private_main_mib=parts.get("private_main_mib"),
        workers=workers,
        events=json.loads(timer.read_text())["events"] if timer.exists() else [],
    )
    return result


def split(run: dict[str, Any]) -> dict[str, float]:
    """The run's CPU by where it went: the main process, the workers of controller-only tasks,
    of node calls (their Python), their ssh clients, and what is left (the interpreter's start
    before the first worker is in main; daemonized ssh masters only in the cgroup)."""
    parts: dict[str, float] = defaultdict(float)
    for w in run["workers"]:
        action = short_action(w["action"])
        kind = "workers: controller tasks" if action in CONTROLLER else "workers: node calls"
        if action not in CONTROLLER | MODULE:
            kind = "workers: other"
        parts[kind] += w["cpu_self_s"]
        parts["ssh clients (workers' children)"] += w["cpu_children_s"]
    parts["main process"] = run.get("cpu_main_s") or 0.0
    return dict(parts)


def by_task(run: dict[str, Any]) -> list[dict[str, Any]]:
    """CPU per task (summed over its hosts and loop items), most first."""
    rows: dict[str, dict[str, Any]] = {}
    for w in run["workers"]:
        row = rows.setdefault(
            w["task"],
            {"task": w["task"], "action": short_action(w["action"]), "role": w["role"],
             "workers": 0, "cpu_s": 0.0, "ssh_s": 0.0},
        )  # fmt: skip
        row["workers"] += 1
        row["cpu_s"] += w["cpu_self_s"]
        row["ssh_s"] += w["cpu_children_s"]
    return sorted(rows.values(), key=lambda r: -(r["cpu_s"] + r["ssh_s"]))


def measure(
    workdir: Path, n: int, repeat: int, variant: str = "project",
    extra_env: dict[str, str] | None = None, profile: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """validate.yml, then its mirror, on one fresh n-host lab."""
    label = f"{variant}-{n}-r{repeat}"
    variables = {
        "nccl_run_id": f"bench-{label}-{os.getpid()}",
        "nccl_report_root": str(workdir / "reports"),
        "nccl_check_args": QUICK,
        **LAB_TIMEOUTS,
    }
    with lab_session(n, slots=1) as (lab, _cpu):
        names = [h.inventory_name for h in lab.hosts]
        load_before = os.getloadavg()
        validate = timed_playbook(
            lab, workdir, label, PLAYBOOK, ["-e", json.dumps(variables)], extra_env, profile
        )
        load_mid = os.getloadavg()
        plays = recorded_tasks(validate.pop("events"), names)
        book = write_mirror(workdir / f"mirror-{label}.yml", plays, False, lab, workdir)
        mirror = timed_playbook(lab, workdir, f"mirror-{label}", book, [], extra_env)
        mirror.pop("events")
        load_after = os.getloadavg()
    verdict = workdir / "reports" / variables["nccl_run_id"] / "verdict.json"
    row = {
        "hosts": n,
        "repeat": repeat,
        "variant": variant,
        "validate": summary_of(validate),
        "mirror": summary_of(mirror),
        "class": json.loads(verdict.read_text())["class"] if verdict.exists() else None,
        "load": [load_before[0], load_mid[0], load_after[0]],
        "tasks": by_task(validate)[:15],
        "mirror_tasks": by_task(mirror)[:8],
    }
    log(
        f"ansible_scale: {variant} {n} hosts: validate.yml {validate['wall_s']:.1f} s CPU "
        f"{validate['rusage_cpu_s']:.1f} s ({validate['rusage_cpu_s'] / n:.2f}/host) rc "
        f"{validate['rc']} {row['class']}; mirror {mirror['wall_s']:.1f} s CPU "
        f"{mirror['rusage_cpu_s']:.1f} s; load {load_after[0]:.1f}"
    )
    return row


def summary_of(run: dict[str, Any]) -> dict[str, Any]:
    return {
        "rc": run["rc"],
        "wall_s": run["wall_s"],
        "cpu_s": run["rusage_cpu_s"],
        "cgroup_cpu_s": run["cgroup_cpu_s"],
        "maxrss_main_mib": run["maxrss_main_mib"],
        "private_main_mib": run["private_main_mib"],
        "worker_private_mib": median([w.get("private_mib") for w in run["workers"]]),
        "workers": len(run["workers"]),
        "split": split(run),
    }


def run(
    workdir: Path, repeats: int = 1, sizes: tuple[int, ...] = SIZES, variant: str = "project",
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    where = workdir / "ansible-scale"
    where.mkdir(parents=True, exist_ok=True)
    rows = [measure(where, n, i, variant, extra_env) for n in sizes for i in range(repeats)]
    return summarize(rows, sizes)


def merge(previous: dict[str, Any] | None, result: dict[str, Any]) -> dict[str, Any]:
    """This run's result with the stored rows of the sizes it did not measure (a stored error or
    an older result without rows adds nothing): sizes measured one at a time, one slope."""
    if not previous or "error" in previous or "error" in result:
        return result
    sizes = set(result["sizes"])
    kept = [r for r in previous.get("rows", []) if r["hosts"] not in sizes]
    if not kept:
        return result
    rows = kept + result["rows"]
    merged = summarize(rows, tuple(sorted({r["hosts"] for r in rows})))
    earlier = [e for e in previous.get("earlier", []) if not set(e["sizes"]) <= sizes]
    merged["earlier"] = [*earlier, {
        "sizes": sorted({r["hosts"] for r in kept}),
        **{k: previous.get(k) for k in ("date", "duration_s", "load_before", "load_after")},
    }]  # fmt: skip
    return merged


def summarize(rows: list[dict[str, Any]], sizes: tuple[int, ...]) -> dict[str, Any]:
    """Medians per size, the slopes (CPU s per extra host) of validate.yml, of the mirror and of
    each part of validate.yml's CPU."""
    by_size: dict[str, dict[str, Any]] = {}
    for n in sizes:
        mine = [r for r in rows if r["hosts"] == n]
        if not mine:
            continue
        entry: dict[str, Any] = {}
        for side in ("validate", "mirror"):
            for key in ("wall_s", "cpu_s", "cgroup_cpu_s", "maxrss_main_mib", "private_main_mib",
                        "worker_private_mib", "workers"):  # fmt: skip
                entry[f"{side}_{key}"] = median([r[side][key] for r in mine])
            entry[f"{side}_rc"] = [r[side]["rc"] for r in mine]
            parts = {p for r in mine for p in r[side]["split"]}
            entry[f"{side}_split"] = {
                p: median([r[side]["split"].get(p, 0.0) for r in mine]) for p in sorted(parts)
            }
        entry["class"] = [r["class"] for r in mine]
        entry["load"] = [r["load"] for r in mine]
        entry["tasks"] = mine[0]["tasks"]
        by_size[str(n)] = entry
    measured = [n for n in sizes if str(n) in by_size]

    def fit(get: Any) -> float | None:
        return slope([(n, get(by_size[str(n)])) for n in measured])

    slopes = {
        "validate": fit(lambda e: e["validate_cpu_s"]),
        "validate_cgroup": fit(lambda e: e["validate_cgroup_cpu_s"]),
        "mirror": fit(lambda e: e["mirror_cpu_s"]),
        "validate_wall": fit(lambda e: e["validate_wall_s"]),
        # Workers per extra host: the tasks each host runs or skips (one worker per task and
        # host, run_once tasks one in all): what the control CPU per host follows.
        "validate_workers": fit(lambda e: e["validate_workers"]),
        "mirror_workers": fit(lambda e: e["mirror_workers"]),
    }
    parts = {p for e in by_size.values() for p in e["validate_split"]}
    slopes["validate_split"] = {
        p: fit(lambda e, p=p: e["validate_split"].get(p, 0.0)) for p in sorted(parts)
    }
    per_host = slopes["validate"]
    # A run that did not pass holds its failure's waits (a rank lost: the check-in's wait, the
    # pairwise relaunch): its CPU is no healthy run's, so the goal is not judged on it.
    healthy = all(c == "passed" for e in by_size.values() for c in e["class"])
    return {
        "name": "ansible_scale",
        "goal": f"validate.yml's control CPU <= {GOAL_PER_HOST:g} s per host (the slope: CPU "
        "per extra host)",
        "met": None if per_host is None or not healthy else per_host <= GOAL_PER_HOST,
        "sizes": measured,
        "by_size": by_size,
        "slopes": slopes,
        "rows": rows,
        "repeats": max((r["repeat"] for r in rows), default=-1) + 1,
    }
