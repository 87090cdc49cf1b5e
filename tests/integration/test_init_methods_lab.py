# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""torch.distributed's init methods across two lab hosts: file:// and tcp://, one rank per host.

env:// is what the playbook's launch uses (torchrun, static rendezvous): every other lab test
of the whole playbook runs it. Here files/nccl_check.py runs on each host as a user would run
it by hand (one command per rank, no torchrun), in that host's network namespace, so the ranks
reach each other only over the lab fabric; GLOO_SOCKET_IFNAME names each host's fabric link.

file://: the lab hosts are network namespaces of one machine and share its file system, so a
fresh temporary directory is a directory every host sees at the same path, as an NFS mount is
on a real cluster. It is removed afterwards.
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


def run_two_ranks(lab: Lab, init_method: str, out_dir: Path) -> list[subprocess.Popen[str]]:
    procs = []
    for rank, host in enumerate(lab.hosts[:2]):
        argv = [lab.python, str(SCRIPT), "--init-method", init_method, "--rank", str(rank)]
        argv += ["--world-size", "2", "--out-dir", str(out_dir), "--timeout", str(TIMEOUT_S)]
        argv += ["--tests", f"{TESTS},bandwidth_all_reduce", *FAST]
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
    try:
        if scheme == "file":
            init = f"file://{shared}/rendezvous"
        else:  # rank 0 serves the store on its fabric address
            init = f"tcp://{lab2.hosts[0].fabric_addr}:29531"
        out_dir = shared / "out"
        procs = run_two_ranks(lab2, init, out_dir)
        outputs = []
        for proc in procs:
            stdout, _ = proc.communicate(timeout=150)
            outputs.append(f"rc={proc.returncode}\n{stdout}")
        assert all(p.returncode == 0 for p in procs), "\n".join(outputs)

        recs = records(out_dir)
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
