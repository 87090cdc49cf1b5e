# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The verdict of one run: every finding with its host, what and fix, and the run's exit class.

Pure functions over what src/nccl_preflight/core/run_data.py read (RunData) and
src/nccl_preflight/core/junit.py built (SuiteFile), called once per report by
src/nccl_preflight/core/judged_run.py; verdict_document renders reports/<run-id>/verdict.json
(schema in docs/design.md; as a JSON Schema in docs/verdict.schema.json). The findings are the
typed Finding of src/nccl_preflight/core/findings.py, each with its what and fix apart as the
testcase that gave it kept them. The class table lives in src/nccl_preflight/core/exit_classes.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nccl_preflight.node.files import write_atomically

from .exit_classes import BY_NAME, ExitClass, code_table, most_severe
from .findings import Finding, finding_id
from .hints import is_below_threshold
from .run_cause import fold_under_cause, run_cause
from .run_data import unreachable_fix
from .run_stop import INTERRUPTED_TEST, UNREACHABLE_CHECK, RunStop

if TYPE_CHECKING:
    from .findings import JudgedRun, SuiteFile
    from .run_data import HostData, RunData

VERDICT_SCHEMA = 1


def _preflight_findings(run: RunData) -> list[Finding]:
    found = []
    for host in run.hosts:
        if not host.reachable:
            found.append(
                Finding(
                    id=finding_id(host.host, UNREACHABLE_CHECK),
                    cls="unreachable",
                    host=host.host,
                    rank=None,
                    test=UNREACHABLE_CHECK,
                    what=f"{host.host} was unreachable or failed before launch",
                    fix=unreachable_fix(run, host.host),
                )
            )
        for item in (host.preflight or {}).get("results") or []:
            if item.get("status") not in ("failed", "error"):
                continue
            cause = item.get("cause") or {}
            test = str(item.get("check") or "unnamed")
            found.append(
                Finding(
                    id=finding_id(host.host, test),
                    cls="preflight_failed",
                    host=host.host,
                    rank=None,
                    test=test,
                    what=str(item.get("message") or item.get("status")),
                    fix=str(item.get("hint") or "")
                    or "see the check's message; rerun with --tags preflight once fixed",
                    consequence=bool(cause),
                    # resolved by _link_causes: the id of the causing finding
                    named_cause=finding_id(str(cause.get("host")), str(cause.get("check")))
                    if cause
                    else "",
                )
            )
    return found


def _rank_class(
    run: RunData | None,
    host: HostData | None,
    test: dict[str, Any] | None,
    kind: str,
    stop: RunStop | None = None,
) -> tuple[str, bool]:
    """(class, consequence) of one failed or erroneous rank testcase (``stop``: what stopped the
    run before its ranks started, src/nccl_preflight/core/run_stop.py)."""
    if test is not None and test.get("status") == "failed":
        if is_below_threshold(test):
            return "bandwidth", False
        if (test.get("details") or {}).get("refusal"):  # the backend refused it (nccl_check)
            return "rank_lost", False
        return "wrong_data", False
    if kind == "never started":
        skipped = str(run.plan.get("launch_skipped") or "") if run is not None else ""
        if (host is not None and not host.reachable) or skipped.startswith("static rendezvous"):
            return "unreachable", True
        if skipped or stop is not None:  # _link_causes gives it its cause's class
            return "preflight_failed", True
    return "rank_lost", False


