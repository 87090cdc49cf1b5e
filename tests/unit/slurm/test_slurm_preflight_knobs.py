# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight's own variables (roles/preflight/defaults/main.yml) under the Slurm front-end:
each one honoured with the Ansible path's meaning or refused with its reason (core/config.py
UNDER_SLURM, NOT_UNDER_SLURM, preflight_values), and the clock check on the Slurm path
(slurm/observe.py node_clocks, slurm/step.py RECEIVED)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from jinja2.nativetypes import NativeEnvironment

from bench.slurm_sizes import fake_nodes, started
from nccl_preflight.core.config import (
    NOT_UNDER_SLURM,
    UNDER_SLURM,
    ConfigError,
    load_config,
    preflight_values,
)
from nccl_preflight.core.preflight.judge import judge_preflight
from nccl_preflight.slurm import node_check, node_step, observe, step
from nccl_preflight.slurm.run import judge_settings
from nccl_preflight.slurm.ship import settings_of
from tests.playbook_run import ROOT

ROLE_DEFAULTS = yaml.safe_load((ROOT / "roles" / "preflight" / "defaults" / "main.yml").read_text())


def config_of(tmp_path: Path, text: str) -> dict[str, Any]:
    path = tmp_path / "nccl.yaml"
    path.write_text("nccl_fabric_cidr: 10.1.0.0/16\n" + text)
    return load_config(path)


def test_every_preflight_variable_is_either_honoured_or_refused_under_slurm() -> None:
    assert set(UNDER_SLURM) | set(NOT_UNDER_SLURM) == set(ROLE_DEFAULTS)
    assert not set(UNDER_SLURM) & set(NOT_UNDER_SLURM)


