# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Pre-flight checks on the multi-host lab: real ansible-playbook over SSH, `--tags preflight`.

A healthy 2-node and 4-node lab pass every check. Independent faults are grouped, each on its own
host, into one playbook run per lab; the assertions read what a user reads: the exit status, the
printed failures grouped by host, and reports/<run-id>/preflight/<host>.json.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab.harness import Lab, LabHost

pytestmark = pytest.mark.lab

PLAYBOOK = "playbooks/validate.yml"
MASTER_PORT = 29500


class Run:
    """One `validate.yml --tags preflight` run and what it left on the control machine."""

    def __init__(self, lab: Lab, inventory: Path, report_root: Path, *extra: str) -> None:
        self.run_id = f"pftest-{uuid.uuid4().hex[:8]}"
        self.lab = lab
        # ansible_playbook() passes the lab's own inventory; a second -i adds the private copy's
        # host_vars on top (same hosts, same group_vars).
        extra_inventory = ["-i", str(inventory)] if inventory != lab.inventory_dir else []
        try:
            self.proc = lab.ansible_playbook(
                PLAYBOOK,
                *extra_inventory,
                "--tags",
                "preflight",
                "-e",
                f"nccl_run_id={self.run_id}",
                "-e",
                f"nccl_report_root={report_root}",
                *extra,
                timeout=240,
            )
        finally:
            # A failed pre-flight ends the play before the clean-up play: remove the run dirs.
            run_dirs = [
                Path(f"/tmp/nccl-preflight-{self.run_id}-{h.inventory_name}") for h in lab.hosts
            ]
            self.leftover_run_dirs = [d for d in run_dirs if d.exists()]
            for d in run_dirs:
                shutil.rmtree(d, True)
        self.output = self.proc.stdout + self.proc.stderr
        self.results: dict[str, dict[str, dict]] = {}
        for h in lab.hosts:
            path = report_root / self.run_id / "preflight" / f"{h.inventory_name}.json"
            data = json.loads(path.read_text())
            assert data["host"] == h.inventory_name
            self.results[h.inventory_name] = {r["check"]: r for r in data["results"]}

    def result(self, host_index: int, check: str) -> dict:
        return self.results[self.lab.hosts[host_index].inventory_name][check]

    def failed(self) -> set[tuple[int, str]]:
        names = [h.inventory_name for h in self.lab.hosts]
        return {
            (names.index(host), check)
            for host, checks in self.results.items()
            for check, r in checks.items()
            if r["status"] == "failed"
        }


@pytest.fixture
def inventory_copy(tmp_path: Path) -> Iterator[callable]:
    """A private copy of a lab's inventory, so a test may add host_vars without touching the
    session-wide lab."""

    def make(lab: Lab, host_vars: dict[int, dict] | None = None) -> Path:
        inv = tmp_path / f"inventory-{lab.name}"
        shutil.copytree(lab.inventory_dir, inv)
        for index, values in (host_vars or {}).items():
            (inv / "host_vars").mkdir(exist_ok=True)
            path = inv / "host_vars" / f"{lab.hosts[index].inventory_name}.yml"
            path.write_text("---\n" + "".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items()))
        return inv

    yield make


def firewall_state(lab: Lab) -> list[str]:
    return [
        lab.run(h, ["iptables-save"]).stdout.split("\n", 1)[-1]
        + lab.run(h, ["nft", "list", "ruleset"]).stdout
        for h in lab.hosts
    ]


def listening_ports(lab: Lab, host: LabHost) -> set[int]:
    lines = lab.run(host, ["ss", "-tlnH"]).stdout.splitlines()
    return {int(line.split()[3].rsplit(":", 1)[1]) for line in lines if line.strip()}


