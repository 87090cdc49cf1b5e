# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Render BENCHMARKS.md from bench/results.json (written by bench/run.py; do not edit by hand)."""

from __future__ import annotations

from typing import Any

from bench import ansible_floor, node_check_health, pairwise, scale_report, vendored_yaml
from bench import interrupt as warden
from bench import report_scale_report as report_scale
from bench import under_slurm_report as slurm
from bench.common import PHASES, Row, fmt, median, met_text


def _load(res: dict[str, Any]) -> str:
    before = res.get("load_before") or []
    after = res.get("load_after") or []
    if not before:
        return "n/a"
    return f"{before[0]:.2f} before, {after[0]:.2f} after (1-min load average)"


def _header(res: dict[str, Any]) -> list[str]:
    rep = res.get("repeats")
    return [
        f"Measured {res.get('date', 'n/a')}, {rep} repeat(s), median shown; took "
        f"{fmt(res.get('duration_s'), 0)} s; machine load {_load(res)}.",
        "",
    ]


def _machine(benches: dict[str, Any]) -> list[str]:
    """The page's opening: how it is written, the machine and versions."""
    any_res = next(iter(benches.values()), {})
    m = any_res.get("machine", {})
    v = any_res.get("versions", {})
    return [
        "# Benchmarks",
        "",
        "Written by `make bench` (`.venv/bin/python -m bench.run`); the raw numbers are in",
        "`bench/results.json`. Benchmarks are not tests: CI does not run them and nothing",
        "asserts a timing. Every lab host is a network namespace of this one machine, so every",
        "host shares its cores: numbers that grow with the host count mostly measure this",
        "machine's CPU.",
        "",
        "## Machine and versions",
        "",
        f"- {m.get('nproc', 'n/a')} CPUs ({m.get('cpu_model', 'n/a')}), "
        f"{fmt(m.get('memory_gib'), 1)} GiB memory, kernel {m.get('kernel', 'n/a')}",
        f"- Python {v.get('python', 'n/a')}, torch {v.get('torch', 'n/a')}, ansible-core "
        f"{v.get('ansible-core', 'n/a')}, {v.get('openssh', 'n/a')}, {v.get('iperf3', 'n/a')}",
        "- Other engineers' jobs shared the machine during some runs: each section gives the load.",
        "",
    ]


HISTORY = [
    "## Earlier rounds",
    "",
    "What each earlier round of tuning measured, and what it changed, is in",
    "[docs/history.md](docs/history.md); this page holds only the current figures.",
    "",
]


def _opened(row: Row, lines: list[str]) -> list[str]:
    """A section with its goal and current figure first, under its heading."""
    if not lines or not lines[0].startswith("## "):
        return lines
    rest = lines[2:] if len(lines) > 1 and not lines[1] else lines[1:]
    return [lines[0], "", *row.opening(), *rest]


def _measured_rows(benches: dict[str, Any]) -> dict[str, Row]:
    """The rows of the benchmarks bench/run.py measures and stores in results.json."""
    rows = {}
    for name, measured in (
        ("overhead", _overhead_line),
        ("ansible_floor", ansible_floor.line),
        ("scaling", _scaling_line),
        ("fidelity", _fidelity_line),
        ("detect", _detect_line),
        ("pairwise", pairwise.line),
        ("slurm_overhead", slurm.overhead_line),
        ("slurm_cpu", slurm.cpu_line),
        ("ansible_scale", scale_report.ansible_line),
        ("slurm_scale", scale_report.slurm_line),
    ):
        res = benches.get(name)
        if res is None and name in ("ansible_scale", "slurm_scale"):
            continue
        if res is None:
            rows[name] = Row(name, "", "not run yet", "not measured")
        elif "error" in res:
            rows[name] = Row(name, "", f"error: {res['error']}", "not measured")
        else:
            rows[name] = Row(name, res["goal"], measured(res), met_text(res.get("met")))
    return rows


