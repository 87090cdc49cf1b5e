# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The typed model of a run's findings: what the judge builds once and every writer renders.

- Case: one testcase (name, classname, status, ``message``: what happened, ``fix``: what to do
  about it, kept apart; ``output``: its details; time; ``finding``: the id of the finding it
  gives, when it gives one);
- Suite and SuiteFile: the testcases of one rank, host or concern, and the junit/ file of each
  (a rank's naming the rank's own result and log: ``files``);
- Finding: one thing wrong, with host, rank, check, class, what, fix and, for a consequence,
  a Pointer to its cause;
- Folded: the findings as a person reads them, each consequence under its cause, folded once;
- JudgedRun: the run with every judgement of it (src/nccl_preflight/core/judged_run.py judge_run
  builds it).

JUnit (core/junit_cases.py, core/junit.py), summary.md (core/summary.py), report.html
(core/html.py), verdict.json (core/verdict.py), the metrics (core/metrics.py) and the console
(core/console.py) render this model; none judges again, and nothing is joined into a string here
to be split apart there. A leaf of core: the standard library only, at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .bandwidth_rows import RunBandwidth
    from .exit_classes import ExitClass
    from .run_data import RunData
    from .run_stop import RunStop

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
_STATUS = attrgetter("status")


@dataclass(slots=True)
class Case:
    """One testcase: passed unless fail(), error() or skip() said otherwise."""

    name: str
    classname: str = ""
    time: float = 0.0  # seconds; 0 writes no time attribute
    stdout: str | None = None  # system-out: what a passed check saw, a pairwise row
    status: str = PASSED
    kind: str = ""  # the failure's or error's type ("hung", "transport"); "" the element's name
    message: str = ""  # what happened
    output: str | None = None  # the failure's, error's or skipped element's text: its details
    fix: str = ""  # what to do about it
    finding: str = ""  # the id of the finding this testcase gives (Finding.id), if any

    def fail(self, message: str, output: str | None = None, kind: str = "", fix: str = "") -> Case:
        return self._set(FAILED, message, output, kind, fix)

    def error(self, message: str, output: str | None = None, kind: str = "", fix: str = "") -> Case:
        return self._set(ERROR, message, output, kind, fix)

    def skip(self, message: str, output: str | None = None, fix: str = "") -> Case:
        return self._set(SKIPPED, message, output, "", fix)

    def _set(self, status: str, message: str, output: str | None, kind: str, fix: str) -> Case:
        self.status, self.message, self.output, self.kind, self.fix = (
            status,
            message,
            output,
            kind,
            fix,
        )
        return self

    @property
    def bad(self) -> bool:
        """A failure or an error: what fails the run."""
        return self.status in (FAILED, ERROR)


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


@dataclass(slots=True)
class SuiteFile:
    """A suite and its file under the run directory."""

    path: str  # relative to the run directory, e.g. junit/rank-3.xml
    suite: Suite
    kind: str  # "rank", "preflight", "pairwise", "bandwidth" or "run"
    host: str
    rank: int | None = None
    # A rank's own files in the run directory, (what, path relative to it): its result and its
    # log, which its junit/ file names (a suite's, not a testcase's: every test of the rank is
    # in them).
    files: tuple[tuple[str, str], ...] = ()


def finding_id(*parts: str) -> str:
    """A finding's id in verdict.json: host/check, host/rank-R/test, pairwise/host/test."""
    return "/".join(parts)


@dataclass(frozen=True, slots=True)
class Pointer:
    """Where a consequence's cause is: its finding's id, host and test."""

    id: str
    host: str
    test: str

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "host": self.host, "test": self.test}


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing wrong with the run (verdict.json's findings; docs/verdict.schema.json)."""

    id: str
    cls: str  # its exit class (core/exit_classes.py): "class" in verdict.json
    host: str
    rank: int | None
    test: str  # the check or test that found it
    what: str
    fix: str
    consequence: bool = False
    cause: Pointer | None = None
    named_cause: str = ""  # the id of the cause a pre-flight check named, until it is linked

    def pointer(self) -> Pointer:
        return Pointer(self.id, self.host, self.test)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "class": self.cls,
            "host": self.host,
            "rank": self.rank,
            "test": self.test,
            "what": self.what,
            "fix": self.fix,
            "consequence": self.consequence,
            "cause": self.cause.to_json() if self.cause else None,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Finding:
        """A finding as verdict.json holds it (a reader of that file: the console's callers)."""
        cause = doc.get("cause") or None
        return cls(
            id=str(doc.get("id") or ""),
            cls=str(doc.get("class") or ""),
            host=str(doc.get("host") or ""),
            rank=doc.get("rank"),
            test=str(doc.get("test") or ""),
            what=str(doc.get("what") or ""),
            fix=str(doc.get("fix") or ""),
            consequence=bool(doc.get("consequence")),
            cause=Pointer(str(cause.get("id")), str(cause.get("host")), str(cause.get("test")))
            if isinstance(cause, dict)
            else None,
        )


@dataclass(frozen=True)
class Folded:
    """The findings as a person reads them: each head (a finding no other finding of the run
    explains), and under each head's id the consequences it explains."""

    heads: list[Finding]
    under: dict[str, list[Finding]]

    def consequences_of(self, finding: Finding) -> list[Finding]:
        return self.under.get(finding.id, [])


def fold(found: list[Finding]) -> Folded:
    """Fold every consequence under its cause, in the findings' order; one whose pointer names
    no finding of the run is a head of its own. The one folding of every writer."""
    ids = {f.id for f in found if f.id}
    heads: list[Finding] = []
    under: dict[str, list[Finding]] = {}
    for item in found:
        if item.cause is not None and item.cause.id in ids:
            under.setdefault(item.cause.id, []).append(item)
        else:
            heads.append(item)
    return Folded(heads, under)


def folded_verdict(found: list[dict[str, Any]]) -> Folded:
    """verdict.json's ``findings`` as the judge folded them, for a reader that holds only that
    file: each finding as the model's (Finding.from_json), each consequence under the cause its
    pointer names (fold). The judge wrote the pointers; nothing is judged again here."""
    return fold([Finding.from_json(item) for item in found])


@dataclass(frozen=True)
class JudgedRun:
    """A run (its collected files) with every judgement of it, each made once."""

    run: RunData
    check_mode: bool  # the run was ansible-playbook --check: only the read-only checks ran
    stop: RunStop | None  # the stage that stopped the run before its ranks started (run_stop)
    transport: dict[str, Any]  # what NCCL used, per rank and host (transport_report.analyze_run)
    pairwise: dict[str, Any] | None  # pairwise.json's document (pairwise.pairwise_document)
    expectations: dict[str, Any]  # busbw against the expected and the baseline (evaluate)
    suites: list[SuiteFile]  # every testcase: pre-flight, ranks, transport, pairwise, bandwidth
    findings: list[Finding]  # most severe class first, causes before consequences
    folded: Folded  # the findings, each consequence under its cause (fold, once)
    totals: dict[str, int]  # tests, failures, errors, skipped over every suite
    failed: bool  # a failed or erroneous testcase anywhere, or no suite at all
    hosts: list[dict[str, Any]]  # per host: pre-flight in words, ranks passed and failed
    bandwidth: list[dict[str, Any]]  # busbw per collective at its largest size
    classes: list[str]  # every class found, in severity order
    exit_class: ExitClass  # the run's class: the most severe finding's
    rows: RunBandwidth | None = None  # every rank's bandwidth rows, read once (run_bandwidth)

    @property
    def run_id(self) -> str:
        return self.run.run_id
