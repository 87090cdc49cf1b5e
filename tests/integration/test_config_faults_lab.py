"""Configuration faults on the lab, the whole playbook each time: they end fast, are named by
their cause in the output and the JUnit, and leave nothing on the hosts.

- a fabric CIDR or an interface that matches nothing stops the run at the environment stage;
- a second validation of the same master and port is refused at the pre-flight;
- ``--check`` is a dry run.
"""

from __future__ import annotations

import json
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ansible.module_utils.nccl_junit import host_label

from tests.jenkins_schema import validate_report_junit
from tests.lab.harness import Lab

pytestmark = pytest.mark.lab

SMALL_CHECK = {"nccl_check_args": ["--max-bytes", "65536", "--iters", "2", "--warmup", "1"]}


def validate(lab: Lab, report_root: Path, run_id: str, *args: str, **variables: object):
    values = {
        "nccl_run_id": run_id,
        "nccl_report_root": str(report_root),
        "nccl_run_timeout": 60,
        **SMALL_CHECK,
        **variables,
    }
    return lab.ansible_playbook(
        "playbooks/validate.yml",
        "-e",
        json.dumps(values),
        *args,
        env={"ANSIBLE_NOCOLOR": "1"},
        timeout=400,
    )


def junit_cases(junit: Path) -> dict[tuple[str, str], ET.Element]:
    root = ET.parse(junit).getroot()
    return {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}


def left_on_hosts(lab: Lab, run_id: str) -> list[str]:
    """What this run left on the lab's hosts: run directories (the hosts share this machine's
    /tmp) and processes whose command line names the run."""
    left = [str(p) for p in Path("/tmp").glob(f"nccl-preflight-{run_id}-*")]
    for host in lab.hosts:
        ps = lab.run(host, ["ps", "-eo", "pid=,args="], check=False).stdout
        left += [f"{host.inventory_name}: {line}" for line in ps.splitlines() if run_id in line]
    return left


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
    assert output.count("skipping: no hosts matched") == 3  # pre-flight, launch, clean-up
    assert "Run the whole" not in output and "--tags launch" not in output

    report_dir = tmp_path / run_id
    cases = junit_cases(report_dir / "junit.xml")
    for host in lab2.hosts:
        error = cases[(f"preflight.{host_label(host.inventory_name)}", "environment")].find("error")
        assert error is not None, sorted(cases)
        assert named in error.get("message", "")
        assert host.fabric_addr in error.get("message", "")
    assert not any(c.startswith("nccl.") for c, _ in cases), sorted(cases)
    validate_report_junit(report_dir)
    assert left_on_hosts(lab2, run_id) == []
