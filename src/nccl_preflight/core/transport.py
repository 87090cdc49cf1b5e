#!/usr/bin/env python3
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Which transport NCCL really used, read from its NCCL_DEBUG=INFO log.

Pure parsing, standard library only, so that it is also a command anyone can point at the NCCL
log of their own job:

    python3 src/nccl_preflight/core/transport.py LOG...

prints one JSON object per file (one line each). The line formats are NCCL's own (src/init.cc
"Using network %s", src/transport/net.cc "Channel %02d/%d : %d[%d] -> %d[%d] [send] via
NET/%s/%d%s", src/transport/p2p.cc "via P2P/...", src/transport/shm.cc "via SHM/direct",
src/transport/net_ib "NET/IB : Using ...; OOB ...", src/bootstrap.cc "Bootstrap: Using ...",
src/debug.cc "host:pid:tid [dev] file:line NCCL WARN ..."), matched anywhere in a line, so logs
quoted with an extra prefix (mpirun's "[1,0]<stdout>:", srun -l's "0: ", a timestamp) or with
NCCL's own prefix stripped still parse. A physical line holding several NCCL entries (logs pasted
without their line breaks, two ranks writing into one line) is read entry by entry.

Every format since NCCL 2.3 is read: "Ring %02d : %d -> %d [send] via NET/%s/%d" (2.4, no bus
ids), "Ring %02d : %d[%lx] -> ..." (2.5), "Channel %02d : ..." (2.6-2.11), "Channel %02d/%d : ..."
(2.12+, with a "(proxy)" rank under PXN and "/Shared"), "via direct shared memory" (SHM before
2.6), "via P2P/indirect/%d[%d]", "CollNet %02d/%d : %d [send] via COLLNET/%s/%d" (and 2.6's
"Coll %02d"), "NET/IB: [0] mlx5_0:1/IB" and "Using internal Network IB" (2.3), "Assigned NET|GIN|
RMA plugin %s to comm" and "Failed to initialize NET plugin %s" (2.27+). The fixture table
tests/fixtures/nccl_logs/expected.json says what each recorded log must yield.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from typing import Any

