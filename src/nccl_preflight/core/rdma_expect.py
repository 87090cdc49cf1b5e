# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What the fabric should carry: the RDMA port rate times the NICs NCCL used, else the interface.

Pure functions on the control machine (docs/design.md, "Expected bandwidth and baseline"). Each
host of plan.json carries ``rdma`` (core/preflight/fabric_checks.py ``nccl_rdma_plan``, from the
facts' fabric.rdma and NCCL_IB_HCA): its active RDMA ports, each marked ``selected`` when
NCCL_IB_HCA leaves it to NCCL. The ranks' NCCL logs (src/nccl_preflight/core/transport.py) say which
NET/IB devices NCCL really used: the names of the "NET/IB : Using [0]mlx5_0:1/IB ..." line,
narrowed to the device indexes of the "via NET/IB/<dev>" channel lines when there are some.

A host's fabric figure, in Gb/s:

* RDMA ports present and active: the rate of each NIC in use, summed (nccl-tests' busbw between
  nodes is a node's aggregate network bandwidth): the NICs the logs name; else the ports
  NCCL_IB_HCA selects (every active port without it), said in the source;
* otherwise the fabric interface's speed (``link_speed_mbps``), as before.

The cluster's figure is the slowest host's; the report shows where each came from, e.g.
"node1: 2 x 400 Gb/s mlx5_0, mlx5_1 (RDMA ports in use) x 0.9".

Only the standard library at import time: core/pair_triggers.py imports it before the run (no
logs yet) to turn the same figure into the pairwise rounds' trigger; the NCCL log parser is
imported where the logs are read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .run_data import RunData

HostFigure = tuple[float | None, str, int]  # (Gb/s or None, where it comes from, NICs)
NicsUsed = dict[str, tuple[list[str], list[int]]]  # used_by_host: {host: nics_used(...)}


def nics_used(parsed_logs: Iterable[dict[str, Any]]) -> tuple[list[str], list[int]]:
    """(device names, unnamed device indexes) of the NET/IB devices a host's ranks used.

    ``parsed_logs`` are src/nccl_preflight/core/transport.py.parse_nccl_log results. The channel
    lines name device indexes; the "NET/IB : Using" line maps an index to its name. Without channel
    lines, every device of the "Using" line counts (NCCL spreads its channels over them)."""
    names: dict[int, str] = {}
    channel_devs: set[int] = set()
    for parsed in parsed_logs:
        if parsed.get("net_kind") not in ("ib", None):
            continue
        for dev in parsed.get("ib_devices") or []:
            names.setdefault(int(dev["index"]), str(dev["name"]))
        for channel in parsed.get("channels") or []:
            if channel.get("device") is not None and _ib_transport(channel.get("transport")):
                channel_devs.add(int(channel["device"]))
    indexes = sorted(channel_devs) if channel_devs else sorted(names)
    named = [names[i] for i in indexes if i in names]
    return sorted(set(named), key=named.index), [i for i in indexes if i not in names]


def used_by_host(run: RunData) -> NicsUsed:
    """{host: nics_used(...)} from every rank's NCCL log of a run; only
    the hosts plan.json gives RDMA ports are read (the others' figure is their link speed)."""
    from .transport import parse_nccl_log  # here: see the top

    found: NicsUsed = {}
    rdma_hosts = {str(h.get("host")) for h in run.plan.get("hosts") or [] if h.get("rdma")}
    for host in run.hosts:
        if host.host not in rdma_hosts:
            continue
        logs = getattr(host, "nccl_logs", {}) or {}
        parsed = [parse_nccl_log(text, f"{host.host}/{key}") for key, text in logs.items()]
        found[host.host] = nics_used(parsed)
    return found


def _ib_transport(transport: Any) -> bool:
    return str(transport or "") == "NET/IB" or str(transport or "").startswith("NET/IBext")


def _rates_text(ports: list[dict[str, Any]]) -> str:
    rates = {float(p["rate_gbps"]) for p in ports}
    names = ", ".join(p["device"] for p in ports)
    if len(rates) == 1:
        return f"{len(ports)} x {next(iter(rates)):g} Gb/s {names}"
    return " + ".join(f"{float(p['rate_gbps']):g} Gb/s {p['device']}" for p in ports)


def rdma_figure(rdma: dict[str, Any] | None, used: tuple[list[str], list[int]]) -> HostFigure:
    """(Gb/s, source, NICs) of a host's RDMA ports, or (None, why, 0) when it has no active one."""
    ports = [p for p in (rdma or {}).get("ports") or [] if p.get("rate_gbps")]
    if not ports:
        return None, "no active RDMA port with a known rate", 0
    names, unnamed = used
    by_name = {p["device"]: p for p in ports}
    if names and all(n in by_name for n in names) and not unnamed:
        chosen = [by_name[n] for n in names]
        return _sum(chosen), f"{_rates_text(chosen)} (RDMA ports in use)", len(chosen)
    selected = [p for p in ports if p.get("selected", True)] or ports
    how = (rdma or {}).get("selected_by") or "every active RDMA port"
    if unnamed and not names:
        # The log gives device indexes only: their count, at the selected ports' lowest rate.
        rate = min(float(p["rate_gbps"]) for p in selected)
        count = len(unnamed)
        devs = ", ".join(map(str, unnamed))
        return (
            rate * count,
            f"{count} x {rate:g} Gb/s (NET/IB devices {devs} in use; the NCCL log does not "
            "name them, the rate is the lowest active port's)",
            count,
        )
    note = ""
    if names:
        missing = [n for n in names if n not in by_name]
        note = f"; the NCCL log names {', '.join(missing)}, which the facts lack"
    return (
        _sum(selected),
        f"{_rates_text(selected)} ({how}; no NCCL log names the NICs used{note})",
        len(selected),
    )


def _sum(ports: list[dict[str, Any]]) -> float:
    return sum(float(p["rate_gbps"]) for p in ports)


def host_figure(row: dict[str, Any], used: tuple[list[str], list[int]]) -> HostFigure:
    """A plan.json host's fabric figure in Gb/s: its RDMA ports, else its interface's speed."""
    gbps, source, nics = rdma_figure(row.get("rdma"), used)
    if gbps is not None:
        return gbps, source, nics
    speed = row.get("link_speed_mbps")
    if not speed or int(speed) <= 0:
        return None, "link speed unknown", 0
    return int(speed) / 1000, f"fabric link {int(speed)} Mb/s", 1


def cluster_figure(
    plan: dict[str, Any],
    used_by_host: dict[str, tuple[list[str], list[int]]],
    efficiency: float,
    rails: int = 1,
) -> tuple[float | None, str]:
    """(GB/s, where it comes from) of the slowest host, or (None, why not).

    With ``rails`` > 1 (the pairwise rounds: every rail of a pair at once) an RDMA figure is
    shared out: each rail gets one NIC when there are as many NICs as rails, else its share."""
    figures = []
    unknown = []
    for row in plan.get("hosts") or []:
        host = str(row.get("host"))
        gbps, source, nics = host_figure(row, used_by_host.get(host, ([], [])))
        if gbps is None:
            unknown.append(host)
            continue
        if rails > 1 and rdma_figure(row.get("rdma"), ([], []))[0] is not None:
            share = max(nics, rails)
            gbps, source = gbps / share, f"({source}) / {share} (one rail's share)"
        figures.append((gbps, host, source))
    if not figures or unknown:
        return None, f"link speed unknown on {', '.join(unknown) or 'every host'}"
    gbps, host, source = min(figures)
    return gbps / 8 * efficiency, f"{host}'s {source} x {efficiency:g}"
