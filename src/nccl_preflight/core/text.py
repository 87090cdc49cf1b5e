# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Text from nodes and inventories made safe for the reports: file names, JUnit classnames,
XML 1.0 text, one-line Markdown, bounded log tails. Pure functions
(src/nccl_preflight/core/junit.py, the summary and the HTML report use them)."""

from __future__ import annotations

import re
from typing import Any

LOG_TAIL_LINES = 40
LOG_TAIL_CHARS = 6000

# XML 1.0 forbids most control characters (ANSI colour codes in logs are the usual source).
_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")


def safe_name(text: str) -> str:
    """A file-name-safe version of a host name."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


def host_label(host: str) -> str:
    """The host as one classname component: Jenkins splits classnames on dots."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", host)


def clean_text(text: str) -> str:
    return _ILLEGAL_XML.sub("", text)


# Markdown that a node's text could turn into markup: links and images ([ ] after !), HTML and
# autolinks (< >), code (`), emphasis (*), table cells (|), entities (&), and the escape itself.
_MD_ACTIVE = re.compile(r"([\\`*\[\]<>|&])")


def md_escape(text: Any) -> str:
    """``text`` as literal Markdown text on one line: every character that could start markup
    is backslash-escaped (CommonMark), a leading '#' too; control characters and line breaks go."""
    flat = " ".join(clean_text(str(text)).splitlines())
    escaped = _MD_ACTIVE.sub(r"\\\1", flat)
    return "\\" + escaped if escaped.startswith("#") else escaped


def tail(text: str | None, lines: int = LOG_TAIL_LINES, chars: int = LOG_TAIL_CHARS) -> str:
    """The last lines of a log, bounded in size."""
    if not text:
        return ""
    kept = "\n".join(text.rstrip("\n").splitlines()[-lines:])
    return kept[-chars:]