# --------------------------------------------------------------------------------------------
# Line formats
# --------------------------------------------------------------------------------------------
_PREFIX = re.compile(r"(?P<host>[A-Za-z0-9_.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] ")
# A further NCCL entry inside a physical line: only after text that already holds an NCCL entry.
_ENTRY_START = re.compile(r"\s+(?=[A-Za-z0-9_.-]+:\d+:\d+ \[\d+\] )")
# The launcher's tag of an interleaved multi-rank log: mpirun --tag-output "[1,3]<stdout>:",
# srun -l "3: ", a "[3] " rank tag (DeepSpeed, pdsh-like launchers).
_LAUNCHER_TAG = re.compile(
    r"^(?:\[\d+,(?P<mpi>\d+)\]<std(?:out|err)>:|(?P<srun>\d+): "
    r"|\[(?P<tag>\d+)\] (?=\S+:\d+:\d+ \[))"
)
_VERSION = re.compile(r"NCCL version (?P<version>\d+\.\d+\.\d+\S*)")
_BOOTSTRAP = re.compile(
    r"(?:Bootstrap ?: Using(?: \[\d+\])? ?|NET : Using interface )"
    r"(?P<ifname>[^:\s\[]+):(?P<address>\S*?)<\d+>"
)
# "Using network IB" (2.6+), "Using internal Network IB" (2.3-2.5).
_USING_NETWORK = re.compile(r"Using (?:internal )?[Nn]etwork (?P<name>\S.*?)\s*$")
_NET_IB = re.compile(
    r"NET/IB ?: Using (?P<devices>.*?); OOB (?P<ifname>[^:\s]+):(?P<address>\S*?)<"
)
_IB_DEVICE = re.compile(r"\[(?P<index>\d+)\] ?(?P<name>[^:\s]+):(?P<port>\d+)/(?P<link>[A-Za-z]+)")
_NET_IB_OLD_DEVICE = re.compile(r"NET/IB: (?P<device>\[\d+\] [^:\s]+:\d+/[A-Za-z]+)")
_NET_IB_NONE = re.compile(r"NET/IB ?: No device found")
_NET_FAILED = re.compile(
    r"Failed to initialize NET plugin (?P<name>\S+)|(?P<verbs>Failed to open libibverbs)"
)
_NET_SOCKET = re.compile(r"NET/Socket ?: Using (?P<devices>\[\d+\].*)$")
_SOCKET_DEVICE = re.compile(r"\[(?P<index>\d+)\](?P<ifname>[^:\s]+):(?P<address>\S*?)<\d+>")
_PLUGIN_LOADED = re.compile(
    r"NET/Plugin ?: Loaded (?P<kind>net|collnet) plugin (?P<name>.+?) \(v\d+\)"
)
_ASSIGNED = re.compile(r"Assigned (?P<kind>[A-Z]+) plugin (?P<name>\S+) to comm")
_PLUGIN_P2P = re.compile(r"P2P plugin (?P<name>\S+)")
_PLUGIN_OFI = re.compile(r"NET/OFI ")
_CHANNEL = re.compile(
    r"(?:(?:Channel|Ring) (?P<channel>\d+)(?:/(?P<conn>\d+))? : )?"
    r"(?P<src>\d+)(?:\[[^\]]*\])? -> (?P<dst>\d+)(?:\[[^\]]*\])?"
    r"(?: \[(?P<direction>send|receive)\])? via (?P<via>\S.*?)\s*$"
)
_COLLNET = re.compile(
    r"Coll(?:Net)? (?P<channel>\d+)(?:/(?P<conn>\d+))? : (?P<src>\d+) "
    r"\[(?P<direction>send|receive)\] via (?P<via>COLLNET/\S+)"
)
_VIA_NET = re.compile(
    r"^(?P<kind>NET|COLLNET)/(?P<name>.+?)/(?P<dev>\d+)(?:\((?P<proxy>\d+)\))?(?P<flags>(?:/[A-Za-z]+(?:\(PCI\))?)*)$"
)
_NVLS_CHANNELS = re.compile(
    r"(?P<coll>\d+) coll channels, (?:\d+ collnet channels, )?(?P<nvls>\d+) nvls channels"
)
_NVLS_CONNECTED = re.compile(r"Connected NVLS|NVLS comm 0x[0-9a-fA-F]+ headRank")
_NVLS_SUPPORT = re.compile(r"NVLS multicast support is (?P<not>not )?available")
_COMM_RANK = re.compile(r"\brank (?P<rank>\d+) n[Rr]anks (?P<nranks>\d+)")
_WARN = re.compile(r"NCCL WARN (?P<text>.*)$")
_ENV_SET = re.compile(r"(?P<name>NCCL_[A-Z0-9_]+) set (?:by environment )?to (?P<value>.*?)\.?\s*$")


def _via_transport(via: str) -> dict[str, Any]:
    """'NET/IB/5/GDRDMA' -> {transport: NET/IB, device: 5, gdrdma: True}; P2P, SHM, COLLNET too."""
    match = _VIA_NET.match(via)
    if match:
        flags = match.group("flags") or ""
        return {
            "transport": f"{match.group('kind')}/{match.group('name')}",
            "device": int(match.group("dev")),
            "gdrdma": "/GDRDMA" in flags,
            "proxy": int(match.group("proxy")) if match.group("proxy") else None,
        }
    if via.startswith("P2P/"):
        kind = re.split(r"[/ ]", via[4:], maxsplit=1)[0]
        return {"transport": f"P2P/{kind}", "device": None, "gdrdma": False, "proxy": None}
    if via.startswith(("SHM", "direct shared memory")):
        return {"transport": "SHM", "device": None, "gdrdma": False, "proxy": None}
    head = via.split("/", 1)[0]
    return {"transport": head, "device": None, "gdrdma": False, "proxy": None}


