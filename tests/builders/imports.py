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


def module_imports(name: str, is_package: bool, source: str, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` imports, wherever the import stands: at the
    top, in a function, or under ``if TYPE_CHECKING:`` (a type-only import closes a cycle for a
    reader and for a type checker all the same). ``from pkg import mod`` counts pkg.mod."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in known}
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([target] if target else [])])
            if target in known:
                found.add(target)
            found |= {f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known}
    found.discard(name)
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every set of modules that import each other, directly or round about (the strongly
    connected components of ``graph`` with more than one module), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for used in sorted(graph.get(module, ())):
            if used not in index:
                visit(used)
                low[module] = min(low[module], low[used])
            elif used in stack:
                low[module] = min(low[module], index[used])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(cycles)
