# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The lab's network: its namespaces, bridges and veth links, running commands inside a host, and
removing all of it (a mixin of tests/lab/harness.py's Lab, which holds the names and the state).

Layout: see tests/lab/harness.py's docstring.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.lab.base import (
    NETNS_DIR,
    PREFIX,
    HostRef,
    _ns_inode,
    _pid_alive,
    _pids_in_netns,
    _run,
    _which,
    state_root,
)

_NS_SYSCTLS = (
    "if [ -d /proc/sys/net/ipv6 ]; then "
    "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6; "
    "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; fi; "
    "for f in /proc/sys/net/bridge/bridge-nf-call-iptables "
    "/proc/sys/net/bridge/bridge-nf-call-ip6tables "
    "/proc/sys/net/bridge/bridge-nf-call-arptables; do "
    '[ -w "$f" ] && echo 0 > "$f"; done; '
)


def in_host_shell(netns: str, script: str, *args: str, ip: str | None = None) -> list[str]:
    """argv of `sh -c script args...` in a host's network namespace and a UTS namespace of its
    own (so the script may set the hostname the host shows)."""
    ip = ip or _which("ip") or "ip"
    return [ip, "netns", "exec", netns, "unshare", "--uts", "sh", "-c", script, *args]


# The kernel's IPv4 neighbour table is one for every namespace, bounded by the root namespace's
# gc_thresh2/3 (128/512/1024 by default). Each lab host resolves every other host on each of its
# two networks: past about 20 hosts the table overflows ("neighbour: arp_cache: neighbor table
# overflow!" in dmesg) and the hosts' connections fail at random (a 32-host run lost ranks in
# bandwidth_all_to_all with "Connection closed by peer"; 32 ranks on one host passed).
NEIGH = Path("/proc/sys/net/ipv4/neigh/default")
NEIGH_HEADROOM = 256


def neigh_needed(n_hosts: int) -> int:
    """Neighbour entries a lab of ``n_hosts`` may hold: every host, both networks, every peer
    (and the control link), with room for the machine's own."""
    return 2 * n_hosts * (n_hosts + 1) + NEIGH_HEADROOM


