# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/collection.py: the collection's tree written from the checkout names
every project module, filter and role in full and ships the node room as the collection's
module_utils (the build, install and lab run: tests/integration/test_collection_lab.py)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from nccl_preflight.core.collection import (
    COLLECTION_IMPORT,
    COLLECTION_REPORT_ROOT,
    FQCN,
    MODULES,
    filter_names,
    qualify,
    write_collection,
)
from nccl_preflight.core.content import TREE
from nccl_preflight.core.variables import VARIABLES, report_root


def test_qualify_names_the_projects_modules_and_filters_in_full_only() -> None:
    filters = filter_names(TREE)
    assert "nccl_rank_layout" in filters and "nccl_run_owner" in filters
    text = (
        "- name: x\n  nccl_facts:\n    a: 1\n"
        "  when: x | nccl_rank_layout(y) and z|nccl_run_owner\n"
        "  ansible.builtin.debug: {msg: '{{ nccl_facts_like | default(1) }}'}\n"
    )
    done = qualify(text, filters)
    assert f"  {FQCN}.nccl_facts:\n" in done
    assert f"x | {FQCN}.nccl_rank_layout(y)" in done and f"z|{FQCN}.nccl_run_owner" in done
    assert "nccl_facts_like | default(1)" in done  # a variable of a similar name stays


def test_the_written_tree_leaves_no_short_project_name(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c")
    filters = "|".join(filter_names(TREE))
    short_filter = re.compile(rf"\|\s*({filters})\b")
    short_module = re.compile(rf"^\s*(- )?({'|'.join(MODULES)}):", re.M)
    for path in [*root.joinpath("roles").rglob("*.yml"), root / "playbooks" / "validate.yml"]:
        text = path.read_text()
        assert not short_filter.search(text), path
        assert not short_module.search(text), path
    assert not re.search(
        r"^\s*- role: [a-z_]+$", (root / "playbooks" / "validate.yml").read_text(), re.M
    )
    for module in MODULES:
        source = (root / "plugins" / "modules" / f"{module}.py").read_text()
        assert "ansible.module_utils.nccl_preflight" not in source
    facts = (root / "plugins" / "modules" / "nccl_facts.py").read_text()
    assert COLLECTION_IMPORT + "node.facts_call" in facts
    # the shared option docs travel, and the modules name them in full (nothing else finds them)
    assert (root / "plugins" / "doc_fragments" / "nccl_program.py").is_file()
    assert "extends_documentation_fragment:\n  - nccl.preflight.nccl_program\n" in facts
    assert (
        root / "plugins" / "module_utils" / "nccl_preflight" / "node" / "facts_call.py"
    ).is_file()
    assert (root / "plugins" / "action" / "nccl_torchrun.py").is_file()  # roles/launch's own
    assert not list(root.joinpath("roles").glob("*/action_plugins"))
    assert (root / "files" / "nccl_check.py").is_file()


def test_the_collections_reports_go_to_the_working_directory(tmp_path: Path) -> None:
    """The collection's defaults file is written from the schema with nccl_report_root's own
    default: the working directory's reports/ (a checkout's: beside playbooks/)."""
    root = write_collection(tmp_path / "c")
    report = root / "roles" / "nccl_defaults" / "defaults" / "main" / "report.yml"
    text = report.read_text(encoding="utf-8")
    assert COLLECTION_REPORT_ROOT in text and "playbook_dir" not in text
    ours = yaml.safe_load(text)
    checkout = yaml.safe_load(
        (TREE.content / "roles" / report.relative_to(root / "roles")).read_text()
    )
    assert ours.pop("nccl_report_root") == report_root(COLLECTION_REPORT_ROOT)
    assert checkout.pop("nccl_report_root") == VARIABLES["nccl_report_root"].default
    assert ours == checkout  # the rest as the schema has it
