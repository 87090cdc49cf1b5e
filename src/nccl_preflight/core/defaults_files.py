# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The text of a role's defaults file, written from the variables schema (core/variables.py).

One home for the shape geerlingguy's roles have: the file's opening comment, then for each
variable its one-line doc as a comment and its default as YAML that loads back to it (a long
string folded with ``>-``). docs/make_variables.py writes the checkout's files with it; the
collection (core/collection.py) writes its own, with the collection's defaults where they differ.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nccl_preflight.core.yaml_file import YamlFileError, load

if TYPE_CHECKING:
    from nccl_preflight.core.variables import DefaultsFile

WIDTH = 100  # the defaults files' comment and folded-value lines


def _words(text: str, width: int) -> list[str]:
    """``text`` cut at single spaces into lines of at most ``width`` (a longer word alone)."""
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line]


def _comment(text: str) -> list[str]:
    return [f"# {line}".rstrip() for line in _words(text, WIDTH - 2)]


def _plain(text: str) -> bool:
    """Whether ``text`` reads back as itself unquoted."""
    try:
        return text != "" and load(f"k: {text}").value == {"k": text}
    except YamlFileError:
        return False


def value_lines(name: str, value: Any) -> list[str]:
    """``name: value`` as YAML that loads back to ``value``: a long string folded (>-)."""
    if isinstance(value, bool):
        return [f"{name}: {'true' if value else 'false'}"]
    if not isinstance(value, str):
        return [f"{name}: {json.dumps(value)}"]
    text = value if _plain(value) and "{" not in value else json.dumps(value)
    if len(name) + 2 + len(text) <= WIDTH:
        return [f"{name}: {text}"]
    if re.search(r"\s{2}|\n|^\s|\s$", value):
        raise ValueError(f"{name}: a long default must be words with single spaces between")
    return [f"{name}: >-", *(f"  {line}" for line in _words(value, WIDTH - 2))]


def defaults_text(file: DefaultsFile, defaults: Mapping[str, Any] | None = None) -> str:
    """The text of one defaults file; ``defaults`` replaces the schema's default by name."""
    other = defaults or {}
    out = ["---", *_comment(file.header)]
    for group in file.groups:
        if group.title:
            out += ["", f"# --- {group.title} ---"]
        for variable in group.variables:
            value = other.get(variable.name, variable.default)
            out += ["", f"# {variable.doc}", *value_lines(variable.name, value)]
    return "\n".join(out) + "\n"
