# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Filters that choose a host's fabric interface and tell address families apart.

Only the standard library: ansible-core has no ipaddr filter without the ansible.utils collection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ansible.module_utils

# The project's module_utils as ansible.module_utils.<name>, as the modules import them on a node
# the one way every controller-side plugin loads them (tests/unit/test_controller_imports.py).
if (_MODULE_UTILS := str(Path(__file__).resolve().parents[2] / "module_utils")) not in (
    ansible.module_utils.__path__
):
    ansible.module_utils.__path__.append(_MODULE_UTILS)

# One function for the environment play and the node's first call (module_utils).
from ansible.module_utils.nccl_fabric_choice import nccl_fabric_choice


class FilterModule:
    """Network filters for nccl-preflight."""

    def filters(self) -> dict[str, Any]:
        return {
            "nccl_fabric_choice": nccl_fabric_choice,
        }
