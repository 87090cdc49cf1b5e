# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The filter of plan.json's ``predicted_skips``: what every rank will skip, from the rank
script's support table (src/nccl_preflight/node/collective_tables.py, imported; the prediction:
src/nccl_preflight/core/support.py)."""

from __future__ import annotations

from typing import Any

from nccl_preflight.core.support import predicted_skips, runs_by_the_table


def nccl_predicted_skips(
    script_text: str, backend: str, check_args: list[str] | None = None
) -> list[dict[str, str]]:
    """Filter: `lookup('file', launch_script) | nccl_predicted_skips(backend, nccl_check_args)`.

    A launch_script of one's own that does not import the table (a wrapper that runs
    files/nccl_check.py after some set-up, as the lab's tests use) predicts nothing: its ranks
    still report every skip, and a refusal the table did not predict is judged by the rank
    script itself."""
    return predicted_skips(backend, check_args) if runs_by_the_table(script_text) else []


class FilterModule:
    """The support table of files/nccl_check.py, on the control machine."""

    def filters(self) -> dict[str, Any]:
        return {"nccl_predicted_skips": nccl_predicted_skips}
