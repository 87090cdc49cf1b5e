# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A real Slurm in the lab (`Lab(n, slurm=True)`): munged, slurmctld and one slurmd per host, from
Debian's packages, started and stopped by the lab (a mixin of tests/lab/harness.py's Lab).

Layout of lab I with Slurm:

    switch namespace "ncclabI-sw"             host namespace "ncclabI-nodeNN" (UTS: <lab>-nodeNN)
    br-mgmt 198.18.I.2  munged, slurmctld     slurmd -N <lab>-nodeNN (beside that host's sshd)

- The controller lives in the switch namespace, the lab's own: its management bridge gets one
  address (198.18.I.2, the controller's), so every host reaches it over its management link and
  the control machine over its one root link, as a head node on the management network would be.
  Nothing of it is in the root namespace (no port taken there, no clash between labs), and the
  namespace goes away with the lab.
- munged runs there too, with the lab's own key, socket, pid and seed files; its socket is a file
  that every namespace reaches (`AuthInfo=socket=...` in slurm.conf), the control machine's
  srun/sbatch/scontrol included.
- Each host's slurmd runs in that host's network namespace and UTS namespace, started like its
  sshd (`ip netns exec` binds the host's /etc/hosts), so any fault injected into a host (a firewall
  drop, a link down, a killed process, an /etc/hosts) hits Slurm and SSH alike. NodeName is the
  lab hostname and NodeAddr its management address (what Ansible's inventory uses); a job's ranks
  reach each other over the fabric as in the Ansible path (the lab hostnames resolve to fabric
  addresses: MASTER_ADDR = the first node's fabric address).
- Every daemon's pid goes into state.json as it starts; down() stops the slurmd's first (TERM,
  then wait), then slurmctld, then munged, each by its recorded pid, before the namespaces' sweep
  removes whatever a job left behind.
- No cgroups (cgroup.conf: cgroup/v1, proctrack/linuxproc, task/none): slurmd 22.05 cannot start
  its cgroup plugin inside `ip netns exec` otherwise. So no CPU binding, no GRES, no memory limits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.lab.base import (
    NETNS_DIR,
    HostRef,
    LabError,
    _pid_alive,
    _run,
    _which,
    lab_unavailable_reason,
)
from tests.lab.network import in_host_shell

SLURM_APT = ("slurmctld", "slurmd", "slurm-client", "munge")
SLURM_TOOLS = ("munged", "slurmctld", "slurmd", "srun", "sbatch", "scontrol", "sinfo", "scancel")
CONTROLLER_HOST = 2  # the controller's address on the management bridge: 198.18.I.2
SLURMCTLD_PORT = 6817
SLURM_PARTITION = "lab"
STOP_WAIT = 5.0  # seconds a daemon gets after SIGTERM before SIGKILL
_LIVE_JOB_STATES = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "RESIZING"}
_START_SCRIPT = 'hostname "$1" || exit 1; shift; exec "$@"'


def slurm_unavailable_reason(python: str | None = None) -> str | None:
    """Why the lab cannot run Slurm here, or None when it can (cheap, no side effects).
    `python`: the hosts' interpreter (lab_unavailable_reason's default when None)."""
    reason = lab_unavailable_reason(python)
    if reason:
        return reason
    missing = [tool for tool in SLURM_TOOLS if _slurm_binary(tool) is None]
    if missing:
        return (
            f"the lab's Slurm needs {', '.join(missing)}; install Debian's packages as root: "
            f"`apt-get install --no-install-recommends {' '.join(SLURM_APT)}` (or `make apt-lab`)"
        )
    return None


def _slurm_binary(name: str) -> str | None:
    """Where a Slurm or munge program is (a seam: tests replace it to inject a failing daemon)."""
    return _which(name)


def _need_binary(name: str) -> str:
    path = _slurm_binary(name)
    if path is None:
        raise LabError(slurm_unavailable_reason() or f"{name} is not installed")
    return path


class LabSlurm:
    """munged, slurmctld and one slurmd per host of a Lab, and the Slurm commands that use them."""

    # ------------------------------------------------------------------ names
    @property
    def slurm_dir(self) -> Path:
        return self.state_dir / "slurm"

    @property
    def slurm_conf(self) -> Path:
        return self.slurm_dir / "slurm.conf"

    @property
    def slurm_controller_addr(self) -> str:
        """slurmctld's address: on the management bridge, in the switch namespace."""
        return f"198.18.{self._need_index()}.{CONTROLLER_HOST}"

    @property
    def slurm_controller_hostname(self) -> str:
        return f"{self.name}-ctl"

    @property
    def slurm_nodes(self) -> list[str]:
        """Slurm's node names, in host order: the lab hostnames."""
        return [h.hostname for h in self.hosts]

    def slurm_node(self, host: HostRef) -> str:
        """The Slurm node name of a host (any reference Lab.host takes)."""
        return self.host(host).hostname

    def slurm_pids(self) -> dict[str, Any]:
        """{"munged": pid, "slurmctld": pid, "slurmd": {node name: pid}} of what was started."""
        return self._state.get("slurm", {}).get("pids", {})

    # ------------------------------------------------------------------ up
    def _slurm_begin(self) -> None:
        """Configuration, munged and slurmctld (right after the switch; the hosts start later)."""
        if not self.slurm:
            return
        binaries = {tool: _need_binary(tool) for tool in ("munged", "slurmctld", "slurmd")}
        d = self.slurm_dir
        self._state["slurm"] = {
            "dir": str(d),
            "controller_addr": self.slurm_controller_addr,
            "binaries": binaries,
            "pids": {"munged": None, "slurmctld": None, "slurmd": {}},
        }
        # the controller's namespace resolves the lab's names without DNS, like every host
        etc = NETNS_DIR / self.switch_netns
        self._state["netns_etc_dirs"].append(str(etc))  # recorded before it is made
        self._save_state()
        etc.mkdir(mode=0o755)
        (etc / "hosts").write_text(
            self.default_hosts_text()
            + f"{self.slurm_controller_addr}\t{self.slurm_controller_hostname}\n"
        )
        (etc / "resolv.conf").write_text("# nccl-preflight lab: no DNS inside the lab\n")
        self._slurm_write_files()
        self._slurm_start_controller(binaries)

    def _slurm_write_files(self) -> None:
        """The munge key, slurm.conf, cgroup.conf and plugstack.conf, and the daemons' dirs."""
        d = self.slurm_dir
        for sub in ("munge", "ctld", "jobs", *self.slurm_nodes):
            (d / sub).mkdir(mode=0o700, parents=True)
        for node in self.slurm_nodes:
            (d / node / "spool").mkdir(mode=0o700)
        key = d / "munge" / "munge.key"
        with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(os.urandom(1024))
        self.slurm_conf.write_text(self._slurm_conf_text())
        (d / "cgroup.conf").write_text(
            "# nccl-preflight lab: no cgroups (see tests/lab/slurm.py)\nCgroupPlugin=cgroup/v1\n"
        )
        (d / "plugstack.conf").write_text("")

    def _slurm_start_controller(self, binaries: dict[str, str]) -> None:
        """The controller's address on the management bridge, munged, then slurmctld."""
        d = self.slurm_dir
        key = d / "munge" / "munge.key"
        ip = _which("ip") or "ip"
        _run(
            [
                ip,
                "-n",
                self.switch_netns,
                "addr",
                "add",
                f"{self.slurm_controller_addr}/24",
                "dev",
                "br-mgmt",
            ]
        )
        self._slurm_start(
            "munged",
            self.switch_netns,
            self.slurm_controller_hostname,
            [
                binaries["munged"],
                "-F",
                # the lab's directories are root's alone (0700): munged refuses a socket that
                # not every user can reach unless forced; only root uses this lab's Slurm
                "--force",
                "--num-threads=2",
                f"--key-file={key}",
                f"--socket={d / 'munge' / 'munge.socket'}",
                f"--pid-file={d / 'munge' / 'munged.pid'}",
                f"--seed-file={d / 'munge' / 'munged.seed'}",
                f"--log-file={d / 'munge' / 'munged.log'}",
                f"--origin={self.slurm_controller_addr}",  # no lookup of the controller's name
            ],
        )
        self._slurm_wait(lambda: (d / "munge" / "munge.socket").is_socket(), "munged's socket")
        self._slurm_start(
            "slurmctld",
            self.switch_netns,
            self.slurm_controller_hostname,
            [binaries["slurmctld"], "-D", "-i", "-f", str(self.slurm_conf)],
        )

    def _slurm_finish(self) -> None:
        """One slurmd per host (their addresses are up), then wait until every node is idle."""
        if not self.slurm:
            return
        self._slurm_wait(self._slurmctld_listens, f"slurmctld on {self.slurm_controller_addr}")
        slurmd = self._state["slurm"]["binaries"]["slurmd"]
        for h in self.hosts:
            self._slurm_start(
                "slurmd",
                h.netns,
                h.hostname,
                [slurmd, "-D", "-f", str(self.slurm_conf), "-N", h.hostname],
                node=h.hostname,
            )
        self.slurm_wait_idle()

    def _slurm_conf_text(self) -> str:
        d = self.slurm_dir
        cpus = os.cpu_count() or 1
        lines = [
            f"# nccl-preflight lab {self.name}: written by tests/lab/slurm.py, removed by down()",
            f"ClusterName=ncclab{self._need_index()}",
            f"SlurmctldHost={self.slurm_controller_hostname}({self.slurm_controller_addr})",
            f"SlurmctldPort={SLURMCTLD_PORT}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            f"AuthInfo=socket={d / 'munge' / 'munge.socket'}",
            "CredType=cred/munge",
            f"StateSaveLocation={d / 'ctld'}",
            f"SlurmctldPidFile={d / 'ctld' / 'slurmctld.pid'}",
            f"SlurmctldLogFile={d / 'ctld' / 'slurmctld.log'}",
            f"SlurmdSpoolDir={d / '%n' / 'spool'}",
            f"SlurmdPidFile={d / '%n' / 'slurmd.pid'}",
            f"SlurmdLogFile={d / '%n' / 'slurmd.log'}",
            f"PlugStackConfig={d / 'plugstack.conf'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "ReturnToService=2",
            "MailProg=/bin/true",
            "KillWait=2",  # scancel: SIGTERM, then SIGKILL 2 s later
            # schedule a job as soon as its nodes are free, not up to 3 s later
            "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0",
            "InactiveLimit=0",
        ]
        lines += [
            f"NodeName={h.hostname} NodeHostname={h.hostname} NodeAddr={h.mgmt_addr} "
            f"CPUs={cpus} RealMemory=1000 State=UNKNOWN"
            for h in self.hosts
        ]
        lines.append(
            f"PartitionName={SLURM_PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
        )
        return "\n".join(lines) + "\n"

    def _slurm_out(self, role: str, node: str | None = None) -> Path:
        """Where a daemon's own stdout/stderr go (its log file is beside it)."""
        sub = {"munged": "munge", "slurmctld": "ctld"}.get(role, node or "")
        return self.slurm_dir / sub / f"{role}.out"

    def _slurm_start(
        self, role: str, netns: str, hostname: str, argv: Sequence[str], node: str | None = None
    ) -> int:
        """Start one daemon in a namespace under its own hostname; its pid goes to state.json."""
        with open(self._slurm_out(role, node), "ab") as out:
            proc = subprocess.Popen(
                in_host_shell(netns, _START_SCRIPT, "sh", hostname, *argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._procs[proc.pid] = proc
        pids = self._state["slurm"]["pids"]
        if node is None:
            pids[role] = proc.pid
        else:
            pids["slurmd"][node] = proc.pid
        self._state["pids"].append(proc.pid)
        self._save_state()
        return proc.pid

    def _slurm_daemons(self) -> list[tuple[str, str | None, int]]:
        """(role, node, pid) of every daemon started, in start order."""
        pids = self.slurm_pids()
        found = [(role, None, pids[role]) for role in ("munged", "slurmctld") if pids.get(role)]
        found += [("slurmd", node, pid) for node, pid in pids.get("slurmd", {}).items()]
        return found

    def _slurm_check_alive(self) -> None:
        """Raise, with its output, when a daemon this lab started has exited."""
        for role, node, pid in self._slurm_daemons():
            proc = self._procs.get(pid)
            if proc is not None and proc.poll() is not None:
                out = self._slurm_out(role, node)
                text = out.read_text(errors="replace").strip() if out.exists() else ""
                where = f" of {node}" if node else ""
                raise LabError(
                    f"{role}{where} (lab {self.name}) exited with {proc.returncode} while the lab "
                    f"started: {text[-2000:] or '(no output)'}; logs in {out.parent}"
                )

    def _slurm_wait(
        self, ready: Callable[[], bool], what: str, timeout: float | None = None
    ) -> None:
        """Poll ready() until it holds; a daemon that exits meanwhile fails at once."""
        timeout = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while not ready():
            self._slurm_check_alive()
            if time.monotonic() > deadline:
                raise LabError(
                    f"lab {self.name}: no {what} within {timeout:.0f}s; see the logs in "
                    f"{self.slurm_dir}"
                )
            time.sleep(0.02)

    def _slurmctld_listens(self) -> bool:
        """Whether slurmctld listens on its port (read from its namespace's /proc/net/tcp, so
        that no probe connection shows up as an error in its log)."""
        pid = self.slurm_pids().get("slurmctld")
        try:
            table = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
        except OSError:
            return False
        port = f":{SLURMCTLD_PORT:04X}"
        return any(
            fields[1].endswith(port) and fields[3] == "0A"  # 0A: LISTEN
            for fields in (line.split() for line in table)
        )

    def slurm_node_states(self) -> dict[str, str]:
        """{node name: state} as `sinfo -N` says it (idle, alloc, drain, idle*, down*, ...)."""
        out = self.slurm_cmd("sinfo", "-h", "-N", "-o", "%N %t", check=False)
        states = {}
        for line in out.stdout.splitlines():
            node, _, state = line.partition(" ")
            states[node] = state.strip()
        return states

    def slurm_wait_idle(
        self, nodes: Sequence[str] | None = None, timeout: float | None = None
    ) -> None:
        """Until sinfo shows each node (default: all) plain idle (not idle*, not drained)."""
        wanted = list(nodes or self.slurm_nodes)

        def idle() -> bool:
            states = self.slurm_node_states()
            return all(states.get(node) == "idle" for node in wanted)

        self._slurm_wait(idle, f"idle Slurm node among {', '.join(wanted)}", timeout)

    def slurm_reconfigure(self, extra: Sequence[str] = ()) -> None:
        """Rewrite slurm.conf as the lab's own lines plus ``extra`` (e.g. HealthCheckProgram=...,
        Prolog=...; none: back to the lab's own) and have slurmctld and every slurmd read it
        again (`scontrol reconfigure`)."""
        lines = "".join(f"{line}\n" for line in extra)
        self.slurm_conf.write_text(self._slurm_conf_text() + lines)
        self.scontrol("reconfigure")

    def slurm_stop_slurmd(self, host: HostRef) -> None:
        """Stop one host's slurmd (TERM, KILL after STOP_WAIT), as a daemon that died: nothing
        tells slurmctld, which marks the node down only after SlurmdTimeout."""
        node = self.slurm_node(host)
        pid = self.slurm_pids().get("slurmd", {}).get(node)
        if not pid or not _is_lab_process(pid, str(self.state_dir)):
            raise LabError(f"lab {self.name}: no slurmd of {node} running")
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            if not self._slurm_wait_gone([pid], STOP_WAIT):
                return
        raise LabError(f"lab {self.name}: the slurmd of {node} (pid {pid}) did not end")

    def slurm_start_slurmd(self, host: HostRef) -> None:
        """Start one host's slurmd again (after slurm_stop_slurmd) and wait until slurmctld had
        its registration (SlurmdStartTime changes; a DOWN node then returns to service by
        itself, ReturnToService=2) and the node is idle. No `state=resume`: a node resumed
        before its slurmd registered looks idle at once, and the registration could come after
        a test has marked it down again."""
        h = self.host(host)

        def started() -> str:
            out = self.scontrol("show", "node", "-o", h.hostname, check=False).stdout
            return next((f for f in out.split() if f.startswith("SlurmdStartTime=")), "")

        before = started()
        slurmd = self._state["slurm"]["binaries"]["slurmd"]
        argv = [slurmd, "-D", "-f", str(self.slurm_conf), "-N", h.hostname]
        self._slurm_start("slurmd", h.netns, h.hostname, argv, node=h.hostname)
        self._slurm_wait(lambda: started() not in ("", before), f"registration of {h.hostname}")
        self.slurm_wait_idle([h.hostname])

    def slurm_describe(self) -> list[str]:
        """Lines for Lab.describe(): where the controller is and how to reach it."""
        env = " ".join(f"{k}={v}" for k, v in self.slurm_env().items())
        return [
            f"  slurm: slurmctld {self.slurm_controller_addr} (netns {self.switch_netns}), "
            f"partition {SLURM_PARTITION}, nodes {','.join(self.slurm_nodes)}",
            f"  slurm env: {env}  (e.g. `{env} srun -N{len(self.hosts)} hostname`)",
        ]

    def slurm_running(self) -> int | None:
        """How many of the daemons this lab started still run (None: a lab without Slurm)."""
        if not self._state.get("slurm"):
            return None
        return sum(1 for _, _, pid in self._slurm_daemons() if _pid_alive(pid))

    # ------------------------------------------------------------------ commands
    def slurm_env(self) -> dict[str, str]:
        """The environment the control machine's srun/sbatch/scontrol/sinfo need for this lab."""
        return {"SLURM_CONF": str(self.slurm_conf)}

    def slurm_cmd(
        self,
        tool: str,
        *args: str,
        check: bool = True,
        timeout: float = 120,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client (srun, sbatch, scontrol, sinfo, squeue, scancel) on the control
        machine against this lab; its working directory is the lab's job directory."""
        if not self.slurm or "slurm" not in self._state:
            raise LabError(f"lab {self.name} has no Slurm: make it with Lab(..., slurm=True)")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
        env.update(self.slurm_env())
        return _run(
            [_which(tool) or tool, *args],
            input=input,
            check=check,
            timeout=timeout,
            env=env,
            cwd=self.slurm_dir / "jobs",
        )

    def srun(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """`srun args...` from the control machine."""
        return self.slurm_cmd("srun", *args, check=check, timeout=timeout)

    def sbatch(self, script: str, *args: str, wait: bool = False, timeout: float = 120) -> str:
        """Submit a batch script (its text) from the control machine; returns the job id.

        The job's output goes to <slurm dir>/jobs/slurm-<id>.out unless args say otherwise.
        wait=True returns once the job ended and raises LabError unless it COMPLETED."""
        job_id = self.slurm_cmd("sbatch", "--parsable", *args, input=script).stdout.strip()
        job_id = job_id.split(";")[0]
        if wait:
            state = self.slurm_wait_job(job_id, timeout)
            if state != "COMPLETED":
                out = self.slurm_dir / "jobs" / f"slurm-{job_id}.out"
                text = out.read_text(errors="replace")[-2000:] if out.exists() else ""
                raise LabError(f"job {job_id} of lab {self.name} ended {state}: {text}")
        return job_id

    def slurm_job_state(self, job_id: str) -> str:
        """The job's state as slurmctld says it (PENDING, RUNNING, COMPLETED, CANCELLED, ...)."""
        out = self.scontrol("show", "job", "-o", job_id).stdout
        for field in out.split():
            if field.startswith("JobState="):
                return field.split("=", 1)[1]
        raise LabError(f"lab {self.name}: no JobState for job {job_id} in {out!r}")

    def slurm_wait_job(self, job_id: str, timeout: float = 120) -> str:
        """Until the job left PENDING, RUNNING, CONFIGURING, COMPLETING; returns its state."""
        states: list[str] = []

        def ended() -> bool:
            states.append(self.slurm_job_state(job_id))
            return states[-1] not in _LIVE_JOB_STATES

        self._slurm_wait(ended, f"end of job {job_id}", timeout)
        return states[-1]

    def scontrol(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`scontrol args...` from the control machine."""
        return self.slurm_cmd("scontrol", *args, check=check)

    def slurm_job_output(self, job_id: str) -> str:
        """The default output file of a batch job (slurm-<id>.out in the lab's job directory)."""
        return (self.slurm_dir / "jobs" / f"slurm-{job_id}.out").read_text(errors="replace")

    # ------------------------------------------------------------------ down
    def _stop_slurm(self, state: dict[str, Any]) -> None:
        """slurmd's, then slurmctld, then munged: TERM each group, wait, KILL what is left.

        Only a recorded pid that is alive and names this lab's directory in its command line is
        signalled (a pid reused since is left alone)."""
        slurm = state.get("slurm")
        if not slurm:
            return
        pids = slurm.get("pids", {})
        lab_dir = str(Path(slurm["dir"]).parent)
        for group in (
            list(pids.get("slurmd", {}).values()),
            [pids.get("slurmctld")],
            [pids.get("munged")],
        ):
            mine = [pid for pid in group if pid and _is_lab_process(pid, lab_dir)]
            for sig, wait in ((signal.SIGTERM, STOP_WAIT), (signal.SIGKILL, STOP_WAIT)):
                for pid in mine:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, sig)
                mine = self._slurm_wait_gone(mine, wait)
                if not mine:
                    break

    def _slurm_wait_gone(self, pids: list[int], wait: float) -> list[int]:
        """Reap our children among pids; returns those still alive after up to wait seconds."""
        deadline = time.monotonic() + wait
        while True:
            for pid in pids:
                proc = self._procs.get(pid)
                if proc is not None:
                    proc.poll()
            pids = [pid for pid in pids if _pid_alive(pid)]
            if not pids or time.monotonic() > deadline:
                return pids
            time.sleep(0.02)


def _is_lab_process(pid: int, lab_dir: str) -> bool:
    if not _pid_alive(pid):
        return False
    try:
        return lab_dir in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    except OSError:
        return False
