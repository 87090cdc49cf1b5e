# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""torch.distributed's init methods across two lab hosts: file:// and tcp://, one rank per host.

env:// is what the playbook's launch uses (torchrun, static rendezvous): every other lab test
of the whole playbook runs it. Here files/nccl_check.py runs on each host as a user would run
it by hand (one command per rank, no torchrun), in that host's network namespace, so the ranks
reach each other only over the lab fabric; GLOO_SOCKET_IFNAME names each host's fabric link.

file://: as an NFS mount on a real cluster, one shared directory is bound at the same path into
each host's own mount namespace (`ip netns exec` gives every command one): the rank binds it
before it starts, so the rendezvous file and the results reach the other host only through
the two binds; the mount point itself stays empty outside them. Both are removed afterwards.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.check.support import FAST, SCRIPT, env, records
from tests.lab.harness import Lab

pytestmark = pytest.mark.lab
TIMEOUT_S = 30
# A short run: the collectives that cross the link, no bandwidth sweep beyond 4 KiB.
TESTS = "all_reduce_sum,broadcast,all_gather,reduce_scatter,all_to_all,send_recv,barrier"


# In the host's mount namespace: bind $1 at $2, then run the rest.
BIND_THEN_RUN = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'


def run_two_ranks(
    lab: Lab, init_method: str, out_dir: Path, bind: tuple[Path, Path] | None = None
) -> list[subprocess.Popen[str]]:
    procs = []
    for rank, host in enumerate(lab.hosts[:2]):
        argv = [lab.python, str(SCRIPT), "--init-method", init_method, "--rank", str(rank)]
        argv += ["--world-size", "2", "--out-dir", str(out_dir), "--timeout", str(TIMEOUT_S)]
        argv += ["--tests", f"{TESTS},bandwidth_all_reduce", *FAST]
        if bind is not None:
            argv = ["sh", "-c", BIND_THEN_RUN, "sh", str(bind[0]), str(bind[1]), *argv]
        host_env = {**env(), "GLOO_SOCKET_IFNAME": host.fabric_ifname}
        procs.append(
            lab.popen(
                host,
                argv,
                env=host_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    return procs


@pytest.mark.parametrize("scheme", ["file", "tcp"])
def test_two_hosts_meet_through_the_init_method(lab2: Lab, scheme: str) -> None:
    shared = Path(tempfile.mkdtemp(prefix="nccl-preflight-init-"))
    mount_point = Path(tempfile.mkdtemp(prefix="nccl-preflight-mnt-"))
    try:
        bind = None
        if scheme == "file":  # both hosts see `shared` at mount_point, through their own bind
            bind, init = (shared, mount_point), f"file://{mount_point}/rendezvous"
            out_dir = mount_point / "out"
        else:  # rank 0 serves the store on its fabric address
            init, out_dir = f"tcp://{lab2.hosts[0].fabric_addr}:29531", shared / "out"
        procs = run_two_ranks(lab2, init, out_dir, bind)
        outputs = []
        for proc in procs:
            stdout, _ = proc.communicate(timeout=150)
            outputs.append(f"rc={proc.returncode}\n{stdout}")
        assert all(p.returncode == 0 for p in procs), "\n".join(outputs)

        if bind is not None:  # what the ranks wrote went through the binds, not beside them
            assert list(mount_point.iterdir()) == []
        recs = records(shared / "out")
        assert sorted(recs) == [0, 1]
        hostnames = {recs[r]["host"] for r in recs}
        assert hostnames == {h.hostname for h in lab2.hosts[:2]}  # two hosts, not one
        for rec in recs.values():
            assert rec["status"] == "passed" and rec["backend"] == "gloo"
            assert rec["env"]["GLOO_SOCKET_IFNAME"] in {h.fabric_ifname for h in lab2.hosts}
            statuses = {t["name"]: t["status"] for t in rec["tests"]}
            assert set(statuses.values()) == {"passed"}, statuses
            assert "send_recv" in statuses and "bandwidth_all_reduce" in statuses
    finally:
        shutil.rmtree(shared, ignore_errors=True)
        shutil.rmtree(mount_point, ignore_errors=True)
