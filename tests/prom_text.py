# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A strict reader of Prometheus' text exposition format (version 0.0.4), as node_exporter's
textfile collector takes it, to prove what src/nccl_preflight/core/metrics.py writes. Neither
promtool nor prometheus_client is installed here (nothing is installed for a test), so this
follows the format's specification (prometheus.io/docs/instrumenting/exposition_formats, "Text
format details"; the data model's name rules, prometheus.io/docs/concepts/data_model):

- UTF-8, lines separated by a line feed, the last one ending with one;
- ``# HELP <name> <docstring>`` (``\\\\`` and ``\\n`` the only escapes) and ``# TYPE <name>
  <counter|gauge|histogram|summary|untyped>``, each at most once per name, the TYPE line before
  the name's first sample;
- ``<name>{<label>="<value>",...} <value>``: a metric name ``[a-zA-Z_:][a-zA-Z0-9_:]*``, label
  names ``[a-zA-Z_][a-zA-Z0-9_]*`` not starting with ``__``, each once per sample, label values
  whose only escapes are ``\\\\``, ``\\"`` and ``\\n``; a value Go's ParseFloat reads, or NaN,
  +Inf, -Inf; no timestamp (node_exporter refuses one in a textfile);
- the lines of one metric family together, one group; a label set at most once per metric.

Anything else raises FormatError naming the line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")
FLOAT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
SPECIAL = {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf, "Inf": math.inf}
HELP_TEXT = re.compile(r"(?:[^\\]|\\\\|\\n)*")  # HELP escapes: \\ and \n only
UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}


class FormatError(ValueError):
    pass


@dataclass
class Family:
    help: str | None = None
    type: str | None = None
    samples: dict[frozenset[tuple[str, str]], float] = field(default_factory=dict)

    def value(self, **labels: str) -> float:
        return self.samples[frozenset(labels.items())]

    def by(self, label: str) -> dict[str, float]:
        """{the value of ``label``: the sample's value} (one sample per value of it)."""
        found = {dict(key)[label]: value for key, value in self.samples.items()}
        assert len(found) == len(self.samples), f"{label} does not tell the samples apart"
        return found


def _label_value(text: str, at: int, where: str) -> tuple[str, int]:
    """The value of a quoted label value starting after its opening quote, and where it ends."""
    out = []
    while at < len(text):
        char = text[at]
        if char == '"':
            return "".join(out), at + 1
        if char == "\\":
            escaped = text[at + 1 : at + 2]
            if escaped not in UNESCAPE:
                raise FormatError(f"{where}: the escape \\{escaped} in a label value")
            out.append(UNESCAPE[escaped])
            at += 2
            continue
        if char == "\n":
            raise FormatError(f"{where}: a line feed in a label value")
        out.append(char)
        at += 1
    raise FormatError(f"{where}: a label value never closed")


def _labels(text: str, where: str) -> tuple[dict[str, str], str]:
    """The labels of ``{...}`` at the start of ``text`` and what follows them."""
    labels: dict[str, str] = {}
    at = 1
    while True:
        if text[at : at + 1] == "}":
            return labels, text[at + 1 :]
        match = LABEL.match(text, at)
        if not match or text[match.end() : match.end() + 2] != '="':
            raise FormatError(f'{where}: a label that is not name="value"')
        name = match.group()
        if name.startswith("__") or name in labels:
            raise FormatError(f"{where}: the label name {name} (reserved or twice)")
        labels[name], at = _label_value(text, match.end() + 2, where)
        if text[at : at + 1] == ",":
            at += 1
        elif text[at : at + 1] != "}":
            raise FormatError(f"{where}: labels not separated by a comma")


def _value(text: str, where: str) -> float:
    if text in SPECIAL:
        return SPECIAL[text]
    if not FLOAT.fullmatch(text):
        raise FormatError(f"{where}: {text!r} is not a sample value (or has a timestamp)")
    return float(text)


def _comment(line: str, families: dict[str, Family], where: str) -> str | None:
    """A HELP or TYPE line's metric name (None for any other comment)."""
    parts = line[1:].strip().split(None, 2)
    if len(parts) < 2 or parts[0] not in ("HELP", "TYPE"):
        return None
    name = parts[1]
    if not NAME.fullmatch(name):
        raise FormatError(f"{where}: {name!r} is not a metric name")
    family = families.setdefault(name, Family())
    rest = parts[2] if len(parts) > 2 else ""
    if parts[0] == "HELP":
        if family.help is not None:
            raise FormatError(f"{where}: a second HELP for {name}")
        if not HELP_TEXT.fullmatch(rest):
            raise FormatError(f"{where}: a HELP escape other than \\\\ and \\n")
        family.help = re.sub(r"\\(.)", lambda m: UNESCAPE[m.group(1)], rest)
    else:
        if family.type is not None or family.samples:
            raise FormatError(f"{where}: TYPE of {name} twice or after its samples")
        if rest not in TYPES:
            raise FormatError(f"{where}: {rest!r} is not a metric type")
        family.type = rest
    return name


def parse(text: str) -> dict[str, Family]:
    """{metric name: its Family} of the exposition ``text``; FormatError at the first fault."""
    if text and not text.endswith("\n"):
        raise FormatError("the last line does not end with a line feed")
    families: dict[str, Family] = {}
    done: set[str] = set()  # families whose group ended
    current = None
    for number, line in enumerate(text.split("\n")[:-1], 1):
        where = f"line {number}"
        if not line.strip():
            continue
        if line.lstrip().startswith("#"):
            name = _comment(line.lstrip(), families, where)
        else:
            match = NAME.match(line)
            if not match:
                raise FormatError(f"{where}: no metric name")
            name, rest = match.group(), line[match.end() :]
            labels, rest = _labels(rest, where) if rest.startswith("{") else ({}, rest)
            if not rest.startswith(" ") or len(rest.split()) != 1:
                raise FormatError(f"{where}: not '<name>{{labels}} <value>'")
            family = families.setdefault(name, Family())
            key = frozenset(labels.items())
            if key in family.samples:
                raise FormatError(f"{where}: {name}{labels} twice")
            family.samples[key] = _value(rest.strip(), where)
        if name is not None and name != current:
            if name in done:
                raise FormatError(f"{where}: the lines of {name} are not one group")
            if current is not None:
                done.add(current)
            current = name
    return families
