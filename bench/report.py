"""Render BENCHMARKS.md from bench/results.json (written by bench/run.py; do not edit by hand)."""

from __future__ import annotations

from typing import Any

from bench.common import PHASES, fmt


def _met(value: Any) -> str:
    return {True: "**met**", False: "**not met**"}.get(value, "not measured")


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


def render(stored: dict[str, Any]) -> str:
    benches: dict[str, Any] = stored.get("benchmarks", {})
    any_res = next(iter(benches.values()), {})
    m = any_res.get("machine", {})
    v = any_res.get("versions", {})
    out = [
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
        "## Summary",
        "",
        "| benchmark | goal | measured | goal met |",
        "|---|---|---|---|",
    ]
    for name, measured in (
        ("overhead", _overhead_line),
        ("scaling", _scaling_line),
        ("fidelity", _fidelity_line),
        ("detect", _detect_line),
    ):
        res = benches.get(name)
        if res is None:
            out.append(f"| {name} | | not run yet | not measured |")
        elif "error" in res:
            out.append(f"| {name} | | error: {res['error']} | not measured |")
        else:
            out.append(f"| {name} | {res['goal']} | {measured(res)} | {_met(res.get('met'))} |")
    out.append("")
    for name, section in (
        ("overhead", _overhead),
        ("scaling", _scaling),
        ("tuning", _tuning),
        ("fidelity", _fidelity),
        ("detect", _detect),
    ):
        res = benches.get(name)
        if res is not None and "error" not in res:
            out += section(res)
    out += FINDINGS
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------ overhead
def _overhead_line(r: dict[str, Any]) -> str:
    return (
        f"{fmt(r['playbook_s'])} s vs {fmt(r['floor_s'])} s by hand = {fmt(r['ratio'], 2)}x "
        f"(+{fmt(r['overhead_s'])} s)"
    )


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
        "Slowest tasks (median seconds, summed over the task's loop):",
        "",
        "| seconds | phase | task |",
        "|---|---|---|",
    ]
    out += [f"| {fmt(t['seconds'], 2)} | {t['phase']} | {t['task']} |" for t in r["top_tasks"]]
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
        "| hosts | wall s | rc | load after | control CPU s | in-host CPU s | "
        + " | ".join(shown)
        + " |",
        "|---" * (6 + len(shown)) + "|",
    ]
    for n in sorted(results, key=int):
        s = results[n]
        out.append(
            f"| {n} | {fmt(s['wall_s'])} | {s['rcs']} | {fmt(s.get('load_after'), 1)} | "
            f"{fmt(s['control_cpu_s'])} | "
            f"{fmt(s['node_cpu_s'])} | " + " | ".join(fmt(s["phases"].get(p)) for p in shown) + " |"
        )
    return out