def _rank_findings(run: RunData, files: list[SuiteFile], stop: RunStop | None) -> list[Finding]:
    """A finding per failed or erroneous testcase of a rank's (or the run's) suite; each case
    keeps its finding's id (Case.finding)."""
    hosts = {h.host: h for h in run.hosts}
    found = []
    for item in files:
        if item.kind not in ("rank", "run") or item.suite.ok:
            continue
        host = hosts.get(item.host)
        doc = host.ranks.get(item.rank) if host is not None and item.rank is not None else None
        tests = {str(t.get("name")): t for t in (doc or {}).get("tests") or []}
        rank = [f"rank-{item.rank}"] if item.rank is not None else []
        for case in item.suite.cases:
            if not case.bad:
                continue
            cls, consequence = (
                _rank_class(run, host, tests.get(case.name), case.kind, stop)
                if host is not None
                else ("rank_lost", False)
            )
            fix = case.fix
            if consequence and not fix:
                fix = "fix the finding that skipped the launch (above), then run again"
            case.finding = finding_id(item.host or "run", *rank, case.name)
            found.append(
                Finding(
                    id=case.finding,
                    cls=cls,
                    host=item.host,
                    rank=item.rank,
                    test=case.name,
                    what=case.message or case.kind or "failed",
                    fix=fix or f"read rank-{item.rank}.log on {item.host}",
                    consequence=consequence,
                )
            )
    return found


def _pairwise_findings(pairwise: dict[str, Any] | None) -> list[Finding]:
    """A slow node of the pairwise rounds, or one whose pair timed out, names its host
    (``pairwise``: src/nccl_preflight/core/pairwise.py's document, pairwise.json)."""
    found = []
    for verdict in (pairwise or {}).get("verdicts") or []:
        if verdict.get("status") not in ("slow", "timed out"):
            continue
        host = str(verdict["host"])
        found.append(
            Finding(
                id=finding_id("pairwise", host, "pairwise"),
                cls="rank_lost" if verdict["status"] == "timed out" else "bandwidth",
                host=host,
                rank=None,
                test="pairwise",
                what=str(verdict.get("message") or "") or "slow node",
                fix="see junit/pairwise.xml: the node's pairs and rails",
            )
        )
    return found


TWO_NODES = (
    "with two nodes the pairwise rounds cannot tell which of them is bad (a slow or dead pair "
    "is the same pair for both), so they are not run again to name it: run each node alone, or "
    "add a third node"
)


def _two_nodes(run: RunData, found: list[Finding]) -> list[Finding]:
    """On two nodes, a lost rank's finding says why no node is named (issue 14, item 3)."""
    if len(run.hosts) != 2:
        return found
    return [
        replace(f, fix=f"{f.fix.rstrip('.')}; {TWO_NODES}") if f.cls == "rank_lost" else f
        for f in found
    ]


def _rank_cause(
    hosts: dict[str, HostData], stop: RunStop | None, finding: Finding, causes: dict[str, Finding]
) -> str | None:
    """The id of the finding that kept a rank from starting: its own host's part in what
    stopped the run, else the most severe of the others (src/nccl_preflight/core/run_stop.py)."""
    host = hosts.get(finding.host)
    if host is not None and not host.reachable:
        return finding_id(host.host, UNREACHABLE_CHECK)
    ids = [finding_id(h, check) for h, check in (stop.causes if stop else [])]
    own = [i for i in ids if i in causes and causes[i].host == finding.host]
    order = list(code_table())
    others = sorted((i for i in ids if i in causes), key=lambda i: order.index(causes[i].cls))
    return (own + others + [None])[0]


def _link_causes(run: RunData, stop: RunStop | None, found: list[Finding]) -> list[Finding]:
    """Every consequence gets its cause's Pointer and class; a finding whose cause is not among
    the findings is a cause of its own. A rank that never started keeps its class and no
    pointer when nothing found explains it."""
    causes = {f.id: f for f in found if not f.consequence}
    hosts = {h.host: h for h in run.hosts}
    linked = []
    for f in found:
        if not f.consequence:
            linked.append(f)
            continue
        named = f.named_cause if f.rank is None else _rank_cause(hosts, stop, f, causes)
        cause = causes.get(named or "")
        if cause is None:
            linked.append(replace(f, consequence=f.rank is not None, named_cause=""))
            continue
        linked.append(replace(f, cls=cause.cls, cause=cause.pointer(), named_cause=""))
    return linked


