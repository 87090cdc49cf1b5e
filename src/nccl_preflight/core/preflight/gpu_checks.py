# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""GPU node health verdicts: memory errors, Xid, PCIe, NVLink, fabric, topology, modes, torch's
view, DCGM, each for one host, from what library/nccl_facts.py read (``facts.gpu_health``).

Every finding names the host, the GPU's index and bus id, what is wrong and the fix. A check is
skipped, with the reason, where the host's GPUs are not judged (gpu_presence.nccl_gpu_skip: the
backend needs no GPU, nccl_require_gpu is false), no GPU was found (check gpu fails it), the tool
is absent or its output could not be read. Values a GPU does not report (None: "N/A", "Not
Supported", as on a DGX Spark's GB10) are never a failure.

Used by roles/preflight: ``results_by_host | nccl_gpu_health_add(observations, settings)``
appends these checks to every host's pre-flight results (observations and settings as for
judge_host_checks; settings also ``extra_env``, nccl_extra_env, for NCCL_IB_HCA and
CUDA_VISIBLE_DEVICES).

The PCIe rule (docs/design.md "GPU health"): the link WIDTH is compared with the maximum always
(a GPU keeps its lanes when idle; a narrower link is a bad seat, riser or slot); the GENERATION
is compared only on a GPU that is busy (performance state P0 and clock reason Idle not active),
because idle GPUs drop to Gen1 to save power.
"""

from __future__ import annotations

from collections import Counter

from nccl_preflight.core.preflight.gpu_presence import nccl_gpu_skip, python_facts_of
from nccl_preflight.core.preflight.result import append_results, no_observation, rank_order
from nccl_preflight.core.preflight.result import check_result as _result
from nccl_preflight.core.preflight.result import host_table as _table
from nccl_preflight.core.preflight.result import reference_value as _reference

GPU_CHECKS = (
    "gpu_memory",
    "gpu_xid",
    "gpu_pcie",
    "gpu_nvlink",
    "gpu_fabric",
    "gpu_topology",
    "gpu_modes",
    "gpu_visible",
    "gpu_dcgm",
)
# nvidia-smi -q "Clocks Event Reasons" active now. An overheating GPU fails; the platform's power
# brake and the other slowdowns are warnings, as Azure's NHC logs them (both public H100 -q
# recordings in tests/fixtures/gpu show HW Power Brake Slowdown active on a working node).
THROTTLE_FAIL = ("HW Thermal Slowdown",)
THROTTLE_WARN = ("HW Slowdown", "HW Power Brake Slowdown", "SW Thermal Slowdown")
# GPUs joined to their CPU by NVLink-C2C on one chip, not by a PCIe slot: their PCIe figures say
# nothing about a link (NVML reports Gen1 x1 on a DGX Spark's GB10, Syllo/nvtop#426).
C2C_GPUS = ("GB10",)
TOPO_RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4}
# Xids that mean the GPU, not the application, needs attention before a job runs on it: the list
# Azure's node health checks fail on (customTests/azure_gpu_xid.nhc), plus 95 (uncontained ECC).
# The others (13, 31, 43, 94, ...) are usually an application's fault: reported as warnings.
XID_FATAL = frozenset(
    {48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 95, 119, 120}
)
# What the common Xids mean (NVIDIA's catalogue, https://docs.nvidia.com/deploy/xid-errors/).
XID_MEANINGS = {
    13: "graphics engine exception (often the application)",
    31: "GPU memory page fault (usually the application)",
    43: "GPU stopped processing (the application hit a fault)",
    48: "double-bit (uncorrectable) ECC error",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping recording failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error (the application using the memory was stopped)",
    95: "uncontained ECC error (every application on the GPU is affected)",
    119: "GSP RPC timeout (the GPU's firmware stopped answering)",
    120: "GSP error",
}


def _health(obs: dict) -> dict:
    return (obs.get("facts") or {}).get("gpu_health") or {}


def gpu_label(gpu: dict) -> str:
    return f"GPU {gpu.get('index')} ({gpu.get('bus_id') or 'bus id unknown'})"


def gpus_of(obs: dict) -> list[dict]:
    """nvidia-smi -q's GPUs, each with the index nvidia-smi --query-gpu gives its bus id."""
    facts_gpus = (obs.get("facts") or {}).get("gpus") or []
    listed = {str(g.get("pci_bus_id")).upper(): g for g in facts_gpus}
    out = []
    for gpu in (_health(obs).get("query") or {}).get("gpus") or []:
        known = listed.get(str(gpu.get("bus_id")).upper()) or {}
        out.append({**gpu, "index": known.get("index", gpu.get("position"))})
    return out