def test_a_variable_slurm_has_no_use_for_is_refused_with_file_line_and_why(
    tmp_path: Path,
) -> None:
    path = tmp_path / "nccl.yaml"
    path.write_text(
        "nccl_fabric_cidr: 10.1.0.0/16\npreflight_probe_timeout: 10\n"
        "preflight_lock_path: /tmp/lock\npreflight_become_firewall: true\n"
        "preflight_fail: false\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    lines = str(caught.value).splitlines()
    assert [line.split(": does not apply under Slurm: ")[0] for line in lines] == [
        f"{path}:3: preflight_lock_path",
        f"{path}:4: preflight_become_firewall",
        f"{path}:5: preflight_fail",
    ]
    assert "no lock file on the master" in lines[0]
    assert "never with become" in lines[1]
    assert "playbooks/validate.yml sets it false too" in lines[2]


def test_an_honoured_variable_is_still_validated_by_the_roles_argument_spec(
    tmp_path: Path,
) -> None:
    path = tmp_path / "nccl.yaml"
    path.write_text("preflight_probe_timeout: soon\npreflight_full_mesh: maybe\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).splitlines() == [
        f"{path}:1: preflight_probe_timeout: is 'soon', not a number",
        f"{path}:2: preflight_full_mesh: is 'maybe', not a boolean (true or false)",
    ]


@pytest.mark.parametrize(("nodes", "probe_timeout"), [(1, 3), (3, 10), (40, 2.5)])
def test_the_roles_jinja_defaults_are_worked_out_as_ansible_renders_them(
    tmp_path: Path, nodes: int, probe_timeout: float
) -> None:
    """preflight_values against the role's own expressions, rendered by Jinja with the values
    Ansible gives them (groups['nccl_nodes'], the probe timeout, nccl_expected_versions)."""
    config = config_of(
        tmp_path,
        f"preflight_probe_timeout: {probe_timeout}\nnccl_expected_versions: {{torch: 2.13.0}}\n",
    )
    context = {
        "groups": {"nccl_nodes": [f"n{i}" for i in range(nodes)]},
        **{k: v for k, v in config.items() if not k.startswith("preflight_")},
        "preflight_probe_timeout": probe_timeout,
    }
    env = NativeEnvironment()
    got = preflight_values(config, nodes)
    for name in (
        "preflight_listen_timeout",
        "preflight_collect_wait",
        "preflight_expected_versions",
    ):
        assert got[name] == env.from_string(ROLE_DEFAULTS[name]).render(context), name
    assert got["preflight_listen_timeout"] == 60 + 10 * nodes
    assert got["preflight_collect_wait"] == 2 + 2 * probe_timeout


def test_honoured_variables_reach_the_observe_step_and_the_judgement(tmp_path: Path) -> None:
    config = config_of(
        tmp_path,
        "preflight_probe_timeout: 10\npreflight_python_timeout: '90'\npreflight_full_mesh: yes\n"
        "preflight_listen_timeout: 500\npreflight_clock_check: true\n"
        "preflight_clock_max_skew_s: 2\npreflight_expected_versions: {torch: 2.13.0}\n"
        "nccl_expected_versions: {torch: 2.12.0}\n",
    )
    nodes = fake_nodes(4)
    settings = observe.observe_settings(config, nodes, "py")
    assert {k: settings[k] for k in ("probe_timeout", "python_timeout", "listen_timeout")} == {
        "probe_timeout": 10.0,
        "python_timeout": 90.0,
        "listen_timeout": 500,
    }
    assert settings["collect_wait"] == 22.0 and settings["full_mesh"] is True
    # full mesh: each node's listener expects every peer, and probes every peer (nccl_backend
    # auto: HCCL's port too, started only where the node's own facts choose hccl)
    mine = settings_of({"shared": settings, "own": {}}, nodes[1])
    expects = [(s["name"], s["connections"]) for s in node_step.listeners(mine, nodes[1])]
    assert expects == [("ring", 3), ("hccl", 3)]
    obs = started(nodes)
    plans = observe.probe_plans(nodes, obs, observe.shared_inputs(nodes, obs, settings), True)
    assert len([t for t in plans[nodes[1]]["targets"] if t["name"] != "master"]) == 3
    # the controller waits for the probes it configured: 2 targets at 10 s, collect_wait, python
    assert observe.observed_bound(settings, plans) >= 60 + 4 * 10 + 22 + 90
    judged = judge_settings(config, nodes)
    assert {k: judged[k] for k in ("clock_check", "clock_max_skew_s", "full_mesh")} == {
        "clock_check": True,
        "clock_max_skew_s": 2.0,
        "full_mesh": True,
    }
    assert judged["expected_versions"] == {"torch": "2.13.0"}  # preflight_ wins, as in the role
    assert node_check.judge_settings(config, "n")["expected_versions"] == {"torch": "2.13.0"}


def test_without_them_the_roles_defaults_apply(tmp_path: Path) -> None:
    config = config_of(tmp_path, "nccl_expected_versions: {nccl: 2.28.9}\n")
    nodes = fake_nodes(3)
    settings = observe.observe_settings(config, nodes, "py")
    assert (settings["probe_timeout"], settings["python_timeout"]) == (3.0, 60.0)
    assert (settings["listen_timeout"], settings["collect_wait"]) == (90, 8.0)
    assert settings["full_mesh"] is False
    judged = judge_settings(config, nodes)
    assert (judged["clock_check"], judged["clock_max_skew_s"]) == (False, 5.0)
    assert judged["expected_versions"] == {"nccl": "2.28.9"}


# ------------------------------------------------------------------------------------------------
# The clock check under Slurm
# ------------------------------------------------------------------------------------------------


def test_node_clocks_tell_a_late_record_from_a_clock_that_is_off() -> None:
    """Records read 4 s apart from nodes whose clocks agree: no skew; a clock 30 s ahead: 30 s."""
    records = {
        "a": {"clock": 1000.0, step.RECEIVED: 1000.1},
        "b": {"clock": 1004.0, step.RECEIVED: 1004.1},  # its record came 4 s later
        "c": {"clock": 1032.0, step.RECEIVED: 1002.1},  # 30 s ahead
        "d": {step.RECEIVED: 1001.0},  # sent no clock
    }
    clocks = observe.node_clocks(records)
    assert set(clocks) == {"a", "b", "c"}
    assert clocks["a"] == pytest.approx(clocks["b"])
    assert clocks["c"] - clocks["a"] == pytest.approx(30.0)


# A stand-in for srun: three nodes' "observed" records, framed as node_step.emit frames them, each
# with the node's clock taken as it writes (node-c's 30 s ahead); then it waits for stdin's end.
FAKE_SRUN = """
import sys, time
from nccl_preflight.slurm.ship import frame
for node, ahead in (("node-a", 0.0), ("node-b", 0.0), ("node-c", 30.0)):
    stopped = {"changed": True, "clock": time.time() - 8, "listeners": [], "waited": 0.0}
    record = {"kind": "observed", "probe": {"results": [], "firewall": {}}, "stopped": stopped,
              "clock": time.time() + ahead, "node": node}
    sys.stdout.write(frame(record, node))
    sys.stdout.flush()
    time.sleep(0.2)
sys.stdin.buffer.read()
"""


def clock_results(monkeypatch: pytest.MonkeyPatch, clock_check: bool) -> dict[str, dict]:
    nodes = ["node-a", "node-b", "node-c"]
    monkeypatch.setattr(step, "step_argv", lambda *_: [sys.executable, "-c", FAKE_SRUN])
    env = {"PYTHONPATH": str(ROOT / "src")}
    running = step.Step("7", nodes, "py", "run", "observe", {"shared": {}, "own": {}}, b"", env)
    try:
        records = step.collect(running, nodes, "observed", time.monotonic() + 60)
    finally:
        running.end()
    obs = observe.Observed()
    for node, record in records.items():
        obs.facts[node], obs.started[node] = {}, {}
        obs.stopped[node] = record["stopped"]
    obs.clocks = observe.node_clocks(records)
    settings = {"master": nodes[0], "order": nodes, "require_gpu": False,
                "clock_check": clock_check, "clock_max_skew_s": 5.0}  # fmt: skip
    views = observe.observations(obs, nodes, {n: {} for n in nodes}, clock_check)
    by_node = judge_preflight(views, nodes, settings)
    return {n: next(r for r in by_node[n] if r["check"] == "clock") for n in nodes}


def test_the_clock_check_names_a_node_30_s_off_under_slurm(monkeypatch: pytest.MonkeyPatch) -> None:
    results = clock_results(monkeypatch, clock_check=True)
    assert [results[n]["status"] for n in ("node-a", "node-b", "node-c")] == [
        "passed",
        "passed",
        "failed",
    ]
    assert results["node-c"]["message"].startswith("node-c: its clock is +30.")
    assert "s off the other hosts (bound 5 s)" in results["node-c"]["message"]


def test_with_the_clock_check_off_nothing_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    results = clock_results(monkeypatch, clock_check=False)
    assert {r["status"] for r in results.values()} == {"skipped"}
    assert "preflight_clock_check: false" in results["node-c"]["message"]