def render(stored: dict[str, Any]) -> str:
    benches: dict[str, Any] = stored.get("benchmarks", {})
    rows = _measured_rows(benches)
    slurm_runs = [benches.get(n) for n in ("slurm_overhead", "slurm_cpu", "pairwise")]
    modelled = slurm.model(*slurm_runs, report_scale.report_s(), benches.get("slurm_scale"))
    if modelled:
        rows["slurm_model_1024"] = Row(
            "slurm_model_1024",
            f"a 1,024-node run (pre-flight, check, pairwise verdict) <= {slurm.GOAL_S} s",
            slurm.model_line(modelled),
            f"{met_text(modelled['met'])} (a model, section 7)",
        )
    rows["node-check"] = slurm.NODE_CHECK_ROW
    rows["vendored_yaml"] = vendored_yaml.ROW
    rows["node_check_health"] = node_check_health.row()
    interrupted = warden.recorded()
    if interrupted:
        rows["interrupt"] = warden.summary_row(interrupted)
    rows["report_scale"] = report_scale.summary_row()
    out = [
        *_machine(benches),
        "## Summary",
        "",
        "| benchmark | goal | measured | goal met |",
        "|---|---|---|---|",
        *(row.markdown() for row in rows.values()),
        "",
    ]
    for name, section in (
        ("overhead", _overhead),
        ("ansible_floor", lambda r: ansible_floor.section(r, _header(r))),
        ("scaling", _scaling),
        ("tuning", _tuning),
        ("fidelity", _fidelity),
        ("detect", _detect),
        ("pairwise", lambda r: pairwise.section(r, _header(r))),
        ("slurm_overhead", lambda r: slurm.overhead_section(r, _header(r))),
        ("slurm_cpu", lambda r: slurm.cpu_section(r, _header(r))),
        ("ansible_scale", lambda r: scale_report.ansible_section(r, _header(r))),
    ):
        res = benches.get(name)
        if res is not None and "error" not in res:
            out += _opened(rows[name], section(res)) if name in rows else section(res)
    out += _opened(rows["node-check"], slurm.node_check_section())
    out += _opened(rows["vendored_yaml"], vendored_yaml.section())
    out += _opened(rows["node_check_health"], node_check_health.section())
    out += _opened(rows["interrupt"], warden.section(interrupted)) if interrupted else []
    if benches.get("slurm_scale") and "error" not in benches["slurm_scale"]:
        res = benches["slurm_scale"]
        out += _opened(rows["slurm_scale"], scale_report.slurm_section(res, _header(res)))
    if modelled:
        out += _opened(rows["slurm_model_1024"], slurm.model_section(modelled))
    out += _opened(rows["report_scale"], report_scale.section())
    out += HISTORY
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------ overhead
def _overhead_line(r: dict[str, Any]) -> str:
    line = (
        f"{fmt(r['playbook_s'])} s vs {fmt(r['floor_s'])} s by hand = {fmt(r['ratio'], 2)}x "
        f"(+{fmt(r['overhead_s'])} s)"
    )
    same = r.get("same_load") or {}
    theirs = [pair[same["other"]] for pair in same.get("pairs", []) if same["other"] in pair]
    if theirs:
        ratio = median([t["ratio"] for t in theirs if t.get("ratio") is not None])
        control = median([t["control_cpu_s"] for t in theirs if t.get("control_cpu_s")])
        line += (
            f"; control CPU {fmt(r.get('control_cpu_s'))} s; {same['other']} in turns, same "
            f"load: {fmt(ratio, 2)}x, control CPU {fmt(control)} s"
        )
    return line


def _phase_table(phases: dict[str, float | None]) -> list[str]:
    rows = ["| phase | seconds |", "|---|---|"]
    rows += [f"| {p} | {fmt(phases.get(p), 2)} |" for p in PHASES if phases.get(p)]
    return rows


def _overhead(r: dict[str, Any]) -> list[str]:
    out = [
        "## 1. Overhead: validate.yml against torchrun by hand",
        "",
        *_header(r),
        f"2-host lab, {r['nproc_per_node']} ranks per host, gloo on CPU. nccl_check arguments: "
        f"`{' '.join(r['check_args']) or '(project default: every test, bandwidth 1K..1M)'}`; "
        f"nccl_run_timeout {r['run_timeout']}. The floor is the same torchrun command roles/launch "
        "builds, started in both hosts at once (`ip netns exec`, static rendezvous on host 0's "
        "fabric address, GLOO_SOCKET_IFNAME set). Every measurement on a fresh lab.",
        "",
        f"- floor (by hand): **{fmt(r['floor_s'])} s** (CPU {fmt(r.get('floor_cpu_s'))} s)",
        f"- validate.yml: **{fmt(r['playbook_s'])} s** (control-side CPU "
        f"{fmt(r.get('control_cpu_s'))} s, in-host CPU {fmt(r.get('node_cpu_s'))} s)",
        f"- ratio **{fmt(r['ratio'], 2)}x**, fixed overhead {fmt(r['overhead_s'])} s; every run "
        f"passed: {r.get('all_passed')}",
        "",
        "Per phase (median wall seconds; from bench/callbacks/bench_timer.py):",
        "",
        *_phase_table(r["phases"]),
        "",
        "The results come back inside the launch's wait call (nccl_torchrun state=finished, the",
        "same SSH session), so their transfer is counted in launch; collect is what is left of it",
        "on the control machine.",
        "",
        "Slowest tasks (median seconds, summed over the task's loop):",
        "",
        "| seconds | phase | task |",
        "|---|---|---|",
    ]
    out += [f"| {fmt(t['seconds'], 2)} | {t['phase']} | {t['task']} |" for t in r["top_tasks"]]
    return [*out, "", *_same_load(r.get("same_load"))]