def _skip_reason(obs: dict, settings: dict, part: str = "query") -> str:
    """Why this host's GPU health is not judged ("" when it is): gpu_presence's decision, then
    what the facts hold."""
    skip = nccl_gpu_skip(obs, settings)
    if skip:
        return skip
    facts = obs.get("facts") or {}
    if not facts.get("gpus"):
        return (
            f"no GPU found ({facts.get('gpus_reason') or 'nvidia-smi lists none'}): see check gpu"
        )
    health = _health(obs)
    if not health:
        return "the facts hold no GPU health (nccl_gpu_health is false: nccl_facts read none)"
    if not health.get(part):
        return health.get(f"{part}_reason") or f"no {part} data"
    return ""


def _skipped(
    check: str, obs: dict, settings: dict, part: str = "query", what: str = ""
) -> dict | None:
    """The check's skipped result where this host's GPU health is not judged (None where it is)."""
    skip = _skip_reason(obs, settings, part)
    return _result(check, obs["host"], "skipped", f"{obs['host']}: {what}{skip}") if skip else None


def _verdict(
    check: str, host: str, problems: list[str], notes: list[str], fix: str, passed: str
) -> dict:
    """Failed with the problems (one a line, then the notes) and the fix; passed when none."""
    if problems:
        return _result(check, host, "failed", "\n".join(problems + notes), fix)
    return _result(check, host, "passed", passed)


# --------------------------------------------------------------------------- memory
def _memory_problems(gpu: dict) -> list[str]:
    ecc, pages, rows = (
        gpu.get("ecc") or {},
        gpu.get("retired_pages") or {},
        gpu.get("remapped_rows") or {},
    )
    problems = []
    for scope in ("volatile", "aggregate"):
        count = ecc.get(f"{scope}_uncorrectable")
        if count:
            problems.append(f"{count} uncorrectable ECC errors ({scope})")
    if pages.get("pending"):
        problems.append("retired pages pending (a page waits to be retired at the next reset)")
    if rows.get("pending"):
        problems.append(
            f"remapped rows pending ({rows.get('uncorrectable')} uncorrectable row errors; the "
            "remap takes effect at the next GPU reset)"
        )
    if rows.get("failure"):
        problems.append("a row remapping failed (no spare rows left: the GPU needs replacing)")
    return problems


def check_memory(obs: dict, settings: dict) -> dict:
    host = obs["host"]
    if skipped := _skipped("gpu_memory", obs, settings):
        return skipped
    lines, notes = [], []
    for gpu in gpus_of(obs):
        problems = _memory_problems(gpu)
        if problems:
            lines.append(f"{host}: {gpu_label(gpu)}: " + "; ".join(problems))
        ecc = gpu.get("ecc") or {}
        corrected = ecc.get("aggregate_correctable")
        if corrected:
            notes.append(f"{gpu_label(gpu)} {corrected} correctable (aggregate)")
        if gpu.get("ecc_mode") == "Disabled":
            notes.append(f"warning: {gpu_label(gpu)} has ECC disabled")
    counted = sum(
        1 for g in gpus_of(obs) if (g.get("ecc") or {}).get("volatile_uncorrectable") is not None
    )
    what = f"{counted} GPUs report ECC counters" if counted else "ECC counters not reported"
    passed = (
        f"{host}: no uncorrectable memory error, nothing pending ({what}"
        + ("; " + "; ".join(notes) if notes else "; no correctable error")
        + ")"
    )
    fix = (
        f"nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER  (on {host}); drain the node and "
        "reset the GPU (nvidia-smi -r -i <index>) or reboot; replace the GPU when rows "
        "cannot be remapped or errors come back"
    )
    return _verdict("gpu_memory", host, lines, notes, fix, passed)


