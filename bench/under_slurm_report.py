# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""BENCHMARKS.md's sections on the Slurm front-end (bench/under_slurm.py's results) and the
model of a 1,024-node run built from them. Numbers a lab cannot give are the model's stated
assumptions (ASSUMED), each with where it comes from."""

from __future__ import annotations

import math
from typing import Any

from bench.common import fmt

NODES = 1024
GOAL_S = 300
# What the lab cannot measure, each (seconds, where it comes from).
ASSUMED = {
    "fan-out": (
        2.0,
        "one srun step launch on 1,024 nodes (slurmd's launch tree, TreeWidth 50 by default: two "
        "levels); the lab's 8 nodes give only the slope of a flat launch",
    ),
    "stdin": (
        1.1,
        "the bundle (127 KB) written by srun to every task's own I/O connection: 130 MB from the "
        "control machine at 1 Gbit/s (0.1 s at 10 Gbit/s)",
    ),
    "rendezvous": (
        20.0,
        "torchrun's static rendezvous and the TCPStore handshake of 8,192 ranks on the master",
    ),
    "check": (
        60.0,
        "the rank script's default check (every test, 1K..1M bandwidth, NCCL on GPUs) on 8,192 "
        "ranks: a round figure, no measurement stands behind it",
    ),
    "round": (
        0.15,
        "one pairwise round on GPUs: two barriers of 8,192 ranks, a new peer's NCCL connection, "
        "6 x 64 MiB exchanged both ways (~10 ms at 50 GB/s) and the round's record written",
    ),
    "results": (
        2.0,
        "every node's results back through srun's stdout: ~200 KB per node (rank JSONs, NCCL "
        "INFO logs; at most 4 MiB per node: then 34 s at 1 Gbit/s)",
    ),
}


def overhead_line(r: dict[str, Any]) -> str:
    return (
        f"{r['nodes']} nodes x {r['nproc_per_node']} ranks: slurm command {fmt(r['command_s'])} s "
        f"vs srun + torchrun by hand {fmt(r['hand_s'])} s = {fmt(r['ratio'], 2)}x"
    )


def cpu_line(r: dict[str, Any]) -> str:
    rows = r["by_size"]
    sizes = r["sizes"]
    total = ", ".join(f"{n}: {fmt(rows[str(n)]['slurm_rusage_cpu_s'], 2)}" for n in sizes)
    slopes = r["slopes"]
    return (
        f"slurm command CPU s {total}; slope {fmt(slopes['slurm_rusage_cpu_s'], 3)} s per node "
        f"(validate.yml {fmt(slopes['ansible_rusage_cpu_s'], 2)} s per node)"
    )


def model_line(m: dict[str, Any]) -> str:
    return (
        f"{fmt(m['total_s'], 0)} s modelled ({fmt(m['measured_s'], 0)} s from lab measurements, "
        f"the rest assumed); pairwise {m['rounds']} rounds {fmt(m['pairwise_s'], 0)} s"
    )


def _stage(r: dict[str, Any], name: str) -> float:
    return float((r.get("stages") or {}).get(name) or 0.0)


def model(overhead: dict[str, Any] | None, cpu: dict[str, Any] | None) -> dict[str, Any] | None:
    """A 1,024-node run from the measurements: -> rows (part, seconds, basis) and totals."""
    if not overhead or not cpu or "error" in overhead or "error" in cpu:
        return None
    slope = cpu["slopes"]["slurm_rusage_cpu_s"] or 0.0
    node_side = _stage(overhead, "observe: wait for records")
    fixed = sum(
        _stage(overhead, s)
        for s in ("imports", "salloc", "scontrol show job", "scontrol hostnames", "bundle build")
    )
    report = _stage(overhead, "report build")
    rounds = NODES - 1  # files/nccl_check_pairwise.py tournament(): the circle method
    rows = [
        ("start: imports, allocation, node names, bundle", fixed, "measured (2 nodes)"),
        ("observe step: facts, listeners, torch probe, ring probes on every node", node_side,
         "measured (2 nodes): the nodes work in parallel, each probes its 2 ring peers only"),
        ("two srun launches (observe, launch)", 2 * ASSUMED["fan-out"][0], ASSUMED["fan-out"][1]),
        ("the bundle on stdin, twice", 2 * ASSUMED["stdin"][0], ASSUMED["stdin"][1]),
        (f"control CPU that grows with nodes: {fmt(slope, 3)} s x {NODES}", slope * NODES,
         "measured slope between 2 and 8 nodes (linear: a term growing faster than n would not "
         "show at 8 nodes)"),
        ("rendezvous of 8,192 ranks", *ASSUMED["rendezvous"]),
        ("the check", *ASSUMED["check"]),
        (f"pairwise: {rounds} rounds x {ASSUMED['round'][0]} s", rounds * ASSUMED["round"][0],
         "rounds from the circle method (n - 1 for even n, never log2 n); "
         + ASSUMED["round"][1]),
        ("results back", *ASSUMED["results"]),
        ("report build (its fixed part)", report, "measured (2 nodes); its per-node part is in "
         "the slope"),
    ]  # fmt: skip
    measured = fixed + node_side + slope * NODES + report
    total = sum(seconds for _, seconds, _ in rows)
    lab_round = 3.1 / 9  # section "Pairwise rounds": 8 hosts, 7 + 2 rounds in 3.1 s (gloo, CPU)
    return {
        "rows": rows,
        "total_s": total,
        "measured_s": measured,
        "rounds": rounds,
        "pairwise_s": rounds * ASSUMED["round"][0],
        "pairwise_lab_round_s": lab_round,
        "pairwise_at_lab_round_s": rounds * lab_round,
        "round_budget_s": (GOAL_S - (total - rounds * ASSUMED["round"][0])) / rounds,
        "log2_rounds": math.ceil(math.log2(NODES)),
        "met": total <= GOAL_S,
    }


def overhead_section(r: dict[str, Any], header: list[str]) -> list[str]:
    out = ["## 5. Under Slurm: the slurm command against srun + torchrun by hand", "", *header]
    out += [
        f"bench/under_slurm.py. A {r['nodes']}-host lab with a real Slurm (`Lab(n, slurm=True)`: "
        "slurmctld, one slurmd per host, munge), gloo on CPU, "
        f"{r['nproc_per_node']} ranks per node and the project's default check (as section 1). "
        "In turns on the same lab: torchrun by hand through one `srun` (one task per node, "
        "static rendezvous on the first node's fabric address, GLOO_SOCKET_IFNAME set, the same "
        "rank script and arguments), then `bin/nccl-preflight slurm -N "
        f"{r['nodes']} --config FILE` (its own salloc, observe step, judgement, launch step, "
        "report, scancel), timed by bench/slurm_timer.py from the process's start to its end.",
        "",
        f"- srun + torchrun by hand: **{fmt(r['hand_s'])} s**; the slurm command: "
        f"**{fmt(r['command_s'])} s**; ratio **{fmt(r['ratio'], 2)}x** (goal <= 1.2x)",
        f"- every run passed: {r['all_passed']}",
        "",
        "Where the command's time goes (median seconds; bench/slurm_timer.py wraps each stage):",
        "",
        "| stage | seconds |",
        "|---|---|",
    ]
    out += [f"| {stage} | {fmt(sec, 2)} |" for stage, sec in r["stages"].items()]
    out += [
        "",
        "Each turn:",
        "",
        "| by hand s | command s | ratio | class | load |",
        "|---|---|---|---|---|",
    ]
    for t in r["turns"]:
        out.append(
            f"| {fmt(t['hand']['wall_s'])} | {fmt(t['command']['wall_s'])} | "
            f"{fmt(t['ratio'], 2)}x | {t['command']['class']} | "
            f"{', '.join(f'{x:.1f}' for x in t['load'])} |"
        )
    return [*out, ""]


def cpu_section(r: dict[str, Any], header: list[str]) -> list[str]:
    out = ["## 6. Control-machine CPU per node: validate.yml over SSH and the slurm command", ""]
    out += [*header]
    out += [
        "bench/under_slurm.py. The same lab for both front-ends at each size (sshd and slurmd on "
        "every host), a whole run each (the QUICK check: `--max-bytes 16K --iters 2 --warmup 1`, "
        "1 rank per node): `bin/nccl-preflight -i <lab inventory>` and `bin/nccl-preflight slurm "
        "-N n --config FILE`. CPU = getrusage of the command and every descendant it waited for "
        "(os.wait4), user + sys: under Slurm that is the command with its salloc, scontrol, "
        "srun and scancel processes (the tasks on the nodes run under slurmd, not here); under "
        "Ansible ansible-playbook, its workers and ssh clients. The cgroup column also holds what "
        "daemonizes (ssh's ControlPersist masters). Bytecode is cached as on a user's machine "
        "(this machine's sessions set PYTHONDONTWRITEBYTECODE; the bench unsets it).",
        "",
        "| nodes | validate.yml wall s | validate.yml CPU s | cgroup CPU s | per node | "
        "slurm wall s | slurm CPU s | cgroup CPU s | per node |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n in r["sizes"]:
        row = r["by_size"][str(n)]
        out.append(
            f"| {n} | {fmt(row['ansible_wall_s'])} | {fmt(row['ansible_rusage_cpu_s'], 2)} | "
            f"{fmt(row['ansible_cgroup_cpu_s'], 2)} | {fmt(row['ansible_rusage_cpu_s'] / n, 2)} | "
            f"{fmt(row['slurm_wall_s'])} | {fmt(row['slurm_rusage_cpu_s'], 2)} | "
            f"{fmt(row['slurm_cgroup_cpu_s'], 2)} | {fmt(row['slurm_rusage_cpu_s'] / n, 3)} |"
        )
    s = r["slopes"]
    out += [
        "",
        f"- slope (least squares over the sizes, CPU s per extra node): slurm command "
        f"**{fmt(s['slurm_rusage_cpu_s'], 3)}** (cgroup {fmt(s['slurm_cgroup_cpu_s'], 3)}), "
        f"validate.yml **{fmt(s['ansible_rusage_cpu_s'], 2)}** (cgroup "
        f"{fmt(s['ansible_cgroup_cpu_s'], 2)})",
        "- the goal (<= 0.05 s per node under Slurm) is read as the slope: the marginal CPU of "
        "one more node is what scales to 1,024 nodes; the fixed part (start, imports, report) "
        "is paid once per run whatever the size, and divided by 2 nodes it says nothing about "
        "1,024.",
        "",
    ]
    return out


def model_section(m: dict[str, Any]) -> list[str]:
    out = [
        "## 7. A 1,024-node run under Slurm: a model from sections 5 and 6",
        "",
        "An *estimate, not a measurement*: the pre-flight, the check and the pairwise verdict "
        f"of {NODES} nodes x 8 GPUs with the slurm command inside an allocation (sbatch). Rows "
        "marked measured come from the lab; the others are assumptions the lab cannot test, "
        "each with its reason.",
        "",
        "| part | seconds | basis |",
        "|---|---|---|",
    ]
    out += [f"| {part} | {fmt(sec, 1)} | {basis} |" for part, sec, basis in m["rows"]]
    out += [
        "",
        f"- total **{fmt(m['total_s'], 0)} s** (goal <= {GOAL_S} s): "
        f"**{'met' if m['met'] else 'not met'}** as modelled; of it "
        f"{fmt(m['measured_s'], 0)} s measured on the lab",
        f"- the pairwise rounds dominate: {m['rounds']} rounds (files/nccl_check_pairwise.py "
        "`tournament`, the circle method; each node meets every other once), not "
        f"ceil(log2 {NODES}) = {m['log2_rounds']}, plus one round per suspect of the second "
        f"pass. At the lab's gloo round ({fmt(m['pairwise_lab_round_s'], 2)} s: section "
        f'"Pairwise rounds", 8 hosts) they alone take {fmt(m["pairwise_at_lab_round_s"], 0)} '
        f"s; the whole run fits 5 minutes only if a round costs <= "
        f"{fmt(m['round_budget_s'], 3)} s on the real fabric.",
        "",
    ]
    return out
