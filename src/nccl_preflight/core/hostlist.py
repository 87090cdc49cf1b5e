# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Slurm's hostlist expressions, as `scontrol show hostnames` expands them: ``gpu[001-016]``,
``rack[1-2]-gpu[01,03,07-08]``, ``a,b,c``. Used by the slurm front-end's per-node values
(core/config.py ``nccl_node_vars``), read before any Slurm command runs. Standard library only.
"""

from __future__ import annotations

import re

_GROUP = re.compile(r"\[([^\[\]]*)\]")
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
MAX_HOSTS = 65536  # an expression that names more is refused (a typo such as [1-9999999])
# The reports show up to this many hosts a line each; beyond, hosts that say the same are one
# line with their hostlist (the console's hosts, summary.md's transport lines).
ONE_LINE_EACH = 8


class HostlistError(ValueError):
    """An expression Slurm would not read; the message says what is wrong."""


def _top_level_parts(expression: str) -> list[str]:
    """``expression`` split at the commas outside brackets."""
    parts, depth, current = [], 0, ""
    for char in expression:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"{expression!r}: a ']' without its '['")
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if depth:
        raise HostlistError(f"{expression!r}: a '[' without its ']'")
    return [*parts, current]


def _numbers(group: str, expression: str) -> list[str]:
    """The names one bracket group stands for, zero-padded as written (``07-10``)."""
    out: list[str] = []
    for item in group.split(","):
        match = _RANGE.fullmatch(item.strip())
        if not match:
            raise HostlistError(f"{expression!r}: [{group}] is not numbers and ranges")
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) < int(low):
            raise HostlistError(f"{expression!r}: the range {item} runs backwards")
        if int(high) - int(low) >= MAX_HOSTS:
            raise HostlistError(f"{expression!r}: the range {item} names too many hosts")
        width = len(low) if low.startswith("0") else 0
        out += [str(n).zfill(width) for n in range(int(low), int(high) + 1)]
    return out


def expand(expression: str) -> list[str]:
    """Every host name ``expression`` stands for, in order; HostlistError when it is malformed."""
    names: list[str] = []
    for part in _top_level_parts(str(expression).strip()):
        part = part.strip()
        if not part:
            raise HostlistError(f"{expression!r}: an empty name")
        expanded = [""]
        pos = 0
        for match in _GROUP.finditer(part):
            literal = part[pos : match.start()]
            numbers = _numbers(match.group(1), expression)
            expanded = [f"{e}{literal}{n}" for e in expanded for n in numbers]
            if len(expanded) > MAX_HOSTS:
                raise HostlistError(f"{expression!r}: names more than {MAX_HOSTS} hosts")
            pos = match.end()
        expanded = [f"{e}{part[pos:]}" for e in expanded]
        if any("[" in e or "]" in e for e in expanded):
            raise HostlistError(f"{expression!r}: nested or unmatched brackets")
        names += expanded
    return names


_LAST_NUMBER = re.compile(r"^(.*?)(\d+)(\D*)$")


def _ranges(numbers: list[int], width: int) -> str:
    """[1, 2, 3, 5] (width 4) -> '0001-0003,0005'."""
    spans: list[str] = []
    start = previous = numbers[0]
    for number in [*numbers[1:], None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        low, high = str(start).zfill(width), str(previous).zfill(width)
        spans.append(low if start == previous else f"{low}-{high}")
        if number is not None:
            start = previous = number
    return ",".join(spans)


def compress(names: list[str]) -> str:
    """The hostlist expression of ``names`` (each once), as Slurm writes it: names that differ
    only in their last number are one bracket group of ranges, zero-padded as they are
    (``gpu[0001-0016,0018-1024]``); other names stay as they are, in the order first seen.
    ``expand`` gives every name back."""
    groups: dict[tuple[str, str, int], set[int]] = {}
    widths: dict[tuple[str, str], set[int]] = {}
    plain: dict[str, None] = {}
    for name in names:
        match = _LAST_NUMBER.match(name)
        if match is None or "[" in name or "]" in name or "," in name:
            plain[name] = None
            continue
        prefix, digits, suffix = match.groups()
        padded = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        widths.setdefault((prefix, suffix), set()).add(padded)
        groups.setdefault((prefix, suffix, padded), set()).add(int(digits))
    # An unpadded number as long as the group's one padded width is one of it (gpu0999, gpu1000).
    for (prefix, suffix), seen in widths.items():
        padded = seen - {0}
        if 0 in seen and len(padded) == 1:
            width = padded.pop()
            bare = groups[(prefix, suffix, 0)]
            fits = {n for n in bare if len(str(n)) == width}
            groups[(prefix, suffix, width)] |= fits
            bare -= fits
    parts: list[str] = []
    for (prefix, suffix, width), numbers in groups.items():
        if not numbers:
            continue
        ordered = sorted(numbers)
        spans = _ranges(ordered, width)
        if len(ordered) == 1:
            parts.append(f"{prefix}{spans}{suffix}")
        else:
            parts.append(f"{prefix}[{spans}]{suffix}")
    return ",".join([*parts, *plain])
