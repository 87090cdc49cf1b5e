# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Faults a test puts into a lab host, each with its undo: a firewall drop, a held port, a link
down, a renamed interface, a rate limit, an MTU, a killed process, an /etc/hosts, a fake torch
version (a mixin of tests/lab/harness.py's Lab; Lab.reset_faults undoes whatever is left)."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import select
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tests.lab.base import (
    NETNS_DIR,
    HostRef,
    LabError,
    LabHost,
    _pids_in_netns,
    _run,
    _shquote,
    _which,
)

if TYPE_CHECKING:
    from tests.lab.harness import Lab

_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)?$")
_RATE_UNITS = {
    "bit": 1,
    "kbit": 1e3,
    "mbit": 1e6,
    "gbit": 1e9,
    "tbit": 1e12,
    "bps": 8,
    "kbps": 8e3,
    "mbps": 8e6,
    "gbps": 8e9,
    "tbps": 8e12,
}


def _rate_bits(rate: str | int) -> float:
    if isinstance(rate, int):
        return float(rate)
    match = _RATE_RE.match(rate.strip().lower())
    if not match:
        raise ValueError(f"rate {rate!r} is not a tc rate such as 100mbit, 1gbit or 125mbps")
    return float(match.group(1)) * _RATE_UNITS[match.group(2) or "bit"]


class HeldPort:
    """A process listening on a port inside a lab host (from Lab.hold_port)."""

    def __init__(self, lab: Lab, host: LabHost, port: int, proc: subprocess.Popen[str]):
        self.lab, self.host, self.port, self._proc = lab, host, port, proc
        self.pid = proc.pid

    def release(self) -> None:
        """Stop listening (idempotent)."""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=5)
        self.lab._forget_undo(self.release)

    def __enter__(self) -> HeldPort:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


_HOLD_PORT_CODE = """
import signal, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(64)
print("ready", flush=True)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
while True:
    signal.pause()
"""

_FAKE_SITECUSTOMIZE = '''"""Lab fake (tests/lab): torch.__version__ = {version!r}, real torch."""
import importlib.machinery
import os
import sys

_FAKE_TORCH_VERSION = {version!r}


def _patch(module):
    try:
        from torch.torch_version import TorchVersion

        version = TorchVersion(_FAKE_TORCH_VERSION)
    except Exception:
        version = _FAKE_TORCH_VERSION
    module.__version__ = version
    if getattr(module, "version", None) is not None:
        module.version.__version__ = version


class _TorchVersionFinder:
    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def patched(module):
            exec_module(module)
            _patch(module)

        spec.loader.exec_module = patched
        return spec


sys.meta_path.insert(0, _TorchVersionFinder())

# Chain to the sitecustomize this one shadows, if there is one.
_here = os.path.dirname(os.path.abspath(__file__))
_rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if _spec is not None and _spec.loader is not None:
    _spec.loader.exec_module(type(sys)("_shadowed_sitecustomize"))
'''


