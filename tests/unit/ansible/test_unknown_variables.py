# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""An nccl_*/preflight_* variable the project does not know, or whose value its argument specs
refuse, is refused on both front-ends in the same words: on the Ansible path by
roles/validate_inputs (plugins/filter/nccl_variables.py: the file and line of its value from
Ansible's origin tags; one short line per bad value, not Ansible's argument-spec dump) with exit
12 before any host is touched, under Slurm by core/config.py load_config (the config's file and
line)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nccl_preflight.core.config import (
    ConfigError,
    ansible_names,
    known_names,
    load_config,
    spec_problems,
    unknown_problem,
    unknown_variables,
)
from tests.playbook_run import ROOT, playbook_env

TYPO = "nccl_fabirc_cidr"
HINT = "is not a known variable; did you mean nccl_fabric_cidr?"


def test_unknown_variables_names_only_the_projects_unknown_names() -> None:
    names = [TYPO, "nccl_fabric_cidr", "nccl_slots", "nccl_node_rank", "launch_script", "x_y"]
    assert unknown_variables(names) == [TYPO]
    # the schema's names, not every name the source mentions: a task's register is no input
    assert unknown_variables(["preflight_probe", "preflight_listen_timeout"]) == ["preflight_probe"]
    assert unknown_variables(["preflight_colect_wait", "nccl_node_rank"]) == [
        "preflight_colect_wait"
    ]
    assert known_names() <= ansible_names()
    assert (
        unknown_problem(TYPO, "inv/group_vars/all.yml:3")
        == f"inv/group_vars/all.yml:3: {TYPO}: {HINT}"
    )
    assert unknown_problem(TYPO) == f"{TYPO}: {HINT}"
    assert unknown_variables(["nccl_node_vars"]) == ["nccl_node_vars"]  # the Slurm config's
    assert "its host_vars" in unknown_problem("nccl_node_vars")
    # a name that was renamed is refused with the new name, its prefix policed or not
    assert unknown_variables(["report_expect_ranks", "report_ranks_launched"]) == [
        "report_expect_ranks"
    ]
    assert unknown_problem("report_expect_ranks") == (
        "report_expect_ranks: was renamed report_ranks_launched"
    )


def test_a_typo_in_group_vars_is_refused_with_its_file_and_line_before_any_host(
    tmp_path: Path,
) -> None:
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hostfile").write_text("localhost\n")
    (inventory / "group_vars" / "all.yml").write_text(
        f"---\nansible_connection: local\nansible_python_interpreter: {sys.executable}\n"
        f"{TYPO}: 10.0.0.0/8\n"
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "bin" / "nccl-preflight"), "-i", str(inventory),
         "-e", "nccl_mastr_port=29501"],
        cwd=tmp_path, env=playbook_env(), capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 12, out[-3000:]
    flat = " ".join(out.split())
    assert f"{inventory / 'group_vars' / 'all.yml'}:4: {TYPO}: {HINT}" in flat, flat[-3000:]
    assert "nccl_mastr_port: is not a known variable; did you mean nccl_master_port?" in flat
    assert "TASK [facts" not in out  # refused before the facts play touched the host


def test_the_slurm_config_refuses_the_same_typo_in_the_same_words(tmp_path: Path) -> None:
    config = tmp_path / "site.yml"
    config.write_text(f"nccl_backend: gloo\n{TYPO}: 10.0.0.0/8\n")
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert f"site.yml:2: {TYPO}: {HINT}" in str(caught.value)


def test_spec_problems_one_line_each_and_none_twice() -> None:
    values = {"nccl_pairwise": "sometimes", "nccl_busbw_warn": "high", "nccl_master_port": "99"}
    refused = ["nccl_master_port is 99, outside 1024-65535"]
    lines = spec_problems(values, refused)
    assert len(lines) == 2 and not [line for line in lines if "nccl_master_port" in line]
    assert "nccl_pairwise is 'sometimes', not one of auto, always, never" in lines
    assert spec_problems({"nccl_pairwise": "always", "nccl_master_port": "29500"}) == []


def test_spec_problems_hold_the_roles_own_knobs_too() -> None:
    """No role checks its argument spec at its start (a task per host): the roles' own knobs
    are refused here, before any host is touched, as the project's variables are."""
    lines = spec_problems({"launch_watch_interval": "often", "report_html": "maybe"})
    assert [line.split(" ")[0] for line in lines] == ["launch_watch_interval", "report_html"]
    assert spec_problems({"launch_watch_interval": "2.5", "report_html": "yes"}) == []


def test_bad_values_are_one_short_line_each_not_the_argument_spec(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hostfile").write_text("localhost\n")
    (inventory / "group_vars" / "all.yml").write_text(
        f"---\nansible_connection: local\nansible_python_interpreter: {sys.executable}\n"
        "nccl_pairwise: sometimes\n"
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "bin" / "nccl-preflight"), "-i", str(inventory)],
        cwd=tmp_path, env=playbook_env(), capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 12, out[-3000:]
    assert len(out.splitlines()) < 60, out  # was: Ansible's whole argument spec, 146 lines
    assert "argument_spec_data" not in out
    flat = " ".join(out.split())
    assert "localhost: nccl_pairwise is 'sometimes', not one of auto, always, never" in flat
    config = tmp_path / "site.yml"
    config.write_text("nccl_backend: gloo\nnccl_pairwise: sometimes\n")
    with pytest.raises(ConfigError) as caught:  # the Slurm config: the same words
        load_config(config)
    assert "site.yml:2: nccl_pairwise: is 'sometimes', not one of auto, always, never" in str(
        caught.value
    )
