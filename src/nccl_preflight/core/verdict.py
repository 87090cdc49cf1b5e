# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The verdict of one run: every finding with its host, what and fix, and the run's exit class.

Pure functions over what src/nccl_preflight/core/junit.py read and built (RunData, SuiteFile); the
result is reports/<run-id>/verdict.json (schema in docs/design.md) and the first section of
report.html. The class table lives in src/nccl_preflight/core/exit_classes.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from nccl_preflight.node.files import write_atomically

from .exit_classes import BY_NAME, code_table, most_severe
from .hints import is_below_threshold
from .run_stop import UNREACHABLE_CHECK, run_stop

VERDICT_SCHEMA = 1
_HINT = " Hint: "


def split_hint(message: str) -> tuple[str, str]:
    """(what, fix) of a JUnit message that nccl_junit joined as 'what Hint: fix'."""
    if message.startswith("Hint: "):
        return "", message[len("Hint: ") :]
    what, _, fix = message.partition(_HINT)
    return what, fix


def _preflight_findings(run: Any) -> list[dict[str, Any]]:
    found = []
    for host in run.hosts:
        if not host.reachable:
            found.append(
                {
                    "id": finding_id(host.host, UNREACHABLE_CHECK),
                    "class": "unreachable",
                    "host": host.host,
                    "rank": None,
                    "test": UNREACHABLE_CHECK,
                    "what": f"{host.host} was unreachable or failed before launch",
                    "fix": (
                        f"ansible {host.host} -m ansible.builtin.ping -i <inventory> shows why "
                        "(SSH address, key, user, a Python on the node); see the play output"
                    ),
                    "consequence": False,
                }
            )
        for item in (host.preflight or {}).get("results") or []:
            if item.get("status") not in ("failed", "error"):
                continue
            cause = item.get("cause") or {}
            test = str(item.get("check") or "unnamed")
            found.append(
                {
                    "id": finding_id(host.host, test),
                    "class": "preflight_failed",
                    "host": host.host,
                    "rank": None,
                    "test": test,
                    "what": str(item.get("message") or item.get("status")),
                    "fix": str(item.get("hint") or "")
                    or "see the check's message; rerun with --tags preflight once fixed",
                    "consequence": bool(cause),
                    # resolved by _link_causes: the id of the causing finding
                    "cause": finding_id(str(cause.get("host")), str(cause.get("check")))
                    if cause
                    else None,
                }
            )
    return found


def _rank_class(run: Any, host: Any, test: dict[str, Any] | None, kind: str) -> tuple[str, bool]:
    """(class, consequence) of one failed or erroneous rank testcase."""
    if test is not None and test.get("status") == "failed":
        if is_below_threshold(test):
            return "bandwidth", False
        if (test.get("details") or {}).get("refusal"):  # the backend refused it (nccl_check)
            return "rank_lost", False
        return "wrong_data", False
    if kind == "never started":
        skipped = str(run.plan.get("launch_skipped") or "")
        if not host.reachable or skipped.startswith("static rendezvous"):
            return "unreachable", True
        if skipped or run_stop(run) is not None:  # _link_causes gives it its cause's class
            return "preflight_failed", True
    return "rank_lost", False


def _rank_findings(run: Any, files: list[Any]) -> list[dict[str, Any]]:
    hosts = {h.host: h for h in run.hosts}
    found = []
    for item in files:
        if item.kind not in ("rank", "run"):
            continue
        host = hosts.get(item.host)
        doc = host.ranks.get(item.rank) if host is not None and item.rank is not None else None
        tests = {str(t.get("name")): t for t in (doc or {}).get("tests") or []}
        for case in item.suite.test_cases:
            for info in case.failures + case.errors:
                what, fix = split_hint(str(info.get("message") or ""))
                kind = str(info.get("type") or "")
                cls, consequence = (
                    _rank_class(run, host, tests.get(case.name), kind)
                    if host is not None
                    else ("rank_lost", False)
                )
                if consequence and not fix:
                    fix = "fix the finding that skipped the launch (above), then run again"
                found.append(
                    {
                        "id": finding_id(
                            item.host or "run",
                            *([f"rank-{item.rank}"] if item.rank is not None else []),
                            case.name,
                        ),
                        "class": cls,
                        "host": item.host,
                        "rank": item.rank,
                        "test": case.name,
                        "what": what or kind or "failed",
                        "fix": fix or f"read rank-{item.rank}.log on {item.host}",
                        "consequence": consequence,
                    }
                )
    return found