class LabFaults:
    """Faults in the hosts of a Lab, each undone by reset_faults (or by its own undo)."""

    def _remember_undo(self, undo: Callable[[], None]) -> Callable[[], None]:
        self._undo.append(undo)
        return undo

    def _forget_undo(self, undo: Callable[[], None]) -> None:
        with contextlib.suppress(ValueError):
            self._undo.remove(undo)

    def _once(self, action: Callable[[], None]) -> Callable[[], None]:
        done = False

        def undo() -> None:
            nonlocal done
            if not done:
                done = True
                action()
            self._forget_undo(undo)

        return self._remember_undo(undo)

    def reset_faults(self) -> None:
        """Undo every fault still in place (newest first)."""
        for undo in reversed(list(self._undo)):
            undo()

    def _in_ns(self, h: LabHost, argv: Sequence[str], check: bool = True) -> str:
        return _run([_which("ip") or "ip", "netns", "exec", h.netns, *argv], check=check).stdout

    def firewall_drop(
        self,
        host: HostRef,
        port: int | tuple[int, int],
        chain: str = "INPUT",
        source: str | None = None,
        proto: str = "tcp",
    ) -> Callable[[], None]:
        """iptables DROP of a port or (lo, hi) range in the host; returns the undo."""
        h = self.host(host)
        dport = f"{port[0]}:{port[1]}" if isinstance(port, tuple) else str(int(port))
        rule = [chain, "-p", proto, "--dport", dport]
        if source is not None:
            rule += ["-s", str(ipaddress.ip_network(source, strict=False))]
        rule += ["-m", "comment", "--comment", "nccl-lab-fault", "-j", "DROP"]
        iptables = _which("iptables") or "iptables"
        self._in_ns(h, [iptables, "-w", "-I", *rule])
        return self._once(lambda: self._in_ns(h, [iptables, "-w", "-D", *rule], check=False))

    def hold_port(self, host: HostRef, port: int, timeout: float = 10) -> HeldPort:
        """A process in the host listening on 0.0.0.0:port (TCP); .pid and .release()."""
        h = self.host(host)
        proc = self.popen(
            h,
            [sys.executable, "-c", _HOLD_PORT_CODE, str(int(port))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else ""
        if line.strip() != "ready":
            proc.kill()
            _, err = proc.communicate(timeout=5)
            raise LabError(f"could not hold port {port} on {h.name}: {err.strip()[-500:]}")
        held = HeldPort(self, h, int(port), proc)
        self._remember_undo(held.release)
        return held

    def link_down(self, host: HostRef) -> Callable[[], None]:
        """Take the host's fabric link down (host side); returns the undo (link_up)."""
        h = self.host(host)
        _run([_which("ip") or "ip", "-n", h.netns, "link", "set", "dev", h.fabric_ifname, "down"])
        return self._once(lambda: self.link_up(h))

    def cut_off(self, host: HostRef) -> Callable[[], None]:
        """Take the host's fabric and management links down at once: a node that drops off the
        network (a cable pulled where Slurm, SSH and the ranks share the wire, a dead switch
        port, a hung node), so its slurmd, its sshd and its ranks go silent alike; returns the
        undo (both links up, their routes with them: the lab has only connected routes)."""
        h = self.host(host)
        ip = _which("ip") or "ip"
        links = (h.fabric_ifname, h.mgmt_ifname)
        for ifname in links:
            _run([ip, "-n", h.netns, "link", "set", "dev", ifname, "down"])

        def up() -> None:
            for ifname in links:
                _run([ip, "-n", h.netns, "link", "set", "dev", ifname, "up"], check=False)

        return self._once(up)

    def link_up(self, host: HostRef) -> None:
        """Bring the host's fabric link up again."""
        h = self.host(host)
        _run([_which("ip") or "ip", "-n", h.netns, "link", "set", "dev", h.fabric_ifname, "up"])

    def rename_interface(self, host: HostRef, name: str) -> Callable[[], None]:
        """Rename the host's fabric interface to ``name`` (its address kept, the link up again);
        returns the undo. LabHost.fabric_ifname keeps the lab's own name."""
        h = self.host(host)
        ip = _which("ip") or "ip"

        def rename(old: str, new: str) -> None:
            _run([ip, "-n", h.netns, "link", "set", "dev", old, "down"])
            _run([ip, "-n", h.netns, "link", "set", "dev", old, "name", new])
            _run([ip, "-n", h.netns, "link", "set", "dev", new, "up"])

        rename(h.fabric_ifname, name)
        return self._once(lambda: rename(name, h.fabric_ifname))

    def rate_limit(
        self, host: HostRef, rate: str | int = "1gbit", burst: int | None = None
    ) -> Callable[[], None]:
        """tc tbf on the host's fabric link (egress); returns the undo. (netem does not work.)"""
        h = self.host(host)
        bits = _rate_bits(rate)
        burst = burst or max(int(bits / 8 / 100), 65536 + 1514)  # 10 ms worth, >= one GSO packet
        self._in_ns(
            h,
            [
                _which("tc") or "tc",
                "qdisc",
                "replace",
                "dev",
                h.fabric_ifname,
                "root",
                "tbf",
                "rate",
                f"{int(bits)}bit",
                "burst",
                str(burst),
                "latency",
                "200ms",
            ],
        )
        return self._once(
            lambda: self._in_ns(
                h,
                [_which("tc") or "tc", "qdisc", "del", "dev", h.fabric_ifname, "root"],
                check=False,
            )
        )

    def set_mtu(self, host: HostRef, mtu: int, link: str = "fabric") -> Callable[[], None]:
        """Set the MTU of the host's fabric (or "mgmt") interface; returns the undo."""
        h = self.host(host)
        ifname = {"fabric": h.fabric_ifname, "mgmt": h.mgmt_ifname}[link]
        ip = _which("ip") or "ip"
        info = json.loads(_run([ip, "-n", h.netns, "-j", "link", "show", "dev", ifname]).stdout)
        old = int(info[0]["mtu"])
        _run([ip, "-n", h.netns, "link", "set", "dev", ifname, "mtu", str(int(mtu))])
        return self._once(
            lambda: _run([ip, "-n", h.netns, "link", "set", "dev", ifname, "mtu", str(old)])
        )

    def kill(self, host: HostRef, pid: int, sig: int = signal.SIGKILL) -> None:
        """Send sig to a process that runs in the host (refuses any other process)."""
        h = self.host(host)
        if pid not in _pids_in_netns([f"/run/netns/{h.netns}"]):
            raise LabError(f"pid {pid} does not run in lab host {h.name} ({h.netns}); not killed")
        os.kill(pid, sig)

    def write_hosts_file(self, host: HostRef, text: str) -> Callable[[], None]:
        """Replace /etc/netns/<ns>/hosts in place (the host sees it at once); returns the undo."""
        h = self.host(host)
        path = NETNS_DIR / h.netns / "hosts"
        old = path.read_text()

        def write(content: str) -> None:
            with open(path, "r+") as f:  # in place: the bind mounts refer to this inode
                f.seek(0)
                f.write(content)
                f.truncate()

        write(text)
        return self._once(lambda: write(old))

    def fake_python(self, host: HostRef | None = None, torch_version: str = "2.12.0") -> str:
        """A lab fake: a wrapper around the lab's Python whose `torch.__version__` is torch_version.

        The filesystem is shared, so the path works on every host; `host` only names the copy.
        It patches the version string only: the real torch underneath is unchanged.
        """
        label = self.host(host).name if host is not None else "all"
        d = self.state_dir / "fake-python" / f"{label}-torch-{torch_version}"
        (d / "site").mkdir(parents=True, exist_ok=True)
        (d / "site" / "sitecustomize.py").write_text(
            _FAKE_SITECUSTOMIZE.format(version=torch_version)
        )
        wrapper = d / "python"
        wrapper.write_text(
            "#!/bin/sh\n"
            f"# Lab fake (tests/lab): {self.python} with torch.__version__ = {torch_version}\n"
            f"PYTHONPATH={_shquote(str(d / 'site'))}${{PYTHONPATH:+:$PYTHONPATH}}\n"
            "export PYTHONPATH\n"
            f'exec {_shquote(self.python)} "$@"\n'
        )
        wrapper.chmod(0o755)
        return str(wrapper)