def net_kind(name: str | None) -> str | None:
    """'ib' for NCCL's IB verbs transport (also the IBext plugin), 'socket', else 'plugin'."""
    if not name:
        return None
    if name == "Socket":
        return "socket"
    if name == "IB" or name.startswith("IBext"):
        return "ib"
    return "plugin"


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------
def _empty(name: str) -> dict[str, Any]:
    return {
        "file": name,
        "nccl_version": None,
        "hosts": [],
        "pids": [],
        "ranks": [],
        "log_ranks": [],
        "bootstrap": None,
        "bootstrap_interface": None,
        "net": None,
        "net_kind": None,
        "net_plugin": None,
        "collnet_plugin": None,
        "assigned_plugins": {},
        "net_failed": [],
        "net_line": None,
        "ib_line": None,
        "socket_line": None,
        "ib_devices": [],
        "ib_no_device": False,
        "oob": None,
        "socket_devices": [],
        "gdrdma": False,
        "net_channels": 0,
        "gdrdma_channels": 0,
        "collnet_channels": 0,
        "transports": [],
        "channels": [],
        "nvls_channels": None,
        "nvls_available": None,
        "env": {},
        "warnings": [],
        "lines": 0,
        "info_lines": 0,
    }


def _add_unique(items: list, value: Any) -> None:
    if value not in items:
        items.append(value)


def _parse_channel(match: re.Match[str], line: str) -> dict[str, Any]:
    via = match.group("via")
    groups = match.groupdict()
    channel = {
        "channel": int(groups["channel"]) if groups.get("channel") else None,
        "conn": int(groups["conn"]) if groups.get("conn") else None,
        "src": int(groups["src"]),
        "dst": int(groups["dst"]) if groups.get("dst") else None,
        "direction": groups.get("direction"),
        "via": via,
        "line": line.strip(),
    }
    channel.update(_via_transport(via))
    return channel


def _ib_device(match: re.Match[str]) -> dict[str, Any]:
    return {
        "index": int(match.group("index")),
        "name": match.group("name"),
        "port": int(match.group("port")),
        "link_layer": match.group("link"),
    }


def _parse_plugin_lines(out: dict[str, Any], line: str) -> bool:
    """Net, collnet, GIN and RMA plugins NCCL loaded or assigned; True when one matched."""
    if match := _PLUGIN_LOADED.search(line):
        key = "net_plugin" if match.group("kind") == "net" else "collnet_plugin"
        out[key] = match.group("name")
    elif match := _ASSIGNED.search(line):
        out["assigned_plugins"][match.group("kind")] = match.group("name")
    elif match := _NET_FAILED.search(line):
        _add_unique(out["net_failed"], match.group("name") or "IB")
    elif match := _PLUGIN_P2P.search(line):
        out["net_plugin"] = out["net_plugin"] or match.group("name")
    elif _PLUGIN_OFI.search(line):
        out["net_plugin"] = out["net_plugin"] or "aws-ofi-nccl"
    else:
        return False
    return True


def _parse_net_lines(out: dict[str, Any], line: str) -> bool:
    """The lines that say which network NCCL chose and on which devices; True when one matched."""
    if match := _USING_NETWORK.search(line):
        out["net"] = match.group("name")
        out["net_line"] = line.strip()
    elif match := _NET_IB.search(line):
        out["ib_devices"] = [_ib_device(d) for d in _IB_DEVICE.finditer(match.group("devices"))]
        out["ib_line"] = line.strip()
        out["oob"] = {"ifname": match.group("ifname"), "address": match.group("address")}
    elif match := _NET_IB_OLD_DEVICE.search(line):
        # NCCL 2.3 lists one device a line, each rank on its own: keep each (index, name) once.
        device = _IB_DEVICE.match(match.group("device"))
        if device:
            _add_unique(out["ib_devices"], _ib_device(device))
            out["ib_line"] = line.strip()
    elif _NET_IB_NONE.search(line):
        out["ib_no_device"] = True
    elif match := _NET_SOCKET.search(line):
        out["socket_line"] = line.strip()
        out["socket_devices"] = [
            {
                "index": int(d.group("index")),
                "ifname": d.group("ifname"),
                "address": d.group("address"),
            }
            for d in _SOCKET_DEVICE.finditer(match.group("devices"))
        ]
    else:
        return _parse_plugin_lines(out, line)
    return True


