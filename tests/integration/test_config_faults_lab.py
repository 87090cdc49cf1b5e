# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Configuration faults on the lab, the whole playbook each time: they end fast, are named by
their cause in the output and the JUnit, and leave nothing on the hosts.

- a fabric CIDR or an interface that matches nothing stops the run at the environment stage;
- a second validation of the same master and port is refused at the pre-flight;
- ``--check`` is a dry run.
"""

from __future__ import annotations

import getpass
import json
import shutil
import socket
import subprocess
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from nccl_preflight.core.junit import host_label, safe_name
from tests.builders.lab_runs import junit_cases, left_on_hosts, validate
from tests.jenkins_schema import validate_report_junit
from tests.lab.harness import Lab
from tests.playbook_run import (
    ANSIBLE_PLAYBOOK,
    ansible_playbook,
    assert_plain_console,
    playbook_env,
)

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"nccl_fabric_cidr": "10.250.77.0/24"}, "nccl_fabric_cidr 10.250.77.0/24"),
        ({"nccl_fabric_cidr": "", "nccl_socket_ifname": "fabX9"}, "nccl_socket_ifname fabX9"),
    ],
    ids=["cidr", "ifname"],
)
def test_a_cidr_or_interface_that_matches_nothing_stops_at_the_environment_stage(
    lab2: Lab, tmp_path: Path, variables: dict, named: str
) -> None:
    run_id = f"envstop-{uuid.uuid4().hex[:8]}"
    result = validate(lab2, tmp_path, run_id, **variables)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "The environment of these hosts could not be worked out" in output
    assert named in output
    for host in lab2.hosts:
        # Each host's own addresses are named, so the right CIDR or name can be picked.
        assert f"{host.fabric_ifname} {host.fabric_addr}/" in output, output
    # Nothing past the environment stage ran, and no advice to run what was just run.
    assert "TASK [preflight :" not in output and "TASK [launch :" not in output
    # the pre-flight and launch play (nccl_env_ready); the one clean-up play
    # (nccl_env_ready:nccl_env_stopped, its role roles/cleanup) runs on these hosts to remove what
    # the facts call made.
    assert output.count("skipping: no hosts matched") == 1
    assert "TASK [cleanup : Remove the run directory of this run on this node]" in output
    assert "Run the whole" not in output and "--tags launch" not in output

    report_dir = tmp_path / run_id
    cases = junit_cases(report_dir / "junit.xml")
    for host in lab2.hosts:
        error = cases[(f"preflight.{host_label(host.inventory_name)}", "environment")].find("error")
        assert error is not None, sorted(cases)
        assert named in error.get("message", "")
        assert host.fabric_addr in error.get("message", "")
    # Every planned rank is in the JUnit (a Jenkins trend keeps its test count), as an error
    # that names the stage and the cause.
    ranks = {c: case.find("error") for (c, _), case in cases.items() if c.startswith("nccl.")}
    assert len(ranks) == len(lab2.hosts), sorted(cases)
    for error in ranks.values():
        assert error is not None and error.get("type") == "never started"
        message = error.get("message", "")
        assert "never started: the run stopped at the environment stage: " in message
        assert named in message
    verdict = json.loads((report_dir / "verdict.json").read_text())
    rank_findings = [f for f in verdict["findings"] if f["rank"] is not None]
    assert len(rank_findings) == len(lab2.hosts)
    assert all(f["consequence"] and f["cause"]["test"] == "environment" for f in rank_findings)
    validate_report_junit(report_dir)
    assert left_on_hosts(lab2, run_id) == []


def playbook_args(
    lab: Lab, report_root: Path, run_id: str, inventory: Path | None = None, **variables: object
) -> list[str]:
    """ansible-playbook's arguments for playbooks/validate.yml on ``inventory`` (the lab's)."""
    values = {"nccl_run_id": run_id, "nccl_report_root": str(report_root), **variables}
    inventory = inventory or lab.inventory_dir
    return ["-i", str(inventory), "playbooks/validate.yml", "-e", json.dumps(values)]


def lock_files(lab: Lab) -> list[Path]:
    """The run lock of the lab's master (the lab's hosts share this machine's /tmp)."""
    return list(Path("/tmp").glob(f"nccl-preflight-lock-{lab.hosts[0].fabric_addr}-*.json"))


