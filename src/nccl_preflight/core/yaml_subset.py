# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The YAML that nccl-preflight's variable files use, read with the standard library alone.

A node has no PyYAML, yet ``node-check --config FILE`` must read a config exactly as the control
machine does. ``load(text, source)`` reads one document and gives its value and the line of each
top-level key (``Document``); it returns what PyYAML's ``safe_load`` returns for the same text
(tests/unit/test_yaml_subset.py holds it to that on every variable file of the repository and on
edge cases), or raises ``YamlSubsetError("SOURCE:LINE: what is not supported")``.

The subset:
- one document, optionally opened by ``---`` and closed by ``...``; ``#`` comments;
- block mappings and block sequences (``- item``, ``- key: value``, a sequence under a key at the
  key's own indentation), nested to any depth; indentation by spaces;
- flow mappings and sequences (``{a: 1, b: [x, y]}``), on one line or over several;
- plain, single-quoted and double-quoted scalars on one line (double quotes: the escapes
  ``\\\\ \\" \\/ \\0 \\a \\b \\t \\n \\v \\f \\r \\e \\N \\_ \\L \\P \\xHH \\uHHHH \\UHHHHHHHH``);
- literal and folded block scalars (``|``, ``|-``, ``|+``, ``>``, ``>-``, ``>+``);
- plain scalars resolved as PyYAML resolves them (YAML 1.1): null (``~``, ``null``, empty),
  booleans (``true/false``, ``yes/no``, ``on/off`` in lower, Title and UPPER case; ``y``/``n``
  stay strings), integers (decimal, ``0x``, ``0b``, ``0``-prefixed octal, ``_`` separators),
  floats (``1.5``, ``1.``, ``.5``, ``6.02e+23`` with a signed exponent, ``.inf``, ``.nan``; so
  ``1e3`` stays a string, as in PyYAML).

Refused, with the line: anchors and aliases (``&a``, ``*a``), tags (``!!str``, ``!unsafe``,
``!vault``), merge keys (``<<``), complex keys (``?``), directives (``%YAML``), several
documents, a plain or quoted scalar continued on the next line, timestamps and base-60 numbers
(which PyYAML turns into dates and sexagesimal integers: quote them), block-scalar indentation
indicators, tabs in indentation, and a key given twice (PyYAML keeps the last silently).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

_BOOL = {
    **dict.fromkeys(("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
_NULL = ("", "~", "null", "Null", "NULL")
# PyYAML's implicit resolvers (yaml/resolver.py), kept whole so that what they refuse matches.
_INT = re.compile(
    r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+"
    r"|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$"
)
_FLOAT = re.compile(
    r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
    r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_TIMESTAMP = re.compile(
    r"^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]"
    r"|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?"
    r":[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$"
)
_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
    "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85",
    "_": "\xa0", "L": "\u2028", "P": "\u2029",
}  # fmt: skip
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_BLOCK_HEADER = re.compile(r"^([|>])([-+]?)(?:[ \t]+#.*)?[ \t]*$")


class YamlSubsetError(ValueError):
    """``SOURCE:LINE: what`` for text outside the subset or not YAML at all."""


class _Unclosed(YamlSubsetError):
    """A quoted scalar whose closing quote is not (yet) in the text."""


@dataclass
class Document:
    """One document's value and, when it is a mapping, the 1-based line of each top-level key."""

    value: Any
    key_lines: dict[Any, int] = field(default_factory=dict)


def load(text: str, source: str = "<string>") -> Document:
    """Read one YAML document of the subset; raise YamlSubsetError naming SOURCE:LINE."""
    return _Parser(text, source).document()


def resolve_plain(text: str, where: str = "<string>") -> Any:
    """A plain scalar's value as PyYAML's SafeLoader gives it (YAML 1.1 implicit types)."""
    if text in _NULL:
        return None
    if text in _BOOL:
        return _BOOL[text]
    if _INT.match(text):
        return _integer(text, where)
    if _FLOAT.match(text):
        return _float(text, where)
    if _TIMESTAMP.match(text):
        raise YamlSubsetError(f"{where}: {text!r} would be a date or time: quote it")
    if text == "<<":
        raise YamlSubsetError(f"{where}: merge keys (<<) are not supported")
    if text == "=":
        raise YamlSubsetError(f"{where}: '=' alone is not supported: quote it")
    return text


def _integer(text: str, where: str) -> int:
    digits = text.replace("_", "")
    sign = -1 if digits.startswith("-") else 1
    digits = digits.lstrip("+-")
    if ":" in digits:
        raise YamlSubsetError(f"{where}: base-60 number {text!r} is not supported: quote it")
    if digits.startswith("0b"):
        return sign * int(digits[2:], 2)
    if digits.startswith("0x"):
        return sign * int(digits[2:], 16)
    if digits != "0" and digits.startswith("0"):
        return sign * int(digits, 8)
    return sign * int(digits)


def _float(text: str, where: str) -> float:
    digits = text.replace("_", "").lower()
    if ":" in digits:
        raise YamlSubsetError(f"{where}: base-60 number {text!r} is not supported: quote it")
    if digits.endswith(".nan"):
        return math.nan
    if digits.endswith(".inf"):
        return -math.inf if digits.startswith("-") else math.inf
    return float(digits)


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _strip_comment(text: str) -> str:
    """The text before a `` #`` comment that lies outside quotes; trailing blanks removed."""
    quote = ""
    for index, char in enumerate(text):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"" and (index == 0 or text[index - 1] in " \t[{,:"):
            quote = char
        elif char == "#" and (index == 0 or text[index - 1] in " \t"):
            return text[:index].rstrip()
    return text.rstrip()


class _Parser:
    """Block structure by lines; flow collections and scalars by characters within them."""

    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self.lines = text.splitlines()
        self.index = 0
        self.flow_starts: list[tuple[int, int]] = []
        self.flow_key_lines: dict[Any, int] = {}

    # --- lines -------------------------------------------------------------------------------

    def where(self, index: int | None = None) -> str:
        return f"{self.source}:{(self.index if index is None else index) + 1}"

    def fail(self, what: str, index: int | None = None) -> YamlSubsetError:
        return YamlSubsetError(f"{self.where(index)}: {what}")

    def next_content(self) -> int | None:
        """Skip blank and comment-only lines; the index of the next line with content, or None."""
        while self.index < len(self.lines):
            line = self.lines[self.index]
            if line.strip() and not line.lstrip().startswith("#"):
                if "\t" in line[: len(line) - len(line.lstrip(" \t"))]:
                    raise self.fail("a tab in the indentation is not supported (use spaces)")
                return self.index
            self.index += 1
        return None

    def document(self) -> Document:
        self.skip_document_markers(start=True)
        if self.next_content() is None:
            return Document(None)
        top_lines: dict[Any, int] = {}
        value = self.block_node(-1, top_lines)
        if isinstance(value, dict) and not top_lines:  # a flow mapping: {a: 1, b: 2}
            top_lines = self.flow_key_lines
        self.skip_document_markers(start=False)
        if self.next_content() is not None:
            line = self.lines[self.index]
            if line.startswith("---"):
                raise self.fail("a second document is not supported")
            raise self.fail(f"{line.strip()!r} is not where a value can be (check its indentation)")
        return Document(value, top_lines)

    def skip_document_markers(self, start: bool) -> None:
        if self.next_content() is None:
            return
        line = _strip_comment(self.lines[self.index])
        if start and line.startswith("%"):
            raise self.fail("directives (%YAML, %TAG) are not supported")
        if start and (line == "---" or line.startswith("--- ")):
            rest = line[3:].strip()
            if rest:
                raise self.fail("a value on the '---' line is not supported")
            self.index += 1
        elif not start and line == "...":
            self.index += 1

    # --- block nodes ------------------------------------------------------------------------

    def block_node(self, parent_indent: int, key_lines: dict[Any, int] | None = None) -> Any:
        """The block node whose first line is the next content line, indented > parent_indent."""
        index = self.next_content()
        if index is None:
            return None
        line = self.lines[index]
        indent = _indent_of(line)
        if indent <= parent_indent:
            return None
        body = _strip_comment(line[indent:])
        if body == "?" or body.startswith("? "):
            raise self.fail("complex keys ('? ') are not supported")
        if body == "-" or body.startswith("- "):
            return self.block_sequence(indent)
        if _split_key(body) is not None:
            return self.block_mapping(indent, key_lines)
        if indent == 0 and _document_marker(line):
            return None
        self.index += 1
        value = self.inline_value(body, indent, parent_indent)
        return value

    def block_sequence(self, indent: int) -> list[Any]:
        items: list[Any] = []
        while (index := self.next_content()) is not None:
            line = self.lines[index]
            if _indent_of(line) != indent:
                if _indent_of(line) > indent:
                    raise self.fail("this line is indented more than the list item above it")
                break
            body = _strip_comment(line[indent:])
            if not (body == "-" or body.startswith("- ")) or _document_marker(line):
                break
            items.append(self.sequence_item(index, indent, body))
        return items

    def sequence_item(self, index: int, indent: int, body: str) -> Any:
        rest = body[1:].lstrip(" ")
        if not rest:
            self.index += 1
            return self.block_node(indent)
        column = indent + len(body) - len(rest)
        # A compact node (``- key: value`` or ``- - x``): read it as if it began at its column.
        if rest == "-" or rest.startswith("- ") or _split_key(rest) is not None:
            self.lines[index] = " " * column + self.lines[index][column:]
            return self.block_node(indent)
        self.index += 1
        return self.inline_value(rest, column, indent)

    def block_mapping(self, indent: int, key_lines: dict[Any, int] | None) -> dict[Any, Any]:
        mapping: dict[Any, Any] = {}
        lines_seen: dict[Any, int] = {}
        while (index := self.next_content()) is not None:
            line = self.lines[index]
            if _indent_of(line) != indent:
                if _indent_of(line) > indent:
                    raise self.fail("this line is indented more than the key above it")
                break
            body = _strip_comment(line[indent:])
            split = _split_key(body)
            if split is None:
                if body == "-" or body.startswith("- ") or _document_marker(line):
                    break
                raise self.fail(f"{body!r} is not 'key: value'")
            key_text, rest = split
            key = self.key(key_text)
            if key in lines_seen:
                raise self.fail(f"{key!r} is given twice (first on line {lines_seen[key] + 1})")
            lines_seen[key] = index
            self.index += 1
            mapping[key] = self.mapping_value(rest, indent)
        if key_lines is not None:
            key_lines.update({key: line + 1 for key, line in lines_seen.items()})
        return mapping

    def key(self, text: str) -> Any:
        if text.startswith("? ") or text == "?":
            raise self.fail("complex keys ('? ') are not supported")
        if text[0] in "[{":
            raise self.fail("a collection as a key is not supported")
        value = self.inline_value(text, 0, None)
        return value

    def mapping_value(self, rest: str, indent: int) -> Any:
        if not rest:
            index = self.next_content()
            if index is not None:
                line = self.lines[index]
                body = _strip_comment(line[_indent_of(line) :])
                same_level_list = _indent_of(line) == indent and (
                    body == "-" or body.startswith("- ")
                )
                if same_level_list:
                    return self.block_sequence(indent)
            return self.block_node(indent)
        return self.inline_value(rest, indent, indent)

    # --- values on a line -------------------------------------------------------------------

    def inline_value(self, text: str, column: int, parent_indent: int | None) -> Any:
        """The value written on the current line (self.index - 1) after a key or dash."""
        here = self.where(self.index - 1) if parent_indent is not None else self.where()
        first = text[0]
        if first in "&*":
            raise YamlSubsetError(f"{here}: anchors and aliases ({first}) are not supported")
        if first == "!":
            raise YamlSubsetError(f"{here}: tags ({text.split()[0]}) are not supported")
        if first in "%@`":
            raise YamlSubsetError(f"{here}: a plain value cannot start with {first!r}: quote it")
        if first in "|>" and parent_indent is not None:
            return self.block_scalar(text, parent_indent)
        if first in "[{":
            text = self.flow_text(text, parent_indent)
            flow = _Flow(text, here)
            value, end = flow.node(0)
            self.flow_key_lines = {
                key: max(line for start, line in self.flow_starts if start <= offset)
                for key, offset in flow.top_key_offsets.items()
            }
            if text[end:].strip():
                raise YamlSubsetError(f"{here}: {text[end:].strip()!r} after a flow collection")
            return value
        if first in "'\"":
            if parent_indent is not None:
                text = self.quoted_continued(text, parent_indent)
            value, end = _quoted(text, 0, here)
            rest = text[end:].strip()
            if rest and not rest.startswith("#"):
                raise YamlSubsetError(f"{here}: {rest!r} after a quoted value")
            return value
        if ": " in text or text.endswith(":"):
            raise YamlSubsetError(f"{here}: a second ':' on the line is not supported: quote it")
        if parent_indent is not None:
            text = self.plain_continued(text, parent_indent)
        return resolve_plain(text, here)

    def quoted_continued(self, text: str, parent_indent: int) -> str:
        """A quoted scalar's text with the lines that continue it up to its closing quote."""
        start, blanks = self.index - 1, 0
        while not _quote_closed(text, self.where(start)):
            if text.endswith("\\") and text[0] == '"':
                raise self.fail("an escaped line break in a quoted value is not supported", start)
            line = self.lines[self.index] if self.index < len(self.lines) else ""
            if line.strip() and _indent_of(line) <= parent_indent:
                raise self.fail("a quoted value is not closed", start)
            if self.index >= len(self.lines):
                raise self.fail("a quoted value is not closed", start)
            self.index += 1
            if not line.strip():
                blanks += 1
                continue
            text = text.rstrip(" ") + ("\n" * blanks if blanks else " ") + line.strip()
            blanks = 0
        return text

    def plain_continued(self, text: str, parent_indent: int) -> str:
        """A plain scalar with the lines that continue it (more indented), folded as YAML does."""
        if _strip_comment(self.lines[self.index - 1]) != self.lines[self.index - 1].rstrip():
            return text  # a comment ends a plain scalar
        parts = [text]
        index, blanks = self.index, 0
        while index < len(self.lines):
            line = self.lines[index]
            if not line.strip():
                blanks, index = blanks + 1, index + 1
                continue
            if _indent_of(line) <= parent_indent or line.lstrip().startswith("#"):
                break
            body = _strip_comment(line).strip()
            if ": " in body or body.endswith(":"):
                raise self.fail("a ':' in a value continued over lines is not supported", index)
            parts += ["\n" * blanks if blanks else " ", body]
            index, blanks = index + 1, 0
            self.index = index
            if body != line.strip():
                break
        return "".join(parts)

    def flow_text(self, text: str, parent_indent: int | None) -> str:
        """The flow collection's text, joined with the lines that continue it; where each line's
        part starts in it goes to self.flow_starts as (offset, 1-based line)."""
        parts = [text]
        self.flow_starts = [(0, self.index)]
        while parent_indent is not None and not _flow_closed(" ".join(parts)):
            if self.index >= len(self.lines):
                raise self.fail("a flow collection is not closed", self.index - 1)
            line = self.lines[self.index]
            self.index += 1
            stripped = _strip_comment(line)
            if stripped.strip():
                if _indent_of(line) <= parent_indent:
                    raise self.fail("a flow collection is not closed", self.index - 2)
                self.flow_starts.append((len(" ".join(parts)) + 1, self.index))
                parts.append(stripped.strip())
        return " ".join(parts)

    def block_scalar(self, header: str, parent_indent: int) -> str:
        match = _BLOCK_HEADER.match(header)
        if match is None:
            raise self.fail(f"block scalar header {header!r} is not supported", self.index - 1)
        style, chomping = match.groups()
        raw: list[str] = []
        indent = None
        while self.index < len(self.lines):
            line = self.lines[self.index]
            if line.strip():
                if indent is None:
                    indent = _indent_of(line)
                if _indent_of(line) < indent or indent <= parent_indent:
                    break
            raw.append(line)
            self.index += 1
        if indent is None or indent <= parent_indent:
            indent = max([parent_indent + 1] + [_indent_of(line) for line in raw])
        return _block_text([line[indent:] for line in raw], style, chomping)


def _block_text(lines: list[str], style: str, chomping: str) -> str:
    """Join a block scalar's lines (indentation removed) as PyYAML's scanner does."""
    chunks: list[str] = []
    breaks: list[str] = []
    line_break = ""
    index = 0
    leading = 0
    while index < len(lines) and not lines[index]:
        leading += 1
        index += 1
    breaks = ["\n"] * leading
    while index < len(lines):
        chunks.extend(breaks)
        text = lines[index]
        leading_non_space = not text.startswith((" ", "\t"))
        chunks.append(text)
        line_break = "\n"
        index += 1
        breaks = []
        while index < len(lines) and not lines[index]:
            breaks.append("\n")
            index += 1
        if index < len(lines):
            folds = style == ">" and leading_non_space and not lines[index].startswith((" ", "\t"))
            if folds:
                if not breaks:
                    chunks.append(" ")
            else:
                chunks.append(line_break)
    if chomping != "-":
        chunks.append(line_break)
    if chomping == "+":
        chunks.extend(breaks)
    return "".join(chunks)


def _split_key(body: str) -> tuple[str, str] | None:
    """(key text, rest) when the line is ``key: rest`` or ``key:``; None otherwise."""
    if not body or body[0] in "[{":
        return None
    if body[0] in "'\"":
        try:
            _, end = _quoted(body, 0, "")
        except YamlSubsetError:  # unclosed here, or a bad escape: not a key
            return None
        if body[end : end + 1] == ":" and body[end + 1 : end + 2] in ("", " "):
            return body[:end], body[end + 1 :].strip()
        return None
    match = re.search(r":(?: |$)", body)
    if match is None or body.startswith("- "):
        return None
    return body[: match.start()].rstrip(), body[match.end() :].strip()


def _document_marker(line: str) -> bool:
    return _strip_comment(line) in ("---", "...") or line.startswith("--- ")


def _quote_closed(text: str, where: str) -> bool:
    try:
        _quoted(text, 0, where)
    except _Unclosed:
        return False
    return True


def _flow_closed(text: str) -> bool:
    depth = 0
    quote = ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
    return depth <= 0


def _quoted(text: str, start: int, where: str) -> tuple[str, int]:
    """A quoted scalar starting at text[start]: its value and the index after the closing quote."""
    quote = text[start]
    out: list[str] = []
    index = start + 1
    while index < len(text):
        char = text[index]
        if quote == "'" and char == "'":
            if text[index + 1 : index + 2] == "'":
                out.append("'")
                index += 2
                continue
            return "".join(out), index + 1
        if quote == '"' and char == '"':
            return "".join(out), index + 1
        if quote == '"' and char == "\\":
            escaped, index = _escape(text, index + 1, where)
            out.append(escaped)
            continue
        out.append(char)
        index += 1
    raise _Unclosed(f"{where}: a quoted value is not closed")


def _escape(text: str, index: int, where: str) -> tuple[str, int]:
    code = text[index : index + 1]
    if not code:
        raise _Unclosed(f"{where}: a quoted value is not closed")
    if code in _ESCAPES:
        return _ESCAPES[code], index + 1
    if code in _HEX_ESCAPES:
        width = _HEX_ESCAPES[code]
        digits = text[index + 1 : index + 1 + width]
        if len(digits) == width and all(c in "0123456789abcdefABCDEF" for c in digits):
            return chr(int(digits, 16)), index + 1 + width
    raise YamlSubsetError(f"{where}: the escape \\{code} is not supported")


class _Flow:
    """``[a, b]`` and ``{k: v}`` with scalars and nested flow collections inside."""

    def __init__(self, text: str, where: str) -> None:
        self.text = text
        self.where = where
        self.depth = 0
        self.top_key_offsets: dict[Any, int] = {}  # the outermost mapping's keys: where they start

    def fail(self, what: str) -> YamlSubsetError:
        return YamlSubsetError(f"{self.where}: {what}")

    def skip(self, index: int) -> int:
        while index < len(self.text) and self.text[index] == " ":
            index += 1
        return index

    def node(self, index: int) -> tuple[Any, int]:
        index = self.skip(index)
        char = self.text[index : index + 1]
        if char in ("[", "{"):
            self.depth += 1
            try:
                return self.sequence(index + 1) if char == "[" else self.mapping(index + 1)
            finally:
                self.depth -= 1
        if char in ("'", '"'):
            return _quoted(self.text, index, self.where)
        if char and char in "&*!|>%@`?":
            raise self.fail(f"{char!r} inside a flow collection is not supported")
        end = index
        while end < len(self.text):
            if self.text[end] in ",[]{}" or self.text[end : end + 2] in (": ", ":,", ":}", ":]"):
                break
            if self.text[end] == ":" and end + 1 == len(self.text):
                break
            end += 1
        return resolve_plain(self.text[index:end].strip(), self.where), end

    def sequence(self, index: int) -> tuple[list[Any], int]:
        items: list[Any] = []
        while True:
            index = self.skip(index)
            if self.text[index : index + 1] == "]":
                return items, index + 1
            value, index = self.node(index)
            index = self.skip(index)
            if self.text[index : index + 1] == ":":
                raise self.fail("a 'key: value' pair inside [...] is not supported")
            items.append(value)
            index = self.separator(index, "]")

    def mapping(self, index: int) -> tuple[dict[Any, Any], int]:
        mapping: dict[Any, Any] = {}
        while True:
            index = self.skip(index)
            if self.text[index : index + 1] == "}":
                return mapping, index + 1
            if self.text[index : index + 1] in ("[", "{"):
                raise self.fail("a collection as a key is not supported")
            start = self.skip(index)
            key, index = self.node(index)
            if self.depth == 1:
                self.top_key_offsets[key] = start
            index = self.skip(index)
            value: Any = None
            if self.text[index : index + 1] == ":":
                value, index = self.node(index + 1)
            if key in mapping:
                raise self.fail(f"{key!r} is given twice")
            mapping[key] = value
            index = self.separator(index, "}")

    def separator(self, index: int, closing: str) -> int:
        index = self.skip(index)
        char = self.text[index : index + 1]
        if char == ",":
            return index + 1
        if char == closing:
            return index
        raise self.fail(
            f"expected ',' or {closing!r} in a flow collection, found {char or 'the end'!r}"
        )