# --------------------------------------------------------------------------- xid
def check_xid(obs: dict, settings: dict) -> dict:
    host = obs["host"]
    if skipped := _skipped("gpu_xid", obs, settings, "kernel_log", "kernel log not read: "):
        return skipped
    log = _health(obs)["kernel_log"]
    by_bus = {g.get("bus_key"): g for g in gpus_of(obs)}
    groups: dict[tuple[str, int], list[dict]] = {}
    for event in log.get("xids") or []:
        groups.setdefault((event.get("bus") or "", int(event["xid"])), []).append(event)
    fatal, other = [], []
    for (bus, xid), events in groups.items():
        gpu = by_bus.get(bus)
        who = gpu_label(gpu) if gpu else f"GPU at PCI {bus or 'unknown'}"
        line = (
            f"{host}: {who}: Xid {xid} x{len(events)}: "
            f"{XID_MEANINGS.get(xid, 'see the Xid catalogue')}; last: {events[-1].get('line', '')}"
        )
        (fatal if xid in XID_FATAL else other).append(line)
    source = log.get("source") or "the kernel log"
    warnings = [f"warning: {o}" for o in other]
    text = f"{host}: no GPU Xid since boot in {source}"
    if other:
        text = f"{host}: only application-level Xids since boot in {source}:\n" + "\n".join(
            warnings
        )
    fix = (
        f"{source} | grep -i xid  (on {host}); https://docs.nvidia.com/deploy/xid-errors/ ; "
        "drain the node, reset the GPU or reboot; call the vendor when it comes back"
    )
    return _verdict("gpu_xid", host, fatal, warnings, fix, text)


# --------------------------------------------------------------------------- pcie
def _busy(gpu: dict) -> bool:
    """Working now: performance state P0 and the Idle clock reason not active."""
    idle = (gpu.get("clock_reasons") or {}).get("Idle")
    return gpu.get("performance_state") == "P0" and idle is False


def _pcie_summary(obs: dict) -> str | None:
    """'7 GPUs x16, 1 GPU x4': the current link widths of a host, widest first."""
    widths = Counter(
        (g.get("pcie") or {}).get("width_current")
        for g in gpus_of(obs)
        if (g.get("pcie") or {}).get("width_current") is not None
        and not any(c in str(g.get("name")) for c in C2C_GPUS)
    )
    return (
        ", ".join(
            f"{n} GPU{'' if n == 1 else 's'} x{w}" for w, n in sorted(widths.items(), reverse=True)
        )
        or None
    )


def check_pcie(observations: dict, host: str, settings: dict, order: list[str]) -> dict:
    obs = observations[host]
    if skipped := _skipped("gpu_pcie", obs, settings):
        return skipped
    lines, notes = [], []
    for gpu in gpus_of(obs):
        pcie = gpu.get("pcie") or {}
        if any(c in str(gpu.get("name")) for c in C2C_GPUS):
            notes.append(f"{gpu_label(gpu)} {gpu.get('name')} sits on NVLink-C2C: PCIe not judged")
            continue
        width, width_max = pcie.get("width_current"), pcie.get("width_max")
        gen, gen_max = pcie.get("gen_current"), pcie.get("gen_max")
        if width is not None and width_max is not None and width < width_max:
            lines.append(
                f"{host}: {gpu_label(gpu)}: PCIe link trained down to x{width} of x{width_max} "
                f"(Gen{gen} of Gen{gen_max}): {100 * width // width_max}% of its lanes"
            )
        elif gen is not None and gen_max is not None and gen < gen_max:
            if _busy(gpu):
                lines.append(
                    f"{host}: {gpu_label(gpu)}: PCIe Gen{gen} of Gen{gen_max} while busy (P0, not "
                    f"idle): the link trained down to a lower generation"
                )
            else:
                notes.append(
                    f"{gpu_label(gpu)} Gen{gen} of Gen{gen_max} at idle "
                    f"({gpu.get('performance_state') or 'state unknown'}: power saving)"
                )
        host_max, dev_max = pcie.get("gen_host_max"), pcie.get("gen_device_max")
        if host_max is not None and dev_max is not None and host_max < dev_max:
            notes.append(f"{gpu_label(gpu)} sits in a Gen{host_max} slot (GPU Gen{dev_max})")
    values = {h: s for h, o in observations.items() if (s := _pcie_summary(o)) is not None}
    mine = values.get(host)
    if mine is not None and len(values) > 1 and mine != _reference(values, order):
        lines.append(
            f"{host}: PCIe link widths {mine} differ from the other hosts "
            f"({_reference(values, order)}); host -> widths:\n" + _table(values, order)
        )
    text = f"{host}: every GPU's PCIe link at its full width ({mine or 'widths not reported'})"
    fix = (
        f"nvidia-smi -q -d PCIE; lspci -vv -s <bus id> | grep -i lnksta  (on {host}); reseat "
        "the GPU or its riser, check the slot's bifurcation in the BIOS, power-cycle"
    )
    passed = text + ("; " + "; ".join(notes) if notes else "")
    return _verdict("gpu_pcie", host, lines, [f"note: {n}" for n in notes], fix, passed)


