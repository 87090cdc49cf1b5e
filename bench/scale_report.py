# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""BENCHMARKS.md's sections on both front-ends at 2 to 32 lab nodes (issue 37 items 6 and 7):
bench/slurm_scale.py's and bench/ansible_scale.py's results, and the rows of section 7's model
that the Slurm lab now measures."""

from __future__ import annotations

from typing import Any

from bench.common import fmt

NODES = 1024


def _load(loads: list[Any]) -> str:
    flat = [x for v in loads for x in (v if isinstance(v, list) else [v])]
    return f"{min(flat):.0f}-{max(flat):.0f}" if flat else "n/a"


def _mb(value: float | None) -> str:
    return "n/a" if value is None else f"{value / 1e6:.1f}"


def slurm_line(r: dict[str, Any]) -> str:
    rows, s = r["by_size"], r["slopes"]
    cpu = ", ".join(f"{n}: {fmt(rows[str(n)]['cpu_s'], 2)}" for n in r["sizes"])
    watch = (r.get("watch_cost") or {}).get(str(NODES)) or {}
    return (
        f"slurm command CPU s {cpu}; slope outside the report {fmt(s['cpu_outside_report_s'], 3)} "
        f"s per node (2-8: {fmt(s['cpu_outside_report_s_2_8'], 3)}, 8-32: "
        f"{fmt(s['cpu_outside_report_s_8_32'], 3)}); out of the control machine "
        f"{fmt(s['link_tx_bytes'] / 1e3, 0)} KB per node; the launch watch at {NODES} nodes "
        f"{fmt(watch.get('running_cpu_s_per_s'), 2)} CPU s per second of run (synthetic)"
    )


def slurm_section(r: dict[str, Any], header: list[str]) -> list[str]:
    out = ["## 7a. The slurm command at 2 to 32 nodes on the lab's real Slurm", "", *header]
    out += [
        "bench/slurm_scale.py (issue 37 item 6). A fresh lab with Slurm at each size (slurmctld, "
        "munged, one slurmd and one sshd per host), one run of `bin/nccl-preflight slurm -N n` "
        "through bench/slurm_timer.py: 1 rank per node, the QUICK check (`--max-bytes 16K --iters "
        "2 --warmup 1`), `nccl_pairwise: always`; for the lab's shared cores "
        "`preflight_python_timeout: 600` and `nccl_run_timeout: 900` (32 torch imports at once "
        "on 2 cores under other sessions' load take minutes). CPU = os.wait4's rusage of the "
        "command and its salloc/scontrol/srun/scancel (the nodes' work runs under slurmd), the "
        "primary figure; wall time moves with the load (beside it). *Report*: the report "
        "step's CPU (issue 37 items 1-5 are its own benchmark); *launch per record*: the "
        "launch stage's CPU over the progress records it read (every node sends one a second). "
        "*Out*/*back*: bytes the control machine sent to and got from the lab over its one "
        "root link (srun to every slurmd, slurmctld's RPCs). Peak: the command's own maxrss.",
        "",
        "| nodes | class | wall s | load | CPU s | report CPU s | CPU outside the report | "
        "launch CPU per record ms | progress records | peak MiB | out MB | back MB | "
        "pairwise rounds | s per round |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in r["sizes"]:
        e = r["by_size"][str(n)]
        pw = e.get("pairwise") or {}
        rounds = pw.get("rounds")
        played = f"{rounds} + {pw.get('second_pass')}" if rounds is not None else "n/a"
        out.append(
            f"| {n} | {', '.join(map(str, e['class']))} | {fmt(e['wall_s'])} | "
            f"{_load(e['load'])} | {fmt(e['cpu_s'], 2)} | {fmt(e.get('cpu_report_s'), 2)} | "
            f"{fmt(e.get('cpu_outside_report_s'), 2)} | "
            f"{fmt(e.get('launch_cpu_per_record_ms'), 2)} | {e['records'].get('progress', 0)} | "
            f"{fmt(e['maxrss_command_mib'], 0)} | {_mb(e['link_tx_bytes'])} | "
            f"{_mb(e['link_rx_bytes'])} | {played} | {fmt(pw.get('round_s'), 2)} |"
        )
    s = r["slopes"]
    out += [
        "",
        f"- slopes (least squares, per extra node): CPU {fmt(s['cpu_s'], 3)} s (2-8 nodes "
        f"{fmt(s['cpu_s_2_8'], 3)}, 8-32 {fmt(s['cpu_s_8_32'], 3)}); outside the report "
        f"{fmt(s['cpu_outside_report_s'], 3)} s (2-8 {fmt(s['cpu_outside_report_s_2_8'], 3)}, "
        f"8-32 {fmt(s['cpu_outside_report_s_8_32'], 3)}); out of the control machine "
        f"{fmt(s['link_tx_bytes'] / 1e3, 0)} KB, back {fmt(s['link_rx_bytes'] / 1e3, 0)} KB",
        *_watch_lines(r.get("watch_cost") or {}),
        *[f"- {line}" for line in r.get("notes", [])],
        "",
    ]
    return out


def _watch_lines(cost: dict[str, Any]) -> list[str]:
    if not cost:
        return []
    parts = ", ".join(
        f"{n}: {fmt(c['running_cpu_s_per_s'], 3)} ({fmt(c['half_ended_cpu_s_per_s'], 3)} with "
        "half ended)"
        for n, c in cost.items()
    )
    return [
        "- the launch watch beyond the lab (bench/slurm_scale.py watch_cost: slurm/launch.py's "
        "Watch fed one progress record per node per simulated second, judged as its run loop "
        f"judges; CPU s per second of run): {parts}"
    ]


def ansible_line(r: dict[str, Any]) -> str:
    rows, s = r["by_size"], r["slopes"]
    cpu = ", ".join(f"{n}: {fmt(rows[str(n)]['validate_cpu_s'], 1)}" for n in r["sizes"])
    failed = [
        f"{n}: {', '.join(map(str, rows[str(n)]['class']))}"
        for n in r["sizes"]
        if any(c != "passed" for c in rows[str(n)]["class"])
    ]
    note = (
        f"; not judged: runs that did not pass ({'; '.join(failed)}) hold their failure's waits"
        if failed
        else ""
    )
    return (
        f"validate.yml control CPU s {cpu}; slope {fmt(s['validate'], 2)} s per host (Ansible's "
        f"floor for the same shape, the empty mirror: {fmt(s['mirror'], 2)} s per host){note}"
    )


def _earlier(runs: list[dict[str, Any]]) -> list[str]:
    """The sizes kept from earlier invocations (bench/ansible_scale.py merge): when and how
    loaded each was measured (the header above is the newest invocation's)."""
    out = []
    for e in runs:
        before, after = e.get("load_before") or [None], e.get("load_after") or [None]
        out.append(
            f"- {', '.join(map(str, e['sizes']))} hosts: measured {e.get('date') or 'n/a'}, took "
            f"{fmt(e.get('duration_s'), 0)} s; machine load {fmt(before[0], 2)} before, "
            f"{fmt(after[0], 2)} after (1-min load average)"
        )
    return [*out, ""] if out else []


def ansible_section(r: dict[str, Any], header: list[str]) -> list[str]:
    out = ["## 6a. The Ansible path at 2 to 32 hosts: control CPU per host", "", *header]
    out += [
        "bench/ansible_scale.py (issue 37 item 7). A fresh lab at each size, then on it "
        "validate.yml (the QUICK check, 1 rank per host; `preflight_python_timeout: 600` and "
        "`nccl_run_timeout: 600` for the lab's shared cores) and its empty mirror (bench/"
        "ansible_floor.py: the same plays, tasks, hosts, run_once and loops, each node call a "
        "ping, each controller task a set_fact: Ansible's own floor for this shape), both through "
        "bench/ansible_timer.py (ansible-playbook in one process; every worker, one per task and "
        "host, records its CPU and its ssh clients'). CPU = os.wait4's rusage of ansible-playbook "
        "and what it waited for, user + sys; wall times were taken under other sessions' load "
        "(beside them).",
        "",
        *_earlier(r.get("earlier", [])),
        "| hosts | class | validate.yml wall s | load | CPU s | per host | main process | "
        "workers: controller tasks | workers: node calls | ssh clients | workers | "
        "mirror CPU s | mirror per host | worker private MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in r["sizes"]:
        e = r["by_size"][str(n)]
        split = e["validate_split"]
        out.append(
            f"| {n} | {', '.join(map(str, e['class']))} | {fmt(e['validate_wall_s'])} | "
            f"{_load(e['load'])} | {fmt(e['validate_cpu_s'], 1)} | "
            f"{fmt(e['validate_cpu_s'] / n, 2)} | {fmt(split.get('main process'), 1)} | "
            f"{fmt(split.get('workers: controller tasks'), 1)} | "
            f"{fmt(split.get('workers: node calls'), 1)} | "
            f"{fmt(split.get(next((k for k in split if k.startswith('ssh')), ''), None), 1)} | "
            f"{fmt(e['validate_workers'], 0)} | {fmt(e['mirror_cpu_s'], 1)} | "
            f"{fmt(e['mirror_cpu_s'] / n, 2)} | {fmt(e.get('validate_worker_private_mib'), 1)} |"
        )
    s = r["slopes"]
    parts = ", ".join(f"{k} {fmt(v, 2)}" for k, v in s["validate_split"].items())
    out += [
        "",
        f"- slope (least squares, CPU s per extra host): validate.yml **{fmt(s['validate'], 2)}** "
        f"(cgroup {fmt(s['validate_cgroup'], 2)}; by part: {parts}); the empty mirror "
        f"**{fmt(s['mirror'], 2)}**: Ansible's own cost per host for this shape of plays",
        f"- workers per extra host (a task run or skipped on a host is a worker on the control "
        f"machine; run_once tasks one in all): validate.yml {fmt(s.get('validate_workers'), 1)}, "
        f"the mirror {fmt(s.get('mirror_workers'), 1)}",
        *[f"- {line}" for line in r.get("notes", [])],
        "",
        "Where validate.yml's CPU goes at the largest size (every worker of a task summed: its "
        "own CPU and its ssh clients'):",
        "",
        "| task | workers | CPU s | ssh s |",
        "|---|---|---|---|",
    ]
    largest = r["by_size"][str(max(r["sizes"]))]
    for t in largest["tasks"][:12]:
        out.append(
            f"| {t['task']} | {t['workers']} | {fmt(t['cpu_s'], 2)} | {fmt(t['ssh_s'], 2)} |"
        )
    return [*out, ""]


def measured_rows(rows: list[tuple[str, float, str]], scale: dict[str, Any] | None) -> list:
    """Section 7's model with the Slurm lab's measurements where it has them (bench/slurm_scale):
    the control CPU that grows with the nodes from the slope over 2-32 nodes outside the report
    and the launch watch, plus the watch at 1,024 nodes (overlapping the run: it only has to
    keep up), and the bytes each step sends from the lab's root link."""
    if not scale or "error" in scale or not scale.get("by_size"):
        return rows
    slope = scale["slopes"].get("cpu_outside_report_s")
    largest = max(scale["sizes"])
    watch = (scale.get("watch_cost") or {}).get(str(NODES)) or {}
    per_node_out = scale["slopes"].get("link_tx_bytes") or 0.0
    out = []
    for part, seconds, basis in rows:
        if part.startswith("control CPU that grows with nodes") and slope is not None:
            part = f"control CPU that grows with nodes: {fmt(slope, 3)} s x {NODES}"
            seconds = slope * NODES
            basis = (
                f"measured slope over 2-{largest} nodes on the lab's Slurm (section 7a), outside "
                "the report step; it holds the launch watch at the lab's run lengths. The watch "
                f"at {NODES} nodes: {fmt(watch.get('running_cpu_s_per_s'), 2)} CPU s per second "
                "of run (section 7a, synthetic), beside the run, not after it"
            )
        elif part.startswith("the bundle and the settings on stdin"):
            basis += (
                f"; measured on the lab's root link: {fmt(per_node_out / 1e3, 0)} KB out of the "
                f"control machine per node (slope over 2-{largest} nodes: the bundle and the "
                "settings copied to every node)"
            )
        elif part.startswith("one srun launch"):
            start = scale["by_size"][str(largest)]["stages"].get("srun start + bundle sent")
            basis += (
                f"; measured: the run step's start with the bundle sent {fmt(start, 2)} s at "
                f"{largest} nodes (under load, below TreeWidth 50: one level)"
            )
        out.append((part, seconds, basis))
    return out
