# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Fabric faults on the multi-host lab (issue 13, part 5): the whole playbook over SSH.

The lab has no RDMA device; the faults are those a node can have without one, each on its own
host, in one playbook run (as tests/integration/test_preflight_lab.py groups them):

a) one host's sshd, and so every session and rank it starts, runs with memlock 64 KiB
   (`prlimit` on that sshd): `limits` fails on that host, naming the figure and the others';
b) `nccl_extra_env: {NCCL_IB_HCA: mlx5_9}`: `nccl_ib_hca` fails on every host, naming mlx5_9
   and the RDMA ports present (none);
c) an /etc/nccl.conf with NCCL_IB_DISABLE=1 seen by one host's sessions only (`ip netns exec`
   binds /etc/netns/<ns>/nccl.conf over /etc/nccl.conf for the sshd it starts): `nccl_config`
   fails on that host only.

The pre-flight sees all three before torch starts; the launch is then skipped and the play fails.
Two healthy runs follow: the ranks' NCCL_DEBUG settings and skipped `transport` testcases on gloo,
and the NCCL logs' way back through the launch (with a stand-in writing a transcribed NCCL log
where NCCL would, since the lab's torch has no NCCL).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from nccl_preflight.core.junit import host_label
from tests.jenkins_schema import validate_report_junit
from tests.lab.harness import NETNS_DIR, Lab

pytestmark = pytest.mark.lab

PLAYBOOK = "playbooks/validate.yml"
MEMLOCK = 65536


