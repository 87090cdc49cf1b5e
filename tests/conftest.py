# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Shared pytest set-up: our Ansible code importable, and the multi-host lab fixtures."""

from __future__ import annotations

import sys
from pathlib import Path

import ansible.module_utils

ROOT = Path(__file__).resolve().parent.parent

# Modules in library/ and plugins import our module_utils as ansible.module_utils.<name>, exactly
# as Ansible ships them to a node; make that import work under pytest too.
ansible.module_utils.__path__.append(str(ROOT / "module_utils"))
for extra in (ROOT / "library", ROOT / "plugins" / "inventory", ROOT / "plugins" / "filter"):
    sys.path.insert(0, str(extra))

# The multi-host lab: session-scoped fixtures that skip, with the reason, where no lab can be built.
from tests.lab.fixtures import lab2, lab4, lab_factory  # noqa: F401
