# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The lab's Slurm (tests/lab/slurm.py): munged, slurmctld and one slurmd per host come up with the
lab, run real jobs across the hosts (torch gloo over the fabric), drain and cancel as a real
cluster does, and leave nothing behind on down(), even when up() fails half-way.

Tests marked `lab` need root and Debian's Slurm packages (they skip with the reason otherwise).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders.lab_host import assert_restored, snapshot
from tests.lab import harness, slurm
from tests.lab.base import _pids_in_netns
from tests.lab.fixtures import LabFactory, require_slurm
from tests.lab.harness import Lab, LabError
from tests.polling import wait_or_fail

ROOT = Path(__file__).resolve().parents[2]

# One rank of a gloo all_reduce: rank and world from Slurm, the rendezvous on MASTER_ADDR (the
# first node's fabric address), gloo's own sockets on the fabric interface.
GLOO_RANK = """
import datetime, json, os, socket
import torch
import torch.distributed as dist

rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
dist.init_process_group(
    "gloo",
    init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
    rank=rank,
    world_size=world,
    timeout=datetime.timedelta(seconds=60),
)
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
dist.destroy_process_group()
print(json.dumps({"rank": rank, "world": world, "host": socket.gethostname(), "sum": value.item()}))
"""


@pytest.fixture(scope="module")
def slurm3(lab_factory: LabFactory) -> Lab:
    require_slurm()
    return lab_factory(3, slurm=True)