def _parse_entry(out: dict[str, Any], line: str) -> None:
    """One NCCL log entry (a line, or a part of a line that held several)."""
    if match := _PREFIX.search(line):
        _add_unique(out["hosts"], match.group("host"))
        _add_unique(out["pids"], int(match.group("pid")))
    if "NCCL INFO" in line:
        out["info_lines"] += 1
    if match := _WARN.search(line):
        out["warnings"].append(line.strip())
        if _NET_FAILED.search(line):  # 2.4's "NCCL WARN Failed to open libibverbs.so[.1]"
            _add_unique(out["net_failed"], "IB")
        return
    if match := _CHANNEL.search(line) or _COLLNET.search(line):
        out["channels"].append(_parse_channel(match, line))
        return
    if _parse_net_lines(out, line):
        return
    if match := _VERSION.search(line):
        out["nccl_version"] = out["nccl_version"] or match.group("version")
    elif match := _BOOTSTRAP.search(line):
        out["bootstrap"] = {"ifname": match.group("ifname"), "address": match.group("address")}
    elif match := _NVLS_CHANNELS.search(line):
        out["nvls_channels"] = max(out["nvls_channels"] or 0, int(match.group("nvls")))
    elif _NVLS_CONNECTED.search(line):
        out["nvls_channels"] = max(out["nvls_channels"] or 0, 1)
    elif match := _NVLS_SUPPORT.search(line):
        available = not match.group("not")
        out["nvls_available"] = bool(out["nvls_available"]) or available
    elif match := _COMM_RANK.search(line):
        _add_unique(out["ranks"], int(match.group("rank")))
    elif match := _ENV_SET.search(line):
        out["env"][match.group("name")] = match.group("value")


def _entries(line: str) -> list[str]:
    """A physical line cut before every further "host:pid:tid [dev] " that follows an entry."""
    parts, start = [], 0
    for match in _ENTRY_START.finditer(line):
        if "NCCL " in line[start : match.start()]:
            parts.append(line[start : match.start()])
            start = match.end()
    parts.append(line[start:])
    return parts


def _parse_line(out: dict[str, Any], line: str) -> None:
    if match := _LAUNCHER_TAG.match(line):
        tag = match.group("mpi") or match.group("srun") or match.group("tag")
        _add_unique(out["log_ranks"], int(tag))
    for entry in _entries(line):
        _parse_entry(out, entry)


def _infer_net(out: dict[str, Any], net_channels: list[dict[str, Any]]) -> str | None:
    """The network when no "Using network" line was kept (NCCL before 2.6 prints none); the
    line that says so becomes net_line."""
    if out["net"]:
        return out["net"]
    if net_channels:
        # NCCL_DEBUG_SUBSYS without INIT, an excerpt: the channels name the network.
        return net_channels[0]["transport"][len("NET/") :]
    if out["assigned_plugins"].get("NET"):
        return out["assigned_plugins"]["NET"]
    if out["ib_devices"]:
        # NET/IB initialised (before 2.6 NET/Socket's line is the bootstrap's): IB is used.
        out["net_line"] = out["ib_line"]
        return "IB"
    ib_unusable = (
        out["ib_no_device"] or "IB" in out["net_failed"] or out["env"].get("NCCL_IB_DISABLE") == "1"
    )
    if out["socket_devices"] and ib_unusable:
        out["net_line"] = out["socket_line"]
        return "Socket"
    return None


def _finish(out: dict[str, Any]) -> dict[str, Any]:
    net_channels = [c for c in out["channels"] if c["transport"].startswith("NET/")]
    out["net_channels"] = len(net_channels)
    out["gdrdma_channels"] = sum(1 for c in net_channels if c["gdrdma"])
    out["gdrdma"] = bool(net_channels) and out["gdrdma_channels"] == len(net_channels)
    out["collnet_channels"] = sum(
        1 for c in out["channels"] if c["transport"].startswith("COLLNET/")
    )
    transports = {c["transport"] for c in out["channels"]}
    if out["nvls_channels"]:
        transports.add("NVLS")
    out["transports"] = sorted(transports)
    out["net"] = _infer_net(out, net_channels)
    out["net_kind"] = net_kind(out["net"])
    # Recent NCCL logs "Bootstrap: Using" under the BOOTSTRAP subsystem only (not in
    # INIT,NET,GRAPH): the OOB interface of NET/IB, else NET/Socket's, is the same
    # NCCL_SOCKET_IFNAME choice.
    if out["bootstrap"] is None and out["oob"] is not None:
        out["bootstrap"] = dict(out["oob"])
    elif out["bootstrap"] is None and out["socket_devices"]:
        first = out["socket_devices"][0]
        out["bootstrap"] = {"ifname": first["ifname"], "address": first["address"]}
    out["bootstrap_interface"] = (out["bootstrap"] or {}).get("ifname")
    out["ranks"].sort()
    out["log_ranks"].sort()
    return out