def test_a_second_run_of_the_same_cluster_is_refused_naming_the_first(
    lab2: Lab, tmp_path: Path
) -> None:
    first_id = f"20261123T010203-{uuid.uuid4().hex[:6]}"
    second_id = f"lock2-{uuid.uuid4().hex[:8]}"
    # The first run: the full check (seconds of collectives), so it is still running when the
    # second one reaches its pre-flight.
    first = subprocess.Popen(
        [ANSIBLE_PLAYBOOK, *playbook_args(lab2, tmp_path, first_id, nccl_run_timeout=120)],
        cwd=ROOT,
        env=playbook_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not lock_files(lab2) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lock_files(lab2), "the first run never took its lock"
        second = validate(lab2, tmp_path, second_id)
        first_output, _ = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    output = second.stdout + second.stderr
    assert second.returncode == 2, output
    master = lab2.hosts[0].inventory_name
    for named in (first_id, "2026-11-23T01:02:03Z", socket.gethostname(), getpass.getuser()):
        assert named in output, named
    # Refused by the pre-flight's first call on the master, before any probe or launch; the time
    # to the verdict is the pre-flight's own (seconds on a quiet machine), never a launch timeout.
    refusal = output.index("another validation of this master and port is running")
    assert refusal < output.index("Connect over TCP") < output.index("TASK [launch :")
    assert f"never started: the run stopped at the pre-flight: {master} master_port_free" in output
    cases = junit_cases(tmp_path / second_id / "junit.xml")
    failure = cases[(f"preflight.{host_label(master)}", "master_port_free")].find("failure")
    assert failure is not None and first_id in failure.get("message", "")
    validate_report_junit(tmp_path / second_id)

    # The first run was not disturbed: it passed, with its own complete report.
    assert first.returncode == 0, first_output
    first_cases = junit_cases(tmp_path / first_id / "junit.xml")
    assert any(c.startswith("nccl.") for c, _ in first_cases)
    assert not [c for c in first_cases.values() if c.find("failure") is not None]
    validate_report_junit(tmp_path / first_id)
    assert left_on_hosts(lab2, first_id) == [] and left_on_hosts(lab2, second_id) == []
    assert lock_files(lab2) == []  # the first run's end freed it


def test_a_stale_lock_is_taken_over_and_said_so(lab2: Lab, tmp_path: Path) -> None:
    run_id = f"stale-{uuid.uuid4().hex[:8]}"
    lock = Path("/tmp") / f"nccl-preflight-lock-{lab2.hosts[0].fabric_addr}-29500.json"
    # What a run whose keeper was killed leaves: the record, and no flock on it.
    lock.write_text(
        json.dumps(
            {
                "run_id": "gone-run",
                "started_at": "2026-11-22T23:00:00Z",
                "control_host": "old-ctl",
                "control_user": "bob",
                "keeper_pid": 999999,
            }
        )
    )
    try:
        result = validate(lab2, tmp_path, run_id)
    finally:
        leftover = lock.exists()
        lock.unlink(missing_ok=True)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "took over the stale run lock" in output and "gone-run" in output and "bob" in output
    # What a passed check saw is in the host's own file (junit.xml is lean: issue 37).
    master = lab2.hosts[0].inventory_name
    cases = junit_cases(tmp_path / run_id / "junit" / f"preflight-{safe_name(master)}.xml")
    case = cases[(f"preflight.{host_label(master)}", "master_port_free")]
    assert "gone-run" in (case.findtext("system-out") or "")
    assert not leftover and left_on_hosts(lab2, run_id) == []


def test_check_mode_is_a_dry_run_that_passes_and_changes_nothing(lab2: Lab, tmp_path: Path) -> None:
    run_id = f"check-{uuid.uuid4().hex[:8]}"
    result = validate(lab2, tmp_path, run_id, "--check")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # Each step that would change a node says what it would do.
    master = lab2.hosts[0]
    assert f"check mode: would make the run directory /tmp/nccl-preflight-{run_id}-" in output
    assert f"listen on {master.fabric_addr}:29500 (master)" in output
    assert "take the run lock /tmp/nccl-preflight-lock-" in output
    assert "check mode: would start torchrun on all 2 nodes at once" in output
    assert "PASSED (check mode)" in output
    report_dir = tmp_path / run_id
    root = ET.parse(report_dir / "junit.xml").getroot()
    assert root.get("name", "").endswith("(check mode)")
    cases = junit_cases(report_dir / "junit.xml")
    for host in lab2.hosts:
        label = f"preflight.{host_label(host.inventory_name)}"
        # The read-only checks ran: interface, firewall and the torch versions (the probe ran in
        # the foreground, read only); the TCP probes need listeners, so they say why not.
        for check in ("interface", "firewall", "versions"):
            assert cases[(label, check)].find("skipped") is None, (label, check)
        skipped = cases[(label, "tcp_ring")].find("skipped")
        assert skipped is not None and "check mode" in skipped.get("message", "")
    assert not any(c.startswith("nccl.") for c, _ in cases)
    validate_report_junit(report_dir)
    assert left_on_hosts(lab2, run_id) == [] and lock_files(lab2) == []


def test_host_keys_are_checked_unless_the_inventory_turns_it_off(lab2: Lab, tmp_path: Path) -> None:
    """The shipped ansible.cfg checks host keys: the lab's inventory without its own 'off' is
    refused by an unknown key; after ssh-keyscan into known_hosts (README) the same run passes."""
    inventory = tmp_path / "inventory"
    shutil.copytree(lab2.inventory_dir, inventory)
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    values = yaml.safe_load((inventory / "group_vars" / "all.yml").read_text())
    assert values.pop("ansible_host_key_checking") is False
    # The lab's ssh options without its own "accept any key", checking against our known_hosts.
    words = values["ansible_ssh_common_args"].split()
    pairs = [words[i : i + 2] for i in range(0, len(words), 2)]  # ["-o", "X=y"], ["-F", "f"]
    # Not the lab's ControlPath either: an earlier test's open master connection would skip the
    # key exchange, and with it the check.
    dropped = ("StrictHostKeyChecking", "UserKnownHosts", "ControlPath")
    kept = [p for p in pairs if not p[1].startswith(dropped)]
    options = [*(w for p in kept for w in p), "-o", f"UserKnownHostsFile={known_hosts}"]
    options += ["-o", "ControlPath=none"]
    values["ansible_ssh_common_args"] = " ".join(options)
    (inventory / "group_vars" / "all.yml").write_text(yaml.safe_dump(values))
    run_id = f"hostkey-{uuid.uuid4().hex[:8]}"

    def facts_only() -> subprocess.CompletedProcess:
        return ansible_playbook(
            *playbook_args(lab2, tmp_path, run_id, inventory=inventory),
            "--tags",
            "facts",
            timeout=300,
        )

    refused = facts_only()
    output = refused.stdout + refused.stderr
    assert "Host key verification failed" in output, output
    assert "UNREACHABLE" in output
    scan = subprocess.run(
        ["ssh-keyscan", "-H", *(h.mgmt_addr for h in lab2.hosts)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    known_hosts.write_text(scan.stdout)
    trusted = facts_only()
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    assert "Host key verification failed" not in trusted.stdout


def test_an_interface_absent_on_one_host_stops_the_run_naming_that_host(
    lab2: Lab, tmp_path: Path
) -> None:
    inventory = tmp_path / "inventory"
    shutil.copytree(lab2.inventory_dir, inventory)
    bad = lab2.hosts[1]
    (inventory / "host_vars").mkdir()
    (inventory / "host_vars" / f"{bad.inventory_name}.yml").write_text(
        "---\nnccl_socket_ifname: enp9s0f3\n"
    )
    run_id = f"envone-{uuid.uuid4().hex[:8]}"
    result = ansible_playbook(
        *playbook_args(lab2, tmp_path, run_id, inventory=inventory, nccl_run_timeout=60),
        timeout=400,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    named = f"{bad.inventory_name}: interface enp9s0f3 does not exist on {bad.inventory_name}"
    assert named in output
    assert f"{bad.fabric_ifname} {bad.fabric_addr}/" in output  # what it has instead
    cases = junit_cases(tmp_path / run_id / "junit.xml")
    error = cases[(f"preflight.{host_label(bad.inventory_name)}", "environment")].find("error")
    assert error is not None and "enp9s0f3" in error.get("message", "")
    good = cases[(f"preflight.{host_label(lab2.hosts[0].inventory_name)}", "environment")]
    skipped = good.find("skipped")
    assert skipped is not None and bad.inventory_name in skipped.get("message", "")
    validate_report_junit(tmp_path / run_id)
    assert left_on_hosts(lab2, run_id) == []


def test_a_renamed_fabric_interface_is_named_in_the_fix(
    lab_factory: Callable[..., Lab], tmp_path: Path
) -> None:
    lab3 = lab_factory(3)
    third = lab3.hosts[2]
    run_id = f"envren-{uuid.uuid4().hex[:8]}"
    undo = lab3.rename_interface(third, "fabX")
    try:
        result = validate(
            lab3, tmp_path, run_id, nccl_fabric_cidr="", nccl_socket_ifname=third.fabric_ifname
        )
    finally:
        undo()
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    name = third.inventory_name
    assert f"{name}: interface {third.fabric_ifname} does not exist on {name}" in output
    assert f"fabX {third.fabric_addr}/24" in output  # what it has instead
    fix = f"set nccl_socket_ifname for {name} to fabX: the one interface of {name}"
    assert f"fix: {fix}" in output, output[-4000:]
    verdict = json.loads((tmp_path / run_id / "verdict.json").read_text())
    (finding,) = [f for f in verdict["findings"] if f["cause"] is None]
    assert finding["host"] == name and finding["fix"].startswith(fix), finding
    # The hosts whose interface was found get no finding of their own: every other finding is
    # a planned rank that never started, folded under the one cause.
    others = [f for f in verdict["findings"] if f is not finding]
    assert len(others) == 3 and all(f["cause"]["id"] == finding["id"] for f in others), others
    # The console's last word: the verdict, the failure with its fix, where the report is.
    lines = assert_plain_console(output, run_id, "FAILED")
    assert "Failures (1, plus 3 folded under their causes):" in lines, lines
    assert any(line.startswith(f"  1. {name} environment: {name}: ") for line in lines), lines
    assert f"     fix: {finding['fix']}" in lines, lines
    assert f"Report: {tmp_path / run_id / 'report.html'}" in lines, lines
    assert left_on_hosts(lab3, run_id) == []
