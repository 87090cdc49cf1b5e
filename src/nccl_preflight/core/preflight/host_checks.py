# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight verdicts: every check of every host, from what the role observed.

The role gathers one *observation* per host (facts, nccl_env values, probe and listener results,
firewall findings) and hands all of them to ``nccl_preflight_results``, which returns the list of
``{check, host, status, message, hint}`` for one host. Cross-host checks (MTU, versions, GPU model,
address family, clock) compare that host against the others; the odd host fails and the message
carries the table host -> value.

Observation of a host: the ``preflight_observation`` fact, built by
``nccl_preflight_observation`` (core/preflight/observation.py, whose docstring describes
every key); the judge adds ``host``.

Settings: master (inventory name), order (inventory names in rank order), require_gpu,
gpus_per_node and requested_backend (the checks gpu and gpu_model: gpu_presence.py),
expected_versions ({python, torch, cuda, nccl, driver}), clock_check, clock_max_skew_s,
full_mesh.
"""

from __future__ import annotations

import ipaddress

from nccl_preflight.core.preflight.gpu_presence import (
    check_gpu,
    check_gpu_model,
    python_facts_of,
)
from nccl_preflight.core.preflight.result import check_result as _result
from nccl_preflight.core.preflight.result import host_table as table
from nccl_preflight.core.preflight.result import (
    no_observation,
    rank_order,
    reference_value,
)

# The probe plan is computed on the nodes too (slurm/node_step.py): its home is the node room.
from nccl_preflight.node.probe_plan import (  # noqa: F401 - re-exported for the filters
    nccl_preflight_expected_connections,
    nccl_preflight_probe_plan,
    nccl_preflight_ring_peers,
)

CHECKS = (
    "interface",
    "mtu",
    "hostname",
    "master_addr",
    "master_port_free",
    "tcp_master_port",
    "tcp_ring",
    "firewall",
    "gpu",
    "gpu_model",
    "versions",
    "clock",
)
VIRTUAL_PREFIXES = ("docker", "veth", "br-", "virbr")
VERSION_KEYS = ("python", "torch", "cuda", "nccl", "driver")


def _family(address: str) -> str:
    try:
        return f"ipv{ipaddress.ip_address(address).version}"
    except ValueError:
        return ""


# --------------------------------------------------------------------------- interface
def check_interface(obs: dict) -> dict:
    host, name = obs["host"], obs.get("ifname") or ""
    interfaces = (obs.get("facts") or {}).get("interfaces") or {}
    present = ", ".join(sorted(interfaces)) or "none"
    if not name:
        reason = obs.get("ifname_reason") or "no fabric interface was chosen"
        return _result(
            "interface",
            host,
            "failed",
            f"{host}: no fabric interface: {reason}; interfaces present: {present}",
            f"ip -br addr show  (on {host}); set nccl_socket_ifname or nccl_fabric_cidr",
        )
    if any(c in name for c in "^=,") or name.startswith("^"):
        return _result(
            "interface",
            host,
            "failed",
            f"{host}: interface '{name}' is not a concrete interface name; GLOO_SOCKET_IFNAME "
            "does not understand NCCL's '^' (exclude) or '=' (exact) syntax",
            f"set nccl_socket_ifname for {host} to one name from: {present}",
        )
    unread = (obs.get("facts") or {}).get("interfaces_reason") or ""
    if not interfaces and unread:
        return _result(
            "interface",
            host,
            "failed",
            f"{host}: its interfaces could not be read, so {name} cannot be checked: {unread}",
            f"install iproute2 (the ip command) on {host}"
            if "iproute2" in unread
            else f"ip -br addr show  (on {host})",
        )
    if name not in interfaces:
        return _result(
            "interface",
            host,
            "failed",
            f"{host}: interface {name} does not exist; interfaces present: {present}",
            f"ip link show  (on {host}); set nccl_socket_ifname for {host} to one of: {present}",
        )
    iface = interfaces[name]
    if iface.get("state") == "down":
        return _result(
            "interface",
            host,
            "failed",
            f"{host}: interface {name} is down",
            f"ip link show {name}; bring it up: ip link set {name} up  (on {host})",
        )
    addresses = [a["address"] for a in (iface.get("ipv4") or []) + (iface.get("ipv6") or [])]
    if not obs.get("address") or obs["address"] not in addresses:
        have = ", ".join(addresses) or "no address"
        return _result(
            "interface",
            host,
            "failed",
            f"{host}: interface {name} carries no address of the fabric (it has: {have})",
            f"ip addr show dev {name}  (on {host}); check nccl_fabric_cidr / nccl_socket_ifname",
        )
    speed = iface.get("speed_mbps")
    notes = [f"speed {speed} Mb/s" if speed else "link speed not reported"]
    if name.startswith(VIRTUAL_PREFIXES):
        notes.append(
            f"warning: {name} looks like a container or virtual bridge interface; make sure it is "
            "the real fabric"
        )
    return _result(
        "interface",
        host,
        "passed",
        f"{host}: {name} is {iface.get('state')}, address {obs['address']}, MTU "
        f"{iface.get('mtu')}, " + "; ".join(notes),
    )


def _mtu(obs: dict) -> int | None:
    iface = ((obs.get("facts") or {}).get("interfaces") or {}).get(obs.get("ifname") or "")
    return iface.get("mtu") if iface else None


def check_mtu(observations: dict[str, dict], host: str, order: list[str]) -> dict:
    mine = _mtu(observations[host])
    if mine is None:
        return _result(
            "mtu",
            host,
            "skipped",
            f"{host}: no fabric interface to read the MTU of (see check interface)",
        )
    values = {h: _mtu(o) for h, o in observations.items() if _mtu(o) is not None}
    ref = reference_value(values, order)
    if mine == ref:
        return _result(
            "mtu",
            host,
            "passed",
            f"{host}: MTU {mine} on {observations[host]['ifname']}, the same as the other hosts",
        )
    ifname = observations[host]["ifname"]
    return _result(
        "mtu",
        host,
        "failed",
        f"{host}: MTU {mine} on {ifname} differs from the other hosts ({ref}); host -> MTU:\n"
        + table(values, order),
        f"ip link show {ifname}; ip link set dev {ifname} mtu {ref}  (on {host}, and make it "
        "persistent)",
    )


# --------------------------------------------------------------------------- names and families
def _fabric_address(obs: dict) -> str:
    """The fabric address for a fix, or how to find it where the node could not tell (a host
    without the ip command, as on the lent GPU VMs: tests/fixtures/gpu/facts-h100-vm.json)."""
    if obs.get("address"):
        return f"its fabric address {obs['address']}"
    if ifname := obs.get("ifname"):
        return f"the address of {ifname} (ip -4 addr show {ifname})"
    return "its fabric address (ip -br addr show)"


def check_hostname(obs: dict, run_alone: bool = False) -> dict:
    """``run_alone``: the run has this one host (not a node judged alone for a cluster, as
    node-check's): every peer is itself, so a hostname on loopback only warns."""
    host = obs["host"]
    facts = obs.get("facts") or {}
    name = facts.get("hostname") or host
    addrs = facts.get("hostname_addresses") or []
    loop = [a for a in addrs if _family(a) and ipaddress.ip_address(a).is_loopback]
    fabric = obs.get("address") or ""
    if loop and _family(fabric) and ipaddress.ip_address(fabric).is_loopback:
        # A single machine whose fabric is loopback: its peers are itself, loopback is right.
        return _result(
            "hostname",
            host,
            "passed",
            f"{host}: hostname {name} resolves to loopback {', '.join(loop)}, as does its fabric "
            f"address {fabric}: a single-machine run",
        )
    if loop and run_alone:
        return _result(
            "hostname",
            host,
            "passed",
            f"{host}: warning: its hostname {name} resolves to loopback {', '.join(loop)}: fine "
            "for a run on this host alone (every peer is itself); with other hosts Gloo and the "
            "rendezvous would tell them to connect to loopback where no interface is forced",
            f"getent hosts {name}  (on {host}); map {name} to {_fabric_address(obs)} in "
            f"/etc/hosts instead of {loop[0]}",
        )
    if loop:
        return _result(
            "hostname",
            host,
            "failed",
            f"{host}: its hostname {name} resolves to loopback {', '.join(loop)}; Gloo and the "
            "rendezvous use the hostname when no interface is forced and peers would be told "
            "to connect to loopback",
            f"getent hosts {name}  (on {host}); map {name} to {_fabric_address(obs)} in "
            f"/etc/hosts instead of {loop[0]}",
        )
    if not addrs:
        return _result(
            "hostname",
            host,
            "passed",
            f"{host}: warning: its hostname {name} does not resolve; fine while "
            "GLOO_SOCKET_IFNAME is set",
            f"getent hosts {name}  (on {host})",
        )
    return _result(
        "hostname", host, "passed", f"{host}: hostname {name} resolves to {', '.join(addrs)}"
    )


def check_master_addr(observations: dict[str, dict], host: str) -> dict:
    obs = observations[host]
    maddr, mine = obs.get("master_addr") or "", obs.get("address") or ""
    if not _family(maddr):
        return _result(
            "master_addr",
            host,
            "failed",
            f"{host}: MASTER_ADDR '{maddr}' is not a literal IP address (the master has no fabric "
            "address?)",
            "check the interface check of the master; set nccl_socket_ifname / nccl_fabric_cidr",
        )
    others = {o.get("master_addr") for o in observations.values() if o.get("master_addr")}
    if len(others) > 1:
        return _result(
            "master_addr",
            host,
            "failed",
            f"{host}: the hosts disagree on MASTER_ADDR: {', '.join(sorted(others))}",
            "rerun the play with every host reachable",
        )
    if mine and _family(mine) != _family(maddr):
        return _result(
            "master_addr",
            host,
            "failed",
            f"{host}: its fabric address {mine} is {_family(mine)} but MASTER_ADDR {maddr} is "
            f"{_family(maddr)}; every host must use one family",
            f"ip addr show  (on {host}); give it an {_family(maddr)} address on the fabric",
        )
    return _result(
        "master_addr",
        host,
        "passed",
        f"{host}: MASTER_ADDR {maddr} ({_family(maddr)}), the same family as {mine}",
    )


# --------------------------------------------------------------------------- ports and TCP
def _listener(obs: dict, name: str) -> dict:
    for entry in (obs.get("listeners") or {}).get("listeners") or []:
        if entry.get("name") == name:
            return entry
    return {}


def check_master_port_free(observations: dict[str, dict], host: str, master: str) -> dict:
    obs = observations[host]
    port = obs.get("master_port")
    if host != master:
        return _result(
            "master_port_free",
            host,
            "skipped",
            f"{host}: only the master ({master}) listens on MASTER_PORT {port}",
        )
    lock = obs.get("run_lock") or {}
    if lock.get("refused"):
        return _result(
            "master_port_free",
            host,
            "failed",
            f"{host}: MASTER_PORT {port} is not this run's: {lock.get('message')}",
            "let that run end (or stop it where it was started), or validate with another "
            f"nccl_master_port; cat {lock.get('path')}  (on {host}); when that run is gone "
            "(its control machine died), end its keeper and the next run takes the lock over: "
            f"kill {(lock.get('holder') or {}).get('keeper_pid') or '<keeper_pid>'}  (on {host})",
        )
    owner = obs.get("port_owner") or {}
    holders = owner.get("listeners") or []
    if holders:
        who = "; ".join(
            f"pid {h['pid']} ({h.get('cmdline') or h.get('comm')}) on {h['address']}"
            if h.get("pid")
            else f"a process not visible to this user on {h['address']}"
            for h in holders
        )
        pid = next((h["pid"] for h in holders if h.get("pid")), None)
        stop = f"stop it (kill {pid})" if pid else "stop it"
        return _result(
            "master_port_free",
            host,
            "failed",
            f"{host}: MASTER_PORT {port} is already in use by {who}",
            f"ss -tlnp 'sport = :{port}'  (on {host}); {stop} or choose another nccl_master_port",
        )
    if not owner:
        return _result(
            "master_port_free",
            host,
            "failed",
            f"{host}: could not look at MASTER_PORT {port} (the port check did not run)",
            f"ss -tlnp 'sport = :{port}'  (on {host})",
        )
    entry = _listener(obs, "master")
    if entry.get("error"):
        return _result(
            "master_port_free",
            host,
            "failed",
            f"{host}: cannot listen on MASTER_PORT {port}: {entry['error']}",
            f"ip addr show; ss -tlnp 'sport = :{port}'  (on {host})",
        )
    note = f"; {lock['message']}" if lock.get("took_over") else ""
    return _result("master_port_free", host, "passed", f"{host}: MASTER_PORT {port} is free{note}")


def _probe_failure_text(p: dict) -> str:
    kind = p.get("error_kind")
    why = {
        "timeout": "packets are dropped (a firewall on the peer or in between, or one here "
        "that drops the replies to this host's own ephemeral ports)",
        "refused": "refused (a REJECT rule, or nothing listening)",
        "unreachable": "no route to the peer",
        "source": "the source address is not on this host",
    }.get(kind, "")
    return f"{p.get('error')}" + (f": {why}" if why else "")


def _stopped_early(observations: dict, p: dict) -> str:
    """Why a refused probe may be no fault of the path: the peer's listeners had ended at their
    bound on the node (preflight_listen_timeout, ``ended`` "timeout") before this probe came.
    They are otherwise stopped only after every host's probes, so a refusal is the path's."""
    listeners = (observations.get(p.get("host")) or {}).get("listeners") or {}
    if p.get("error_kind") != "refused" or listeners.get("ended") != "timeout":
        return ""
    return (
        f" (the listeners on {p.get('host')} had already ended at their bound, "
        "preflight_listen_timeout, before this probe came: the run took longer than that bound "
        "between the facts play and the probes)"
    )


def _probe_check(check: str, observations: dict, host: str, target: str, what: str) -> dict:
    obs = observations[host]
    probes = [p for p in obs.get("probes") or [] if p.get("name") == target]
    if not probes:
        reason = (obs.get("probe_skip") or {}).get(target) or "no probe ran"
        return _result(check, host, "skipped", f"{host}: {what}: not tested: {reason}")
    bad = [p for p in probes if not p.get("ok")]
    if not bad:
        done = ", ".join(
            f"{p['host']} {p['address']}:{p['port']} ({p['elapsed_ms']} ms)" for p in probes
        )
        return _result(check, host, "passed", f"{host}: connected over TCP to {what}: {done}")
    lines, hints = [], []
    for p in bad:
        src = p.get("source") or "the default address"
        lines.append(
            f"{host}: cannot open TCP to {p['host']} at {p['address']}:{p['port']} ({what}) "
            f"from {src}: {_probe_failure_text(p)}{_stopped_early(observations, p)}"
        )
        src_opt = f"-s {p['source']} " if p.get("source") else ""
        hints.append(
            f"nc -zv {src_opt}{p['address']} {p['port']}  (on {host}); look at the firewall "
            f"check of {p['host']}: iptables -S INPUT / nft list ruleset (on {p['host']})"
        )
    return _result(check, host, "failed", "; ".join(lines), "; ".join(hints))


# --------------------------------------------------------------------------- firewall
def check_firewall(obs: dict) -> dict:
    host = obs["host"]
    fw = obs.get("firewall") or {}
    if not fw:
        return _result(
            "firewall",
            host,
            "skipped",
            f"{host}: firewall not read: "
            f"{obs.get('firewall_skip') or 'the firewall task did not run'}",
        )
    findings = fw.get("findings") or []
    tools = fw.get("tools") or {}
    errors = [f"{t}: {i['error']}" for t, i in tools.items() if i.get("error")]
    read = sorted(t for t, i in tools.items() if i.get("read"))
    certain = [f for f in findings if f.get("certain", True)]
    maybe = [f for f in findings if not f.get("certain", True)]
    if certain:
        return _result(
            "firewall",
            host,
            "failed",
            "; ".join(f"{host}: {f['text']}" for f in certain),
            "; ".join(f"allow it (on {host}): {f['fix']}" for f in certain),
        )
    if errors and not read:
        return _result(
            "firewall",
            host,
            "skipped",
            f"{host}: the firewall could not be read: " + "; ".join(errors),
            "set preflight_become_firewall: true (reading iptables/nft needs root)",
        )
    notes = [f"read: {', '.join(read) or 'no firewall tool installed'}"]
    if not findings:
        notes.append("no rule drops the job's traffic")
    notes += [f"warning: {f['text']}" for f in maybe]
    notes += [f"warning: {e}" for e in errors]
    return _result("firewall", host, "passed", f"{host}: " + "; ".join(notes))


# --------------------------------------------------------------------------- versions
def versions_of(obs: dict) -> dict[str, str | None]:
    facts = obs.get("facts") or {}
    py = python_facts_of(obs)
    gpus = facts.get("gpus") or []
    return {
        "python": py.get("version"),
        "torch": py.get("torch_version"),
        "cuda": py.get("cuda_version"),
        "nccl": py.get("nccl_version"),
        "driver": gpus[0].get("driver_version") if gpus else None,
    }


def check_versions(observations: dict, host: str, settings: dict, order: list[str]) -> dict:
    obs = observations[host]
    python = obs.get("python") or "python"
    py = python_facts_of(obs)
    mine = versions_of(obs)
    if not mine["torch"]:
        why = py.get("reason") or "torch is not importable"
        return _result(
            "versions",
            host,
            "failed",
            f"{host}: cannot read the torch version with {python}: {why}",
            f'{python} -c "import torch; print(torch.__version__)"  (on {host})',
        )
    expected = {k: v for k, v in (settings.get("expected_versions") or {}).items() if v}
    problems, fixes = [], []
    all_versions = {h: versions_of(o) for h, o in observations.items()}
    for key in VERSION_KEYS:
        if key in expected:
            if str(mine[key]) != str(expected[key]):
                problems.append(
                    f"{key} {mine[key]} but nccl_expected_versions pins {expected[key]}"
                )
            continue
        values = {h: v[key] for h, v in all_versions.items()}
        ref = reference_value(values, order)
        if mine[key] != ref:
            problems.append(
                f"{key} {mine[key]} differs from the other hosts ({ref}); "
                f"host -> {key}:\n" + table(values, order)
            )
    if problems:
        fixes.append(
            f'{python} -c "import sys, torch; print(sys.version, torch.__version__, '
            f"torch.version.cuda, torch.cuda.nccl.version() if torch.cuda.is_available() "
            f'else None)"  (on {host}); install the same versions on every host or set '
            f"nccl_python for {host}"
        )
        return _result(
            "versions", host, "failed", f"{host}: " + "\n".join(problems), "; ".join(fixes)
        )
    text = ", ".join(f"{k} {mine[k]}" for k in VERSION_KEYS if mine[k] is not None)
    if len(observations) > 1:
        text += ", the same on every host"
    elif expected:
        text += f", as nccl_expected_versions pins ({', '.join(sorted(expected))})"
    return _result("versions", host, "passed", f"{host}: {text}")


# --------------------------------------------------------------------------- clock
def check_clock(observations: dict, host: str, settings: dict) -> dict:
    if not settings.get("clock_check"):
        return _result(
            "clock",
            host,
            "skipped",
            f"{host}: the clock check is off (preflight_clock_check: false)",
        )
    clocks = {h: float(o["clock"]) for h, o in observations.items() if o.get("clock") is not None}
    if host not in clocks:
        return _result("clock", host, "skipped", f"{host}: its clock could not be read")
    median = sorted(clocks.values())[len(clocks) // 2]
    skew = clocks[host] - median
    bound = float(settings.get("clock_max_skew_s") or 2)
    if abs(skew) > bound:
        return _result(
            "clock",
            host,
            "failed",
            f"{host}: its clock is {skew:+.1f} s off the other hosts (bound {bound:g} s)",
            f"timedatectl; chronyc tracking  (on {host}); enable NTP",
        )
    return _result("clock", host, "passed", f"{host}: clock within {abs(skew):.1f} s of the others")


# --------------------------------------------------------------------------- entry points
def nccl_preflight_results(
    observations: dict[str, dict], host: str, settings: dict | None = None
) -> list[dict[str, str]]:
    """Every check for ``host``, given the observations of all hosts."""
    settings = settings or {}
    observations = {h: {**o, "host": h} for h, o in observations.items() if o}
    if host not in observations:
        return no_observation(CHECKS, host)
    order = rank_order(observations, settings)
    master = settings.get("master") or order[0]
    obs = observations[host]
    return [
        check_interface(obs),
        check_mtu(observations, host, order),
        check_hostname(obs, run_alone=len(order) == 1 and not settings.get("node_alone")),
        check_master_addr(observations, host),
        check_master_port_free(observations, host, master),
        _probe_check(
            "tcp_master_port",
            observations,
            host,
            "master",
            f"the master's MASTER_PORT {obs.get('master_port')}",
        ),
        _probe_check(
            "tcp_ring",
            observations,
            host,
            "ring",
            "its ring neighbour's ephemeral port"
            if not settings.get("full_mesh")
            else "every peer's ephemeral port",
        ),
        check_firewall(obs),
        check_gpu(observations, host, settings, order),
        check_gpu_model(observations, host, settings, order),
        check_versions(observations, host, settings, order),
        check_clock(observations, host, settings),
    ]


def nccl_preflight_failures_text(results_by_host: dict[str, list[dict]]) -> str:
    """The failures grouped by host, for the final message; "" when nothing failed."""
    blocks = []
    for host, results in results_by_host.items():
        if results is None:
            blocks.append(
                f"{host}: no pre-flight results (the host failed or was unreachable "
                "before the pre-flight)"
            )
            continue
        failed = [r for r in results or [] if r.get("status") == "failed"]
        if not failed:
            continue
        lines = [f"{host}: {len(failed)} check(s) failed"]
        for r in failed:
            cause = r.get("cause") or {}
            of = f" (a consequence of {cause['host']}'s {cause['check']})" if cause else ""
            lines.append(f"  [{r['check']}] {r['message']}{of}".replace("\n", "\n    "))
            if r.get("hint"):
                lines.append(f"    fix: {r['hint']}")
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def judge_host_checks(
    observations: dict[str, dict], present: list[str], settings: dict | None = None
) -> dict[str, list[dict[str, str]] | None]:
    """Every host's results at once, in settings["order"] (all nodes of the inventory).

    Hosts in ``present`` (the play's hosts) get nccl_preflight_results; the others dropped out
    before the pre-flight (unreachable, failed) and get None, as nccl_preflight_failed_hosts and
    nccl_preflight_failures_text expect. One call for all hosts, so the play judges once
    (run_once) instead of once per host.
    """
    settings = settings or {}
    order = list(settings.get("order") or observations)
    return {
        host: nccl_preflight_results(observations, host, settings) if host in present else None
        for host in order
    }


def nccl_preflight_failed_hosts(results_by_host: dict[str, list[dict] | None]) -> list[str]:
    """Hosts with a failed check, or without results, in the given order."""
    return [
        host
        for host, results in results_by_host.items()
        if results is None or any(r.get("status") == "failed" for r in results)
    ]