def parse_nccl_log(text: str, name: str = "") -> dict[str, Any]:
    """Everything this module reads from one NCCL log (see the module docstring)."""
    out = _empty(name)
    for line in text.splitlines():
        out["lines"] += 1
        _parse_line(out, line)
    return _finish(out)


# --------------------------------------------------------------------------------------------
# Words for people
# --------------------------------------------------------------------------------------------
def compress_names(names: Iterable[str]) -> str:
    """['mlx5_0', 'mlx5_1', 'mlx5_2', 'mlx5_3'] -> 'mlx5_0..3'; otherwise a comma list."""
    names = list(dict.fromkeys(names))
    parsed = [re.fullmatch(r"(.*?)(\d+)", n) for n in names]
    if len(names) > 2 and all(parsed):
        stems = {m.group(1) for m in parsed if m}
        numbers = [int(m.group(2)) for m in parsed if m]
        if len(stems) == 1 and numbers == list(range(numbers[0], numbers[0] + len(numbers))):
            return f"{names[0]}..{numbers[-1]}"
    return ", ".join(names)


def net_devices_used(parsed: dict[str, Any]) -> list[str]:
    """Names of the NET devices the channels used (by NCCL's device index), in index order."""
    by_index = {d["index"]: d["name"] for d in parsed.get("ib_devices") or []}
    by_index.update(
        {
            d["index"]: d["ifname"]
            for d in parsed.get("socket_devices") or []
            if d["index"] not in by_index
        }
        if parsed.get("net_kind") == "socket"
        else {}
    )
    used = sorted(
        {c["device"] for c in parsed.get("channels") or [] if c.get("device") is not None}
    )
    return [by_index.get(i, f"#{i}") for i in used]


def describe(parsed: dict[str, Any]) -> str:
    """One line: 'NET/IB mlx5_0..3 with GDRDMA; inside the node P2P/CUMEM'."""
    parts = []
    net_transports = [t for t in parsed.get("transports") or [] if t.startswith("NET/")]
    collnet = [t for t in parsed.get("transports") or [] if t.startswith("COLLNET/")]
    local = [t for t in parsed.get("transports") or [] if not t.startswith(("NET/", "COLLNET/"))]
    if net_transports:
        devices = net_devices_used(parsed)
        text = "/".join(net_transports)
        if devices:
            text += " " + compress_names(devices)
        if parsed.get("gdrdma"):
            text += " with GDRDMA"
        elif parsed.get("gdrdma_channels"):
            text += (
                f" with GDRDMA on {parsed['gdrdma_channels']} of {parsed['net_channels']} channels"
            )
        elif parsed.get("net_kind") != "socket":
            text += " without GDRDMA"
        parts.append(text)
    elif parsed.get("net"):
        parts.append(f"network {parsed['net']} chosen, no channel crossed the network")
    if collnet:
        parts.append(f"CollNet {'/'.join(collnet)} on {parsed.get('collnet_channels')} channels")
    if parsed.get("ib_no_device"):
        parts.append("NET/IB found no device")
    if local:
        parts.append("inside the node " + ", ".join(local))
    if not parts:
        parts.append("no NCCL transport line in the log")
    return "; ".join(parts)


def summary(parsed: dict[str, Any]) -> dict[str, Any]:
    """The command's JSON: the parse without the per-channel detail lines."""
    out = dict(parsed)
    out["channels"] = [{k: v for k, v in c.items() if k != "line"} for c in parsed["channels"]]
    out["description"] = describe(parsed)
    return out


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "usage: python3 src/nccl_preflight/core/transport.py LOG...\n"
            "Reads NCCL logs written with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH is "
            "enough) and prints one JSON object per file: nccl_version, net, ib_devices, gdrdma, "
            "transports, warnings, bootstrap_interface, channels, description.",
            file=sys.stderr if not argv else sys.stdout,
        )
        return 2 if not argv else 0
    status = 0
    for path in argv:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError as exc:
            print(json.dumps({"file": path, "error": str(exc)}))
            status = 1
            continue
        print(json.dumps(summary(parse_nccl_log(text, path)), sort_keys=True))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
