# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight observation (src/nccl_preflight/core/preflight/observation.py).

Each case is checked twice: against the values a reader expects, and against the 18-key
set_fact the filter replaced in roles/preflight/tasks/main.yml (kept below as the reference,
rendered by Ansible's own templar), so the verdicts read the same observation as before.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from nccl_preflight.core.preflight.observation import CHECK_MODE_SKIP, nccl_preflight_observation

ROOT = Path(__file__).resolve().parents[4]

# The set_fact "Gather what this host showed into one observation" before the filter.
REFERENCE = r"""
facts: "{{ ansible_facts.nccl | default({}) }}"
ifname: "{{ nccl_env_ifname | default('') }}"
ifname_reason: "{{ nccl_env_ifname_reason | default('') }}"
address: "{{ nccl_env_address | default('') }}"
master_addr: "{{ nccl_env_master_addr | default('') }}"
master_port: "{{ nccl_env_master_port | int }}"
nproc_per_node: "{{ nccl_env_nproc_per_node | int }}"
backend: "{{ nccl_env_backend | default('') }}"
python: "{{ nccl_env_python | default('') }}"
port_owner: "{{ preflight_listen.port_owner | default({}) }}"
run_lock: "{{ preflight_listen.lock | default({}) }}"
listeners: >-
  {{ preflight_listen_stop if preflight_listen_stop.listeners | default([]) | length > 0
     else preflight_listen if preflight_listen.listeners is defined else {} }}
probes: "{{ preflight_probe.results | default([]) }}"
probe_skip: >-
  {{ preflight_probe_plan.skip if not ansible_check_mode else
     {'master': 'check mode: no listener is started, so nothing to connect to',
      'ring': 'check mode: no listener is started, so nothing to connect to'} }}
firewall: "{{ preflight_probe.firewall | default({}) if preflight_probe is succeeded else {} }}"
firewall_skip: >-
  {{ preflight_probe.msg | default('the probe and firewall read failed')
     if preflight_probe is failed
     else '' if preflight_probe.firewall | default({}) else 'no fabric address' }}
python_facts: >-
  {{ preflight_listen_stop.python | default(preflight_listen.python)
     | default({'executable': nccl_env_python | default(''),
                'reason': 'the torch probe gave no result: '
                          ~ preflight_listen_stop.msg | default('the listeners did not stop')}) }}
clock: >-
  {{ preflight_listen_stop.clock | float
     if preflight_clock_check | bool and preflight_listen_stop.clock is defined else none }}
"""

FACTS = {"hostname": "node1", "interfaces": {"fab0": {"state": "up", "mtu": 9000}}}
ENV = {
    "ifname": "fab0",
    "ifname_reason": "",
    "address": "10.0.0.1",
    "master_addr": "10.0.0.1",
    "master_port": "29500",
    "nproc_per_node": "2",
    "backend": "gloo",
    "python": "/usr/bin/python3",
}
PYTHON = {"executable": "/usr/bin/python3", "torch_version": "2.13.0", "reason": ""}
STARTED = {
    "changed": True,
    "port_owner": {"free": True, "listeners": []},
    "lock": {"path": "/tmp/x.lock", "refused": False, "took_over": False, "message": ""},
    "listeners": {"master": {"port": 29500, "error": ""}},
}
PROBE = {
    "changed": False,
    "results": [{"name": "ring", "target": "10.0.0.2", "port": 40001, "ok": True}],
    "firewall": {"findings": [], "tools": ["iptables"]},
}
STOPPED = {
    "changed": True,
    "listeners": [{"name": "master", "address": "10.0.0.1", "port": 29500, "accepted": []}],
    "timed_out": False,
    "python": PYTHON,
    "clock": 1763870000.25,
}
PLAN_SKIP = {"master": "", "ring": "no ring predecessor"}


def reference(case: dict[str, Any]) -> dict[str, Any]:
    """What the old set_fact gave for the same registered results (None = not registered)."""
    env = case.get("env", ENV)
    variables = {
        "ansible_check_mode": case.get("check_mode", False),
        "preflight_clock_check": case.get("clock_check", True),
        "preflight_probe_plan": {"targets": [], "skip": PLAN_SKIP},
        "preflight_listen": case["started"],
        "preflight_probe": case["probe"],
        "preflight_listen_stop": case["stopped"],
        **{f"nccl_env_{key}": value for key, value in env.items()},
    }
    if case.get("facts") is not None:
        variables["ansible_facts"] = {"nccl": case["facts"]}
    templar = Templar(loader=DataLoader(), variables=copy.deepcopy(variables))
    template = {k: trust_as_template(v) for k, v in yaml.safe_load(REFERENCE).items()}
    return templar.template(template)


def observe(case: dict[str, Any]) -> dict[str, Any]:
    return nccl_preflight_observation(
        case.get("facts"),
        env=case.get("env", ENV),
        started=case["started"],
        probe=case["probe"],
        stopped=case["stopped"],
        probe_skip=PLAN_SKIP,
        check_mode=case.get("check_mode", False),
        clock_check=case.get("clock_check", True),
    )


CASES = {
    "everything answered": {"facts": FACTS, "started": STARTED, "probe": PROBE, "stopped": STOPPED},
    "the stop call lost the listeners and torch": {
        "facts": FACTS,
        "started": {**STARTED, "python": {**PYTHON, "reason": "foreground"}},
        "probe": PROBE,
        "stopped": {"changed": False, "listeners": [], "timed_out": True},
    },
    "every call failed": {
        "facts": None,
        "env": {**dict.fromkeys(ENV, ""), "python": "/opt/py/bin/python", "master_port": "x"},
        "started": {"failed": True, "msg": "cannot bind"},
        "probe": {"failed": True, "msg": "probe blew up"},
        "stopped": {"failed": True, "msg": "no listener process"},
    },
    "a failure without a message, the probe skipped, no clock check": {
        "facts": FACTS,
        "started": {"changed": False},
        "probe": {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"},
        "stopped": {"failed": True, "clock": 1.5},
        "clock_check": False,
    },
    "check mode": {
        "facts": FACTS,
        "started": {"changed": False, "msg": "would start", "python": PYTHON},
        "probe": {"changed": False, "results": [], "firewall": {}},
        "stopped": {"changed": False},
        "check_mode": True,
    },
    "a failed probe without a message": {
        "facts": FACTS,
        "started": STARTED,
        "probe": {"failed": True, "firewall": {"findings": ["x"]}},
        "stopped": STOPPED,
    },
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_same_observation_as_the_set_fact_it_replaced(name: str) -> None:
    case = CASES[name]
    assert observe(case) == reference(case)


def test_everything_answered() -> None:
    obs = observe(CASES["everything answered"])
    assert obs["facts"] is FACTS
    assert (obs["ifname"], obs["address"], obs["master_port"], obs["nproc_per_node"]) == (
        "fab0",
        "10.0.0.1",
        29500,
        2,
    )
    assert obs["port_owner"] == {"free": True, "listeners": []}
    assert obs["run_lock"]["path"] == "/tmp/x.lock"
    assert obs["listeners"] is STOPPED
    assert obs["probes"] == PROBE["results"]
    assert obs["probe_skip"] == PLAN_SKIP
    assert (obs["firewall"], obs["firewall_skip"]) == (PROBE["firewall"], "")
    assert obs["python_facts"] is PYTHON
    assert obs["clock"] == 1763870000.25


def test_what_is_left_when_the_stop_call_lost_the_listeners() -> None:
    case = CASES["the stop call lost the listeners and torch"]
    obs = observe(case)
    # At least the bind errors of the start call, and the torch it ran in the foreground.
    assert obs["listeners"] is case["started"]
    assert obs["python_facts"]["reason"] == "foreground"
    assert obs["clock"] is None


def test_every_call_failed_says_why() -> None:
    obs = observe(CASES["every call failed"])
    assert obs["facts"] == {} and obs["ifname"] == "" and obs["master_port"] == 0
    assert (obs["port_owner"], obs["run_lock"], obs["listeners"], obs["probes"]) == ({}, {}, {}, [])
    assert (obs["firewall"], obs["firewall_skip"]) == ({}, "probe blew up")
    assert obs["python_facts"] == {
        "executable": "/opt/py/bin/python",
        "reason": "the torch probe gave no result: no listener process",
    }


def test_check_mode_and_a_skipped_probe() -> None:
    obs = observe(CASES["check mode"])
    assert obs["probe_skip"] == {"master": CHECK_MODE_SKIP, "ring": CHECK_MODE_SKIP}
    assert obs["firewall_skip"] == "no fabric address"
    obs = observe(CASES["a failure without a message, the probe skipped, no clock check"])
    assert (obs["probes"], obs["firewall_skip"], obs["clock"]) == ([], "no fabric address", None)
    assert (
        obs["python_facts"]["reason"]
        == "the torch probe gave no result: the listeners did not stop"
    )


def test_the_role_builds_the_observation_with_the_filter() -> None:
    """One description of the keys: the filter's docstring, which names every key it returns."""
    from nccl_preflight.core.preflight import observation as nccl_observation

    tasks = yaml.safe_load((ROOT / "roles" / "preflight" / "tasks" / "main.yml").read_text())
    [task] = [t for t in tasks if t["name"] == "Gather what this host showed into one observation"]
    assert (
        "nccl_preflight_observation(" in task["ansible.builtin.set_fact"]["preflight_observation"]
    )
    doc = nccl_observation.__doc__
    described = {
        line.split()[0] for line in doc.splitlines() if line.startswith("    ") and line[4] != " "
    }
    assert described == set(observe(CASES["everything answered"]))