def memlock_of(pid: int) -> str:
    """'soft:hard' of a process's RLIMIT_MEMLOCK, as prlimit takes it back."""
    out = subprocess.run(
        ["prlimit", "--pid", str(pid), "--memlock", "--raw", "--noheadings", "-o", "SOFT,HARD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return f"{out[0]}:{out[1]}"


@pytest.fixture
def faulty_lab(lab2: Lab) -> Iterator[Lab]:
    """lab2 with a) on hosts[1] and c) on hosts[0]; everything undone afterwards."""
    low, conf_host = lab2.hosts[1], lab2.hosts[0]
    sshd = lab2.sshd_pid(low)
    assert memlock_of(sshd) != f"{MEMLOCK}:{MEMLOCK}"
    placeholder = Path("/etc/nccl.conf")
    made_placeholder = not placeholder.exists()
    netns_conf = NETNS_DIR / conf_host.netns / "nccl.conf"
    try:
        subprocess.run(
            ["prlimit", "--pid", str(sshd), f"--memlock={MEMLOCK}:{MEMLOCK}"], check=True
        )
        if made_placeholder:
            # `ip netns exec` binds /etc/netns/<ns>/X over /etc/X only when /etc/X exists.
            placeholder.write_text("")
        netns_conf.write_text("NCCL_IB_DISABLE=1\n")
        _restart_sshd(lab2, conf_host)
        # Ansible's SSH masters (ControlPersist) opened before the faults would bypass them.
        _close_ssh_masters(lab2)
        yield lab2
    finally:
        netns_conf.unlink(missing_ok=True)
        if made_placeholder:
            placeholder.unlink(missing_ok=True)
        # A fresh sshd for both hosts: the bind of nccl.conf lives in the old sshd's mount
        # namespace, and a lowered hard memlock cannot be raised again without CAP_SYS_RESOURCE.
        for host in (conf_host, low):
            _restart_sshd(lab2, host)
        _close_ssh_masters(lab2)


def _close_ssh_masters(lab: Lab) -> None:
    """End every persisted SSH master connection to the lab's hosts (later sessions are new)."""
    for sock in (lab.state_dir / "ssh" / "cp").glob("*"):
        subprocess.run(["ssh", "-S", str(sock), "-O", "exit", "lab"], capture_output=True)


def _restart_sshd(lab: Lab, host) -> None:
    pid = lab.sshd_pid(host)
    if _alive(pid):
        lab.kill(host, pid)
        _wait_gone(lab, host)
    lab.restart_sshd(host)


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and "zombie" not in _status(pid)


def _status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"


def _wait_gone(lab: Lab, host) -> None:
    pid = lab.sshd_pid(host)
    for _ in range(100):
        if not _alive(pid):
            return
        time.sleep(0.05)
    raise AssertionError(f"sshd {pid} of {host} did not exit")


def test_memlock_ib_hca_and_nccl_conf_faults_are_named_before_torch_starts(
    faulty_lab: Lab, tmp_path: Path
) -> None:
    lab = faulty_lab
    run_id = f"fabric-{uuid.uuid4().hex[:8]}"
    try:
        proc = lab.ansible_playbook(
            PLAYBOOK,
            "-e",
            f"nccl_run_id={run_id}",
            "-e",
            f"nccl_report_root={tmp_path}",
            "-e",
            json.dumps({"nccl_extra_env": {"NCCL_IB_HCA": "mlx5_9"}}),
            timeout=420,
        )
    finally:
        for h in lab.hosts:
            shutil.rmtree(f"/tmp/nccl-preflight-{run_id}-{h.inventory_name}", True)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    names = [h.inventory_name for h in lab.hosts]
    results = {
        h: {
            r["check"]: r
            for r in json.loads((tmp_path / run_id / "preflight" / f"{h}.json").read_text())[
                "results"
            ]
        }
        for h in names
    }
    conf_host, low = names

    # a) memlock: the host whose sshd runs with 64 KiB, and only that one
    limits = results[low]["limits"]
    assert limits["status"] == "failed", limits
    assert f"{low}: memlock (ulimit -l) is 64 KiB, lower than the other hosts'" in limits["message"]
    assert results[conf_host]["limits"]["status"] == "passed"

    # b) NCCL_IB_HCA names a device no host has
    for host in names:
        hca = results[host]["nccl_ib_hca"]
        assert hca["status"] == "failed", hca
        assert f"{host}: NCCL_IB_HCA=mlx5_9 (from nccl_extra_env)" in hca["message"]
        assert "mlx5_9 does not exist" in hca["message"]
        assert "RDMA ports present: none" in hca["message"]

    # c) /etc/nccl.conf with NCCL_IB_DISABLE=1 on one host only
    conf = results[conf_host]["nccl_config"]
    assert conf["status"] == "failed", conf
    assert (
        "NCCL_IB_DISABLE=1 from /etc/nccl.conf differs from the other hosts (unset)"
        in (conf["message"])
    )
    assert results[low]["nccl_config"]["status"] == "passed"
    assert "NCCL_IB_DISABLE" not in results[low]["nccl_config"]["message"]

    # no RDMA here: the RDMA checks say so instead of passing
    assert results[low]["rdma"]["status"] == "skipped"
    assert results[low]["gpudirect"]["status"] == "skipped"

    # named in the output the user reads, and in the JUnit
    assert "[limits]" in output and "64 KiB" in output
    assert "[nccl_ib_hca]" in output and "[nccl_config]" in output
    report = tmp_path / run_id
    validate_report_junit(report)
    cases = {
        (s.get("name"), c.get("name")): c
        for s in ET.parse(report / "junit.xml").getroot().iter("testsuite")
        for c in s.iter("testcase")
    }
    low_suite, conf_suite = (f"preflight.{host_label(h)}" for h in (low, conf_host))
    assert cases[(low_suite, "limits")].find("failure") is not None
    assert cases[(conf_suite, "nccl_config")].find("failure") is not None
    assert cases[(conf_suite, "nccl_ib_hca")].find("failure") is not None
    # the launch did not start: nothing of torch ran
    plan = json.loads((report / "plan.json").read_text())
    assert "the pre-flight failed" in plan["launch_skipped"]
    assert [h["expect_net"]["network"] for h in plan["hosts"]] == ["socket", "socket"]


def test_ranks_get_the_nccl_debug_file_and_gloo_ranks_say_why_no_transport(
    lab2: Lab, tmp_path: Path
) -> None:
    """A healthy run: every rank sees NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS and its own
    NCCL_DEBUG_FILE in the run directory; with gloo (no NCCL in the lab's torch) every rank's
    `transport` testcase is skipped with the reason and summary.md says it per host."""
    run_id = f"fabric-{uuid.uuid4().hex[:8]}"
    quick = ["--max-bytes", "16K", "--iters", "2", "--warmup", "1"]
    variables = {
        "nccl_run_id": run_id,
        "nccl_report_root": str(tmp_path),
        "nccl_check_args": quick,
        "nccl_run_timeout": 120,
    }
    try:
        proc = lab2.ansible_playbook(PLAYBOOK, "-e", json.dumps(variables), timeout=600)
    finally:
        for h in lab2.hosts:
            shutil.rmtree(f"/tmp/nccl-preflight-{run_id}-{h.inventory_name}", True)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    report = tmp_path / run_id
    validate_report_junit(report)
    for rank, host in enumerate(lab2.hosts):
        doc = json.loads((report / host.inventory_name / f"rank-{rank}.json").read_text())
        env = doc["env"]
        assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_DEBUG_SUBSYS"] == "INIT,NET,GRAPH"
        assert env["NCCL_DEBUG_FILE"] == (
            f"/tmp/nccl-preflight-{run_id}-{host.inventory_name}/results/nccl.%p.log"
        )
        suite = next(
            s for s in ET.parse(report / "junit" / f"rank-{rank}.xml").getroot().iter("testsuite")
        )
        [transport] = [c for c in suite.iter("testcase") if c.get("name") == "transport"]
        assert transport.find("skipped").get("message") == (
            f"rank {rank} on {host.inventory_name} ran the gloo backend: NCCL is not used"
        )
    summary = (report / "summary.md").read_text()
    assert "Transport (what NCCL used, from its INFO log):" in summary
    for rank, host in enumerate(lab2.hosts):
        assert f"- {host.inventory_name}: rank {rank} on {host.inventory_name} ran the gloo" in (
            summary
        )
    plan = json.loads((report / "plan.json").read_text())
    assert plan["hosts"][0]["expect_net"]["network"] == "socket"
    assert "no RDMA device" in plan["hosts"][0]["expect_net"]["reason"]


STAND_IN = """\
# A stand-in for NCCL's NCCL_DEBUG_FILE writer (the lab's torch has no NCCL): writes a transcribed
# NCCL log where NCCL would (%h hostname, %p pid of this rank process), then runs the real check.
import os, runpy, socket, sys
target = os.environ["NCCL_DEBUG_FILE"].replace("%h", socket.gethostname())
with open(target.replace("%p", str(os.getpid())), "w") as out, open({fixture!r}) as src:
    out.write(src.read())
sys.argv[0] = {check!r}
sys.path.insert(0, os.path.dirname({check!r}))  # its modules beside it (files/nccl_check_*.py)
runpy.run_path({check!r}, run_name="__main__")
"""


def test_each_rank_nccl_log_comes_back_named_by_its_rank(lab2: Lab, tmp_path: Path) -> None:
    """The path of the NCCL logs through the whole playbook: NCCL_DEBUG_FILE in the rank's
    environment, the file at the pid NCCL expands, the collect naming it by rank, the report."""
    root = Path(__file__).resolve().parents[2]
    fixture = root / "tests" / "fixtures" / "nccl_logs" / "roce-dgxh100.log"
    script = tmp_path / "stand_in.py"
    script.write_text(
        STAND_IN.format(fixture=str(fixture), check=str(root / "files" / "nccl_check.py"))
    )
    run_id = f"fabric-{uuid.uuid4().hex[:8]}"
    variables = {
        "nccl_run_id": run_id,
        "nccl_report_root": str(tmp_path / "reports"),
        "nccl_check_args": ["--max-bytes", "16K", "--iters", "2", "--warmup", "1"],
        "nccl_run_timeout": 120,
        "nccl_slots": 2,
        "launch_script": str(script),
    }
    try:
        proc = lab2.ansible_playbook(
            PLAYBOOK, "--tags", "launch", "-e", json.dumps(variables), timeout=600
        )
    finally:
        for h in lab2.hosts:
            shutil.rmtree(f"/tmp/nccl-preflight-{run_id}-{h.inventory_name}", True)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    report = tmp_path / "reports" / run_id
    for node, host in enumerate(lab2.hosts):
        names = sorted(p.name for p in (report / host.inventory_name).glob("nccl-*.log"))
        assert names == [f"nccl-rank-{2 * node}.log", f"nccl-rank-{2 * node + 1}.log"]
        for name in names:
            assert (report / host.inventory_name / name).read_text() == fixture.read_text()
    validate_report_junit(report)
    # gloo ranks: the log came back, the backend says NCCL carried nothing
    root_el = ET.parse(report / "junit" / "rank-3.xml").getroot()
    [case] = [c for c in root_el.iter("testcase") if c.get("name") == "transport"]
    assert "ran the gloo backend" in case.find("skipped").get("message")
