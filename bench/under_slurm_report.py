# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""BENCHMARKS.md's sections on the Slurm front-end (bench/under_slurm.py's results) and the
model of a 1,024-node run built from them. Numbers a lab cannot give are the model's stated
assumptions (ASSUMED), each with where it comes from."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from bench.common import Row, fmt
from bench.scale_report import measured_rows
from nccl_preflight.node.pair_schedule import DEFAULT_PAIR_ROUNDS, first_pass

NODES = 1024
GOAL_S = 300
# The lab's gloo round when bench/pairwise.py has no stored result: section "Pairwise rounds",
# 8 hosts, 7 + 2 rounds in 3.1 s.
LAB_ROUND_S = 3.1 / 9
# What the lab cannot measure, each (seconds, where it comes from).
ASSUMED = {
    "fan-out": (
        2.0,
        "one srun step launch on 1,024 nodes (slurmd's launch tree, TreeWidth 50 by default: two "
        "levels); the lab's 8 nodes give only the slope of a flat launch",
    ),
    "stdin": (
        3.1,
        "the steps' bundle (137 KB: node_step and what it imports, no control-machine code; "
        "the whole bundle node-check runs is 340 KB) and the run step's settings and messages "
        "(observe's, then the launch's: 241 KB at 1,024 nodes, bench/slurm_sizes.py) written by "
        "srun to every task's own I/O connection: 0.39 GB from the control machine at 1 Gbit/s "
        "(0.31 s at 10 Gbit/s)",
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


def round_budget(m: dict[str, Any]) -> str:
    """What a pairwise round may cost for the modelled run to stay within the goal."""
    if m["round_budget_s"] <= 0:
        return "the rest of the model alone exceeds 5 min, whatever a round costs"
    return f"within 5 min while a round costs <= {fmt(m['round_budget_s'], 1)} s"


def model_line(m: dict[str, Any]) -> str:
    return (
        f"{fmt(m['total_s'], 0)} s modelled ({fmt(m['measured_s'], 0)} s from lab measurements, "
        f"the rest assumed); the pairwise rounds bounded: {m['rounds']} rounds "
        f"({m['first_pass_rounds']} of the first pass, nccl_pair_rounds {DEFAULT_PAIR_ROUNDS}, "
        f"+ 1 second pass) x the lab's gloo round {fmt(m['pairwise_lab_round_s'], 2)} s = "
        f"{fmt(m['pairwise_s'], 1)} s (the whole tournament: {m['all_rounds']} rounds, "
        f"{fmt(m['all_rounds'] * m['pairwise_lab_round_s'], 0)} s); {round_budget(m)}; what a "
        "step is sent grows linearly (123 KB of settings at 1,024 nodes, measured on fake node "
        "lists)"
    )


def lab_round_s(pairwise: dict[str, Any] | None) -> tuple[float, str]:
    """(seconds per round, where from): the pairwise phase of bench/pairwise.py's largest lab over
    its rounds (first and second pass), else LAB_ROUND_S."""
    sizes = (pairwise or {}).get("sizes") or {}
    if "error" in (pairwise or {}) or not sizes:
        return LAB_ROUND_S, 'section "Pairwise rounds", 8 hosts: 9 rounds in 3.1 s'
    n = max(sizes, key=int)
    run = sizes[n]["runs"][0]
    rounds = int(run["rounds"]) + int(run["second_pass"])
    seconds = float(sizes[n]["pairwise_s"])
    load = ((pairwise or {}).get("load_before") or [None])[0]
    return seconds / rounds, (
        f'section "Pairwise rounds": {n} hosts, {rounds} rounds in {fmt(seconds, 1)} s, gloo '
        f"on this machine's 2 cores at load {fmt(load, 0)}, "
        f"{int(run['pair_bytes']) >> 20} MiB each way"
    )


def _stage(r: dict[str, Any], name: str) -> float:
    return float((r.get("stages") or {}).get(name) or 0.0)


def model(
    overhead: dict[str, Any] | None,
    cpu: dict[str, Any] | None,
    pairwise: dict[str, Any] | None = None,
    report_scale: tuple[float, str] | None = None,
    scale: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """A 1,024-node run from the measurements: -> rows (part, seconds, basis) and totals;
    ``report_scale``: (seconds, basis) of the report step measured at 1,024 x 8 ranks
    (bench/report_scale_report.py report_s), else its fixed part measured on 2 nodes."""
    if not overhead or not cpu or "error" in overhead or "error" in cpu:
        return None
    slope = cpu["slopes"]["slurm_rusage_cpu_s"] or 0.0
    node_side = _stage(overhead, "observe: wait for records")
    fixed = sum(
        _stage(overhead, s)
        for s in ("imports", "salloc", "scontrol show job", "scontrol hostnames", "bundle build")
    )
    report, report_basis = (
        _stage(overhead, "report build"),
        ("measured (2 nodes); its per-node part is in the slope"),
    )
    report_part = "report build (its fixed part)"
    if report_scale is not None:
        report, report_basis = report_scale
        report_part = "report build: JUnit, summary, verdict, report.html of 8,192 ranks"
    first = len(first_pass(NODES, DEFAULT_PAIR_ROUNDS))  # files/nccl_check_pairwise.py's pass 1
    rounds = first + 1  # the second pass: every suspect at once (pair_schedule.second_pass)
    lab_round, lab_basis = lab_round_s(pairwise)
    rows = [
        ("start: imports, allocation, node names, bundle", fixed, "measured (2 nodes)"),
        ("observe (run step): facts, listeners, torch probe, ring probes on every node", node_side,
         "measured (2 nodes): the nodes work in parallel, each probes its 2 ring peers only"),
        ("one srun launch (the run step: observe, then launch)", ASSUMED["fan-out"][0],
         ASSUMED["fan-out"][1]),
        ("the bundle and the settings on stdin (the launch's follow as one message)",
         ASSUMED["stdin"][0],
         ASSUMED["stdin"][1]),
        (f"control CPU that grows with nodes: {fmt(slope, 3)} s x {NODES}", slope * NODES,
         "measured slope between 2 and 8 nodes (linear: a term growing faster than n would not "
         "show at 8 nodes)"),
        ("rendezvous of 8,192 ranks", *ASSUMED["rendezvous"]),
        ("the check", *ASSUMED["check"]),
        (f"pairwise: {rounds} rounds x {fmt(lab_round, 2)} s", rounds * lab_round,
         f"{first} first-pass rounds (nccl_pair_rounds {DEFAULT_PAIR_ROUNDS}: that many of the "
         f"circle method's {NODES - 1}, spread, each node meets {DEFAULT_PAIR_ROUNDS} distinct "
         "partners) + 1 second-pass round (every suspect at once with a distinct fast node); "
         f"the round measured on the lab ({lab_basis}). Assumed: a GPU round at 8,192 ranks "
         "costs no more (two barriers of 8,192 ranks, a new peer's NCCL connection, 6 x 64 MiB "
         "both ways, ~10 ms at 50 GB/s, the round's record written)"),
        ("results back", *ASSUMED["results"]),
        (report_part, report, report_basis),
    ]  # fmt: skip
    rows = measured_rows(rows, scale)  # the 2-32 node lab's figures (bench/slurm_scale.py)
    slope = (scale or {}).get("slopes", {}).get("cpu_outside_report_s") or slope
    measured = fixed + node_side + slope * NODES + report + rounds * lab_round
    total = sum(seconds for _, seconds, _ in rows)
    return {
        "rows": rows,
        "total_s": total,
        "measured_s": measured,
        "rounds": rounds,
        "first_pass_rounds": first,
        "all_rounds": NODES - 1,
        "pairwise_s": rounds * lab_round,
        "pairwise_lab_round_s": lab_round,
        "round_budget_s": (GOAL_S - (total - rounds * lab_round)) / rounds,
        "log2_rounds": math.ceil(math.log2(NODES)),
        "report_measured": report_scale is not None,
        "slope_outside_report": bool((scale or {}).get("slopes", {}).get("cpu_outside_report_s")),
        "observe_largest": _observe_largest(scale),
        # Not judged: the total hangs on the assumed rows (rendezvous, the check, srun).
        "met": None,
    }


def _observe_largest(scale: dict[str, Any] | None) -> tuple[int, float] | None:
    """(nodes, seconds) of the observe step at the Slurm lab's largest size (bench/slurm_scale)."""
    if not scale or "error" in scale or not scale.get("sizes"):
        return None
    n = max(scale["sizes"])
    seconds = (scale["by_size"][str(n)].get("stages") or {}).get("observe: wait for records")
    return (n, float(seconds)) if seconds is not None else None


def overhead_section(r: dict[str, Any], header: list[str]) -> list[str]:
    out = ["## 5. Under Slurm: the slurm command against srun + torchrun by hand", "", *header]
    out += [
        f"bench/under_slurm.py. A {r['nodes']}-host lab with a real Slurm (`Lab(n, slurm=True)`: "
        "slurmctld, one slurmd per host, munge), gloo on CPU, "
        f"{r['nproc_per_node']} ranks per node and the project's default check (as section 1). "
        "In turns on the same lab: torchrun by hand through one `srun` (one task per node, "
        "static rendezvous on the first node's fabric address, GLOO_SOCKET_IFNAME set, the same "
        "rank script and arguments), then `bin/nccl-preflight slurm -N "
        f"{r['nodes']} --config FILE` (its own salloc, one run step: observe, judgement, launch "
        "in the same step; report, scancel), timed by bench/slurm_timer.py from the process's "
        "start to its end (the first turn's command also under cProfile).",
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
        "## 7. A 1,024-node run under Slurm: a model from sections 5, 6, 7a and 8",
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
    out += [""]
    if m.get("report_measured"):
        out.append(
            "- the report build is measured at 1,024 x 8 ranks (section 8) where the model had its "
            "2-node fixed part (0.1 s); "
            + (
                "the control CPU slope is taken outside the report step (section 7a), so the "
                "report is counted once"
                if m.get("slope_outside_report")
                else "the control CPU slope row still holds the report's share of each of the "
                "lab's 2-8 nodes, so the report is counted a little twice: the row is an upper "
                "bound"
            )
        )
    observe = m.get("observe_largest")
    out.append(
        "- measured on the lab: the start and the observe step (2 nodes: a node's own work, which "
        "every node does at once), the control CPU that grows with the nodes (section 7a's slope "
        "over its sizes), the bytes each node is sent (7a), the pairwise round (gloo) and the "
        "report step (section 8). Assumptions, which the lab cannot measure: srun's launch tree "
        "beyond TreeWidth 50 (the lab's nodes fit in one level), the stdin at a real control "
        "machine's link rate, the rendezvous of 8,192 ranks, the check with NCCL on GPUs, a GPU "
        "pairwise round and the results back from 1,024 nodes"
        + (
            f". The observe step at {observe[0]} lab nodes ({fmt(observe[1], 1)} s, section 7a) "
            "is not the model's: its torch imports share the lab machine's 2 cores, where real "
            "nodes each import on their own"
            if observe
            else ""
        )
    )
    out += [
        f"- total **{fmt(m['total_s'], 0)} s** (goal <= {GOAL_S} s): not judged, since the "
        f"total hangs on the assumed rows; {fmt(m['measured_s'], 0)} s of it measured on the lab "
        "(its node-side part under section 5's load: the lab's hosts share 2 cores)",
        f"- the pairwise rounds are bounded: {m['first_pass_rounds']} first-pass rounds "
        f"(nccl_pair_rounds, default {DEFAULT_PAIR_ROUNDS}; src/nccl_preflight/node/"
        "pair_schedule.py `first_pass`: that many rounds of the circle method spread over its "
        f"{m['all_rounds']}, each a perfect matching, no partner twice) and one second-pass "
        "round for every suspect at once (`second_pass`: each with a distinct fast non-suspect "
        "node; more rounds only when the suspects outnumber the fast nodes). Before the bound "
        f"they were the whole tournament, {m['all_rounds']} rounds: "
        f"{fmt(m['all_rounds'] * m['pairwise_lab_round_s'], 0)} s at the lab's round, more than "
        f"the goal alone. Now {fmt(m['pairwise_s'], 1)} s at the lab's "
        f"{fmt(m['pairwise_lab_round_s'], 2)} s per round; {round_budget(m)}, so the goal no "
        "longer hangs on the rounds but on the other rows.",
        "",
        *SCALE_LIMITS,
    ]
    return out


# Measured 2026-11-26 by bench/slurm_sizes.py (the command's own functions on fake node lists):
# what each step is sent, after the settings left srun's command line.
SCALE_LIMITS = [
    "**What a 1,024-node run sends** (bench/slurm_sizes.py: the command's own functions on fake "
    "node lists, no Slurm involved; tests/unit/slurm/test_slurm_step_size.py bounds the same "
    "numbers):",
    "",
    "| nodes | the run step's stdin beyond the bundle (observe's settings and messages, then "
    "the launch's) | the pairwise relaunch step's | longest srun argument "
    "| srun's command line | out of the control machine per step (bundle included) |",
    "|---|---|---|---|---|---|",
    "| 8 | 3.0 KB | 1.5 KB | 1.3 KB | 1.5 KB | 1.1 MB |",
    "| 128 | 30.7 KB | 15.5 KB | 1.8 KB | 3.2 KB | 21.9 MB |",
    "| 512 | 120.7 KB | 61.4 KB | 7.2 KB | 8.6 KB | 133.5 MB |",
    "| 1024 | 240.6 KB | 122.7 KB | 14.3 KB | 15.8 KB | 389.8 MB |",
    "",
    "- Each step's settings travel on its stdin, one line after the node bundle: what every node "
    "shares once, and per node only what differs (its rank, address and interface: about 120 "
    "bytes a node; slurm/ship.py shared_and_own). Before, they were one argument of srun's "
    "command line (2.8 MB at 1,024 nodes for the launch step), and Linux refuses one argument "
    "of 128 KiB (E2BIG): the launch could not start beyond about 137 nodes, the observe step "
    "beyond about 470. Now only `--nodelist` grows (about 15 bytes a node): 14.3 KB at 1,024.",
    "- The probe plan: every node gets every node's ports and fabric address in one message "
    "(88 KB at 1,024 nodes) and works out its own plan and firewall read with the function the "
    "Ansible path uses (node/probe_plan.py). Before, the control machine sent every node's plan "
    "to every node, each listing every other node's address: 14.6 MB per node, 14.9 GB out of "
    "the control machine at 1,024 nodes.",
    "- The steps' bundle (slurm/bundle.py step_sources) holds node_step, the modules it "
    "imports (core/zipapp.py package_closure) and the rank zipapp: 137 KB; the whole bundle, "
    "which node-check runs, 340 KB.",
    "- Left: srun copies the whole stdin to every task, so each node still receives every "
    "node's part (O(n) per node, O(n^2) in all: 0.39 GB in the run step at 1,024 nodes, a "
    "third of it the bundle); the lab has 8 nodes, so no step beyond 8 real nodes was run.",
    "",
]


# node-check (bench/node_check.py, issue 27 item 6): its row and section as its author wrote them
# by hand from bench/node_check_results.json (with the lent GPU machine's runs); kept here so that
# `bench.run` renders them with the rest instead of dropping them.
NODE_CHECK_RESULTS = Path(__file__).resolve().parent / "node_check_results.json"
NODE_CHECK_WHAT = {
    "node-check": "`python nccl-preflight.pyz node-check --config C` (21 checks, exit 0)",
    "torch probe": "the torch probe alone (`python -c PYTHON_PROBE`: the torch import)",
    "without torch": "node-check with a recorded probe answer instead of torch",
}
NODE_CHECK_ROW = Row(
    "node-check",
    "`node-check` wall time on a lab node <= 10 s",
    "median 2.1 s (min 1.9, max 2.4) of 5 at load about 3; 8.6 s (max 10.9) at load 10-13; the "
    "torch import alone 2.1 s and 6.7 s, the rest 0.4 s; an H200 node: 3.5-5.4 s; an H100 "
    "node: 3.6-4.8 s",
    "**met** (every run at load 3; the median at load 10-13)",
)
NODE_CHECK_HEAD = """\
## node-check: one node's checks for Slurm's HealthCheckProgram / Prolog

Measured 2026-11-26 05:54 UTC by `.venv/bin/python -m bench.node_check --repeat 5` (raw numbers:
`bench/node_check_results.json`); machine load 12.9 before, 10.7 after (1-min load average, 2
cores, other engineers' test suites running). A 1-host lab (no Slurm needed), the command run
inside the host (its namespace, hostname and /etc/hosts) with the lab hosts' Python
(`.venv-node`: torch 2.13.0+cpu and the standard library), from the bundle written by
`bin/nccl-preflight bundle`; config `nccl_socket_ifname: fab0`, backend auto (no GPU: gloo).
Wall-clock seconds around the whole process, as a HealthCheckProgram wrapper would take.
"""
NODE_CHECK_TAIL = """\
Goal <= 10 s: **met** at the median; the slowest of 5 runs took 10.9 s on this overloaded machine.
The same command at 16:27 UTC (load about 3, nothing else running): node-check median 2.1 s (min
1.9, max 2.4) of 5, the torch probe alone 2.1 s, without torch 0.36 s: every run well within.
Nearly all of it is importing torch (node-check starts the probe first and reads everything else
meanwhile); the rest takes 0.4 s. On a real GPU node the torch import took 5.2 s
(`tests/device` recorder, `time python -c "import torch"`), and `nvidia-smi -q` adds its own time
there, not measured here (no GPU). Every command and the probe end at `--timeout` (50 s), below
the 60 s after which Slurm kills a HealthCheckProgram.

On the lent GPU machine (one NVIDIA H200 in a VM, 16 cores, quiet; 2026-11-26 06:27 UTC,
`tests/device/node_check_gpu.sh`): the bundle's node-check with the machine's own python3 (torch
2.11.0+cu130), 21 checks with the real `nvidia-smi -q`, `topo -m` and `nvlink -s`, three runs in a
row: **5.40 s, 3.98 s, 3.53 s** wall (4.9-5.4 s CPU: the torch import with CUDA). Goal <= 10 s:
**met** on a real GPU node.

On the lent GPU machine of the other kind (one NVIDIA H100 80GB HBM3, an SXM5 module, in a VM of
the same image, 16 cores; 2026-11-26 08:55 UTC, `tests/device/record_h100.sh`, which runs
`node_check_gpu.sh` after `record_gpu.sh` has imported torch several times, so no run was cold): the
same bundle, config and 21 checks, three runs in a row: **3.63 s, 3.89 s, 4.79 s** wall (5.1-6.2 s
CPU; node-check's own clock 3.4, 3.7, 4.6 s). The torch import alone, timed earlier in the same
call, took 6.4 s (5.2 s on the H200). Goal <= 10 s: **met** on both cards."""


def node_check_section() -> list[str]:
    """The node-check section: its author's text, the table from node_check_results.json."""
    results = json.loads(NODE_CHECK_RESULTS.read_text())["results"]
    table = ["| what | median | min | max |", "|---|---|---|---|"]
    for key, what in NODE_CHECK_WHAT.items():
        r = results[key]
        table.append(
            f"| {what} | {r['median_s']:.2f} s | {r['min_s']:.2f} s | {r['max_s']:.2f} s |"
        )
    return [*NODE_CHECK_HEAD.splitlines(), *table, "", *NODE_CHECK_TAIL.splitlines(), ""]
