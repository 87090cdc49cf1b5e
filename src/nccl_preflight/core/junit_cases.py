# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The JUnit model of a run (Case, Suite) and its XML, written directly as text.

Every suite builder fills it (src/nccl_preflight/core/junit.py: pre-flight and ranks;
transport_report.py, pairwise.py, bandwidth_expectation.py: their testcases and suites);
summary.py and verdict.py read it; junit.write_report writes it. The XML is what the Jenkins
xunit schema (jenkins-junit.xsd) accepts: no ``disabled`` or ``skipped`` on ``testsuites``,
times with 3 decimals, no empty suite, only the attributes the schema knows. Whatever a node sent
(names, versions, messages, logs) is text without the control characters XML 1.0 forbids
(text.clean_text), and escaped here. Standard library only.

A suite is written in two forms: ``full`` (junit/<file>.xml: every property and every
testcase's system-out) and ``lean`` (the merged junit.xml: a passed or skipped testcase carries
no system-out, and the suite only its ``properties``, not its ``details``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
_ELEMENT = {FAILED: "failure", ERROR: "error", SKIPPED: "skipped"}
_STATUS = attrgetter("status")
INDENT = "  "
CASE_PAD, INNER_PAD = INDENT * 2, INDENT * 3  # a testcase's (and a property's) and what is in it
XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n'

# One search finds a string that needs work: a character XML 1.0 forbids (removed, as
# text.clean_text does) or one that markup needs escaped (& < > " and the whitespace an
# attribute would lose).
_SPECIAL = re.compile('[\x00-\x1f\x7f\ufffe\uffff&<>"]')
_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")
_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff&<>]")


def escapes(text: str) -> bool:
    """True when ``text`` has a character that attr() or text_node() changes."""
    return _SPECIAL.search(text) is not None


