# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The controller's list of timed collectives (plugins/filter/nccl_inputs.py, which checks
nccl_expected_busbw's keys before anything runs) is the rank script's: files/nccl_check.py is
shipped to the nodes alone and cannot import it, so the two copies are held equal here."""

from __future__ import annotations

from nccl_inputs import COLLECTIVES

from tests.check.support import load_script


def test_the_inputs_accept_exactly_the_collectives_the_rank_script_times() -> None:
    assert COLLECTIVES == load_script().BANDWIDTH_COLLECTIVES
