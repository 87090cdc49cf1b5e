# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""docs/variables.md lists every role variable with its default and meaning, and stays current."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location(
    "make_variables", ROOT / "docs" / "make_variables.py"
)
assert _spec and _spec.loader
make_variables = importlib.util.module_from_spec(_spec)
sys.modules["make_variables"] = make_variables
_spec.loader.exec_module(make_variables)


def test_committed_page_is_what_the_defaults_files_give() -> None:
    expected = make_variables.render(make_variables.all_groups())
    current = (ROOT / "docs" / "variables.md").read_text(encoding="utf-8")
    assert current == expected, (
        "docs/variables.md is out of date: run python docs/make_variables.py"
    )


def test_every_variable_of_every_defaults_file_has_a_meaning() -> None:
    variables = [v for g in make_variables.all_groups() for v in g.variables]
    assert len(variables) >= 30
    assert [v.name for v in variables if not v.meaning] == []
    names = [v.name for v in variables]
    assert len(names) == len(set(names)), "a variable is defined in two defaults files"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    defaults = tmp_path / "roles" / "demo" / "defaults"
    defaults.mkdir(parents=True)
    (defaults / "main.yml").write_text(
        "---\n"
        "# Demo: what the role does.\n"
        "\n"
        "# Seconds to wait.\n"
        "demo_wait: 5\n"
        "\n"
        "# --- Paths ------------------------------\n"
        "# Where the files go; a | b.\n"
        "demo_dir: >-\n"
        "  {{ a |\n"
        "     b }}\n"
        "demo_bare: x\n",
        encoding="utf-8",
    )
    (tmp_path / "roles" / "nccl_defaults" / "defaults" / "main").mkdir(parents=True)
    return tmp_path


def test_groups_meanings_and_folded_defaults_are_read(tree: Path) -> None:
    groups = make_variables.all_groups(tree)
    assert [g.title for g in groups] == ["Demo", "Paths"]
    (wait,) = groups[0].variables
    assert (wait.name, wait.default, wait.meaning) == ("demo_wait", "5", "Seconds to wait.")
    folded, bare = groups[1].variables
    assert folded.default == "{{ a | b }}"
    assert folded.meaning == "Where the files go; a | b."
    assert (bare.name, bare.meaning) == ("demo_bare", "")
    page = make_variables.render(groups)
    assert "## Role demo (roles/demo/defaults/main.yml)" in page
    assert "| `demo_dir` | `{{ a \\| b }}` | Where the files go; a \\| b. |" in page