def _same_load(same: dict[str, Any] | None) -> list[str]:
    """Another tree measured in turns with this one (one repeat each, same load window)."""
    if not same or not same.get("pairs"):
        return []
    out = [
        f"Under the same load, in turns with {same['other']} (one run each, "
        f"{same['when']}; medians in the last row):",
        "",
        "| turn | load before | tree | by hand s | validate.yml s | ratio | overhead s | "
        "control CPU s | in-host CPU s | floor CPU s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = ("floor_s", "playbook_s", "ratio", "overhead_s", "control_cpu_s", "node_cpu_s",
            "floor_cpu_s")  # fmt: skip
    for i, pair in enumerate(same["pairs"], 1):
        for tree, row in pair.items():
            cells = " | ".join(fmt(row.get(k), 2 if k == "ratio" else 1) for k in keys)
            out.append(f"| {i} | {fmt(row.get('load_before'), 1)} | {tree} | {cells} |")
    for tree in same["pairs"][0]:
        rows = [pair[tree] for pair in same["pairs"] if tree in pair]
        cells = " | ".join(
            fmt(median([r.get(k) for r in rows if r.get(k) is not None]), 2 if k == "ratio" else 1)
            for k in keys
        )
        out.append(f"| median | | {tree} | {cells} |")
    return [*out, ""]


# ------------------------------------------------------------------------------------ scaling
def _scaling_line(r: dict[str, Any]) -> str:
    proj = r["results"].get("project", {})
    sizes = sorted(proj, key=int)
    walls = ", ".join(f"{n}: {fmt(proj[n]['wall_s'])} s" for n in sizes)
    return f"{walls}; {fmt(r['ratio'], 2)}x; {fmt(r['slope_s_per_host'], 2)} s/host"


def _scaling_table(results: dict[str, Any]) -> list[str]:
    shown = [p for p in PHASES if any((s["phases"].get(p) or 0) > 0.05 for s in results.values())]
    out = [
        "| hosts | wall s | rc | load after | control CPU s | control CPU s per host | "
        "in-host CPU s | " + " | ".join(shown) + " |",
        "|---" * (7 + len(shown)) + "|",
    ]
    for n in sorted(results, key=int):
        s = results[n]
        per_host = s["control_cpu_s"] / int(n) if s.get("control_cpu_s") is not None else None
        out.append(
            f"| {n} | {fmt(s['wall_s'])} | {s['rcs']} | {fmt(s.get('load_after'), 1)} | "
            f"{fmt(s['control_cpu_s'])} | {fmt(per_host, 2)} | "
            f"{fmt(s['node_cpu_s'])} | " + " | ".join(fmt(s["phases"].get(p)) for p in shown) + " |"
        )
    return out


def _ends(results: dict[str, Any]) -> list[int]:
    sizes = sorted(int(n) for n in results)
    return [sizes[0], sizes[-1]] if sizes else []


