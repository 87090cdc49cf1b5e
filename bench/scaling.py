# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Scaling: pre-flight only (`--tags preflight`: inputs, facts, environment, pre-flight, cleanup,
report; no torch launch) on 2, 8, 16 and 32 lab hosts. Wall time, slope per host, which phase
grows. Goal: 32 hosts <= 2x the time of 2.

Then the knobs that are ours (ansible.cfg: forks, pipelining, ControlPersist; module transfer),
each measured at the smallest and largest size through ANSIBLE_* environment variables, against
the project's ansible.cfg as it is.

Every lab host shares this machine's cores, so the CPU the hosts' modules use (counted in a cgroup
around the lab's sshd processes) is reported too: on real hosts that work runs in parallel.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench.common import PHASES, lab_session, log, median, run_playbook

GOAL = 2.0
SIZES = (2, 8, 16, 32)
ARGS = ["--tags", "preflight"]

# name -> (what it is, environment). "project" is ansible.cfg as committed.
VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    "project": ("ansible.cfg as committed (forks 50, pipelining, ControlPersist 60s)", {}),
    "ansible-defaults": (
        "ansible-core defaults: forks 5, no pipelining, ssh_args -C -o ControlMaster=auto "
        "-o ControlPersist=60s",
        {
            "ANSIBLE_FORKS": "5",
            "ANSIBLE_PIPELINING": "False",
            "ANSIBLE_SSH_ARGS": "-C -o ControlMaster=auto -o ControlPersist=60s",
        },
    ),
    "no-controlpersist": (
        "project, but a new SSH connection per task (ControlMaster=no)",
        {"ANSIBLE_SSH_ARGS": "-o ControlMaster=no -o ServerAliveInterval=15"},
    ),
    "forks-4": ("project, forks 4 (hosts in batches of 4)", {"ANSIBLE_FORKS": "4"}),
    "zip-stored": (
        "project + module_compression ZIP_STORED (no deflate of each module payload)",
        {"ANSIBLE_MODULE_COMPRESSION": "ZIP_STORED"},
    ),
}
TUNING_SIZES = (2, 32)
# Sizes above this get `large_repeats` runs (default 1) so that `make bench` stays near 25 min.
LARGE = 8


def measure(
    workdir: Path, n_hosts: int, variant: str, repeat: int, env: dict[str, str]
) -> dict[str, Any]:
    with lab_session(n_hosts, slots=1) as (lab, cpu):
        pb = run_playbook(
            lab, cpu, workdir / "scaling", f"{variant}-{n_hosts}-r{repeat}", ARGS, env=env
        )
    log(
        f"scaling: {variant} {n_hosts} hosts: {pb.wall_s:.1f}s rc {pb.rc} "
        f"(control cpu {pb.control_cpu_s or 0:.1f}s, node cpu {pb.node_cpu_s or 0:.1f}s)"
    )
    return {
        "n_hosts": n_hosts,
        "variant": variant,
        "wall_s": pb.wall_s,
        "rc": pb.rc,
        "phases": pb.phases,
        "tasks": pb.tasks,
        "control_cpu_s": pb.control_cpu_s,
        "node_cpu_s": pb.node_cpu_s,
        "log": pb.log_path,
        "load_after": os.getloadavg()[0],
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "wall_s": median([r["wall_s"] for r in rows]),
        "phases": {p: median([r["phases"].get(p, 0.0) for r in rows]) for p in PHASES},
        "control_cpu_s": median([r["control_cpu_s"] for r in rows]),
        "node_cpu_s": median([r["node_cpu_s"] for r in rows]),
        "rcs": [r["rc"] for r in rows],
        "load_after": median([r.get("load_after") for r in rows]),
        "n": len(rows),
    }


def slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares seconds per host."""
    if len(points) < 2:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else None


def run(
    workdir: Path,
    repeats: int,
    sizes: tuple[int, ...] = SIZES,
    variants: tuple[str, ...] = tuple(VARIANTS),
    tuning_repeats: int | None = None,
    tuning_sizes: tuple[int, ...] = TUNING_SIZES,
    large_repeats: int = 1,
) -> dict[str, Any]:
    results: dict[str, dict[int, dict[str, Any]]] = {}
    raw: list[dict[str, Any]] = []
    for variant in variants:
        _, env = VARIANTS[variant]
        var_sizes = sizes if variant == "project" else tuning_sizes
        reps = repeats if variant == "project" else (tuning_repeats or repeats)
        results[variant] = {}
        for n in var_sizes:
            rows = []
            for i in range(reps if n <= LARGE else min(reps, large_repeats)):
                row = measure(workdir, n, variant, i, env)
                rows.append(row)
                raw.append(row)
            results[variant][n] = summarize(rows)
    project = results.get("project", {})
    pts = [(n, s["wall_s"]) for n, s in sorted(project.items()) if s["wall_s"] is not None]
    smallest, largest = (min(project), max(project)) if project else (None, None)
    ratio = (
        project[largest]["wall_s"] / project[smallest]["wall_s"]
        if project and smallest != largest
        else None
    )
    growth = {}
    if project and smallest != largest:
        growth = {
            p: (project[largest]["phases"][p] or 0) - (project[smallest]["phases"][p] or 0)
            for p in PHASES
        }
    node_cpu_per_host = None
    if project and smallest != largest:
        a, b = project[smallest]["node_cpu_s"], project[largest]["node_cpu_s"]
        if a is not None and b is not None:
            node_cpu_per_host = (b - a) / (largest - smallest)
    return {
        "name": "scaling",
        "goal": f"pre-flight on {largest} hosts <= {GOAL}x the time on {smallest}",
        "met": ratio is not None and ratio <= GOAL,
        "ratio": ratio,
        "slope_s_per_host": slope(pts),
        "node_cpu_s_per_host": node_cpu_per_host,
        "phase_growth_s": growth,
        "results": {v: {str(n): s for n, s in r.items()} for v, r in results.items()},
        "variants": {v: VARIANTS[v][0] for v in variants},
        "raw": raw,
        "repeats": repeats,
        "large_repeats": large_repeats,
        "large": LARGE,
        "control_projection_s": _projection(project),
    }


def _projection(project: dict[int, dict[str, Any]]) -> dict[str, float] | None:
    """An estimate, not a measurement: the wall time if the hosts were machines of their own.

    Only the control machine's CPU is shared then: wall(n) ~ wall(smallest) + extra control
    CPU / this machine's cores.
    """
    if len(project) < 2:
        return None
    small = min(project)
    base, cpu0 = project[small]["wall_s"], project[small]["control_cpu_s"]
    if base is None or cpu0 is None:
        return None
    cores = os.cpu_count() or 1
    return {
        str(n): base + max(0.0, (s["control_cpu_s"] or cpu0) - cpu0) / cores
        for n, s in sorted(project.items())
    }
