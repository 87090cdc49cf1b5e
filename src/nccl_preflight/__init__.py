# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""nccl-preflight's Python code, in two rooms (docs/design.md, "Layout").

``nccl_preflight.node``: what runs on a node (standard library and torch only; the Ansible
modules ship it inside their payload as ``ansible.module_utils.nccl_preflight.node``).
``nccl_preflight.core``: what plans and judges on the control machine (plain Python, no Ansible).
"""

# The version's one home: pyproject.toml reads it (dynamic); nccl-preflight --version prints it.
__version__ = "0.1.0"