def _scaling(r: dict[str, Any]) -> list[str]:
    growth = r.get("phase_growth_s") or {}
    top = sorted(growth.items(), key=lambda kv: -(kv[1] or 0))[:3]
    return [
        "## 2. Scaling: pre-flight only (`--tags preflight`), "
        + " to ".join(str(n) for n in _ends(r["results"].get("project", {})))
        + " hosts",
        "",
        *_header(r),
        "Inputs, facts, environment, pre-flight checks, cleanup and report; no torch launch. "
        "Phases in wall seconds (medians). CPU: control = ansible-playbook and its ssh clients "
        "(the whole process tree, user + sys, counted with a cgroup around it); per host = that "
        "divided by the hosts: what a control machine pays per node, which the lab's shared cores "
        "cannot hide, unlike wall time; in-host = everything the lab hosts' sshd ran (the "
        "modules), counted with cgroup cpuacct.",
        "",
        *_scaling_table(r["results"].get("project", {})),
        "",
        f"- largest / smallest: **{fmt(r['ratio'], 2)}x** (goal <= 2x): {met_text(r.get('met'))}",
        f"- slope: **{fmt(r['slope_s_per_host'], 2)} s per host** (least squares over the sizes)",
        f"- in-host CPU per extra host: {fmt(r.get('node_cpu_s_per_host'), 2)} s",
        f"- sizes above {r.get('large', 8)} hosts: {r.get('large_repeats', r['repeats'])} run(s) "
        f"each (`--large-repeats`); smaller sizes {r['repeats']}",
        "- *estimate, not a measurement*: if every host were a machine of its own, only the "
        "control CPU would be shared: wall(n) ~ wall(2) + extra control CPU / cores = "
        + ", ".join(f"{n}: {fmt(w)} s" for n, w in (r.get("control_projection_s") or {}).items()),
        "- phases that grow most (largest minus smallest, s): "
        + ", ".join(f"{p} +{fmt(g)}" for p, g in top),
        "",
    ]


def _tuning(r: dict[str, Any]) -> list[str]:
    out = [
        "## 2b. Tuning: Ansible knobs, pre-flight only",
        "",
        *_header(r),
        "Each variant is set through ANSIBLE_* environment variables on top of ansible.cfg.",
        "",
        "| variant | what | " + " | ".join(f"{n} hosts s" for n in _sizes(r)) + " |",
        "|---|---|" + "---|" * len(_sizes(r)),
    ]
    for name, what in r["variants"].items():
        res = r["results"].get(name, {})
        cells = " | ".join(
            f"{fmt(res[str(n)]['wall_s'])} (rc {res[str(n)]['rcs']})" if str(n) in res else ""
            for n in _sizes(r)
        )
        out.append(f"| {name} | {what} | {cells} |")
    return [*out, ""]


def _sizes(r: dict[str, Any]) -> list[int]:
    return sorted({int(n) for res in r["results"].values() for n in res})


# ------------------------------------------------------------------------------------ fidelity
def _fidelity_line(r: dict[str, Any]) -> str:
    label = (r.get("layout") or {}).get("label", "2 hosts x 1 rank")
    ratios = ", ".join(f"{c} {fmt(s['ratio'], 2)}" for c, s in r["summary"].items())
    return f"{label}: {ratios}"


def _fidelity_table(summary: dict[str, Any]) -> list[str]:
    out = ["| collective | size (B) | busbw GB/s | busbw / link |", "|---|---|---|---|"]
    for c, s in summary.items():
        out.append(
            f"| {c} | {s['size_bytes']} | {fmt(s['busbw_gbps'], 4)} | **{fmt(s['ratio'], 3)}** |"
        )
    return out


def _fidelity(r: dict[str, Any]) -> list[str]:
    link = r["link_bps"]
    fwd, rev = r.get("duplex_bps") or (None, None)
    # Older results measured one layout, 2 hosts x 1 rank, and recorded no layout.
    layouts = r.get("layouts") or {"2 hosts x 1 rank": {"summary": r["summary"], "met": r["met"]}}
    goal_label = (r.get("layout") or {}).get("label", "2 hosts x 1 rank")
    out = [
        "## 3. Fidelity: nccl_check busbw against the link rate",
        "",
        *_header(r),
        f"Both fabric links limited with tc tbf to {r['rate']} (lab.rate_limit), gloo; nccl_check "
        f"`{' '.join(r['check_args'])}`, started with torchrun by hand in each layout below. The "
        f"goal is judged on {goal_label} (several ranks per node and one NIC, as real nodes).",
        "",
        f"- link rate (iperf3, one TCP stream, one way, 5 s): **{fmt(link / 1e9, 3)} Gbit/s** = "
        f"{fmt(link / 8e9, 4)} GB/s",
        f"- both ways at once (iperf3 --bidir): {fmt(fwd / 1e9 if fwd else None, 3)} + "
        f"{fmt(rev / 1e9 if rev else None, 3)} Gbit/s: the link is full duplex",
    ]
    for label, res in layouts.items():
        layout = res.get("layout") or {}
        out += ["", f"**{label}**" + (" (the goal's layout)" if label == goal_label else "")]
        if layout.get("send_recv_cross_host"):
            out.append(
                f"(send/recv pairs across the link: {', '.join(layout['send_recv_cross_host'])}; "
                f"inside a host: {', '.join(layout.get('send_recv_same_host') or []) or 'none'})"
            )
        out += ["", *_fidelity_table(res["summary"])]
    return [*out, ""]


