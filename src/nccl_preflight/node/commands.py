# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What the node's readers ask of the module that calls them: find a command, run it.

The Ansible module passes its AnsibleModule (library/nccl_facts.py,
library/nccl_preflight_observe.py); the node room names only this shape, so it imports nothing
from Ansible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class CommandRunner(Protocol):
    """AnsibleModule's get_bin_path and run_command, as the readers call them."""

    def get_bin_path(
        self, arg: str, required: bool = False, opt_dirs: Sequence[str] | None = None
    ) -> str | None: ...

    def run_command(
        self, args: Sequence[str], environ_update: Mapping[str, str] | None = None, **kwargs: Any
    ) -> tuple[int, str, str]: ...
