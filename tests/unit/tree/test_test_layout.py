# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The tests mirror the code: tests/unit/ has a folder per room of src/nccl_preflight/ (node, core,
slurm), one for the Ansible front-end and one for the tree's own rules; what more than one test
builds lives in tests/builders/ or a fixture, never in a test module another one imports; one
bounded wait (tests/polling.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.playbook_run import ROOT

TESTS = ROOT / "tests"
UNIT_FOLDERS = {"node", "core", "slurm", "ansible", "tree"}


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "fixtures" not in p.relative_to(TESTS).parts)


def imported_test_modules(tree: ast.Module) -> list[str]:
    """The test modules a file imports (a name ``test_*`` anywhere in an import)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            parts = (node.module or "").split(".")
            names = [a.name for a in node.names]
            found += [m for m in parts if m.startswith("test_")]
            found += [n for n in names if n.startswith("test_")]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[-1].startswith("test_")]
    return found


def test_the_rule_sees_every_way_to_import_a_test_module() -> None:
    src = (
        "import test_a\nfrom tests.unit.core.test_b import x\nfrom tests.unit import test_c\n"
        "import tests.lab.test_d as d\nfrom tests.builders.report import RunDir\n"
    )
    found = imported_test_modules(ast.parse(src))
    assert found == ["test_a", "test_b", "test_c", "tests.lab.test_d"]


def test_no_imported_test_modules_another() -> None:
    offences = [
        f"{path.relative_to(ROOT)} imports {', '.join(names)}"
        for path in python_files()
        if (names := imported_test_modules(ast.parse(path.read_text())))
    ]
    assert offences == [], "put what they share in tests/builders/ or a conftest fixture"


def test_unit_tests_sit_in_the_folder_of_what_they_test() -> None:
    unit = TESTS / "unit"
    loose = sorted(p.name for p in unit.glob("*.py") if p.name != "conftest.py")
    assert loose == [], f"in tests/unit/ itself, not in one of {sorted(UNIT_FOLDERS)}"
    folders = {p.name for p in unit.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == UNIT_FOLDERS
    names = [p.name for p in unit.rglob("test_*.py")]
    assert len(names) == len(set(names)), "pytest imports unit test files by their base name"


def test_one_bounded_wait() -> None:
    waits = [
        str(path.relative_to(ROOT))
        for path in python_files()
        for node in ast.parse(path.read_text()).body  # a method waits on its own object
        if isinstance(node, ast.FunctionDef) and node.name in {"wait_for", "wait_or_fail"}
    ]
    assert waits == ["tests/polling.py", "tests/polling.py"]