# --------------------------------------------------------------------------- nvlink
def _active_links(obs: dict) -> dict[int, tuple[int, int]]:
    """GPU index -> (links up, links listed), from nvidia-smi nvlink -s."""
    out = {}
    for entry in _health(obs).get("nvlink") or []:
        links = entry.get("links") or []
        out[int(entry["index"])] = (sum(1 for link in links if link.get("up")), len(links))
    return out


def _no_nvlink(host: str, gpus: int) -> str:
    """No GPU lists a link: a PCIe card, a GB10's NVLink-C2C, or an NVLink GPU whose links the
    host does not see (an SXM5 H100 or an H200 passed alone into a VM lists none,
    tests/fixtures/gpu/nvlink-h100-vm.txt): say what was seen, not which card it must be."""
    seen = f"{host}: no GPU here reports an NVLink (nvidia-smi nvlink -s lists none)"
    if gpus == 1:
        return f"{seen}; its one GPU has no peer on this host: nothing to check"
    return (
        f"{seen}; its GPUs reach each other over PCIe (PCIe cards, or NVLink GPUs whose links "
        "this host does not see: nvidia-smi topo -m shows no NV# between them); nothing to check"
    )


def check_nvlink(observations: dict, host: str, settings: dict, order: list[str]) -> dict:
    obs = observations[host]
    if skipped := _skipped("gpu_nvlink", obs, settings):
        return skipped
    entries = _health(obs).get("nvlink")
    if entries is None:
        why = _health(obs).get("nvlink_reason") or "no nvlink data"
        return _result("gpu_nvlink", host, "skipped", f"{host}: NVLink not read: {why}")
    if not any(e.get("links") or e.get("all_inactive") for e in entries):
        return _result("gpu_nvlink", host, "skipped", _no_nvlink(host, len(gpus_of(obs))))
    by_index = {g.get("index"): g for g in gpus_of(obs)}
    lines = []
    for entry in entries:
        gpu = by_index.get(entry["index"]) or {"index": entry["index"]}
        down = [str(link["link"]) for link in entry.get("links") or [] if not link.get("up")]
        if entry.get("all_inactive"):
            lines.append(f"{host}: {gpu_label(gpu)}: every NVLink is inactive")
        elif down:
            lines.append(f"{host}: {gpu_label(gpu)}: NVLink {', '.join(down)} inactive")
    counts = {
        h: ", ".join(sorted({f"{up} up" for up, _ in links.values()}))
        for h, o in observations.items()
        if (links := _active_links(o)) and any(total for _, total in links.values())
    }
    mine = counts.get(host)
    if mine is not None and len(counts) > 1 and mine != _reference(counts, order):
        lines.append(
            f"{host}: NVLinks per GPU ({mine}) differ from the other hosts "
            f"({_reference(counts, order)}); host -> links up per GPU:\n" + _table(counts, order)
        )
    fix = (
        f"nvidia-smi nvlink -s; nvidia-smi nvlink -e  (on {host}); reset the GPUs or reboot; "
        "on an NVSwitch system restart nvidia-fabricmanager; reseat or replace the baseboard"
    )
    links = sum(len(e.get("links") or []) for e in entries)
    passed = f"{host}: all {links} NVLinks of {len(entries)} GPUs up"
    return _verdict("gpu_nvlink", host, lines, [], fix, passed)


