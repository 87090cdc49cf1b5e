# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The fabric checks of the pre-flight: rdma, nccl_ib_hca, gpudirect, limits, nccl_config, fabric.

Pure functions of the observations the pre-flight role gathers (docs/design.md, "Pre-flight
results"); each host's ``facts.fabric`` is library/nccl_facts.py's ``ansible_facts.nccl.fabric``
(src/nccl_preflight/node/fabric_facts.py). ``nccl_fabric_judge`` appends these checks to the results
of core/preflight/host_checks.py's ``judge_host_checks``, so every host gets every
check. ``nccl_expect_net`` says which network NCCL should use on a host (plan.json, the transport
verdict of the report).

Settings (besides nccl_preflight's): extra_env_by_host ({host: nccl_extra_env}).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from nccl_preflight.core.preflight.result import append_results, no_observation, rank_order
from nccl_preflight.core.preflight.result import check_result as _result
from nccl_preflight.core.preflight.result import host_table as _table
from nccl_preflight.core.preflight.result import reference_value as _reference

FABRIC_CHECKS = ("rdma", "nccl_ib_hca", "gpudirect", "limits", "nccl_config", "fabric")
GIB = 1024**3
SHM_MIN_FREE = GIB
# NCCL settings that switch a fast path off (NCCL environment variables documentation).
DISABLING = {
    "NCCL_IB_DISABLE": ("1", "rdma", "NCCL falls back to TCP sockets although RDMA ports exist"),
    "NCCL_NET": ("socket", "rdma", "NCCL uses TCP sockets although RDMA ports exist"),
    "NCCL_P2P_DISABLE": ("1", "p2p", "NCCL copies through host memory between this host's GPUs"),
}
MEMLOCK_DOC = (
    "NCCL troubleshooting, InfiniBand: 'ulimit -l ... should be unlimited' "
    "(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html)"
)
_HCA_ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)(?::(?P<port>\d+))?$")


def _fabric(obs: dict) -> dict:
    return (obs.get("facts") or {}).get("fabric") or {}


def _human(value: Any) -> str:
    if value == "unlimited" or value is None:
        return str(value or "unknown")
    value = int(value)
    for unit, size in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if value >= size:
            return f"{value / size:g} {unit}"
    return f"{value} B"


# --------------------------------------------------------------------------------------------
# RDMA ports
# --------------------------------------------------------------------------------------------
def rdma_ports(obs: dict) -> list[dict]:
    """Every port of every RDMA device: {device, port, state, ..., netdevs, gids}."""
    return [
        {"device": d["name"], **p}
        for d in _fabric(obs).get("rdma") or []
        for p in d.get("ports") or []
    ]


def _active(port: dict) -> bool:
    return port.get("state") == "ACTIVE" and port.get("phys_state") in (None, "LinkUp")


def _label(port: dict) -> str:
    return f"{port['device']}:{port['port']}"


def fabric_ports(obs: dict) -> list[dict]:
    """The ports NCCL's fabric would use: those behind the fabric interface, else every port."""
    ports = rdma_ports(obs)
    on_fabric = [
        p for p in ports if obs.get("ifname") and obs["ifname"] in (p.get("netdevs") or [])
    ]
    return on_fabric or ports


def has_active_rdma(obs: dict) -> bool:
    return any(_active(p) for p in rdma_ports(obs))


def _rate_of(obs: dict) -> float | None:
    rates = [p["rate_gbps"] for p in fabric_ports(obs) if _active(p) and p.get("rate_gbps")]
    return min(rates) if rates else None


def check_rdma(observations: dict[str, dict], host: str, order: list[str]) -> dict:
    obs = observations[host]
    fabric = _fabric(obs)
    if not fabric:
        return _result("rdma", host, "skipped", f"{host}: no fabric facts (nccl_facts too old?)")
    ports = rdma_ports(obs)
    if not ports:
        why = fabric.get("rdma_reason") or "no RDMA device"
        return _result("rdma", host, "skipped", f"{host}: {why}; NCCL will use TCP sockets")
    wanted = fabric_ports(obs)
    behind = [p for p in wanted if obs.get("ifname") in (p.get("netdevs") or [])]
    down = [p for p in wanted if not _active(p)]
    if down and (behind or not any(_active(p) for p in wanted)):
        what = "; ".join(
            f"{_label(p)} is {p.get('state')}/{p.get('phys_state')}"
            + (f" (netdev {', '.join(p['netdevs'])})" if p.get("netdevs") else "")
            for p in down
        )
        return _result(
            "rdma",
            host,
            "failed",
            f"{host}: RDMA port(s) of the fabric not ACTIVE/LinkUp: {what}",
            "; ".join(f"ibstat {p['device']} {p['port']}" for p in down)
            + f"  (on {host}); check the cable and the switch port"
            + "".join(f"; ip link set {n} up" for p in down for n in p.get("netdevs") or []),
        )
    rates = {h: r for h, o in observations.items() if (r := _rate_of(o)) is not None}
    mine = rates.get(host)
    if mine is not None and len(rates) > 1:
        ref = _reference(rates, order)
        if mine < ref:
            slow = [p for p in wanted if _active(p) and p.get("rate_gbps") == mine]
            return _result(
                "rdma",
                host,
                "failed",
                f"{host}: RDMA port {', '.join(_label(p) for p in slow)} runs at {mine:g} Gb/s, "
                f"the other hosts at {ref:g} Gb/s ({slow[0].get('rate') if slow else ''}); "
                "host -> Gb/s:\n" + _table({h: f"{v:g}" for h, v in rates.items()}, order),
                f"ibstat {slow[0]['device'] if slow else ''}  (on {host}); reseat or replace the "
                "cable or transceiver, check the switch port's speed",
            )
    roce = _roce_problem(obs, behind)
    if roce:
        return roce
    active = [p for p in wanted if _active(p)]
    text = ", ".join(
        f"{_label(p)} {p.get('link_layer')} {p.get('rate_gbps') or '?'} Gb/s" for p in active
    )
    notes = [f"{host}: ACTIVE/LinkUp: {text}"]
    others = [_label(p) for p in ports if not _active(p)]
    if others:
        notes.append(f"not active (not on the fabric): {', '.join(others)}")
    return _result("rdma", host, "passed", "; ".join(notes))


def _roce_problem(obs: dict, behind: list[dict]) -> dict | None:
    host, address = obs["host"], obs.get("address") or ""
    roce = [p for p in behind if p.get("link_layer") == "Ethernet" and _active(p)]
    for p in roce:
        v2 = [g for g in p.get("gids") or [] if g.get("type") == "v2"]
        if not any(g.get("address") == address for g in v2):
            have = ", ".join(f"{g['index']}={g.get('address')}" for g in v2) or "none"
            return _result(
                "rdma",
                host,
                "failed",
                f"{host}: RoCE port {_label(p)} on {obs.get('ifname')} has no RoCE v2 GID "
                f"carrying the fabric address {address} (its v2 GIDs: {have})",
                f"grep . /sys/class/infiniband/{p['device']}/ports/{p['port']}/gid_attrs/types/* "
                f"(on {host}); the address must be on {obs.get('ifname')} itself (not on a bond "
                "or VLAN above it) for a RoCE v2 GID to carry it",
            )
    return None


# --------------------------------------------------------------------------------------------
# NCCL_IB_HCA
# --------------------------------------------------------------------------------------------
def parse_ib_hca(value: str) -> dict[str, Any]:
    """NCCL_IB_HCA: ['^'] ['='] name[:port] {',' name[:port]}; raises ValueError on bad syntax."""
    text = value.strip()
    exclude = text.startswith("^")
    text = text[1:] if exclude else text
    exact = text.startswith("=")
    text = text[1:] if exact else text
    entries = []
    for raw in text.split(","):
        match = _HCA_ENTRY.match(raw.strip())
        if not match:
            raise ValueError(
                f"entry {raw.strip()!r} is not name[:port] (syntax: [^][=]name[:port][,...])"
            )
        port = match.group("port")
        entries.append({"name": match.group("name"), "port": int(port) if port else None})
    return {"exclude": exclude, "exact": exact, "entries": entries}


def _matches(entry: dict, port: dict, exact: bool) -> bool:
    name_ok = port["device"] == entry["name"] if exact else port["device"].startswith(entry["name"])
    return name_ok and (entry["port"] is None or entry["port"] == port["port"])


def ib_hca_of(obs: dict, extra_env: dict) -> tuple[str | None, str]:
    """(NCCL_IB_HCA the ranks get, where it comes from): inventory first, then nccl.conf/env."""
    if extra_env.get("NCCL_IB_HCA") not in (None, ""):
        return str(extra_env["NCCL_IB_HCA"]), "nccl_extra_env"
    effective = (_fabric(obs).get("nccl_config") or {}).get("effective") or {}
    entry = effective.get("NCCL_IB_HCA")
    return (entry["value"], entry["source"]) if entry else (None, "")


def check_nccl_ib_hca(obs: dict, extra_env: dict) -> dict:
    host = obs["host"]
    value, source = ib_hca_of(obs, extra_env)
    if value is None:
        return _result(
            "nccl_ib_hca",
            host,
            "skipped",
            f"{host}: NCCL_IB_HCA is not set; NCCL uses every active port",
        )
    try:
        spec = parse_ib_hca(value)
    except ValueError as exc:
        return _result(
            "nccl_ib_hca",
            host,
            "failed",
            f"{host}: NCCL_IB_HCA={value!r} (from {source}) is not valid: {exc}",
            "write it as mlx5_0:1,mlx5_1:1 (prefix match), =mlx5_0 (exact) or ^mlx5_3 (exclude)",
        )
    ports = rdma_ports(obs)
    present = ", ".join(f"{_label(p)} ({p.get('state')})" for p in ports) or (
        f"none ({_fabric(obs).get('rdma_reason') or 'no RDMA device'})"
    )
    if spec["exclude"]:
        return _check_hca_exclude(obs, value, source, spec, ports, present)
    problems, hints, chosen = [], [], []
    for entry in spec["entries"]:
        found = [p for p in ports if _matches(entry, p, spec["exact"])]
        shown = entry["name"] + (f":{entry['port']}" if entry["port"] else "")
        if not found:
            problems.append(f"{shown} does not exist")
            hints.append(f"ls /sys/class/infiniband  (on {host})")
        elif not any(_active(p) for p in found):
            problems.append(
                f"{shown} is not active ({', '.join(p.get('state') or '?' for p in found)})"
            )
            hints.append(f"ibstat {found[0]['device']}  (on {host})")
        chosen += found
    if problems:
        return _result(
            "nccl_ib_hca",
            host,
            "failed",
            f"{host}: NCCL_IB_HCA={value} (from {source}) names devices NCCL cannot use: "
            f"{'; '.join(problems)}. RDMA ports present: {present}",
            "; ".join(dict.fromkeys(hints))
            + "; set NCCL_IB_HCA to ports that exist and are active",
        )
    left = [p for p in ports if _active(p) and p not in chosen]
    selected = ", ".join(_label(p) for p in chosen)
    text = f"{host}: NCCL_IB_HCA={value} (from {source}) selects {selected}"
    if left:
        text += (
            f"; warning: active RDMA ports left out of it: {', '.join(_label(p) for p in left)} "
            "(NCCL will not use them; on a DGX Spark both halves of the port must be listed)"
        )
    return _result("nccl_ib_hca", host, "passed", text)


def _check_hca_exclude(obs, value, source, spec, ports, present) -> dict:
    host = obs["host"]
    excluded = [p for p in ports if any(_matches(e, p, spec["exact"]) for e in spec["entries"])]
    remaining = [p for p in ports if _active(p) and p not in excluded]
    if ports and not remaining:
        return _result(
            "nccl_ib_hca",
            host,
            "failed",
            f"{host}: NCCL_IB_HCA={value} (from {source}) excludes every active RDMA port "
            f"({present}); NCCL falls back to TCP sockets",
            "remove the exclusion or leave one active port out of it",
        )
    unknown = [
        e["name"] for e in spec["entries"] if not any(_matches(e, p, spec["exact"]) for p in ports)
    ]
    kept = ", ".join(_label(p) for p in remaining) or "no port"
    text = f"{host}: NCCL_IB_HCA={value} (from {source}) leaves {kept}"
    if unknown:
        text += f"; warning: excludes {', '.join(unknown)}, which this host does not have"
    return _result("nccl_ib_hca", host, "passed", text)


# --------------------------------------------------------------------------------------------
# GPUDirect RDMA
# --------------------------------------------------------------------------------------------
def check_gpudirect(obs: dict) -> dict:
    host = obs["host"]
    gpus = (obs.get("facts") or {}).get("gpus") or []
    if not gpus:
        return _result(
            "gpudirect", host, "skipped", f"{host}: no GPU, GPUDirect RDMA does not apply"
        )
    if not has_active_rdma(obs):
        return _result(
            "gpudirect",
            host,
            "skipped",
            f"{host}: no active RDMA port, GPUDirect RDMA does not apply",
        )
    gd = _fabric(obs).get("gpudirect") or {}
    if gd.get("peermem"):
        return _result("gpudirect", host, "passed", f"{host}: {gd['peermem']} is loaded")
    if gd.get("dmabuf"):
        return _result("gpudirect", host, "passed", f"{host}: dma-buf: {gd.get('dmabuf_reason')}")
    return _result(
        "gpudirect",
        host,
        "failed",
        f"{host}: GPUDirect RDMA cannot work: neither nvidia_peermem nor nv_peer_mem is loaded, "
        f"and dma-buf is not available ({gd.get('dmabuf_reason') or 'unknown'}); NCCL then copies "
        "through host memory (no /GDRDMA on its channels, a fraction of the bandwidth)",
        f"modprobe nvidia-peermem  (on {host}; make it persistent in /etc/modules-load.d/); "
        "lsmod | grep peermem",
    )


# --------------------------------------------------------------------------------------------
# Limits
# --------------------------------------------------------------------------------------------
def _memlock(obs: dict) -> Any:
    return (_fabric(obs).get("limits") or {}).get("memlock_soft")


def _memlock_key(value: Any) -> float:
    return float("inf") if value == "unlimited" else float(value)


def check_limits(observations: dict[str, dict], host: str, order: list[str]) -> dict:
    obs = observations[host]
    limits = _fabric(obs).get("limits") or {}
    if not limits:
        return _result("limits", host, "skipped", f"{host}: no limits were read (no fabric facts)")
    mine = limits.get("memlock_soft")
    fix_memlock = (
        f"ulimit -l  (on {host}, as the user Ansible logs in as); set '* soft memlock unlimited' "
        "and '* hard memlock unlimited' in /etc/security/limits.conf (LimitMEMLOCK=infinity for "
        "sshd.service when it starts with a lower limit), then log in again"
    )
    values = {h: m for h, o in observations.items() if (m := _memlock(o)) is not None}
    if mine is not None and has_active_rdma(obs) and mine != "unlimited":
        return _result(
            "limits",
            host,
            "failed",
            f"{host}: memlock (ulimit -l) is {_human(mine)}, RDMA needs unlimited; "
            f"ibv_reg_mr fails with 'Cannot allocate memory' otherwise ({MEMLOCK_DOC})",
            fix_memlock,
        )
    if mine is not None and len(values) > 1:
        ref = _reference(values, order)
        if _memlock_key(mine) < _memlock_key(ref):
            return _result(
                "limits",
                host,
                "failed",
                f"{host}: memlock (ulimit -l) is {_human(mine)}, lower than the other hosts' "
                f"{_human(ref)}; host -> memlock:\n"
                + _table({h: _human(v) for h, v in values.items()}, order),
                fix_memlock,
            )
    shm = limits.get("shm") or {}
    free = shm.get("free_bytes")
    notes = [f"memlock {_human(mine)}"]
    if free is not None and free < SHM_MIN_FREE:
        text = (
            f"{host}: {shm.get('path')} has {_human(free)} free of "
            f"{_human(shm.get('size_bytes'))}; NCCL's SHM transport and torch need at least 1 GiB"
        )
        hint = (
            f"df -h {shm.get('path')}  (on {host}); mount -o remount,size=8G /dev/shm, or for a "
            "container: docker run --shm-size=8g (or --ipc=host)"
        )
        if obs.get("backend") == "nccl":
            return _result("limits", host, "failed", text, hint)
        notes.append(f"warning: {text[len(host) + 2 :]}")
    elif free is not None:
        notes.append(f"{shm.get('path')} {_human(free)} free")
    else:
        notes.append(f"warning: /dev/shm not read: {shm.get('reason')}")
    port_range = limits.get("ip_local_port_range") or []
    if len(port_range) == 2:
        notes.append(f"ephemeral ports {port_range[0]}-{port_range[1]}")
    return _result("limits", host, "passed", f"{host}: " + ", ".join(notes))


# --------------------------------------------------------------------------------------------
# NCCL configuration that overrides ours
# --------------------------------------------------------------------------------------------
# What nccl.env always sets (core/env_file.py): the ranks never see another
# value from nccl.conf or the inherited environment.
SET_BY_NCCL_ENV = ("NCCL_SOCKET_IFNAME", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")


def overrides_of(obs: dict, extra_env: dict) -> dict[str, dict[str, str]]:
    """NCCL_* the ranks will see from nccl.conf or the inherited environment, unless nccl.env
    (which wins) sets the same variable: nccl_extra_env, or one of SET_BY_NCCL_ENV."""
    effective = (_fabric(obs).get("nccl_config") or {}).get("effective") or {}
    return {k: v for k, v in effective.items() if k not in extra_env and k not in SET_BY_NCCL_ENV}


def _p2p_capable(obs: dict) -> bool:
    return len((obs.get("facts") or {}).get("gpus") or []) > 1


def check_nccl_config(
    observations: dict[str, dict], host: str, order: list[str], extra_env_by_host: dict
) -> dict:
    obs = observations[host]
    if not _fabric(obs):
        return _result("nccl_config", host, "skipped", f"{host}: no fabric facts")
    mine = overrides_of(obs, extra_env_by_host.get(host) or {})
    listed = ", ".join(f"{k}={v['value']} ({v['source']})" for k, v in sorted(mine.items()))
    problems = []
    for name, (bad, need, why) in DISABLING.items():
        entry = mine.get(name)
        if not entry or entry["value"].strip().lower() != bad:
            continue
        relevant = has_active_rdma(obs) if need == "rdma" else _p2p_capable(obs)
        if relevant:
            problems.append(f"{name}={entry['value']} from {entry['source']}: {why}")
    odd = _odd_overrides(observations, host, order, extra_env_by_host)
    problems += odd
    if problems:
        sources = sorted({v["source"] for v in mine.values() if v["source"] != "environment"})
        return _result(
            "nccl_config",
            host,
            "failed",
            f"{host}: NCCL configuration outside the inventory: " + "; ".join(problems),
            f"grep NCCL_ {' '.join(sources) or '/etc/nccl.conf ~/.nccl.conf'}; env | grep NCCL_  "
            f"(on {host}); remove the line, or set the value on purpose in nccl_extra_env",
        )
    if not mine:
        return _result(
            "nccl_config",
            host,
            "passed",
            f"{host}: no NCCL setting from nccl.conf or the environment",
        )
    return _result("nccl_config", host, "passed", f"{host}: NCCL settings found: {listed}")


def _odd_overrides(observations, host, order, extra_env_by_host) -> list[str]:
    """Overrides this host has (or lacks) that most hosts do not: named as the odd one out."""
    by_host = {h: overrides_of(o, extra_env_by_host.get(h) or {}) for h, o in observations.items()}
    names = sorted({n for values in by_host.values() for n in values})
    found = []
    for name in names:
        values = {h: (v.get(name) or {}).get("value", "unset") for h, v in by_host.items()}
        ref = _reference(values, order, prefer="unset")
        if values[host] != ref:
            source = (by_host[host].get(name) or {}).get("source", "")
            found.append(
                f"{name}={values[host]}"
                + (f" from {source}" if source else "")
                + f" differs from the other hosts ({ref}); host -> {name}:\n"
                + _table(values, order)
            )
    return found


# --------------------------------------------------------------------------------------------
# Fabric choice
# --------------------------------------------------------------------------------------------
def _usable_addresses(iface: dict) -> list[str]:
    out = []
    for entry in (iface.get("ipv4") or []) + (iface.get("ipv6") or []):
        address = ipaddress.ip_address(entry["address"])
        if not (address.is_link_local or address.is_loopback):
            out.append(entry["address"])
    return out


def check_fabric(obs: dict) -> dict:
    host, ifname = obs["host"], obs.get("ifname") or ""
    interfaces = (obs.get("facts") or {}).get("interfaces") or {}
    if not ifname or ifname not in interfaces:
        return _result(
            "fabric", host, "skipped", f"{host}: no fabric interface (see check interface)"
        )
    ssh = _fabric(obs).get("ssh_address") or ""
    mine = interfaces[ifname]
    others = {
        n: a
        for n, i in sorted(interfaces.items())
        if n not in (ifname, "lo") and i.get("state") != "down" and (a := _usable_addresses(i))
    }
    notes = [f"{host}: NCCL and Gloo use {ifname} ({obs.get('address')})"]
    rdma = [n for n, i in interfaces.items() if i.get("rdma_devices") and n in others]
    if not mine.get("rdma_devices") and rdma:
        notes.append(
            f"warning: {ifname} has no RDMA device, but {', '.join(rdma)} has one and an "
            "address: set nccl_socket_ifname or nccl_fabric_cidr to use it"
        )
    own = [a["address"] for a in (mine.get("ipv4") or []) + (mine.get("ipv6") or [])]
    if ssh and ssh in own and others:
        listed = "; ".join(f"{n} {', '.join(a)}" for n, a in others.items())
        notes.append(
            f"warning: {ifname} is the network Ansible reaches {host} on (SSH to {ssh}); "
            f"other interfaces with addresses: {listed}. Set nccl_fabric_cidr or "
            "nccl_socket_ifname if one of them is the fabric"
        )
    return _result("fabric", host, "passed", "; ".join(notes))


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------
def nccl_fabric_results(
    observations: dict[str, dict], host: str, settings: dict | None = None
) -> list[dict]:
    """The fabric checks of ``host``, given the observations of all hosts."""
    settings = settings or {}
    observations = {h: {**o, "host": h} for h, o in observations.items() if o}
    if host not in observations:
        return no_observation(FABRIC_CHECKS, host)
    order = rank_order(observations, settings)
    extra = settings.get("extra_env_by_host") or {}
    obs = observations[host]
    return [
        check_rdma(observations, host, order),
        check_nccl_ib_hca(obs, extra.get(host) or {}),
        check_gpudirect(obs),
        check_limits(observations, host, order),
        check_nccl_config(observations, host, order, extra),
        check_fabric(obs),
    ]


def nccl_fabric_judge(
    results_by_host: dict[str, list | None],
    observations: dict[str, dict],
    settings: dict | None = None,
) -> dict[str, list | None]:
    """judge_host_checks' results with the fabric checks appended to every host's list."""
    return append_results(
        results_by_host, lambda host: nccl_fabric_results(observations, host, settings)
    )


def nccl_expect_net(facts: dict, ifname: str, setting: str = "auto") -> dict[str, str]:
    """Which network NCCL should use on a host: {"network": ib|socket|any, "reason"}.

    ``auto`` expects IB (NCCL's IB verbs transport, RoCE included) where the host has an active
    RDMA port behind its fabric interface (or any active port when none sits behind it)."""
    if setting in ("ib", "socket", "any"):
        return {"network": setting, "reason": f"nccl_expect_net is {setting}"}
    obs = {"facts": facts or {}, "ifname": ifname}
    active = [p for p in fabric_ports(obs) if _active(p)]
    if active:
        return {
            "network": "ib",
            "reason": f"active RDMA port(s) {', '.join(_label(p) for p in active)} on the fabric",
        }
    why = _fabric(obs).get("rdma_reason") or "no active RDMA port"
    return {"network": "socket", "reason": why}


def nccl_rdma_plan(facts: dict, extra_env: dict | None = None) -> dict | None:
    """plan.json's ``rdma`` of a host: its active RDMA ports with their rate, each ``selected``
    when NCCL_IB_HCA leaves it to NCCL (src/nccl_preflight/core/rdma_expect.py); None without
    one."""
    obs = {"facts": facts or {}}
    active = [p for p in rdma_ports(obs) if _active(p)]
    if not active:
        return None
    value, source = ib_hca_of(obs, extra_env or {})
    spec = None
    if value is not None:
        try:
            spec = parse_ib_hca(value)
        except ValueError:
            spec = None  # the nccl_ib_hca check fails the pre-flight with the reason
    rows = []
    for p in active:
        hit = spec is None or any(_matches(e, p, spec["exact"]) for e in spec["entries"])
        rows.append(
            {
                "device": p["device"],
                "port": p["port"],
                "rate_gbps": p.get("rate_gbps"),
                "link_layer": p.get("link_layer"),
                "selected": hit != bool(spec and spec["exclude"]),
            }
        )
    selected_by = (
        f"the active RDMA ports NCCL_IB_HCA={value} ({source}) selects"
        if spec is not None
        else "every active RDMA port"
    )
    return {"ports": rows, "selected_by": selected_by}
