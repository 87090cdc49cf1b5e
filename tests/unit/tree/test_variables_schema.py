# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The variables schema (core/variables.py) is the one home of a variable's type, default and
allowed values: the roles' meta/argument_specs.yml agree with it, each role declares its own
knobs, and what core/config.py derives from it (the per-node variables, what the Slurm config
takes or refuses, the names the Ansible path knows) holds."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from nccl_preflight.core import config
from nccl_preflight.core.variables import ELSEWHERE, FILES, VARIABLES, file_of

ROOT = Path(__file__).resolve().parents[3]
SPEC_FIELDS = ("type", "elements", "choices")


def _spec_options() -> dict[str, dict[str, dict]]:
    """{role: {option: its spec}} from every role's meta/argument_specs.yml (all entry points)."""
    found: dict[str, dict[str, dict]] = {}
    for path in sorted((ROOT / "roles").glob("*/meta/argument_specs.yml")):
        role = path.parts[-3]
        for entry in yaml.safe_load(path.read_text())["argument_specs"].values():
            found.setdefault(role, {}).update(entry.get("options") or {})
    return found


def test_every_argument_spec_agrees_with_the_schema_on_type_choices_and_default() -> None:
    wrong = []
    checked = 0
    for role, options in _spec_options().items():
        for name, option in options.items():
            variable = VARIABLES.get(name)
            if variable is None:
                continue  # a fact of another role (nccl_env_run_dir): the role's interface
            checked += 1
            for field in SPEC_FIELDS:
                want = getattr(variable, field)
                got = option.get(field)
                if (tuple(got) if isinstance(got, list) else got) != want:
                    wrong.append(f"{role}: {name}.{field} is {got!r}, the schema says {want!r}")
            if (
                "default" in option
                and not variable.derived
                and option["default"] != variable.default
            ):
                wrong.append(f"{role}: {name}.default is {option['default']!r}")
    assert wrong == []
    assert checked >= 80


def test_each_role_declares_every_knob_of_its_own_defaults_file() -> None:
    options = _spec_options()
    missing = [
        f"{file.path}: {variable.name}"
        for file in FILES
        if not file.path.startswith("nccl_defaults/")
        for group in file.groups
        for variable in group.variables
        if variable.name not in options[file.path.split("/")[0]]
    ]
    assert missing == []


def test_derived_means_a_jinja_default_and_a_default_means_one_in_a_defaults_file() -> None:
    for variable in VARIABLES.values():
        templated = isinstance(variable.default, str) and "{{" in variable.default
        assert variable.derived == templated, variable.name
    for variable in ELSEWHERE:
        assert file_of(variable.name) is None
    assert all(
        v.type in {"str", "path", "int", "float", "bool", "list", "dict"}
        for v in VARIABLES.values()
    )


def test_what_the_slurm_front_end_takes_comes_from_the_schema() -> None:
    assert set(config.NODE_VARIABLES) == {
        "nccl_socket_ifname",
        "nccl_fabric_cidr",
        "nccl_extra_env",
        "nccl_nproc_per_node",
    }
    preflight = {
        v.name
        for f in FILES
        if f.path.startswith("preflight/")
        for g in f.groups
        for v in g.variables
    }
    assert set(config.UNDER_SLURM) | set(config.NOT_UNDER_SLURM) == preflight
    assert (
        "preflight_master" in config.NOT_UNDER_SLURM
        and "preflight_probe_timeout" in config.UNDER_SLURM
    )
    # a role's own knob is not a Slurm config name; the project-wide ones are
    assert "launch_kill_grace" not in config.known_names()
    assert {"nccl_run_id", "nccl_backend", "nccl_run_dir"} <= config.known_names()
    assert config.SLURM_ONLY == {"nccl_node_vars": {}}


def test_every_name_the_hostfile_inventory_plugin_sets_is_in_the_schema() -> None:
    """ansible_names needs no scan of the source: the plugin's variables are the schema's."""
    source = (ROOT / "plugins" / "inventory" / "hostfile.py").read_text()
    set_names = set(re.findall(r'set_variable\([^,]+,\s*"((?:nccl|preflight)_[a-z0-9_]+)"', source))
    assert set_names and set_names <= config.ansible_names()
    assert {"nccl_node_rank", "nccl_slots"} <= set_names


def test_the_sample_inventories_and_examples_set_only_known_names() -> None:
    found = set()
    for folder in ("inventory", "examples"):
        for path in (ROOT / folder).rglob("*.y*ml"):
            loaded = yaml.safe_load(path.read_text()) or {}
            if isinstance(loaded, dict):
                found |= {n for n in loaded if config.POLICED.fullmatch(str(n))}
    assert found
    assert config.unknown_variables(found) == [n for n in sorted(found) if n in config.SLURM_ONLY]


def test_every_doc_is_one_line_of_a_defaults_file_and_details_add_to_it() -> None:
    """geerlingguy's shape: one comment per knob; a longer story goes to docs/variables.md."""
    variables = [*VARIABLES.values(), *ELSEWHERE]
    too_long = [v.name for v in variables if len(f"# {v.doc}") > 100 or "\n" in v.doc]
    assert too_long == []
    assert all(v.details != v.doc for v in variables)
    for file in FILES:
        text = (ROOT / "roles" / file.path).read_text(encoding="utf-8").splitlines()
        for variable in (v for group in file.groups for v in group.variables):
            at = next(i for i, line in enumerate(text) if line.startswith(f"{variable.name}:"))
            assert text[at - 1] == f"# {variable.doc}" and not text[at - 2].startswith("#")