def neigh_targets(n_hosts: int) -> dict[str, int]:
    """The thresholds a lab of ``n_hosts`` sets when they are lower: gc_thresh3 what it needs,
    gc_thresh2 (where the kernel starts to collect) half of it."""
    need = neigh_needed(n_hosts)
    return {"gc_thresh3": need, "gc_thresh2": need // 2}


def neigh_below(n_hosts: int) -> dict[str, int]:
    """The thresholds lower than a lab of ``n_hosts`` needs, by name, with their values now (what
    raise_neigh_table replaces and restore_neigh_table puts back; empty when they suffice)."""
    below = {}
    for name, value in neigh_targets(n_hosts).items():
        with contextlib.suppress(OSError, ValueError):
            now = int((NEIGH / name).read_text())
            if now < value:
                below[name] = now
    return below


def raise_neigh_table(below: dict[str, int], n_hosts: int) -> None:
    """Raise the thresholds of ``below`` (neigh_below) to what a lab of ``n_hosts`` needs."""
    targets = neigh_targets(n_hosts)
    for name in below:
        with contextlib.suppress(OSError):
            (NEIGH / name).write_text(f"{targets[name]}\n")


def restore_neigh_table(replaced: dict[str, int], n_hosts: int) -> None:
    """Put back the thresholds raise_neigh_table replaced (``replaced``: neigh_below's), unless
    someone changed them since."""
    targets = neigh_targets(n_hosts)
    for name, before in replaced.items():
        path = NEIGH / name
        with contextlib.suppress(OSError, ValueError):
            if int(path.read_text()) == targets[name]:
                path.write_text(f"{before}\n")


class LabNetwork:
    """Namespaces, bridges and links of a Lab; commands run inside its hosts."""

    def _claim_names(self) -> None:
        """Create the namespaces and the root link; under the registry lock they claim the index."""
        ip = _which("ip") or "ip"
        root_batch = [f"netns add {ns}" for ns in self._state["netns"]]
        root_batch += [
            f"link add {self.root_link} type veth peer name ctl netns {self.switch_netns}",
            f"addr add {self.control_addr}/24 dev {self.root_link}",
        ]
        _run([ip, "-batch", "-"], input="\n".join(root_batch) + "\n")
        # recorded before the change, so a lab torn down from any process puts it back
        self._state["neigh_replaced"] = neigh_below(len(self.hosts))
        self._save_state()
        raise_neigh_table(self._state["neigh_replaced"], len(self.hosts))
        for sysctl, value in (
            (f"ipv6/conf/{self.root_link}/disable_ipv6", "1"),
            # resolve a host's address soon after it appears, not a second later
            (f"ipv4/neigh/{self.root_link}/retrans_time_ms", "50"),
        ):
            with contextlib.suppress(OSError):
                Path(f"/proc/sys/net/{sysctl}").write_text(value + "\n")

    def _write_netns_files(self) -> None:
        """/etc/netns/<ns>/{hosts,resolv.conf}, BEFORE anything runs there (ip netns exec binds
        them)."""
        for h in self.hosts:
            etc = NETNS_DIR / h.netns
            etc.mkdir(mode=0o755, parents=True, exist_ok=True)
            (etc / "hosts").write_text(self.default_hosts_text())
            (etc / "resolv.conf").write_text("# nccl-preflight lab: no DNS inside the lab\n")

    def _build_switch(self, d: Path, ip: str) -> None:
        """The switch namespace: two bridges and one veth pair per host and network."""
        bridge_opts = "type bridge stp_state 0 mcast_snooping 0"
        sw_batch = [
            f"link add br-mgmt {bridge_opts}",
            f"link add br-fab {bridge_opts}",
            "link set ctl master br-mgmt up",
        ]
        for i, h in enumerate(self.hosts, start=1):
            sw_batch += [
                f"link add m{i:02d} type veth peer name {h.mgmt_ifname} netns {h.netns}",
                f"link add f{i:02d} type veth peer name {h.fabric_ifname} netns {h.netns}",
                f"link set m{i:02d} master br-mgmt up",
                f"link set f{i:02d} master br-fab up",
            ]
        sw_batch += ["link set br-mgmt up", "link set br-fab up", "link set lo up"]
        (d / "switch.batch").write_text("\n".join(sw_batch) + "\n")
        _run(
            [
                ip,
                "netns",
                "exec",
                self.switch_netns,
                "sh",
                "-c",
                _NS_SYSCTLS + 'exec ip -batch "$1"',
                "sh",
                str(d / "switch.batch"),
            ]
        )
        _run([ip, "link", "set", self.root_link, "up"])

    def _remove_network(self, state: dict[str, Any]) -> None:
        """Stop the lab's processes, then delete its root link, namespaces and /etc/netns dirs."""
        ip = _which("ip") or "ip"
        netns_paths = [f"/run/netns/{ns}" for ns in state.get("netns", [])]
        self._kill_lab_processes(netns_paths, state.get("pids", []))
        batch = [f"link del {link}" for link in state.get("root_links", [])]
        batch += [f"netns del {ns}" for ns in state.get("netns", [])]
        existing_links = _root_link_names()
        existing_ns = set(_netns_names())
        batch = [
            line
            for line in batch
            if (line.startswith("link") and line.split()[-1] in existing_links)
            or (line.startswith("netns") and line.split()[-1] in existing_ns)
        ]
        if batch:
            _run([ip, "-force", "-batch", "-"], input="\n".join(batch) + "\n", check=False)
        for etc in state.get("netns_etc_dirs", []):
            if Path(etc).parent == NETNS_DIR:
                shutil.rmtree(etc, ignore_errors=True)
        restore_neigh_table(state.get("neigh_replaced") or {}, len(state.get("hosts", [])))
        if state.get("netns_etc_created"):
            with contextlib.suppress(OSError):
                NETNS_DIR.rmdir()  # only when empty: other labs may use it meanwhile
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and set(state.get("root_links", [])) & set(
            _root_link_names()
        ):
            time.sleep(0.02)

    def _kill_lab_processes(self, netns_paths: list[str], recorded: list[int]) -> None:
        lab_dir = str(state_root() / self._state["name"])
        pids = set(_pids_in_netns(netns_paths))
        for pid in recorded:  # a recorded pid whose namespace is gone: only if it is ours
            if pid not in pids and _pid_alive(pid):
                with contextlib.suppress(OSError):
                    if lab_dir in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                        pids.add(pid)
        pids.discard(os.getpid())
        for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 3.0)):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                for pid, proc in list(self._procs.items()):
                    if proc.poll() is not None:
                        del self._procs[pid]
                pids = {pid for pid in pids if _pid_alive(pid)}
                if not pids:
                    return
                time.sleep(0.02)

    def netns_argv(self, host: HostRef, argv: Sequence[str]) -> list[str]:
        """argv wrapped to run in the host: its netns, its hostname, its /etc/hosts."""
        h = self.host(host)
        return in_host_shell(h.netns, 'hostname "$0" && exec "$@"', h.hostname, *argv)

    def run(
        self,
        host: HostRef,
        argv: Sequence[str],
        check: bool = True,
        timeout: float = 60,
        input: str | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run argv in the host (its netns, hostname and /etc/hosts), like a local shell there."""
        self._need_index()
        return _run(
            self.netns_argv(host, argv),
            input=input,
            check=check,
            timeout=timeout,
            env=env,
        )

    def popen(self, host: HostRef, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start argv in the host in the background; down() stops it."""
        self._need_index()
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        kwargs.setdefault("start_new_session", True)
        proc = subprocess.Popen(self.netns_argv(host, argv), **kwargs)
        self._procs[proc.pid] = proc
        self._state["pids"].append(proc.pid)
        # `ip netns exec` enters the namespace a moment after it starts (same pid): return once it
        # has, so the process already belongs to the host when the caller looks at it.
        netns = _ns_inode(f"/run/netns/{self.host(host).netns}")
        deadline = time.monotonic() + 5
        while (
            proc.poll() is None
            and _ns_inode(f"/proc/{proc.pid}/ns/net") != netns
            and time.monotonic() < deadline
        ):
            time.sleep(0.002)
        return proc


def _root_link_names() -> set[str]:
    return set(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else set()


def _netns_names() -> list[str]:
    try:
        return sorted(os.listdir("/run/netns"))
    except FileNotFoundError:
        return []


def _indices_in_use_on_machine() -> set[int]:
    """Lab indices taken by links, namespaces or addresses already on this machine."""
    used: set[int] = set()
    pattern = re.compile(rf"^{PREFIX}(\d+)(?:-|$)")
    for name in [*_root_link_names(), *_netns_names()]:
        m = pattern.match(name)
        if m:
            used.add(int(m.group(1)))
    out = _run([_which("ip") or "ip", "-j", "addr"], check=False).stdout or "[]"
    bench = ipaddress.ip_network("198.18.0.0/15")
    for link in json.loads(out):
        for a in link.get("addr_info", []):
            with contextlib.suppress(ValueError):
                net = ipaddress.ip_interface(f"{a['local']}/{a['prefixlen']}").network
                if net.version == 4 and net.overlaps(bench):
                    if net.prefixlen <= 16:
                        used |= set(range(256))
                    else:
                        used.add(int(str(net.network_address).split(".")[2]))
    return used