def lab_processes(lab_dir: str) -> list[int]:
    """Every live process whose command line names this lab's directory."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and harness._pid_alive(int(entry)):
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_text(errors="replace")
            except OSError:
                continue
            if lab_dir in cmdline:
                found.append(int(entry))
    return found


def host_processes(lab: Lab) -> dict[str, set[int]]:
    """{host name: pids in its network namespace}."""
    return {
        h.name: {p for p in _pids_in_netns([f"/run/netns/{h.netns}"]) if harness._pid_alive(p)}
        for h in lab.hosts
    }


def commands(pids: set[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ").strip())
        except OSError:
            continue
    return out


# --------------------------------------------------------------------- no root needed


def test_reason_names_the_missing_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm, "lab_unavailable_reason", lambda python=None: None)
    monkeypatch.setattr(slurm, "_slurm_binary", lambda name: None if name == "slurmd" else name)
    reason = slurm.slurm_unavailable_reason()
    assert reason is not None
    assert "needs slurmd" in reason and "slurmctld slurmd slurm-client munge" in reason
    monkeypatch.setattr(slurm, "_slurm_binary", lambda name: f"/usr/bin/{name}")
    assert slurm.slurm_unavailable_reason() is None


def test_reason_is_the_lab_reason_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm, "lab_unavailable_reason", lambda python=None: "no root here")
    assert slurm.slurm_unavailable_reason() == "no root here"


def test_slurm_lab_refuses_to_start_without_slurm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        harness, "slurm_unavailable_reason", lambda python=None: "the lab's Slurm needs x"
    )
    with pytest.raises(LabError, match="the lab's Slurm needs x"):
        Lab(2, slurm=True).up()


# --------------------------------------------------------------------- a running Slurm lab


@pytest.mark.lab
def test_srun_runs_on_every_lab_host(slurm3: Lab) -> None:
    assert slurm3.slurm_node_states() == {name: "idle" for name in slurm3.slurm_nodes}
    out = slurm3.srun("-N3", "hostname")
    assert sorted(out.stdout.split()) == sorted(h.hostname for h in slurm3.hosts)
    # every task runs in its own host: its own namespace address, beside that host's sshd
    out = slurm3.srun("-N3", "-l", "ip", "-o", "-4", "addr", "show", "scope", "global")
    addrs: dict[str, set[str]] = {}
    for line in out.stdout.splitlines():
        task, _, rest = line.partition(":")
        addrs.setdefault(task, set()).update(re.findall(r"\binet (\S+)/", rest))
    assert sorted(map(sorted, addrs.values())) == sorted(
        sorted([h.mgmt_addr, h.fabric_addr]) for h in slurm3.hosts
    )


@pytest.mark.lab
def test_a_fault_in_a_host_reaches_its_slurm_jobs(slurm3: Lab) -> None:
    first, second = slurm3.hosts[0], slurm3.hosts[1]
    lookup = ["-w", second.hostname, "getent", "ahostsv4", first.hostname]
    # a job resolves the lab hostnames to fabric addresses, as torch's ranks do
    assert slurm3.srun(*lookup).stdout.split()[0] == first.fabric_addr
    undo = slurm3.write_hosts_file(second, "127.0.0.1\tlocalhost\n")
    try:
        assert slurm3.srun(*lookup, check=False).returncode == 2  # getent: not found
    finally:
        undo()
    assert slurm3.srun(*lookup).stdout.split()[0] == first.fabric_addr


@pytest.mark.lab
def test_torch_gloo_all_reduce_over_the_fabric(slurm3: Lab) -> None:
    first, second = slurm3.hosts[0], slurm3.hosts[1]
    assert first.fabric_ifname == second.fabric_ifname
    env = (
        f"ALL,MASTER_ADDR={first.fabric_addr},MASTER_PORT=29511,"
        f"GLOO_SOCKET_IFNAME={first.fabric_ifname}"
    )
    out = slurm3.srun(
        "-N2",
        "--ntasks-per-node=1",
        f"--nodelist={first.hostname},{second.hostname}",
        f"--export={env}",
        slurm3.python,
        "-c",
        GLOO_RANK,
        timeout=180,
    )
    ranks = sorted((json.loads(line) for line in out.stdout.splitlines()), key=lambda r: r["rank"])
    assert [(r["rank"], r["world"], r["host"], r["sum"]) for r in ranks] == [
        (0, 2, first.hostname, 3.0),
        (1, 2, second.hostname, 3.0),
    ]


@pytest.mark.lab
def test_drain_reason_is_shown_whole_and_resume_restores(slurm3: Lab) -> None:
    node = slurm3.slurm_node(2)
    reason = "nccl-preflight: test drain with a long reason"
    slurm3.scontrol("update", f"nodename={node}", "state=drain", f"reason={reason}")
    try:
        assert slurm3.slurm_node_states()[node] == "drain"
        shown = slurm3.slurm_cmd("sinfo", "-h", "-R", "-o", "%n %E").stdout
        assert f"{node} {reason}" in shown.splitlines()
        # a job asking for every node cannot run now
        out = slurm3.srun("-N3", "--immediate=1", "true", check=False, timeout=60)
        assert out.returncode != 0
    finally:
        slurm3.scontrol("update", f"nodename={node}", "state=resume")
    slurm3.slurm_wait_idle()
    assert slurm3.srun("-N3", "true").returncode == 0


@pytest.mark.lab
def test_scancel_leaves_no_job_process_on_any_node(slurm3: Lab) -> None:
    # between jobs, each host runs its sshd and its slurmd only (once an earlier job's step ended)
    baseline = {
        h.name: {slurm3.sshd_pid(h), slurm3.slurm_pids()["slurmd"][h.hostname]}
        for h in slurm3.hosts
    }
    wait_or_fail(
        lambda: host_processes(slurm3) == baseline, what="the hosts to run sshd and slurmd only"
    )
    job = slurm3.sbatch("#!/bin/sh\nsrun sleep 600\n", "-N2")

    def sleeping() -> bool:
        assert slurm3.slurm_job_state(job) in {"PENDING", "CONFIGURING", "RUNNING"}
        now = host_processes(slurm3)
        return (
            sum(  # the two nodes the job got
                any(c.endswith("sleep 600") for c in commands(now[h.name] - baseline[h.name]))
                for h in slurm3.hosts
            )
            == 2
        )

    wait_or_fail(sleeping, what=f"job {job}'s sleep on two nodes")
    slurm3.slurm_cmd("scancel", job)
    wait_or_fail(lambda: host_processes(slurm3) == baseline, what=f"job {job}'s processes to end")
    # slurmctld may still say COMPLETING for a moment after the last process ended
    assert slurm3.slurm_wait_job(job) == "CANCELLED"
    slurm3.slurm_wait_idle()


# --------------------------------------------------------------------- up and down


@pytest.mark.lab
def test_cli_up_slurm_then_down_from_another_process_leaves_nothing() -> None:
    require_slurm()
    before = snapshot()
    name = f"slurmcli{os.getpid() % 10000}"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tests.lab", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
            check=False,
        )

    index, daemons = None, []
    up = cli("up", "--hosts", "2", "--slurm", "--name", name)
    try:
        assert up.returncode == 0, up.stderr
        assert "slurm:" in up.stdout and "SLURM_CONF=" in up.stdout
        row = next(s for s in json.loads(cli("status", "--json").stdout) if s["name"] == name)
        index = row["index"]
        assert row["slurm_running"] == 4  # munged, slurmctld, two slurmd
        lab = Lab.load(name)
        assert lab.slurm and lab.slurm_node_states() == {n: "idle" for n in lab.slurm_nodes}
        daemons = [pid for _, _, pid in lab._slurm_daemons()]
        assert all(harness._pid_alive(pid) for pid in daemons)
    finally:
        down = cli("down", "--name", name)
    assert down.returncode == 0, down.stderr
    assert not [pid for pid in daemons if harness._pid_alive(pid)]
    assert not lab_processes(str(harness.state_root() / name))
    assert_restored(before, snapshot(), index, name)


@pytest.mark.lab
def test_failed_slurmd_in_up_removes_every_daemon(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    require_slurm()
    before = snapshot()
    real = slurm._slurm_binary("slurmd")
    broken = tmp_path / "slurmd"
    broken.write_text(
        "#!/bin/sh\n"
        'case "$*" in *-node02*) echo "injected: slurmd of node02 fails" >&2; exit 3;; esac\n'
        f'exec {real} "$@"\n'
    )
    broken.chmod(0o755)
    real_binary = slurm._slurm_binary
    monkeypatch.setattr(
        slurm, "_slurm_binary", lambda n: str(broken) if n == "slurmd" else real_binary(n)
    )
    started: list[int] = []
    real_start = Lab._slurm_start

    def spy(self: Lab, *args: object, **kwargs: object) -> int:
        pid = real_start(self, *args, **kwargs)  # type: ignore[arg-type]
        started.append(pid)
        return pid

    monkeypatch.setattr(Lab, "_slurm_start", spy)
    lab = Lab(3, slurm=True)
    with pytest.raises(LabError, match=r"slurmd of .*-node02 .*injected: slurmd of node02 fails"):
        lab.up()
    assert len(started) == 5  # munged, slurmctld and the three slurmd were started
    assert not [pid for pid in started if harness._pid_alive(pid)]
    assert not lab_processes(str(lab.state_dir))
    assert not lab.state_dir.exists()
    assert_restored(before, snapshot(), lab.index, lab.name)


@pytest.mark.lab
def test_down_stops_slurmd_then_slurmctld_then_munged_each_on_term(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_slurm()
    lab = Lab(2, slurm=True)
    signals: list[tuple[int, int]] = []
    real_kill = os.kill

    def spy(pid: int, sig: int) -> None:
        signals.append((pid, sig))
        real_kill(pid, sig)

    try:
        lab.up()
        pids = lab.slurm_pids()
        slurmd = set(pids["slurmd"].values())
        monkeypatch.setattr(slurm.os, "kill", spy)
    finally:
        lab.down()
    daemons = [*slurmd, pids["slurmctld"], pids["munged"]]
    to_daemons = [(pid, sig) for pid, sig in signals if pid in daemons]
    assert to_daemons[:2] and {pid for pid, _ in to_daemons[:2]} == slurmd
    assert to_daemons[2:] == [(pids["slurmctld"], signal.SIGTERM), (pids["munged"], signal.SIGTERM)]
    assert all(sig == signal.SIGTERM for _, sig in to_daemons)  # none needed a SIGKILL
    assert not [pid for pid in daemons if harness._pid_alive(pid)]