def processes_holding(text: str) -> list[int]:
    """The pids with an open file whose path contains ``text``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            links = [os.readlink(fd) for fd in (proc / "fd").iterdir()]
        except (FileNotFoundError, ProcessLookupError, PermissionError):  # ended, or not ours
            continue
        if any(text in link for link in links):
            pids.append(int(proc.name))
    return pids


def ephemeral_range(lab: Lab, index: int) -> tuple[int, int]:
    lo, hi = lab.run(index, ["cat", "/proc/sys/net/ipv4/ip_local_port_range"]).stdout.split()
    return int(lo), int(hi)


@pytest.mark.parametrize("lab_name", ["lab2", "lab4"])
def test_healthy_lab_passes_every_check_and_changes_nothing(
    lab_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    lab: Lab = request.getfixturevalue(lab_name)
    async_dir = Path.home() / ".ansible_async"
    async_before = set(async_dir.iterdir()) if async_dir.exists() else set()
    firewalls_before = firewall_state(lab)

    run = Run(lab, lab.inventory_dir, tmp_path)

    assert run.proc.returncode == 0, run.output[-4000:]
    assert "Pre-flight failed" not in run.output
    assert run.failed() == set()
    n = len(lab.hosts)
    for i, h in enumerate(lab.hosts):
        checks = run.results[h.inventory_name]
        for name in (
            "interface",
            "mtu",
            "hostname",
            "master_addr",
            "tcp_master_port",
            "tcp_ring",
            "firewall",
            "versions",
        ):
            assert checks[name]["status"] == "passed", checks[name]
        assert checks["gpu"]["status"] == "skipped" and "gloo" in checks["gpu"]["message"]
        assert h.fabric_ifname in checks["interface"]["message"]
        neighbour = lab.hosts[(i + 1) % n]
        assert f"{neighbour.fabric_addr}:" in checks["tcp_ring"]["message"]
    assert run.result(0, "master_port_free")["status"] == "passed"
    # The checks only read: no firewall rule changed, no async job file outside the run dir
    # (other tests may run async jobs meanwhile: only ours would name this run).
    assert firewall_state(lab) == firewalls_before
    new_async = (set(async_dir.iterdir()) if async_dir.exists() else set()) - async_before
    assert [p for p in new_async if run.run_id in p.read_text(errors="replace")] == []
    assert run.leftover_run_dirs == []  # listeners' files lived in the run dir, removed at the end
    # No launch follows --tags preflight: the listeners' stop removed it, the clean-up play made
    # no call on the nodes.
    cleanup = run.output.split("TASK [Remove the run directory of this run on this node]")[1]
    cleanup = cleanup.split("TASK [")[0]
    assert cleanup.count("skipping:") == n and "changed:" not in cleanup, cleanup
    # The listeners did not outlive the run: nothing listens any more on the ports they held.
    for i, h in enumerate(lab.hosts):
        neighbour = lab.hosts[(i + 1) % n]
        ring_port = re.search(
            rf"{re.escape(neighbour.fabric_addr)}:(\d+)",
            run.results[h.inventory_name]["tcp_ring"]["message"],
        )
        assert ring_port, run.results[h.inventory_name]["tcp_ring"]
        held = {MASTER_PORT} if i == n - 1 else set()
        held.add(int(ring_port.group(1)))
        # the neighbour's ring port, and MASTER_PORT on the master (the neighbour of the last)
        assert listening_ports(lab, neighbour) & held == set()
    # ...and no process holds a file of this run (the listener's log) any more: the lab's hosts
    # share this machine's process table.
    assert processes_holding(run.run_id) == []


def test_faults_on_four_hosts_each_fail_naming_the_host_and_the_thing(
    lab4: Lab, inventory_copy, tmp_path: Path
) -> None:
    """node1 (master): DROP of MASTER_PORT; node2: DROP of its ephemeral range; node3: MTU 1400;
    node4: a Python whose torch reports 2.12.0, and a hostname resolving to 127.0.1.1."""
    hosts = lab4.hosts
    fake = lab4.fake_python(hosts[3], torch_version="2.12.0")
    inventory = inventory_copy(lab4, {3: {"nccl_python": fake}})
    node2_range = ephemeral_range(lab4, 1)
    hosts_text = lab4.default_hosts_text().replace(
        f"{hosts[3].fabric_addr}\t{hosts[3].hostname}", f"127.0.1.1\t{hosts[3].hostname}"
    )
    undo = [
        lab4.firewall_drop(hosts[0], MASTER_PORT),
        lab4.firewall_drop(hosts[1], node2_range),
        lab4.set_mtu(hosts[2], 1400),
        lab4.write_hosts_file(hosts[3], hosts_text),
    ]
    try:
        run = Run(lab4, inventory, tmp_path)
    finally:
        for u in reversed(undo):
            u()

    assert run.proc.returncode != 0
    names = [h.inventory_name for h in hosts]
    # Failures are printed grouped by host, each with its fix.
    assert "Pre-flight failed" in run.output
    for name in names:
        assert f"{name}: " in run.output and "check(s) failed" in run.output

    # node1: the firewall names the tool, the chain and the port; everybody's probe to it fails.
    fw = run.result(0, "firewall")
    assert fw["status"] == "failed"
    assert "iptables filter chain INPUT rule 1" in fw["message"] and "tcp/29500" in fw["message"]
    assert "MASTER_PORT" in fw["message"]
    assert f"iptables -I INPUT 1 -p tcp -s {hosts[1].fabric_addr}" in fw["hint"]
    for i in (1, 2, 3):
        probe = run.result(i, "tcp_master_port")
        assert probe["status"] == "failed", probe
        assert f"{names[0]} at {hosts[0].fabric_addr}:{MASTER_PORT}" in probe["message"]
        assert "timed out" in probe["message"] and "nc -zv" in probe["hint"]

    # node2: its ephemeral range is dropped; node1, its ring predecessor, cannot reach it.
    fw2 = run.result(1, "firewall")
    assert fw2["status"] == "failed"
    assert f"tcp/{node2_range[0]}-{node2_range[1]} (ephemeral range)" in fw2["message"]
    ring = run.result(0, "tcp_ring")
    assert (
        ring["status"] == "failed" and f"{names[1]} at {hosts[1].fabric_addr}:" in ring["message"]
    )
    # node2's own outgoing connections fail too: the replies come back to its ephemeral ports.
    own = run.result(1, "tcp_ring")
    assert (
        own["status"] == "failed" and "replies to this host's own ephemeral ports" in own["message"]
    )
    assert run.result(2, "tcp_ring")["status"] == "passed"  # node3 -> node4 is fine

    # node3: MTU 1400 while the others have 1500; only node3 fails.
    mtu = run.result(2, "mtu")
    assert mtu["status"] == "failed"
    assert f"MTU 1400 on {hosts[2].fabric_ifname}" in mtu["message"] and "(1500)" in mtu["message"]
    assert "mtu 1500" in mtu["hint"]
    assert all(run.result(i, "mtu")["status"] == "passed" for i in (0, 1, 3))

    # node4: torch 2.12.0 against the others' version, one message with the table host -> torch.
    versions = run.result(3, "versions")
    assert versions["status"] == "failed"
    assert "torch 2.12.0 differs" in versions["message"]
    for name in names:
        assert name in versions["message"]
    assert all(run.result(i, "versions")["status"] == "passed" for i in (0, 1, 2))
    hostname = run.result(3, "hostname")
    assert hostname["status"] == "failed" and "127.0.1.1" in hostname["message"]
    assert hosts[3].hostname in hostname["message"]

    # Nothing else failed: each fault names its own host and thing.
    expected = {
        (0, "firewall"),
        (1, "tcp_master_port"),
        (2, "tcp_master_port"),
        (3, "tcp_master_port"),
        (1, "firewall"),
        (0, "tcp_ring"),
        (1, "tcp_ring"),
        (2, "mtu"),
        (3, "versions"),
        (3, "hostname"),
    }
    # node1 probes its own MASTER_PORT through the same INPUT chain, so it fails too.
    assert run.failed() - {(0, "tcp_master_port")} == expected


def test_port_held_on_master(lab2: Lab, inventory_copy, tmp_path: Path) -> None:
    # An interface that does not exist stops the run at the environment stage, before the
    # pre-flight: tests/integration/test_config_faults_lab.py.
    hosts = lab2.hosts
    inventory = inventory_copy(lab2)
    held = lab2.hold_port(hosts[0], MASTER_PORT)
    try:
        # nccl_fail_on_error=false: the pre-flight prints its failures but leaves the verdict to
        # the report, which still writes the JUnit.
        run = Run(lab2, inventory, tmp_path, "-e", "nccl_fail_on_error=false")
    finally:
        held.release()

    assert run.proc.returncode == 0, run.output[-3000:]
    assert "Pre-flight failed:" in run.output and "check(s) failed" in run.output
    junit = tmp_path / run.run_id / "junit" / f"preflight-{hosts[0].inventory_name}.xml"
    assert "master_port_free" in junit.read_text()
    busy = run.result(0, "master_port_free")
    assert busy["status"] == "failed"
    assert f"MASTER_PORT {MASTER_PORT} is already in use by pid {held.pid}" in busy["message"]
    assert f"kill {held.pid}" in busy["hint"] and "nccl_master_port" in busy["hint"]

    # The busy port is reported once, on the master; nobody probes a foreign listener.
    assert run.result(1, "tcp_master_port")["status"] == "skipped"
