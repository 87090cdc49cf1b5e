# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What every part of the multi-host lab shares: its names and numbers, its errors, a lab host,
running a command, and the processes of /proc (tests/lab/harness.py puts the parts together)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
STATE_ROOT_ENV = "NCCL_LAB_STATE_ROOT"
DEFAULT_STATE_ROOT = "/tmp/nccl-lab"
DISABLE_ENV = "NCCL_LAB"  # NCCL_LAB=0 disables the lab (tests skip with that reason)
# The lab hosts' Python (ansible_python_interpreter): a node's, made from requirements-node.txt
# alone (`make node-venv`), so every lab run proves a node needs torch and nothing else.
NODE_PYTHON_ENV = "NCCL_LAB_NODE_PYTHON"
DEFAULT_NODE_PYTHON = PROJECT_ROOT / ".venv-node" / "bin" / "python"
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


def node_python() -> str:
    """The lab hosts' Python: $NCCL_LAB_NODE_PYTHON, else .venv-node/bin/python (not resolved: a
    venv's python is a link to the base interpreter, and only the link's path is the venv)."""
    return os.environ.get(NODE_PYTHON_ENV, "").strip() or str(DEFAULT_NODE_PYTHON)


def node_python_missing(python: str) -> str | None:
    """Why `python` cannot be the lab hosts' interpreter, or None when it can."""
    if os.path.isfile(python) and os.access(python, os.X_OK):
        return None
    return (
        f"the lab hosts' Python {python} does not exist: the lab runs the nodes on an "
        "interpreter made from requirements-node.txt alone; `make node-venv` builds .venv-node "
        f"(or set {NODE_PYTHON_ENV} to one)"
    )


def lab_unavailable_reason(python: str | None = None) -> str | None:
    """Why a lab cannot be built on this machine, or None when it can. Cheap, no side effects.
    `python`: the hosts' interpreter (default node_python())."""
    return machine_unavailable_reason() or node_python_missing(python or node_python())


def machine_unavailable_reason() -> str | None:
    """Why this machine cannot hold a lab (root, namespaces, tools), or None when it can."""
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
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        list(argv),
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
        cwd=cwd,
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


def _shquote(s: str) -> str:
    return shlex.quote(s)