# --------------------------------------------------------------------------- fabric manager
def check_fabric(obs: dict, settings: dict) -> dict:
    host = obs["host"]
    if skipped := _skipped("gpu_fabric", obs, settings):
        return skipped
    health = _health(obs)
    gpus = gpus_of(obs)
    states = {gpu_label(g): (g.get("fabric_state"), g.get("fabric_status")) for g in gpus}
    reported = {k: v for k, v in states.items() if v[0] is not None}
    if not health.get("nvswitch") and not reported:
        return _result(
            "gpu_fabric",
            host,
            "skipped",
            f"{host}: no NVSwitch fabric (no NVSwitch device, no GPU fabric state): no Fabric "
            "Manager needed",
        )
    fm = health.get("fabric_manager") or {}
    lines = [
        f"{host}: {label}: fabric state {state}, status {status}"
        for label, (state, status) in reported.items()
        if state != "Completed" or status not in (None, "Success")
    ]
    if fm.get("state") and fm["state"] != "active":
        lines.insert(0, f"{host}: the nvidia-fabricmanager service is {fm['state']}")
    fix = (
        f"systemctl status nvidia-fabricmanager; journalctl -u nvidia-fabricmanager  (on "
        f"{host}); systemctl restart nvidia-fabricmanager (its version must match the "
        "driver's); nvidia-smi -q | grep -A2 Fabric"
    )
    service = (
        f"nvidia-fabricmanager {fm['state']}"
        if fm.get("state")
        else f"the service state unknown ({fm.get('reason') or 'not read'})"
    )
    passed = f"{host}: NVSwitch fabric: {len(reported)} GPUs Completed/Success, {service}"
    return _verdict("gpu_fabric", host, lines, [], fix, passed)


# --------------------------------------------------------------------------- topology
def run_nics(settings: dict, topology_nics: list[str]) -> tuple[list[str], str]:
    """The RDMA NICs the run will use and what says so.

    NCCL uses every RDMA NIC it finds unless NCCL_IB_HCA (in nccl_extra_env) narrows them
    (`mlx5_0:1,mlx5_1` prefixes; `=x` exact names; `^x` excludes) or NCCL_IB_DISABLE=1 turns
    them off (NCCL then talks over sockets).
    """
    env = settings.get("extra_env") or {}
    if str(env.get("NCCL_IB_DISABLE") or "").strip() == "1":
        return [], "NCCL_IB_DISABLE=1"
    hca = str(env.get("NCCL_IB_HCA") or "").strip()
    if not hca:
        return list(topology_nics), "every RDMA NIC: NCCL_IB_HCA is not set"
    names = [n.split(":")[0] for n in hca.lstrip("^=").split(",") if n.strip()]
    if hca.startswith("^"):
        return [n for n in topology_nics if not any(n.startswith(x) for x in names)], (
            f"NCCL_IB_HCA={hca}"
        )
    if hca.startswith("="):
        return names, f"NCCL_IB_HCA={hca}"
    return [n for n in topology_nics if any(n.startswith(x) for x in names)], f"NCCL_IB_HCA={hca}"


def check_topology(obs: dict, settings: dict) -> dict:
    host = obs["host"]
    if skipped := _skipped("gpu_topology", obs, settings, "topology", "topology not read: "):
        return skipped
    topology = _health(obs)["topology"]
    nics, source = run_nics(settings, topology.get("nics") or [])
    if not nics:
        return _result(
            "gpu_topology",
            host,
            "skipped",
            f"{host}: the run uses no RDMA NIC ({source}; nvidia-smi topo -m lists "
            f"{', '.join(topology.get('nics') or []) or 'none'}): NCCL talks over sockets",
        )
    by_index = {g.get("index"): g for g in gpus_of(obs)}
    near, far, unknown = [], [], [n for n in nics if n not in (topology.get("nics") or [])]
    for row in topology.get("gpus") or []:
        relations = {n: r for n, r in (row.get("nics") or {}).items() if n in nics}
        if not relations:
            continue
        best = min(relations, key=lambda n: TOPO_RANK.get(relations[n], 5))
        gpu = by_index.get(row["index"]) or {"index": row["index"]}
        text = f"{gpu_label(gpu)} -> {best} ({relations[best]})"
        (far if relations[best] == "SYS" else near).append(text)
    notes = [
        f"warning: {host}: {t}: every NIC of the run is across the CPU interconnect (SYS)"
        for t in far
    ]
    notes += [f"warning: {host}: NIC {n} ({source}) is not in nvidia-smi topo -m" for n in unknown]
    return _result(
        "gpu_topology",
        host,
        "passed",
        f"{host}: nearest NIC of each GPU among {', '.join(nics)} ({source}): "
        + ("; ".join(near) or "none")
        + ("\n" + "\n".join(notes) if notes else ""),
        f"nvidia-smi topo -m  (on {host}); set NCCL_IB_HCA in nccl_extra_env to the NICs next to "
        "the GPUs"
        if notes
        else "",
    )