def _scaling(r: dict[str, Any]) -> list[str]:
    growth = r.get("phase_growth_s") or {}
    top = sorted(growth.items(), key=lambda kv: -(kv[1] or 0))[:3]
    return [
        "## 2. Scaling: pre-flight only (`--tags preflight`), 2 to 32 hosts",
        "",
        *_header(r),
        "Inputs, facts, environment, pre-flight checks, cleanup and report; no torch launch. "
        "Phases in wall seconds (medians). CPU: control = ansible-playbook and its ssh clients; "
        "in-host = everything the lab hosts' sshd ran (the modules), counted with cgroup cpuacct.",
        "",
        *_scaling_table(r["results"].get("project", {})),
        "",
        f"- largest / smallest: **{fmt(r['ratio'], 2)}x** (goal <= 2x): {_met(r.get('met'))}",
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
    return ", ".join(f"{c} {fmt(s['ratio'], 2)}" for c, s in r["summary"].items())


def _fidelity(r: dict[str, Any]) -> list[str]:
    link = r["link_bps"]
    fwd, rev = r.get("duplex_bps") or (None, None)
    out = [
        "## 3. Fidelity: nccl_check busbw against the link rate",
        "",
        *_header(r),
        f"Both fabric links limited with tc tbf to {r['rate']} (lab.rate_limit). 2 hosts x 1 rank, "
        f"gloo; nccl_check `{' '.join(r['check_args'])}`, started with torchrun by hand.",
        "",
        f"- link rate (iperf3, one TCP stream, one way, 5 s): **{fmt(link / 1e9, 3)} Gbit/s** = "
        f"{fmt(link / 8e9, 4)} GB/s",
        f"- both ways at once (iperf3 --bidir): {fmt(fwd / 1e9 if fwd else None, 3)} + "
        f"{fmt(rev / 1e9 if rev else None, 3)} Gbit/s: the link is full duplex",
        "",
        "| collective | size (B) | busbw GB/s | busbw / link |",
        "|---|---|---|---|",
    ]
    for c, s in r["summary"].items():
        out.append(
            f"| {c} | {s['size_bytes']} | {fmt(s['busbw_gbps'], 4)} | **{fmt(s['ratio'], 3)}** |"
        )
    return [*out, ""]


# ------------------------------------------------------------------------------------ detect
def _detect_line(r: dict[str, Any]) -> str:
    return (
        f"{fmt(r['detect_s'])} s after the link went down (timeout {r['run_timeout']} s, "
        f"limit {r['run_timeout'] + 15} s)"
    )


def _detect(r: dict[str, Any]) -> list[str]:
    return [
        "## 4. Time to detect a dead fabric link",
        "",
        *_header(r),
        f"2-host lab, nccl_run_timeout={r['run_timeout']}, nccl_check "
        f"`{' '.join(r['check_args'])}`. As soon as a rank had recorded its first collective in "
        "rank-<R>.json (check-in and init done), host 2's fabric link was set down "
        "(lab.link_down). Measured until ansible-playbook ended.",
        "",
        f"- link down {fmt(r['down_after_start_s'])} s after ansible-playbook started",
        f"- **{fmt(r['detect_s'])} s** from link down to the play's end (goal <= "
        f"{r['run_timeout'] + 15} s): {_met(r.get('met'))}",
        f"- the play reported the failure (non-zero exit) every time: {r['reported_failure']}",
        f"- whole run {fmt(r['wall_s'])} s",
        "",
        *_phase_table(r["phases"]),
        "",
    ]


FINDINGS = [
    "## Findings, shortfalls and what to tune",
    "",
    "Written from the runs above (and the investigations noted); the numbers in this section",
    "are from those runs, not re-measured by every `make bench`.",
    "",
    "**Overhead.** The playbook adds a roughly fixed cost (tens of seconds on this shared",
    "2-core machine) to a check that by default takes well under half a minute, so the ratio",
    "is far above 1.3x for the default check; it falls to 1.3x only for checks that run at",
    "least (fixed cost / 0.3) seconds. Part of the cost is the product itself (pre-flight",
    "checks and the report that torchrun by hand does not give). Where the rest goes, and",
    "what would cut it (roles owned by other engineers; not changed here):",
    "",
    "- launch, *Wait for torchrun*: async_status every `launch_poll_delay` (2 s) is one SSH",
    "  session and one Python start per host per poll, on the same cores as the ranks; plus",
    "  the *Remove Ansible's record* task. Running nccl_torchrun synchronously (it already",
    "  bounds itself with `timeout`) removes both; or poll less often.",
    "- collect, *Fetch every rank's result and log*: one fetch (stat + slurp round trips) per",
    "  file per host. One archive per host (`ansible.builtin.command: tar` in the run dir,",
    "  one `ansible.builtin.fetch`, unpack on the control machine) makes it one round trip.",
    "- launch, *Copy the collective check* and environment, *Render nccl.env* / *Create the",
    "  run directory*: each is 2-3 module round trips (stat, checksum, put). Staging the",
    "  script and nccl.env in one module call (nccl_torchrun could take the script path on",
    "  the control machine via `copy` once, or the env as a parameter) saves a few seconds.",
    "- pre-flight listeners: start / wait bound / read ports / tell done / wait closed are",
    "  five tasks, i.e. five round trips per host; one module doing start+wait+read and",
    "  one doing done+close would halve them.",
    "- facts: nccl_facts imports torch on every host (about 1.5-2 CPU seconds each).",
    "",
    "**Scaling.** On this machine every lab host's modules run on the same 2 cores, so the",
    "wall time grows with the in-host CPU (about 10 CPU seconds per host for the pre-flight",
    "flow, mostly Python interpreter starts and the torch import in nccl_facts) divided by 2:",
    "the 2x goal cannot be met by a 32-host lab on 2 cores whatever Ansible does. On real",
    "hosts that work runs in parallel; what grows there is the control machine's CPU",
    "(ansible-playbook and its ssh clients, in the control CPU column). Under heavy load at",
    "32 hosts the pre-flight TCP probes also reached the short-lived listeners after they had",
    "closed (connection refused, rc 2): the listeners' lifetime should grow with the host",
    "count (or the probes and listeners should be one module call).",
    "",
    "**What was tuned** (ours: ansible.cfg, owned by the skeleton, so measured through",
    "ANSIBLE_* variables, `python -m bench.run --only tuning --sizes 8`, table 2b). The",
    "committed ansible.cfg already holds the settings that pay: against ansible-core's",
    "defaults (forks 5, no pipelining) the 8-host pre-flight took 50-90% longer and used",
    "about 65% more in-host CPU (without pipelining every task is three SSH sessions: put,",
    "exec, cleanup). Without ControlPersist the control CPU rose by about 50% (an SSH",
    "handshake per task and host) while the wall time on this 2-core lab did not get worse:",
    "on real networks each handshake also costs round trips, so keep it. forks 4 and",
    "ZIP_STORED module payloads changed nothing beyond the noise: the variants ran one after",
    "another while other jobs' load fell, and a re-run of the committed settings right after",
    "the tuning run took 41.5 s, the same as forks-4 and zip-stored (the 54 s of the project",
    "row in 2b was load). No change to ansible.cfg is proposed; the gains left are in the",
    "roles (fewer round trips per host, above) and in nccl_facts (the torch import). Even",
    "the control-CPU estimate in section 2 (about 2.8 CPU seconds per host on the control",
    "machine) puts 32 real hosts near 3x of 2: the 2x goal needs fewer tasks per host.",
    "",
    "**Fidelity.** all_reduce, broadcast and send/recv reach the link rate. send/recv used",
    "to reach half of it: gloo's TCP pair sends a payload only after the peer announced the",
    "matching receive, and that announcement waits in the same per-peer queue as payloads,",
    "so a receive posted after a send whose peer was already waiting sat behind the whole",
    "64 MiB and the two directions took turns (a standalone probe on this lab: send posted",
    "first took 1.11 s for 64 MiB each way in 4 of 6 runs, receive first 0.56 s in 6 of 6).",
    "nccl_check now posts the receive first (files/nccl_check.py, ring_exchange); NCCL",
    "groups the two, so the order changes nothing there. The two left below the goal are",
    "bounded by gloo's own algorithms, not by the measurement, and nccl_check prints a note",
    "under their tables when the backend is gloo: torch's gloo reduce_scatter_tensor is an",
    "all_reduce of the whole input plus a copy (ProcessGroupGloo::",
    "reduce_scatter_tensor_coalesced), so its busbw, with the (n-1)/n factor of nccl-tests,",
    "is at most half of all_reduce's, which is the link rate (measured 0.43-0.48); gloo's",
    "ring all_gather (gloo/allgather.cc) posts each send before its receive, the same race",
    "as above inside gloo (0.63-0.65). NCCL on real NICs runs neither algorithm; not",
    "measurable here (no GPU). iperf3 --bidir shows the link is full duplex, and the tbf",
    "settings (burst 10 ms, latency 200 ms) are not a cause: one-way traffic, all_reduce and",
    "now send/recv reach the iperf3 rate through the same qdisc.",
    "",
    "**Time to detect.** Gloo does not notice a link that is down (TCP keeps retrying), so",
    "the failure is found by the time bounds: nccl_check's watchdog (`--timeout`, which",
    "roles/launch sets to nccl_run_timeout minus 10% / 5 s) and nccl_torchrun's own",
    "nccl_run_timeout; after that the play collects what the ranks wrote and reports.",
    "Detection therefore costs at most the remaining timeout plus collect and report.",
    "",
]
