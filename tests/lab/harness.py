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
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[2]
STATE_ROOT_ENV = "NCCL_LAB_STATE_ROOT"
DEFAULT_STATE_ROOT = "/tmp/nccl-lab"
DISABLE_ENV = "NCCL_LAB"  # NCCL_LAB=0 disables the lab (tests skip with that reason)
PREFIX = "ncclab"  # kernel object names: ncclab<I> (root link), ncclab<I>-sw, ncclab<I>-node01
MGMT_NET = "198.18.{index}.0/24"  # RFC 2544 benchmarking range: never routed anywhere real
FABRIC_NET = "198.19.{index}.0/24"
HOST_OFFSET = 10  # host N (1-based) gets .10+N
MAX_HOSTS = 240
DEFAULT_FABRIC_IFNAME = "fab0"
DEFAULT_MGMT_IFNAME = "mgmt0"
NETNS_DIR = Path("/etc/netns")
SBIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_IFNAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")
_LABNAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,19}$")
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


class LabError(RuntimeError):
    """The lab could not do what was asked; the message says what and how to fix it."""


class LabCommandError(subprocess.CalledProcessError):
    """A command in a lab host failed; str() includes its output."""

    def __str__(self) -> str:
        return (
            f"{super().__str__()}\n--- stdout ---\n{self.stdout or ''}"
            f"\n--- stderr ---\n{self.stderr or ''}"
        )


@dataclass(frozen=True)
class LabHost:
    """One host of the lab."""

    name: str  # short label, unique in the lab: node01, node02, ...
    hostname: str  # what `hostname` says inside the host: <lab name>-node01
    netns: str  # network namespace: ncclab<I>-node01
    mgmt_addr: str  # management address (sshd, inventory): 198.18.I.11
    fabric_addr: str  # fabric address (NCCL/Gloo): 198.19.I.11
    fabric_ifname: str
    mgmt_ifname: str
    rank: int = 0  # 0-based position in the hostfile

    @property
    def inventory_name(self) -> str:
        """The name Ansible knows this host by (the hostfile lists management addresses)."""
        return self.mgmt_addr


HostRef = LabHost | str | int


def _which(name: str) -> str | None:
    return shutil.which(name, path=os.environ.get("PATH", "") + ":" + SBIN_PATH)


def lab_unavailable_reason() -> str | None:
    """Why a lab cannot be built on this machine, or None when it can. Cheap, no side effects."""
    if os.environ.get(DISABLE_ENV, "").strip().lower() in {"0", "no", "false", "off"}:
        return f"the multi-host lab is disabled by {DISABLE_ENV}={os.environ[DISABLE_ENV]}"
    if not sys.platform.startswith("linux"):
        return f"the multi-host lab needs Linux network namespaces; this is {sys.platform}"
    if os.geteuid() != 0:
        return (
            "the multi-host lab needs root (network namespaces, veth links, one sshd per host); "
            "run the lab tests as root, e.g. `sudo .venv/bin/python -m pytest -m lab`"
        )
    if not os.path.exists("/proc/self/ns/net") or not os.path.exists("/proc/self/ns/uts"):
        return "this kernel has no network/UTS namespace support (/proc/self/ns/net missing)"
    missing = [
        tool
        for tool in ("ip", "unshare", "sshd", "ssh", "ssh-keygen", "iptables", "tc")
        if _which(tool) is None
    ]
    if missing:
        return (
            f"the multi-host lab needs {', '.join(missing)}; install them, e.g. "
            "`apt-get install iproute2 util-linux openssh-server openssh-client iptables`"
        )
    return None


def state_root() -> Path:
    """Where labs record their state (one directory per lab)."""
    return Path(os.environ.get(STATE_ROOT_ENV, DEFAULT_STATE_ROOT))


def _ensure_state_root() -> Path:
    root = state_root()
    with contextlib.suppress(FileExistsError):
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(root)
    if not os.path.isdir(root) or os.path.islink(root) or st.st_uid != os.geteuid():
        raise LabError(
            f"lab state directory {root} is not a directory owned by uid {os.geteuid()}; "
            f"remove it or point {STATE_ROOT_ENV} elsewhere"
        )
    return root


