# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The JUnit XML of the run's model (core/findings.py: Case, Suite), written directly as text.

Every suite builder fills the model (src/nccl_preflight/core/junit.py: pre-flight and ranks;
transport_report.py, pairwise.py, bandwidth_expectation.py: their testcases and suites);
junit.write_report writes it with the functions here, which only render it. The XML is what the
Jenkins xunit schema (jenkins-junit.xsd) accepts: no ``disabled`` or ``skipped`` on ``testsuites``,
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
from functools import lru_cache

from .findings import ERROR, FAILED, PASSED, SKIPPED, Case, Suite

_ELEMENT = {FAILED: "failure", ERROR: "error", SKIPPED: "skipped"}
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


def joined(case: Case) -> str:
    """The message attribute of a testcase's failure, error or skipped element: what happened,
    then its fix after "Hint: " (rendered here only; every reader takes Case.fix itself)."""
    if not case.fix:
        return case.message
    return f"{case.message} Hint: {case.fix}" if case.message else f"Hint: {case.fix}"


def case_xml(case: Case, lean: bool, classname: str, name: str | None = None) -> str:
    """The <testcase> element; ``classname`` and ``name`` (the case's own, when not given) as
    attributes (suite_forms escapes each once)."""
    head = f'{CASE_PAD}<testcase name="{attr(case.name) if name is None else name}"'
    if case.time:
        head += f' time="{fmt_time(case.time)}"'
    if classname:
        head += f' classname="{classname}"'
    inner = []
    if case.status != PASSED:
        element = _ELEMENT[case.status]
        tag = f'<{element} type="{attr(case.kind or element)}"'
        message = joined(case)
        if message:
            tag += f' message="{attr(message)}"'
        if case.output:
            tag += f">{text_node(case.output)}</{element}>"
        else:
            tag += "/>"
        inner.append(tag)
    if case.stdout and not (lean and case.status in (PASSED, SKIPPED)):
        inner.append(f"<system-out>{text_node(case.stdout)}</system-out>")
    if not inner:
        return head + "/>\n"
    body = "".join(f"{INNER_PAD}{line}\n" for line in inner)
    return f"{head}>\n{body}{CASE_PAD}</testcase>\n"


def _head(suite: Suite, counts: dict[str, int], seconds: float) -> str:
    head = (
        f'{INDENT}<testsuite errors="{counts["errors"]}" failures="{counts["failures"]}" '
        f'name="{attr(suite.name)}" skipped="{counts["skipped"]}" tests="{counts["tests"]}" '
        f'time="{fmt_time(seconds)}"'
    )
    if suite.hostname:
        head += f' hostname="{attr(suite.hostname)}"'
    if suite.timestamp:
        head += f' timestamp="{attr(suite.timestamp)}"'
    return head + ">\n"


def _properties(suite: Suite) -> list[str]:
    """A <property> line per property; every name and value escaped when any needs it."""
    props = suite.properties
    items = props.items()
    if escapes("".join(props) + "".join(props.values())):
        return [f'{CASE_PAD}<property name="{attr(k)}" value="{attr(v)}"/>\n' for k, v in items]
    return [f'{CASE_PAD}<property name="{k}" value="{v}"/>\n' for k, v in items]


_PASSED_HEAD = f'{CASE_PAD}<testcase name="'  # a passed testcase's line, up to its name
# A test name as an attribute: the same few names in every rank's suite, escaped once each.
_name_attr = lru_cache(maxsize=4096)(attr)


def suite_forms(
    suite: Suite,
    details_xml: str = "",
    counts: dict[str, int] | None = None,
    seconds: float | None = None,
) -> tuple[str, str]:
    """The <testsuite> element, full (with ``details_xml``: more <property> lines at CASE_PAD,
    the rank's own files) and lean; ``counts`` and ``seconds``: the suite's, when the caller
    has them (Suite.counts, Suite.seconds); ValueError for a suite without testcases."""
    if not suite.cases:
        raise ValueError(f"suite {suite.name} has no testcase; empty suites are not allowed")
    head = _head(
        suite,
        suite.counts() if counts is None else counts,
        suite.seconds if seconds is None else seconds,
    )
    props = _properties(suite)
    full, lean = [head], [head]
    if props or details_xml:
        full += [f"{INDENT}<properties>\n", *props, details_xml, f"{INDENT}</properties>\n"]
    if props:
        lean += [f"{INDENT}<properties>\n", *props, f"{INDENT}</properties>\n"]
    escaped: dict[str, str] = {}  # a classname or test name, escaped once (23 tests a rank)
    for case in suite.cases:
        classname = escaped.get(case.classname)
        if classname is None:
            classname = escaped[case.classname] = attr(case.classname)
        name = _name_attr(case.name)
        if case.status == PASSED and not case.stdout and case.time > 0 and classname:
            # A passed testcase with a time and nothing to say (most of 8,192 ranks' suites):
            # case_xml's line, the same in both forms.
            text = f'{_PASSED_HEAD}{name}" time="{case.time:.3f}" classname="{classname}"/>\n'
            full.append(text)
            lean.append(text)
            continue
        text = case_xml(case, False, classname, name)
        full.append(text)
        differs = case.stdout and case.status in (PASSED, SKIPPED)
        lean.append(case_xml(case, True, classname, name) if differs else text)
    tail = f"{INDENT}</testsuite>\n"
    return "".join([*full, tail]), "".join([*lean, tail])


def suite_xml(suite: Suite, lean: bool = False, details_xml: str = "") -> str:
    """The <testsuite> element, lean or full (suite_forms)."""
    return suite_forms(suite, details_xml)[1 if lean else 0]


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
        body.append(suite_xml(suite, lean))
        add_counts(totals, suite)
        seconds += round(suite.seconds, 3)
    return testsuites(body, totals, seconds, name)


def add_counts(totals: dict[str, int], suite: Suite) -> None:
    """Add ``suite``'s counts to ``totals`` (the keys it has)."""
    counts = suite.counts()
    for key in totals:
        totals[key] += counts[key]