# ------------------------------------------------------------------------------------ detect
def _detect_line(r: dict[str, Any]) -> str:
    if "named_s" not in r:  # a result from before the watch (timeout-bound detection)
        return f"{fmt(r.get('detect_s'))} s after the link went down (timeout {r['run_timeout']} s)"
    if "cut_play_end_by_timeout" not in r:  # from before the play's end had a goal (2 hosts)
        return (
            f"link cut named {fmt(r['named_s'])} s after the cut (goal 30 s), SIGKILLed rank: "
            f"every node ended {fmt(r['kill_ended_s'])} s after the kill (goal 10 s); timeout "
            f"{r['run_timeout']} s"
        )
    ends = ", ".join(
        f"{fmt(s)} s with nccl_run_timeout {t}" for t, s in r["cut_play_end_by_timeout"].items()
    )
    return (
        f"link cut named {fmt(r['named_s'])} s after the cut (goal 30 s), play exited {ends} "
        f"(goal 30 s; pairwise relaunch: {'yes' if r['relaunched'] else 'none'}), SIGKILLed "
        f"rank: every node ended {fmt(r['kill_ended_s'])} s after the kill (goal 10 s)"
    )


def _detect(r: dict[str, Any]) -> list[str]:
    if "named_s" not in r:
        return ["## 4. Time to detect", "", _detect_line(r), ""]
    stops = sorted({s.split(": ", 1)[1] for run in r["runs"] for s in run["stopped_by"]})
    hosts = r.get("cut_hosts", 2)
    ends = r.get("cut_play_end_by_timeout") or {str(r["run_timeout"]): r["cut_play_end_s"]}
    return [
        "## 4. Time to detect a dead fabric link and a killed rank",
        "",
        *_header(r),
        f"Link cut: {hosts}-host lab, 1 rank per host, nccl_pairwise auto, nccl_stall_timeout 30 "
        f"(the default), nccl_run_timeout {' and '.join(ends)}; nccl_check "
        f"`{' '.join(r['check_args'])}`; once rank 0 timed a bandwidth size, host 2's fabric "
        "link was set down (lab.link_down). Killed rank: 2-host lab, 2 ranks per host, "
        f"nccl_run_timeout {r['run_timeout']}, rank 0 asleep before `barrier` (node 1 cannot end "
        "by itself), rank 3 SIGKILLed while it waits in `barrier` (lab.kill). Named = the play's "
        "output (read as it is written) carries the finding; play exited = ansible-playbook "
        "returned (the whole playbook: stop, collect, report); ended = the last node's "
        "launch.json finished_at (whole seconds). Every measurement on a fresh lab.",
        "",
        f"- link cut {fmt(median([x['fault_after_start_s'] for x in r['runs']]))} s after "
        "ansible-playbook started",
        f"- **{fmt(r['named_s'])} s** from the cut to the finding in the output (goal <= 30 s)",
        *[
            f"- **{fmt(s)} s** from the cut until the play exited with nccl_run_timeout {t} "
            "(goal <= 30 s)"
            for t, s in ends.items()
        ],
        f"- slowest play exit after a cut: {fmt(r.get('cut_play_end_max_s'))} s; a pairwise "
        f"relaunch ran after a cut: {'yes' if r.get('relaunched') else 'never'}",
        f"- **{fmt(r['kill_ended_s'])} s** from the SIGKILL until every node's run ended (goal "
        f"<= 10 s); named in the output {fmt(r['kill_named_s'])} s after the kill",
        f"- goals {met_text(r.get('met'))}; the play reported the failure (non-zero exit) every "
        f"time: {r['reported_failure']}",
        "",
        "What the nodes' launch.json said (link cut):",
        "",
        *[f"    {s}" for s in stops],
        "",
        *_phase_table(r["phases"]),
        "",
    ]
