# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Filters that choose a host's fabric interface and tell address families apart.

Only the standard library: ansible-core has no ipaddr filter without the ansible.utils collection.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any


def _load_choice() -> ModuleType:
    """module_utils/nccl_fabric_choice.py of this project (the controller has no custom
    module_utils on ansible.module_utils' path, only the modules shipped to the nodes do)."""
    path = Path(__file__).resolve().parents[2] / "module_utils" / "nccl_fabric_choice.py"
    spec = importlib.util.spec_from_file_location("nccl_preflight_fabric_choice", path)
    if spec is None or spec.loader is None:  # pragma: no cover
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# One function for the environment play and the node's first call (module_utils).
nccl_fabric_choice = _load_choice().nccl_fabric_choice


class FilterModule:
    """Network filters for nccl-preflight."""

    def filters(self) -> dict[str, Any]:
        return {
            "nccl_fabric_choice": nccl_fabric_choice,
        }