# --------------------------------------------------------------------------- modes
def _mode_problems(gpu: dict, ranks_per_gpu: float) -> tuple[list[str], list[str]]:
    fails, warns = [], []
    if gpu.get("mig_mode") == "Enabled":
        fails.append("MIG mode is enabled (NCCL does not run collectives across MIG instances)")
    mode = gpu.get("compute_mode")
    if mode == "Prohibited":
        fails.append("compute mode Prohibited (no CUDA context allowed)")
    elif mode in ("Exclusive_Process", "Exclusive_Thread") and ranks_per_gpu > 1:
        fails.append(f"compute mode {mode} with more ranks than GPUs on the host")
    reasons = gpu.get("clock_reasons") or {}
    slow = [r for r in THROTTLE_FAIL if reasons.get(r)]
    if slow:
        fails.append(f"clocks slowed now by {', '.join(slow)}")
    warns += [f"clocks slowed now by {r}" for r in THROTTLE_WARN if reasons.get(r)]
    if gpu.get("persistence_mode") == "Disabled":
        warns.append("persistence mode disabled (every CUDA start re-initialises the GPU)")
    return fails, warns


def check_modes(obs: dict, settings: dict) -> dict:
    host = obs["host"]
    if skipped := _skipped("gpu_modes", obs, settings):
        return skipped
    gpus = gpus_of(obs)
    ranks_per_gpu = int(obs.get("nproc_per_node") or 1) / max(len(gpus), 1)
    lines, warnings = [], []
    for gpu in gpus:
        fails, warns = _mode_problems(gpu, ranks_per_gpu)
        lines += [f"{host}: {gpu_label(gpu)}: {f}" for f in fails]
        warnings += [f"warning: {host}: {gpu_label(gpu)}: {w}" for w in warns]
    fix = (
        f"nvidia-smi -q -d PERFORMANCE,COMPUTE  (on {host}); nvidia-smi -i <index> -mig 0; "
        "nvidia-smi -i <index> -c DEFAULT; check cooling and power for HW slowdown"
    )
    text = f"{host}: {len(gpus)} GPUs: no MIG, compute mode usable, no hardware slowdown"
    return _verdict("gpu_modes", host, lines, warnings, fix, "\n".join([text, *warnings]))


# --------------------------------------------------------------------------- torch's view
def _visible_problems(entries: list[str], gpus: list[dict], want: int) -> list[str]:
    problems = []
    if not entries:
        return ["CUDA_VISIBLE_DEVICES is empty: it hides every GPU"]
    if len(set(entries)) < len(entries):
        problems.append(f"CUDA_VISIBLE_DEVICES={','.join(entries)} names a GPU twice")
    indices = {str(g.get("index")) for g in gpus}
    uuids = [str(g.get("uuid") or "") for g in gpus]
    for entry in entries:
        if entry.isdigit():
            if entry not in indices:
                problems.append(f"CUDA_VISIBLE_DEVICES names GPU {entry}, which does not exist")
        elif entry.startswith(("GPU-", "MIG-")):
            if not any(u.startswith(entry) for u in uuids):
                problems.append(f"CUDA_VISIBLE_DEVICES names {entry}, not a GPU of this host")
        else:
            problems.append(f"CUDA_VISIBLE_DEVICES entry {entry!r} is neither an index nor a UUID")
    if len(entries) < want:
        problems.append(
            f"CUDA_VISIBLE_DEVICES shows {len(entries)} GPUs, {want} ranks planned on this host"
        )
    return problems


