# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A multi-host lab on one machine: one network namespace + sshd per host.

Layout of a lab with index I (the third octet of its networks, unique per machine):

    root namespace          switch namespace "ncclabI-sw"    host namespace "ncclabI-nodeNN"
    ncclabI 198.18.I.1/24 ──veth── ctl ─┐
                                 br-mgmt ── mNN ──veth── mgmt0 198.18.I.(10+N)   (sshd only here)
                                 br-fab ─── fNN ──veth── <fabric ifname> 198.19.I.(10+N)

The bridges live in a namespace of the lab's own, so the root namespace's firewall and bridge
netfilter never see host-to-host traffic, and the root namespace gets exactly one link per lab (the
control machine's management address). The root namespace has no address on the fabric. Each host
runs its own sshd (lab-only keys, ListenAddress = management address) inside its own UTS
namespace, so `hostname` over ssh is the lab hostname. `/etc/netns/<ns>/hosts` maps the lab
hostnames to fabric addresses.

Every resource is recorded in `<state root>/<lab name>/state.json` before it is created, so
`down()` (also from another process: `python -m tests.lab down --all`) removes exactly what the
lab made: the processes inside its namespaces, its namespaces, its root link, its
`/etc/netns/<ns>` directories and its state directory.

This file holds the Lab: its names, its state file, up and down. Each of its jobs has a file:
base.py (names, errors, commands, /proc), network.py (namespaces and links), sshd.py (keys,
sshd per host, ssh), slurm.py (with slurm=True: munged, slurmctld and one slurmd per host),
inventory.py (the inventory and ansible-playbook), faults.py (faults and their undo). The names
tests import from here are re-exported.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

# The names tests, bench/ and `python -m tests.lab` import from here are re-exported ("X as X").
from tests.lab.base import (
    _ENV_NAME_RE,
    _IFNAME_RE,
    _LABNAME_RE,
    DEFAULT_FABRIC_IFNAME,
    DEFAULT_MGMT_IFNAME,
    FABRIC_NET,
    HOST_OFFSET,
    MAX_HOSTS,
    MGMT_NET,
    NETNS_DIR,
    PREFIX,
    HostRef,
    LabError,
    LabHost,
    _proc_start_time,
    _registry_lock,
    _shquote,
    _which,
    lab_unavailable_reason,
    node_python,
    state_root,
)
from tests.lab.base import PROJECT_ROOT as PROJECT_ROOT
from tests.lab.base import SBIN_PATH as SBIN_PATH
from tests.lab.base import STATE_ROOT_ENV as STATE_ROOT_ENV
from tests.lab.base import LabCommandError as LabCommandError
from tests.lab.base import _pid_alive as _pid_alive
from tests.lab.base import machine_unavailable_reason as machine_unavailable_reason
from tests.lab.faults import HeldPort as HeldPort
from tests.lab.faults import LabFaults
from tests.lab.inventory import LabInventory
from tests.lab.network import LabNetwork, _indices_in_use_on_machine
from tests.lab.network import _netns_names as _netns_names
from tests.lab.slurm import LabSlurm, slurm_unavailable_reason
from tests.lab.sshd import LabSshd
from tests.lab.sshd import _ssh_banners as _ssh_banners


class Lab(LabNetwork, LabSshd, LabSlurm, LabInventory, LabFaults):
    """N hosts, each a network namespace with sshd (and slurmd with slurm=True); see the module
    docstring and tests/lab/slurm.py."""

    def __init__(
        self,
        n_hosts: int = 2,
        fabric_ifnames: Sequence[str] | str | None = None,
        name: str | None = None,
        python: str | None = None,
        *,
        mgmt_ifname: str = DEFAULT_MGMT_IFNAME,
        slots: int | None = 1,
        keep: bool = False,
        ready_timeout: float = 30.0,
        host_env: dict[int | str, dict[str, str]] | None = None,
        slurm: bool = False,
    ) -> None:
        if not 1 <= n_hosts <= MAX_HOSTS:
            raise ValueError(f"n_hosts must be 1..{MAX_HOSTS}, got {n_hosts}")
        if fabric_ifnames is None:
            fabric_ifnames = [DEFAULT_FABRIC_IFNAME]
        elif isinstance(fabric_ifnames, str):
            fabric_ifnames = [s.strip() for s in fabric_ifnames.split(",") if s.strip()]
        fabric_ifnames = list(fabric_ifnames)
        if not fabric_ifnames or len(fabric_ifnames) > n_hosts:
            raise ValueError(
                f"fabric_ifnames needs 1..{n_hosts} names (cycled over the hosts), "
                f"got {fabric_ifnames!r}"
            )
        for ifname in [*fabric_ifnames, mgmt_ifname]:
            if not _IFNAME_RE.match(ifname) or ifname in {"lo", ".", ".."}:
                raise ValueError(
                    f"interface name {ifname!r} is not valid: 1-15 characters of "
                    "letters, digits, '_', '.', '-', and not 'lo'"
                )
        if mgmt_ifname in fabric_ifnames:
            raise ValueError(f"management interface {mgmt_ifname!r} is also a fabric interface")
        if name is not None and not _LABNAME_RE.match(name):
            raise ValueError(
                f"lab name {name!r} must be 1-20 characters of a-z, 0-9, '-', starting with "
                "a letter or digit"
            )
        if slots is not None and slots < 1:
            raise ValueError(f"slots must be >= 1 or None, got {slots}")
        for ref, env in (host_env or {}).items():
            for key, value in env.items():
                if not _ENV_NAME_RE.match(key) or any(c in str(value) for c in '"\n\0'):
                    raise ValueError(
                        f"host_env[{ref!r}]: {key}={value!r} cannot go into sshd's SetEnv (a name "
                        "of letters, digits and '_'; a value without '\"' or a newline)"
                    )
        self.n_hosts = n_hosts
        self.fabric_ifnames = [fabric_ifnames[i % len(fabric_ifnames)] for i in range(n_hosts)]
        self.mgmt_ifname = mgmt_ifname
        self.name: str | None = name
        self.python = str(python or node_python())  # the hosts' ansible_python_interpreter
        self.slots = slots
        self.keep = keep
        self.ready_timeout = ready_timeout
        # Per-host environment of every SSH session (sshd's SetEnv), by rank (0-based) or name.
        self.host_env = {ref: dict(env) for ref, env in (host_env or {}).items()}
        self.slurm = slurm  # munged, slurmctld and one slurmd per host (tests/lab/slurm.py)
        self.index: int | None = None
        self.hosts: list[LabHost] = []
        self.up_seconds: float | None = None
        self._state: dict[str, Any] = {}
        self._procs: dict[int, subprocess.Popen[Any]] = {}
        self._undo: list[Callable[[], None]] = []
        self._is_up = False
        self._made_state_dir = False  # by this object, so down() may remove it even without state
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ derived names
    @property
    def state_dir(self) -> Path:
        if self.name is None:
            raise LabError("the lab has no name yet: call up() first")
        return state_root() / self.name

    @property
    def inventory_dir(self) -> Path:
        return self.state_dir / "inventory"

    @property
    def ssh_key(self) -> Path:
        return self.state_dir / "ssh" / "id_ed25519"

    @property
    def fabric_cidr(self) -> str:
        return FABRIC_NET.format(index=self._need_index())

    @property
    def mgmt_cidr(self) -> str:
        return MGMT_NET.format(index=self._need_index())

    @property
    def control_addr(self) -> str:
        """The control machine's address on the management bridge (root namespace)."""
        return f"198.18.{self._need_index()}.1"

    @property
    def switch_netns(self) -> str:
        return f"{PREFIX}{self._need_index()}-sw"

    @property
    def root_link(self) -> str:
        return f"{PREFIX}{self._need_index()}"

    @property
    def is_up(self) -> bool:
        return self._is_up

    def _need_index(self) -> int:
        if self.index is None:
            raise LabError("the lab is not up: call up() first")
        return self.index

    def _plan_hosts(self) -> list[LabHost]:
        index = self._need_index()
        hosts = []
        for i in range(self.n_hosts):
            label = f"node{i + 1:02d}"
            hosts.append(
                LabHost(
                    name=label,
                    hostname=f"{self.name}-{label}",
                    netns=f"{PREFIX}{index}-{label}",
                    mgmt_addr=f"198.18.{index}.{HOST_OFFSET + i + 1}",
                    fabric_addr=f"198.19.{index}.{HOST_OFFSET + i + 1}",
                    fabric_ifname=self.fabric_ifnames[i],
                    mgmt_ifname=self.mgmt_ifname,
                    rank=i,
                )
            )
        return hosts

    def host(self, ref: HostRef) -> LabHost:
        """A host by LabHost, 0-based rank, name (node01), hostname, netns or an address."""
        if isinstance(ref, LabHost):
            if ref not in self.hosts:
                raise LabError(f"host {ref.name} is not part of lab {self.name}")
            return ref
        if isinstance(ref, int):
            if not 0 <= ref < len(self.hosts):
                raise LabError(f"lab {self.name} has no host with rank {ref}")
            return self.hosts[ref]
        for h in self.hosts:
            if ref in (h.name, h.hostname, h.netns, h.mgmt_addr, h.fabric_addr):
                return h
        raise LabError(
            f"lab {self.name} has no host {ref!r}; hosts: {', '.join(h.name for h in self.hosts)}"
        )

    # ------------------------------------------------------------------ state file
    def _state_file(self) -> Path:
        return self.state_dir / "state.json"

    def _save_state(self) -> None:
        tmp = self._state_file().with_suffix(".tmp")
        tmp.write_text(json.dumps(self._state, indent=2))
        os.replace(tmp, self._state_file())

    @classmethod
    def load(cls, name: str) -> Lab:
        """The lab recorded under this name (made by this or another process)."""
        path = state_root() / name / "state.json"
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            raise LabError(
                f"no lab named {name!r} (no {path}); see `python -m tests.lab status`"
            ) from None
        lab = cls(
            n_hosts=state["n_hosts"],
            fabric_ifnames=state["fabric_ifnames"],
            name=state["name"],
            python=state["python"],
            mgmt_ifname=state["mgmt_ifname"],
            slots=state["slots"],
            keep=True,
            slurm=bool(state.get("slurm")),
        )
        lab.index = state["index"]
        lab.hosts = [LabHost(**h) for h in state["hosts"]]
        lab._state = state
        lab._is_up = state.get("status") == "up"
        return lab

    @staticmethod
    def recorded() -> list[str]:
        """Names of every lab recorded in the state root."""
        root = state_root()
        if not root.is_dir():
            return []
        return sorted(p.parent.name for p in root.glob("*/state.json"))

    # ------------------------------------------------------------------ up
    def __enter__(self) -> Lab:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def up(self) -> Lab:
        """Build the lab; returns once every sshd answers. Removes what it built on error."""
        reason = (
            slurm_unavailable_reason(self.python)
            if self.slurm
            else lab_unavailable_reason(self.python)
        )
        if reason:
            raise LabError(reason)
        if self._is_up:
            return self
        started = time.monotonic()
        atexit.register(self._atexit_down)
        _install_sigterm_handler()
        try:
            self._allocate()
            self._build()
        except BaseException:
            with contextlib.suppress(Exception):
                self.down()
            raise
        self.up_seconds = time.monotonic() - started
        return self

    def _allocate(self) -> None:
        with _registry_lock():
            _reap_stale_labs()
            used = set()
            for other in Lab.recorded():
                with contextlib.suppress(OSError, ValueError, KeyError):
                    used.add(json.loads((state_root() / other / "state.json").read_text())["index"])
            used |= _indices_in_use_on_machine()
            free = [i for i in range(1, 255) if i not in used]
            if not free:
                raise LabError("no free lab index (1..254); `python -m tests.lab down --all`")
            self.index = free[0]
            if self.name is None:
                self.name = f"lab{self.index}"
                while self.state_dir.exists():
                    self.name = f"lab{self.index}-{os.getpid() % 10000}"
            if self.state_dir.exists():
                raise LabError(
                    f"a lab named {self.name!r} exists already ({self.state_dir}); "
                    f"remove it with `python -m tests.lab down --name {self.name}`"
                )
            self.hosts = self._plan_hosts()
            self._state = {
                "schema": 1,
                "name": self.name,
                "index": self.index,
                "status": "creating",
                "n_hosts": self.n_hosts,
                "fabric_ifnames": self.fabric_ifnames,
                "mgmt_ifname": self.mgmt_ifname,
                "python": self.python,
                "slots": self.slots,
                "owner_pid": None if self.keep else os.getpid(),
                "owner_start": None if self.keep else _proc_start_time(os.getpid()),
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                # everything below is recorded BEFORE it is created
                "netns": [self.switch_netns, *(h.netns for h in self.hosts)],
                "root_links": [self.root_link],
                "netns_etc_dirs": [str(NETNS_DIR / h.netns) for h in self.hosts],
                "netns_etc_created": not NETNS_DIR.exists(),
                "pids": [],
                "hosts": [asdict(h) for h in self.hosts],
            }
            self.state_dir.mkdir(mode=0o700)
            self._made_state_dir = True
            self._save_state()
            self._claim_names()

    def _build(self) -> None:
        d = self.state_dir
        ip = _which("ip") or "ip"
        sshd = _which("sshd") or "/usr/sbin/sshd"
        (d / "ssh" / "cp").mkdir(mode=0o700, parents=True)
        (d / "hosts").mkdir(mode=0o700)
        host_key = self._make_keys(d)
        self._write_netns_files()
        self._build_switch(d, ip)
        self._slurm_begin()  # munged and slurmctld start while the hosts come up

        # every host at once: addresses, hostname, sshd (one process per host, no waits).
        for h in self.hosts:
            hd = d / "hosts" / h.name
            hd.mkdir(mode=0o700)
            (hd / "setup.batch").write_text(
                "link set lo up\n"
                f"addr add {h.mgmt_addr}/24 dev {h.mgmt_ifname}\n"
                f"addr add {h.fabric_addr}/24 dev {h.fabric_ifname}\n"
                f"link set {h.mgmt_ifname} up\n"
                f"link set {h.fabric_ifname} up\n"
            )
            (hd / "sshd_config").write_text(self._sshd_config(h, host_key))
        for h in self.hosts:
            self._start_sshd(h, ip, sshd, setup=True)
        self._save_state()
        self._wait_for_sshd()
        self._slurm_finish()  # one slurmd per host, then every node idle
        self._write_inventory()
        self._state["status"] = "up"
        self._save_state()
        self._is_up = True

    # ------------------------------------------------------------------ down
    def _atexit_down(self) -> None:
        if not self.keep:
            with contextlib.suppress(Exception):
                self.down()

    def down(self) -> None:
        """Remove everything the lab created (idempotent; works from any process)."""
        with self._lock:
            atexit.unregister(self._atexit_down)
            if self.name is None or not self._state:
                return
            state = self._state
            self._stop_slurm(state)  # slurmd's, slurmctld, munged, in that order
            self._remove_network(state)
            state_dir = state_root() / state["name"]
            if state_dir.is_dir() and (self._made_state_dir or (state_dir / "state.json").exists()):
                shutil.rmtree(state_dir, ignore_errors=True)
            self._made_state_dir = False
            self._state = {}
            self._is_up = False
            self._undo.clear()
            self._procs.clear()

    def describe(self) -> str:
        """A human summary: hosts, addresses, inventory, how to log in and tear down."""
        lines = [
            f"lab {self.name}: {self.n_hosts} hosts, management {self.mgmt_cidr} "
            f"(control {self.control_addr}), fabric {self.fabric_cidr}",
            f"  inventory: {self.inventory_dir}",
        ]
        for h in self.hosts:
            lines.append(
                f"  {h.name}  {h.hostname:<20} mgmt {h.mgmt_addr:<15} "
                f"fabric {h.fabric_ifname} {h.fabric_addr:<15} netns {h.netns}"
            )
        if self.hosts:
            lines.append(f"  ssh: {' '.join(map(_shquote, self.ssh_argv(0)))}")
        if self.slurm and self.hosts:
            lines += self.slurm_describe()
        lines.append(f"  down: python -m tests.lab down --name {self.name}")
        return "\n".join(lines)


def _reap_stale_labs() -> None:
    """Remove labs whose owning process (a test session) died without tearing them down."""
    for name in Lab.recorded():
        try:
            state = json.loads((state_root() / name / "state.json").read_text())
        except (OSError, ValueError):
            continue
        owner = state.get("owner_pid")
        if owner and _proc_start_time(owner) != state.get("owner_start"):
            lab = Lab.load(name)
            lab.down()


def down_all(kept_only: bool = False) -> list[str]:
    """Tear down every lab recorded in the state root; returns their names.

    kept_only: only the labs made to outlive their command (`python -m tests.lab up`), not
    those of running test sessions.
    """
    removed = []
    for name in Lab.recorded():
        with contextlib.suppress(LabError):  # removed meanwhile by its owner
            lab = Lab.load(name)
            if kept_only and lab._state.get("owner_pid"):
                continue
            lab.down()
            removed.append(name)
    return removed


_sigterm_installed = False


def _install_sigterm_handler() -> None:
    """Turn SIGTERM into KeyboardInterrupt so finally blocks and fixtures tear labs down."""
    global _sigterm_installed
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:

        def on_term(signum: int, frame: object) -> None:
            raise KeyboardInterrupt(f"signal {signum}")

        signal.signal(signal.SIGTERM, on_term)
    _sigterm_installed = True
