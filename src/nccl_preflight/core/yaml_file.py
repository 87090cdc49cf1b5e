# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""One YAML variable file read as Ansible reads it, with the line of each top-level key.

``load(text, source)`` reads one document with PyYAML's SafeLoader (the vendored pure-Python
copy, ``nccl_preflight/_vendor/yaml``: a node has only the standard library and torch, and the
node bundle carries it; the control machine imports the same copy, so both read a file the same
way) and gives its value and the 1-based line of each top-level key (``Document``). What PyYAML
refuses, and a key given twice in one mapping (PyYAML keeps the last one silently, Ansible
warns and keeps it; in a config it is a mistake), raise ``YamlFileError("SOURCE:LINE: problem")``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nccl_preflight._vendor import yaml
from nccl_preflight._vendor.yaml.constructor import ConstructorError
from nccl_preflight._vendor.yaml.reader import ReaderError

MERGE_TAG = "tag:yaml.org,2002:merge"  # `<<: *defaults`: its keys may be set again after it


class YamlFileError(ValueError):
    """``SOURCE:LINE: problem`` for text that is not YAML, or sets a key twice."""


@dataclass
class Document:
    """One document's value and, when it is a mapping, the 1-based line of each top-level key."""

    value: Any
    key_lines: dict[Any, int] = field(default_factory=dict)


class _Loader(yaml.SafeLoader):
    """PyYAML's SafeLoader that refuses a key given twice in one mapping, at any depth."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    first = seen.get(key)
                except TypeError:  # unhashable: SafeLoader refuses it in its own words
                    continue
                if first is not None:
                    raise ConstructorError(
                        None, None, f"{key!r} is given twice (first on line {first})",
                        key_node.start_mark,
                    )  # fmt: skip
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def load(text: str, source: str = "<string>") -> Document:
    """Read one YAML document; raise YamlFileError naming SOURCE:LINE."""
    loader = None
    try:
        loader = _Loader(text)  # refuses a non-printable character at once
        node = loader.get_single_node()
        value = None if node is None else loader.construct_document(node)
        key_lines: dict[Any, int] = {}
        if isinstance(node, yaml.MappingNode):
            # after construction: merge keys (`<<`) are replaced by what they merge, first
            for key_node, _ in node.value:
                key_lines[loader.construct_object(key_node)] = key_node.start_mark.line + 1
    except yaml.YAMLError as exc:
        raise YamlFileError(_refusal(exc, text, source)) from exc
    finally:
        if loader is not None:
            loader.dispose()
    return Document(value, key_lines)


def _refusal(error: yaml.YAMLError, text: str, source: str) -> str:
    """``SOURCE:LINE: [context (line N): ]problem`` from what PyYAML raised: LINE is where the
    problem is; the context's line is told when it is another one."""
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark else 1
        words = error.problem or error.context or "not YAML"
        if error.context and error.problem:
            where = error.context_mark.line + 1 if error.context_mark else line
            words = f"{error.context}{f' (line {where})' if where != line else ''}: {words}"
        return f"{source}:{line}: {words}"
    if isinstance(error, ReaderError):
        line = text.count("\n", 0, max(error.position, 0)) + 1
        return f"{source}:{line}: {str(error).splitlines()[0]}"
    return f"{source}:1: {error}"