def check_visible(obs: dict, settings: dict) -> dict:
    host = obs["host"]
    if skipped := _skipped("gpu_visible", obs, settings):
        return skipped
    want = int(obs.get("nproc_per_node") or 1)
    extra = settings.get("extra_env") or {}
    value = extra.get("CUDA_VISIBLE_DEVICES", _health(obs).get("cuda_visible_devices"))
    where = "nccl_extra_env" if "CUDA_VISIBLE_DEVICES" in extra else "the node's environment"
    facts_gpus = (obs.get("facts") or {}).get("gpus") or []
    problems = []
    if value is not None:
        entries = [e.strip() for e in str(value).split(",")]
        problems = _visible_problems([] if entries == [""] else entries, facts_gpus, want)
    py = python_facts_of(obs)
    count = py.get("device_count") if py.get("torch_version") else None
    if count is not None and int(count) < want:
        problems.append(
            f"torch.cuda.device_count() is {count} in {obs.get('python') or py.get('executable')}, "
            f"{want} ranks planned" + (f" ({py['reason']})" if py.get("reason") else "")
        )
    fix = (
        f'echo $CUDA_VISIBLE_DEVICES; nvidia-smi -L; python -c "import torch; '
        f'print(torch.cuda.device_count())"  (on {host}); fix CUDA_VISIBLE_DEVICES ({where}) '
        "or the ranks per node"
    )
    seen = "unknown (the torch probe gave no answer)" if count is None else str(count)
    shown = "unset" if value is None else f"{value!r} ({where})"
    passed = (
        f"{host}: torch sees {seen} CUDA devices for {want} ranks; CUDA_VISIBLE_DEVICES {shown}"
    )
    lines = [f"{host}: {p}" for p in problems]
    return _verdict("gpu_visible", host, lines, [], fix, passed)


# --------------------------------------------------------------------------- dcgm
def check_dcgm(obs: dict, settings: dict) -> dict:
    host = obs["host"]
    if skipped := _skipped("gpu_dcgm", obs, settings):
        return skipped
    dcgm = _health(obs).get("dcgm") or {}
    if not dcgm.get("results"):
        why = dcgm.get("reason") or "nccl_dcgm_diag_level is 0 (off)"
        return _result("gpu_dcgm", host, "skipped", f"{host}: DCGM diagnostics not run: {why}")
    level = dcgm.get("level")
    by_index = {str(g.get("index")): g for g in gpus_of(obs)}

    def who(result: dict) -> str:
        gpu = result.get("gpu")
        return gpu_label(by_index.get(gpu) or {"index": gpu}) if gpu is not None else "all GPUs"

    def line(result: dict) -> str:
        info = f": {result['info']}" if result.get("info") else ""
        return (
            f"{host}: {who(result)}: {result['category']}/{result['test']} {result['status']}{info}"
        )

    results = dcgm["results"]
    failed = [line(r) for r in results if r.get("status", "").lower().startswith("fail")]
    warned = [line(r) for r in results if r.get("status", "").lower().startswith("warn")]
    warnings = [f"warning: {w}" for w in warned]
    fix = (
        f"dcgmi diag -r {level}  (on {host}); act on the failed diagnostic (drain the node, "
        "reset or replace the GPU)"
    )
    count = sum(1 for r in results if r.get("status", "").lower().startswith("pass"))
    text = f"{host}: dcgmi diag -r {level}: {count} of {len(results)} results Pass, none Fail"
    return _verdict("gpu_dcgm", host, failed, warnings, fix, "\n".join([text, *warnings]))


# --------------------------------------------------------------------------- entry points
def nccl_gpu_health_results(
    observations: dict[str, dict], host: str, settings: dict | None = None
) -> list[dict[str, str]]:
    """Every GPU health check of ``host``, given the observations of all hosts."""
    settings = settings or {}
    observations = {h: {**o, "host": h} for h, o in observations.items() if o}
    if host not in observations:
        return no_observation(GPU_CHECKS, host)
    order = rank_order(observations, settings)
    obs = observations[host]
    return [
        check_memory(obs, settings),
        check_xid(obs, settings),
        check_pcie(observations, host, settings, order),
        check_nvlink(observations, host, settings, order),
        check_fabric(obs, settings),
        check_topology(obs, settings),
        check_modes(obs, settings),
        check_visible(obs, settings),
        check_dcgm(obs, settings),
    ]


def nccl_gpu_health_add(
    results_by_host: dict[str, list[dict] | None],
    observations: dict[str, dict],
    settings: dict | None = None,
) -> dict[str, list[dict] | None]:
    """results_by_host (judge_host_checks') with every host's GPU health checks appended;
    hosts without results (None: dropped out before the pre-flight) stay None."""
    return append_results(
        results_by_host, lambda host: nccl_gpu_health_results(observations, host, settings)
    )
