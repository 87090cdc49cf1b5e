# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A plugin file as Ansible loads it: by its path, as a module of its own (action and callback
plugins live outside any package; a role's action_plugins/ too)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_plugin(relative: str, name: str) -> ModuleType:
    """The plugin file at ``relative`` (to the checkout), imported under ``name``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
