# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Builders for the stage API's tests (tests/unit/core/test_stage_*.py): the Ansible path's
variables and expressions rendered by Ansible itself, and the Slurm path's config and SlurmRun,
from the same user values, so that a test compares what both front-ends decide."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import filter_loader, init_plugin_loader
from ansible.template import Templar, trust_as_template

from nccl_preflight.core.config import load_config
from nccl_preflight.core.layout import nccl_rank_layout
from nccl_preflight.slurm.run import SlurmRun

ROOT = Path(__file__).resolve().parents[2]
NODES = ["node1", "node2", "node3"]


def trusted(value: Any) -> Any:
    """A value read from a role's YAML, its strings trusted as templates (as Ansible does)."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [trusted(item) for item in value]
    return value


def yaml_of(relative: str) -> Any:
    return yaml.safe_load((ROOT / relative).read_text(encoding="utf-8"))


def role_variables(*files: str) -> dict[str, Any]:
    """The project-wide defaults (roles/nccl_defaults) and the ``files`` (a role's defaults or
    vars), in that order, as Ansible would hold them."""
    found: dict[str, Any] = {}
    for path in sorted((ROOT / "roles/nccl_defaults/defaults/main").glob("*.yml")):
        found.update(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    for relative in files:
        found.update(yaml_of(relative) or {})
    return {name: trusted(value) for name, value in found.items()}


@functools.cache
def _plugins() -> None:
    """The ansible.builtin lookups by their FQCN (file) and the project's filters, once."""
    init_plugin_loader()
    filter_loader.add_directory(str(ROOT / "plugins" / "filter"))


def render(expression: str, variables: dict[str, Any]) -> Any:
    """``expression`` rendered by Ansible with the project's filters and ``variables``."""
    _plugins()
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template(expression))


def slurm_config(tmp_path: Path, user: dict[str, Any]) -> dict[str, Any]:
    """The Slurm front-end's config of ``user``'s values (core/config.py load_config)."""
    path = tmp_path / "site.yml"
    path.write_text(yaml.safe_dump(user), encoding="utf-8")
    return load_config(path)


def layout(per_node: list[int]) -> dict[str, Any]:
    """The one rank layout (core/layout.py) of NODES with ``per_node`` ranks each."""
    return nccl_rank_layout(NODES, per_node, None, 1)


def slurm_run(config: dict[str, Any], per_node: list[int], backend: str = "gloo") -> SlurmRun:
    """A SlurmRun past its environment stage (no allocation: only what its stage calls read)."""
    run = SlurmRun.__new__(SlurmRun)
    run.config = config
    run.nodes = list(NODES)
    run.run_id = "20260101T000000-abcdef"
    run.layout = layout(per_node)
    run.env_by_node = {node: {"backend": backend} for node in NODES}
    run.pair_triggers = []
    return run
