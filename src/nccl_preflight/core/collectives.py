# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The collectives the rank script times: the keys nccl_expected_busbw accepts
(plugins/filter/nccl_inputs.py) and the collectives the pairwise triggers are worked out for
(plugins/filter/nccl_pair_triggers.py)."""

from __future__ import annotations

# The collectives files/nccl_check.py times (its BANDWIDTH_COLLECTIVES).
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "send_recv",
)
