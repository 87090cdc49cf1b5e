# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Filters that choose a host's fabric interface and tell address families apart.

Only the standard library: ansible-core has no ipaddr filter without the ansible.utils collection.
"""

from __future__ import annotations

from typing import Any

# One function for the environment play and the node's first call (nccl_preflight.node).
from nccl_preflight.node.fabric_choice import nccl_fabric_choice


class FilterModule:
    """Network filters for nccl-preflight."""

    def filters(self) -> dict[str, Any]:
        return {
            "nccl_fabric_choice": nccl_fabric_choice,
        }
