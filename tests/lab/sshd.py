# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""One sshd per lab host: the lab-only keys, each host's sshd_config, starting sshd in the host's
namespace and waiting for its banner, and the ssh command line that reaches it (a mixin of
tests/lab/harness.py's Lab)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from tests.lab.base import (
    HostRef,
    LabError,
    LabHost,
    _pid_alive,
    _run,
    _shquote,
    _which,
)
from tests.lab.network import _NS_SYSCTLS, in_host_shell


class LabSshd:
    """The sshd of every host of a Lab, and ssh to them."""

    def _make_keys(self, d: Path) -> Path:
        """One host key and one client key for the whole lab, both lab-only; returns the host
        key's path."""
        keygen = _which("ssh-keygen") or "ssh-keygen"
        host_key = d / "ssh" / "ssh_host_ed25519_key"
        for key, comment in ((host_key, "lab host key"), (self.ssh_key, "lab client key")):
            _run(
                [
                    keygen,
                    "-q",
                    "-t",
                    "ed25519",
                    "-N",
                    "",
                    "-C",
                    f"{comment} {self.name}",
                    "-f",
                    str(key),
                ]
            )
        (d / "ssh" / "authorized_keys").write_text(self.ssh_key.with_suffix(".pub").read_text())
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
        return host_key

    def _sshd_config(self, h: LabHost, host_key: Path) -> str:
        d = self.state_dir
        hd = d / "hosts" / h.name
        return (
            f"# nccl-preflight lab {self.name}, host {h.name}: lab-only sshd\n"
            f"ListenAddress {h.mgmt_addr}\n"
            "Port 22\n"
            f"HostKey {host_key}\n"
            f"PidFile {hd / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {d / 'ssh' / 'authorized_keys'}\n"
            "AuthenticationMethods publickey\n"
            "PubkeyAuthentication yes\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "HostbasedAuthentication no\n"
            "PermitRootLogin prohibit-password\n"
            "UsePAM no\n"
            "StrictModes no\n"  # the lab dir lives under /tmp (world-writable parent)
            "UseDNS no\n"
            "PrintMotd no\n"
            "PrintLastLog no\n"
            "X11Forwarding no\n"
            "PermitUserEnvironment no\n"
            "MaxStartups 200:30:400\n"
            "MaxSessions 200\n"
            "LogLevel ERROR\n"
            "Subsystem sftp internal-sftp\n"
        ) + self._setenv_line(h)

    def _setenv_line(self, h: LabHost) -> str:
        """sshd's SetEnv for host h (host_env by rank, then by name); "" when none."""
        env = {**self.host_env.get(h.rank, {}), **self.host_env.get(h.name, {})}
        if not env:
            return ""
        return "SetEnv " + " ".join(f'"{k}={v}"' for k, v in env.items()) + "\n"

    def _start_sshd(self, h: LabHost, ip: str, sshd: str, setup: bool = False) -> int:
        hd = self.state_dir / "hosts" / h.name
        script = (_NS_SYSCTLS + 'ip -batch "$1" || exit 1; ' if setup else "") + (
            'hostname "$2" || exit 1; exec "$3" -D -f "$4" -E "$5"'
        )
        with open(hd / "start.log", "ab") as log:
            proc = subprocess.Popen(
                in_host_shell(
                    h.netns,
                    script,
                    "sh",
                    str(hd / "setup.batch"),
                    h.hostname,
                    sshd,
                    str(hd / "sshd_config"),
                    str(hd / "sshd.log"),
                    ip=ip,
                ),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._procs[proc.pid] = proc
        self._state.setdefault("sshd_pids", {})[h.name] = proc.pid
        self._state["pids"].append(proc.pid)
        return proc.pid

    def restart_sshd(self, host: HostRef) -> int:
        """Start the host's sshd again (after lab.kill of it); returns the new pid."""
        h = self.host(host)
        old = self._state.get("sshd_pids", {}).get(h.name)
        if old and _pid_alive(old):
            raise LabError(f"sshd of {h.name} still runs (pid {old}); kill it first")
        pid = self._start_sshd(h, _which("ip") or "ip", _which("sshd") or "/usr/sbin/sshd")
        self._save_state()
        self._wait_for_sshd([h])
        return pid

    def _wait_for_sshd(self, hosts: Sequence[LabHost] | None = None) -> None:
        """Until every sshd sends its banner on its management address."""
        pending = {h.mgmt_addr: h for h in (hosts or self.hosts)}
        deadline = time.monotonic() + self.ready_timeout
        while pending:
            for h in list(pending.values()):
                pid = self._state["sshd_pids"][h.name]
                proc = self._procs.get(pid)
                if proc is not None and proc.poll() is not None:
                    log = (self.state_dir / "hosts" / h.name / "start.log").read_text()
                    raise LabError(
                        f"sshd of lab host {h.name} ({h.netns}) exited with {proc.returncode}: "
                        f"{log.strip()[-2000:]}"
                    )
            for addr in _ssh_banners(list(pending), timeout=0.2):
                del pending[addr]
            if not pending:
                break
            if time.monotonic() > deadline:
                names = ", ".join(f"{h.name} ({a})" for a, h in pending.items())
                raise LabError(
                    f"sshd did not answer within {self.ready_timeout:.0f}s on {names}; see "
                    f"{self.state_dir}/hosts/*/sshd.log, and check that the root namespace's "
                    f"firewall (`iptables -S`, `nft list ruleset`) accepts {self.mgmt_cidr}"
                )
            time.sleep(0.02)

    def ssh_options(self) -> list[str]:
        """ssh options for reaching lab hosts (no user config, no known_hosts, lab ControlPath)."""
        return [
            "-F",
            "/dev/null",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "ConnectTimeout=10",
            "-o",
            f"ControlPath={self.state_dir / 'ssh' / 'cp' / '%C'}",
        ]

    def ssh_argv(self, host: HostRef) -> list[str]:
        """`ssh ... root@<mgmt addr>`: append the remote command."""
        return [
            _which("ssh") or "ssh",
            *self.ssh_options(),
            "-i",
            str(self.ssh_key),
            f"root@{self.host(host).mgmt_addr}",
        ]

    def ssh(
        self, host: HostRef, command: str | Sequence[str], check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run a command on the host over SSH (a string goes to the remote shell as is)."""
        remote = command if isinstance(command, str) else " ".join(map(_shquote, command))
        return _run([*self.ssh_argv(host), remote], check=check, timeout=timeout)

    def sshd_pid(self, host: HostRef) -> int:
        """The pid of the host's sshd."""
        return int(self._state["sshd_pids"][self.host(host).name])


def _ssh_banners(addrs: Sequence[str], timeout: float = 0.2, port: int = 22) -> set[str]:
    """The addresses among addrs where an SSH server sent its banner within timeout (parallel)."""
    import selectors

    sel = selectors.DefaultSelector()
    answered: set[str] = set()
    for addr in addrs:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex((addr, port))
        sel.register(s, selectors.EVENT_READ, addr)
    deadline = time.monotonic() + timeout
    try:
        while len(sel.get_map()) and (left := deadline - time.monotonic()) > 0:
            for key, _ in sel.select(left):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                with contextlib.suppress(OSError):
                    if sock.recv(64).startswith(b"SSH-"):
                        answered.add(key.data)
                sel.unregister(sock)
                sock.close()
    finally:
        for key in list(sel.get_map().values()):
            sel.unregister(key.fileobj)
            key.fileobj.close()  # type: ignore[union-attr]
        sel.close()
    return answered