@contextlib.contextmanager
def _registry_lock() -> Iterator[None]:
    """Serialises choosing a lab index and claiming its names, machine-wide (any state root)."""
    _ensure_state_root()
    lock_dir = Path(DEFAULT_STATE_ROOT)
    lock_dir.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(lock_dir / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "r+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(
    argv: Sequence[str],
    *,
    input: str | None = None,
    check: bool = True,
    timeout: float = 60,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        list(argv),
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )
    if check and proc.returncode != 0:
        raise LabCommandError(proc.returncode, list(argv), proc.stdout, proc.stderr)
    return proc


def _proc_start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _ns_inode(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _pids_in_netns(netns_paths: Sequence[str]) -> list[int]:
    """Every process whose network namespace is one of these (bound) namespaces."""
    wanted = {ino for ino in (_ns_inode(p) for p in netns_paths) if ino is not None}
    if not wanted:
        return []
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _ns_inode(f"/proc/{entry}/ns/net") in wanted:
            pids.append(int(entry))
    return pids


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


class Lab:
    """N hosts, each a network namespace with sshd; see the module docstring."""

    def __init__(
        self,
        n_hosts: int = 2,
        fabric_ifnames: Sequence[str] | str | None = None,
        name: str | None = None,
        python: str = sys.executable,
        *,
        mgmt_ifname: str = DEFAULT_MGMT_IFNAME,
        slots: int | None = 1,
        keep: bool = False,
        ready_timeout: float = 30.0,
        host_env: dict[int | str, dict[str, str]] | None = None,
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
        self.python = str(python)
        self.slots = slots
        self.keep = keep
        self.ready_timeout = ready_timeout
        # Per-host environment of every SSH session (sshd's SetEnv), by rank (0-based) or name.
        self.host_env = {ref: dict(env) for ref, env in (host_env or {}).items()}
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
        reason = lab_unavailable_reason()
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

    def _claim_names(self) -> None:
        """Create the namespaces and the root link; under the registry lock they claim the index."""
        ip = _which("ip") or "ip"
        root_batch = [f"netns add {ns}" for ns in self._state["netns"]]
        root_batch += [
            f"link add {self.root_link} type veth peer name ctl netns {self.switch_netns}",
            f"addr add {self.control_addr}/24 dev {self.root_link}",
        ]
        _run([ip, "-batch", "-"], input="\n".join(root_batch) + "\n")
        for sysctl, value in (
            (f"ipv6/conf/{self.root_link}/disable_ipv6", "1"),
            # resolve a host's address soon after it appears, not a second later
            (f"ipv4/neigh/{self.root_link}/retrans_time_ms", "50"),
        ):
            with contextlib.suppress(OSError):
                Path(f"/proc/sys/net/{sysctl}").write_text(value + "\n")

    def _build(self) -> None:
        d = self.state_dir
        ip = _which("ip") or "ip"
        sshd = _which("sshd") or "/usr/sbin/sshd"
        (d / "ssh" / "cp").mkdir(mode=0o700, parents=True)
        (d / "hosts").mkdir(mode=0o700)
        # Keys: one host key and one client key for the whole lab, both lab-only.
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

        # Per-namespace files, BEFORE anything runs in the namespaces (ip netns exec binds them).
        for h in self.hosts:
            etc = NETNS_DIR / h.netns
            etc.mkdir(mode=0o755, parents=True, exist_ok=True)
            (etc / "hosts").write_text(self.default_hosts_text())
            (etc / "resolv.conf").write_text("# nccl-preflight lab: no DNS inside the lab\n")

        # the switch namespace: two bridges and one veth pair per host and network.
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
        self._write_inventory()
        self._state["status"] = "up"
        self._save_state()
        self._is_up = True

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
                [
                    ip,
                    "netns",
                    "exec",
                    h.netns,
                    "unshare",
                    "--uts",
                    "sh",
                    "-c",
                    script,
                    "sh",
                    str(hd / "setup.batch"),
                    h.hostname,
                    sshd,
                    str(hd / "sshd_config"),
                    str(hd / "sshd.log"),
                ],
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

    def default_hosts_text(self) -> str:
        """The lab's /etc/hosts for every host: hostnames -> fabric addresses."""
        lines = [
            "127.0.0.1\tlocalhost",  # no ::1: IPv6 is off inside the lab
            f"# nccl-preflight lab {self.name}: hostnames resolve to fabric addresses",
        ]
        lines += [f"{h.fabric_addr}\t{h.hostname}" for h in self.hosts]
        lines += [f"{h.mgmt_addr}\t{h.hostname}-mgmt" for h in self.hosts]
        return "\n".join(lines) + "\n"

    def _write_inventory(self) -> None:
        inv = self.inventory_dir
        (inv / "group_vars").mkdir(parents=True)
        slots = f" slots={self.slots}" if self.slots is not None else ""
        (inv / "hostfile").write_text("".join(f"{h.mgmt_addr}{slots}\n" for h in self.hosts))
        common = " ".join(self.ssh_options())
        values = {
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(self.ssh_key),
            "ansible_ssh_common_args": common,
            # Lab hosts get fresh host keys with every lab: checking is off for this inventory only.
            "ansible_host_key_checking": False,
            "ansible_python_interpreter": self.python,
            "nccl_fabric_cidr": self.fabric_cidr,
            "nccl_backend": "gloo",
            "nccl_require_gpu": False,
        }
        body = "".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items())
        (inv / "group_vars" / "all.yml").write_text(
            f"---\n# Written by tests/lab for lab {self.name}; removed by "
            f"`python -m tests.lab down --name {self.name}`.\n{body}"
        )

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
            if state.get("netns_etc_created"):
                with contextlib.suppress(OSError):
                    NETNS_DIR.rmdir()  # only when empty: other labs may use it meanwhile
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and set(state.get("root_links", [])) & set(
                _root_link_names()
            ):
                time.sleep(0.02)
            state_dir = state_root() / state["name"]
            if state_dir.is_dir() and (self._made_state_dir or (state_dir / "state.json").exists()):
                shutil.rmtree(state_dir, ignore_errors=True)
            self._made_state_dir = False
            self._state = {}
            self._is_up = False
            self._undo.clear()
            self._procs.clear()

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

    # ------------------------------------------------------------------ running things
    def netns_argv(self, host: HostRef, argv: Sequence[str]) -> list[str]:
        """argv wrapped to run in the host: its netns, its hostname, its /etc/hosts."""
        h = self.host(host)
        return [
            _which("ip") or "ip",
            "netns",
            "exec",
            h.netns,
            "unshare",
            "--uts",
            "sh",
            "-c",
            'hostname "$0" && exec "$@"',
            h.hostname,
            *argv,
        ]

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

    def ansible_playbook(
        self,
        playbook: str | os.PathLike[str],
        *args: str,
        env: dict[str, str] | None = None,
        timeout: float = 900,
        capture: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """ansible-playbook -i <inventory_dir> <playbook> *args, from the project root.

        Does not raise on a non-zero exit: the caller asserts on returncode/stdout.
        capture=False lets the output through to the terminal (stdout/stderr are then None).
        """
        exe = Path(sys.executable).parent / "ansible-playbook"
        cmd = str(exe) if exe.exists() else (shutil.which("ansible-playbook") or "ansible-playbook")
        full_env = {**os.environ, "ANSIBLE_CONFIG": str(PROJECT_ROOT / "ansible.cfg")}
        full_env.update(env or {})
        return subprocess.run(
            [cmd, "-i", str(self.inventory_dir), str(playbook), *args],
            cwd=PROJECT_ROOT,
            env=full_env,
            capture_output=capture,
            text=True,
            timeout=timeout,
            check=False,
        )

    # ------------------------------------------------------------------ faults
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

    def link_up(self, host: HostRef) -> None:
        """Bring the host's fabric link up again."""
        h = self.host(host)
        _run([_which("ip") or "ip", "-n", h.netns, "link", "set", "dev", h.fabric_ifname, "up"])

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

    def sshd_pid(self, host: HostRef) -> int:
        """The pid of the host's sshd."""
        return int(self._state["sshd_pids"][self.host(host).name])

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
        lines.append(f"  down: python -m tests.lab down --name {self.name}")
        return "\n".join(lines)


_NS_SYSCTLS = (
    "if [ -d /proc/sys/net/ipv6 ]; then "
    "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6; "
    "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; fi; "
    "for f in /proc/sys/net/bridge/bridge-nf-call-iptables "
    "/proc/sys/net/bridge/bridge-nf-call-ip6tables "
    "/proc/sys/net/bridge/bridge-nf-call-arptables; do "
    '[ -w "$f" ] && echo 0 > "$f"; done; '
)


def _shquote(s: str) -> str:
    import shlex

    return shlex.quote(s)


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