def _pairwise_findings(run: Any, files: list[Any]) -> list[dict[str, Any]]:
    """A slow node of the pairwise rounds (junit/pairwise.xml failure) names its host."""
    labels = {"pairwise." + _label(h.host): h.host for h in run.hosts}
    found = []
    for item in files:
        if item.kind != "pairwise":
            continue
        for case in item.suite.test_cases:
            for info in case.failures:
                what, fix = split_hint(str(info.get("message") or ""))
                timed_out = info.get("type") == "pair timed out"
                host = labels.get(str(case.classname), str(case.classname))
                found.append(
                    {
                        "id": finding_id("pairwise", host, case.name),
                        "class": "rank_lost" if timed_out else "bandwidth",
                        "host": host,
                        "rank": None,
                        "test": case.name,
                        "what": what or "slow node",
                        "fix": fix or "see junit/pairwise.xml: the node's pairs and rails",
                        "consequence": False,
                    }
                )
    return found


def _label(host: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", host)  # as nccl_pairwise's classnames


TWO_NODES = (
    "with two nodes the pairwise rounds cannot tell which of them is bad (a slow or dead pair "
    "is the same pair for both), so they are not run again to name it: run each node alone, or "
    "add a third node"
)


def _two_nodes(run: Any, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """On two nodes, a lost rank's finding says why no node is named (issue 14, item 3)."""
    if len(run.hosts) != 2:
        return found
    return [
        {**f, "fix": f"{f['fix']}; {TWO_NODES}"} if f["class"] == "rank_lost" else f for f in found
    ]


def finding_id(*parts: str) -> str:
    """A finding's id in verdict.json: host/check, host/rank-R/test, pairwise/host/test."""
    return "/".join(parts)


def _rank_cause(run: Any, finding: dict[str, Any], causes: dict[str, Any]) -> str | None:
    """The id of the finding that kept a rank from starting: its own host's part in what
    stopped the run, else the most severe of the others (src/nccl_preflight/core/run_stop.py)."""
    host = next((h for h in run.hosts if h.host == finding["host"]), None)
    if host is not None and not host.reachable:
        return finding_id(host.host, UNREACHABLE_CHECK)
    stop = run_stop(run)
    ids = [finding_id(h, check) for h, check in (stop.causes if stop else [])]
    own = [i for i in ids if i in causes and causes[i]["host"] == finding["host"]]
    order = list(code_table())
    others = sorted((i for i in ids if i in causes), key=lambda i: order.index(causes[i]["class"]))
    return (own + others + [None])[0]


def _link_causes(run: Any, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every consequence gets ``cause: {id, host, test}`` and its cause's class; a finding whose
    cause is not among the findings is a cause of its own. A rank that never started keeps its
    class and no pointer when nothing found explains it."""
    causes = {f["id"]: f for f in found if not f["consequence"]}
    linked = []
    for f in found:
        if not f["consequence"]:
            linked.append({**f, "cause": None})
            continue
        cause = causes.get(f["cause"] if f["rank"] is None else _rank_cause(run, f, causes))
        if cause is None:
            linked.append({**f, "cause": None, "consequence": f["rank"] is not None})
            continue
        pointer = {"id": cause["id"], "host": cause["host"], "test": cause["test"]}
        linked.append({**f, "class": cause["class"], "cause": pointer})
    return linked


def findings(run: Any, files: list[Any]) -> list[dict[str, Any]]:
    """Every finding, most severe class first, causes before consequences, in host order."""
    found = _preflight_findings(run) + _rank_findings(run, files) + _pairwise_findings(run, files)
    found = _link_causes(run, _two_nodes(run, found))
    order = list(code_table())
    return sorted(found, key=lambda f: (f["consequence"], order.index(f["class"])))


def build_verdict(
    run: Any, files: list[Any], summary: dict[str, Any], check_mode: bool = False
) -> dict[str, Any]:
    """verdict.json of the run (schema in docs/design.md)."""
    found = findings(run, files)
    classes = {f["class"] for f in found}
    if summary.get("verdict") == "failed" and not classes:
        classes = {"rank_lost"}  # a failed run nothing above explains: no result at all
    chosen = most_severe(classes)
    return {
        "schema": VERDICT_SCHEMA,
        "run_id": run.run_id,
        "class": chosen.name,
        "exit_code": chosen.code,
        "meaning": chosen.meaning,
        # --check (a dry run: nothing launched) marks the verdict; set by the caller.
        "check_mode": bool(check_mode),
        "classes": [c for c in code_table() if c in classes],
        "totals": summary.get("totals", {}),
        "findings": found,
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
