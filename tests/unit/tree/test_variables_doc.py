# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The roles' defaults files and docs/variables.md are made from the variables schema
(docs/make_variables.py, `make variables`) and stay current; what it writes loads back to the
schema's defaults."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nccl_preflight.core.variables import ELSEWHERE, FILES, DefaultsFile, Group, Variable

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location(
    "make_variables", ROOT / "docs" / "make_variables.py"
)
assert _spec and _spec.loader
make_variables = importlib.util.module_from_spec(_spec)
sys.modules["make_variables"] = make_variables
_spec.loader.exec_module(make_variables)


def test_the_committed_defaults_files_and_page_are_what_the_schema_gives() -> None:
    assert make_variables.stale() == [], "out of date: run make variables"


def test_every_roles_defaults_file_is_made_from_the_schema() -> None:
    made = {f"roles/{file.path}" for file in FILES}
    found = {p.relative_to(ROOT).as_posix() for p in (ROOT / "roles").glob("*/defaults/**/*.yml")}
    assert found == made


def test_each_defaults_file_loads_back_to_the_schemas_defaults_in_order() -> None:
    for file in FILES:
        loaded = yaml.safe_load(make_variables.render_defaults(file))
        wanted = {v.name: v.default for group in file.groups for v in group.variables}
        assert list(loaded) == list(wanted), file.path
        for name, value in wanted.items():
            assert loaded[name] == value and type(loaded[name]) is type(value), name


def test_every_variable_has_a_doc_and_one_home() -> None:
    variables = [v for f in FILES for g in f.groups for v in g.variables] + list(ELSEWHERE)
    assert len(variables) >= 70
    assert [v.name for v in variables if not v.doc.strip()] == []
    names = [v.name for v in variables]
    assert len(names) == len(set(names)), "a variable is in the schema twice"


def _demo() -> DefaultsFile:
    return DefaultsFile(
        "demo/defaults/main.yml",
        "Demo: what the role does.",
        (
            Group("", (Variable("demo_wait", "int", 5, "Seconds to wait."),)),
            Group(
                "Paths",
                (
                    Variable("demo_dir", "path", "{{ a | b }}", "Where; a | b.", derived=True),
                    Variable("demo_mode", "str", "0700", "A mode, quoted.", slurm=False),
                    Variable("demo_off", "str", "off", "Not a boolean.", per_node=True),
                    Variable("demo_long", "str", "{{ " + "x + " * 40 + "1 }}", "Long: folded."),
                ),
            ),
        ),
    )


def test_a_defaults_file_has_its_header_groups_one_comment_each_and_quoted_values() -> None:
    text = make_variables.render_defaults(_demo())
    assert text.startswith("---\n# Demo: what the role does.\n\n# Seconds to wait.\ndemo_wait: 5\n")
    assert '\n# --- Paths ---\n\n# Where; a | b.\ndemo_dir: "{{ a | b }}"\n' in text
    assert 'demo_mode: "0700"' in text and 'demo_off: "off"' in text
    assert "demo_long: >-\n  {{ x + x" in text
    assert all(len(line) <= make_variables.WIDTH for line in text.splitlines())
    loaded = yaml.safe_load(text)
    assert loaded["demo_mode"] == "0700" and loaded["demo_off"] == "off"
    assert loaded["demo_long"] == "{{ " + "x + " * 40 + "1 }}"


def test_a_long_default_with_a_line_break_is_refused_not_written_wrong() -> None:
    with pytest.raises(ValueError, match="demo_x"):
        make_variables.value_lines("demo_x", "{{ a }}\n" + "b " * 60)


def test_the_page_shows_type_choices_default_and_what_the_schema_says_of_slurm() -> None:
    page = make_variables.render_page()
    assert "| `nccl_backend` | str: auto, nccl, gloo, hccl, xccl, mpi, ucc | `auto` |" in page
    assert "| `nccl_check_args` | list of str | `[]` |" in page
    row = next(line for line in page.splitlines() if line.startswith("| `preflight_master`"))
    assert "*Derived from other variables: not a knob.*" in row
    assert "*Not under Slurm: the master is the allocation's first node" in row
    row = next(line for line in page.splitlines() if line.startswith("| `nccl_socket_ifname`"))
    assert "*Per node.*" in row
    assert "## Set elsewhere (no role default)" in page and "| `nccl_run_id` |" in page


def test_check_names_a_stale_file_and_writing_makes_it_current(tmp_path: Path) -> None:
    for path, text in make_variables.outputs(tmp_path).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert make_variables.stale(tmp_path) == []
    edited = tmp_path / "roles" / "launch" / "defaults" / "main.yml"
    edited.write_text(edited.read_text() + "launch_extra: 1\n", encoding="utf-8")
    assert make_variables.stale(tmp_path) == ["roles/launch/defaults/main.yml"]


def test_the_command_says_whether_the_tree_is_current() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "make_variables.py"), "--check"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
