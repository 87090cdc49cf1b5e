# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What a Python file imports, read from its syntax tree (the rooms' import rules)."""

from __future__ import annotations

import ast


def imports_of(source: str) -> list[tuple[int, str]]:
    """Every import as (level, dotted name): level 0 absolute, 1 ``from .``, 2 ``from ..``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(0, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
    return found