def attr(value: object) -> str:
    """``value`` as the text of a double-quoted attribute."""
    text = str(value)
    if not _SPECIAL.search(text):
        return text
    text = _ILLEGAL.sub("", text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace('"', "&quot;").replace("\n", "&#10;").replace("\r", "&#13;")
    return text.replace("\t", "&#09;")


def text_node(value: object) -> str:
    """``value`` as element text."""
    text = str(value)
    if not _TEXT.search(text):
        return text
    text = _ILLEGAL.sub("", text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fmt_time(seconds: float) -> str:
    return f"{max(seconds, 0.0):.3f}"


@dataclass(slots=True)
class Case:
    """One testcase: passed unless fail(), error() or skip() said otherwise."""

    name: str
    classname: str = ""
    time: float = 0.0  # seconds; 0 writes no time attribute
    stdout: str | None = None  # system-out: what a passed check saw, a pairwise row
    status: str = PASSED
    kind: str = ""  # the failure's or error's type ("hung", "transport"); "" the element's name
    message: str = ""
    output: str | None = None  # the failure's, error's or skipped element's text

    def fail(self, message: str, output: str | None = None, kind: str = "") -> Case:
        return self._set(FAILED, message, output, kind)

    def error(self, message: str, output: str | None = None, kind: str = "") -> Case:
        return self._set(ERROR, message, output, kind)

    def skip(self, message: str, output: str | None = None) -> Case:
        return self._set(SKIPPED, message, output, "")

    def _set(self, status: str, message: str, output: str | None, kind: str) -> Case:
        self.status, self.message, self.output, self.kind = status, message, output, kind
        return self

    @property
    def bad(self) -> bool:
        """A failure or an error: what fails the run."""
        return self.status in (FAILED, ERROR)

    def xml(self, lean: bool, classname: str) -> str:
        """The <testcase> element; ``classname`` as an attribute (Suite.forms escapes it once)."""
        head = f'{CASE_PAD}<testcase name="{attr(self.name)}"'
        if self.time:
            head += f' time="{fmt_time(self.time)}"'
        if classname:
            head += f' classname="{classname}"'
        inner = []
        if self.status != PASSED:
            element = _ELEMENT[self.status]
            tag = f'<{element} type="{attr(self.kind or element)}"'
            if self.message:
                tag += f' message="{attr(self.message)}"'
            if self.output:
                tag += f">{text_node(self.output)}</{element}>"
            else:
                tag += "/>"
            inner.append(tag)
        if self.stdout and not (lean and self.status in (PASSED, SKIPPED)):
            inner.append(f"<system-out>{text_node(self.stdout)}</system-out>")
        if not inner:
            return head + "/>\n"
        body = "".join(f"{INNER_PAD}{line}\n" for line in inner)
        return f"{head}>\n{body}{CASE_PAD}</testcase>\n"


@dataclass(slots=True)
class Suite:
    """One testsuite: its cases, host, start and properties."""

    name: str
    cases: list[Case]
    hostname: str | None = None
    timestamp: str | None = None
    properties: dict[str, str] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """tests, failures, errors, skipped."""
        statuses = list(map(_STATUS, self.cases))
        return {
            "tests": len(statuses),
            "failures": statuses.count(FAILED),
            "errors": statuses.count(ERROR),
            "skipped": statuses.count(SKIPPED),
        }

    @property
    def ok(self) -> bool:
        """No failure and no error."""
        statuses = set(map(_STATUS, self.cases))
        return FAILED not in statuses and ERROR not in statuses

    @property
    def seconds(self) -> float:
        return sum(case.time for case in self.cases)

    def _head(self, counts: dict[str, int]) -> str:
        head = (
            f'{INDENT}<testsuite errors="{counts["errors"]}" failures="{counts["failures"]}" '
            f'name="{attr(self.name)}" skipped="{counts["skipped"]}" tests="{counts["tests"]}" '
            f'time="{fmt_time(self.seconds)}"'
        )
        if self.hostname:
            head += f' hostname="{attr(self.hostname)}"'
        if self.timestamp:
            head += f' timestamp="{attr(self.timestamp)}"'
        return head + ">\n"

    def _properties(self) -> list[str]:
        """A <property> line per property; every name and value escaped when any needs it."""
        items = self.properties.items()
        if escapes("".join(self.properties) + "".join(self.properties.values())):
            return [f'{CASE_PAD}<property name="{attr(k)}" value="{attr(v)}"/>\n' for k, v in items]
        return [f'{CASE_PAD}<property name="{k}" value="{v}"/>\n' for k, v in items]

    def forms(self, details_xml: str = "") -> tuple[str, str]:
        """The <testsuite> element, full (with ``details_xml``: more <property> lines at
        CASE_PAD, a rank's every bandwidth row) and lean; ValueError for a suite without
        testcases."""
        if not self.cases:
            raise ValueError(f"suite {self.name} has no testcase; empty suites are not allowed")
        head = self._head(self.counts())
        props = self._properties()
        full, lean = [head], [head]
        if props or details_xml:
            full += [f"{INDENT}<properties>\n", *props, details_xml, f"{INDENT}</properties>\n"]
        if props:
            lean += [f"{INDENT}<properties>\n", *props, f"{INDENT}</properties>\n"]
        names: dict[str, str] = {}
        for case in self.cases:
            classname = names.get(case.classname)
            if classname is None:
                classname = names[case.classname] = attr(case.classname)
            text = case.xml(False, classname)
            full.append(text)
            differs = case.stdout and case.status in (PASSED, SKIPPED)
            lean.append(case.xml(True, classname) if differs else text)
        tail = f"{INDENT}</testsuite>\n"
        return "".join([*full, tail]), "".join([*lean, tail])

    def xml(self, lean: bool = False, details_xml: str = "") -> str:
        """The <testsuite> element, lean or full (forms)."""
        return self.forms(details_xml)[1 if lean else 0]


def testsuites(body: list[str], totals: dict[str, int], seconds: float, name: str = "") -> str:
    """A <testsuites> document around ``body`` (<testsuite> elements) with their ``totals``
    (tests, failures, errors) and ``seconds``."""
    head = f'<testsuites name="{attr(name)}"' if name else "<testsuites"
    head += "".join(f' {key}="{totals.get(key, 0)}"' for key in ("tests", "failures", "errors"))
    head += f' time="{fmt_time(seconds)}">\n'
    return "".join([XML_DECLARATION, head, *body, "</testsuites>\n"])


def document(suites: Iterable[Suite], name: str = "", lean: bool = False) -> str:
    """A <testsuites> document of the given (non-empty) suites, lean or full."""
    totals = {"tests": 0, "failures": 0, "errors": 0}
    seconds = 0.0
    body = []
    for suite in suites:
        body.append(suite.xml(lean))
        add_counts(totals, suite)
        seconds += round(suite.seconds, 3)
    return testsuites(body, totals, seconds, name)


def add_counts(totals: dict[str, int], suite: Suite) -> None:
    """Add ``suite``'s counts to ``totals`` (the keys it has)."""
    counts = suite.counts()
    for key in totals:
        totals[key] += counts[key]