INTERRUPTED_ID = f"run/{INTERRUPTED_TEST}"


def _interruption(run: RunData, found: list[Finding]) -> list[Finding]:
    """A run cut short from outside (plan.json's ``interrupted``: Ctrl-C of the slurm command,
    scancel of its job) has no verdict: one finding says so (in place of the one the JUnit's
    ``interrupted`` testcase gave), and every rank lost because of it is its consequence."""
    why = str(run.plan.get("interrupted") or "")
    if not why:
        return found
    head = Finding(
        id=INTERRUPTED_ID,
        cls="no_verdict",
        host="",
        rank=None,
        test=INTERRUPTED_TEST,
        what=f"the run was cut short: {why}",
        fix="run it again to the end (nothing of this run is left on the nodes)",
    )
    # Its ranks: those of a host whose launch never came back or was stopped (the command's
    # stop, or the node's own on scancel's SIGTERM); a rank's own failure stays a finding.
    stopped = {h.host for h in run.hosts if h.launch is None or h.launch.get("stopped_by")}
    pointer = head.pointer()
    linked = [
        replace(f, cls="no_verdict", consequence=True, cause=pointer)
        if f.rank is not None and f.host in stopped and f.cause is None
        else f
        for f in found
    ]
    return [head, *(f for f in linked if f.id != INTERRUPTED_ID)]


def findings(
    run: RunData,
    files: list[SuiteFile],
    pairwise: dict[str, Any] | None,
    stop: RunStop | None,
) -> list[Finding]:
    """Every finding, most severe class first, causes before consequences, in host order:
    the pre-flight's, the ranks' testcases' (``files``), the pairwise verdicts' (``pairwise``);
    ``stop``: what stopped the run before its ranks started (run_stop)."""
    found = _preflight_findings(run) + _rank_findings(run, files, stop)
    found = _link_causes(run, stop, _two_nodes(run, found + _pairwise_findings(pairwise)))
    if stop is None:  # what ended the run while its ranks ran, named: the rest is its consequence
        found = fold_under_cause(run_cause(run), found)
    found = _interruption(run, found)
    order = list(code_table())
    return sorted(found, key=lambda f: (f.consequence, order.index(f.cls)))


def exit_class(found: list[Finding], failed: bool) -> tuple[list[str], ExitClass]:
    """(every class found, in severity order; the run's class): the most severe finding's; a
    failed run nothing found explains (no result at all) is rank_lost; a run cut short from
    outside (a no_verdict finding: _interruption) has no verdict, whatever else it found."""
    classes = {f.cls for f in found}
    if failed and not classes:
        classes = {"rank_lost"}
    chosen = BY_NAME["no_verdict"] if "no_verdict" in classes else most_severe(classes)
    return [c for c in code_table() if c in classes], chosen


def verdict_document(judged: JudgedRun) -> dict[str, Any]:
    """verdict.json of the run (docs/design.md; docs/verdict.schema.json)."""
    chosen = judged.exit_class
    return {
        "schema": VERDICT_SCHEMA,
        "run_id": judged.run.run_id,
        "class": chosen.name,
        "exit_code": chosen.code,
        "meaning": chosen.meaning,
        # --check (a dry run: nothing launched) marks the verdict; set by the caller.
        "check_mode": bool(judged.check_mode),
        "classes": judged.classes,
        "totals": judged.totals,
        "findings": [f.to_json() for f in judged.findings],
        "exit_codes": code_table(),
    }


def write_verdict(where: Path, verdict: dict[str, Any], name: str = "verdict.json") -> Path:
    """Write where/name (or the file `where` itself when name is empty)."""
    path = where / name if name else where
    write_atomically(path, json.dumps(verdict, indent=2, sort_keys=True) + "\n")
    return path


def describe(name: str) -> str:
    item = BY_NAME[name]
    return f"{item.name} (exit {item.code}): {item.meaning}"
