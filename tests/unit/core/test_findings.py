# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The typed model of a run's findings (src/nccl_preflight/core/findings.py): built once by the
judge, what and fix kept apart, causes folded once, every writer rendering the same model."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core.console import console_lines
from nccl_preflight.core.findings import Finding, Pointer, fold, folded_verdict
from nccl_preflight.core.judged_run import judge_run
from nccl_preflight.core.run_data import read_run
from nccl_preflight.core.summary import summarize
from nccl_preflight.core.verdict import verdict_document
from tests.builders.report import RunDir, report


def _finding(fid: str, host: str, cause: str = "") -> Finding:
    pointer = Pointer(cause, "h0", "t") if cause else None
    return Finding(fid, "rank_lost", host, 0, "t", f"what {fid}", "fix", bool(cause), pointer)


def test_fold_puts_each_consequence_under_its_cause_once() -> None:
    head, other = _finding("a", "h0"), _finding("b", "h1")
    under = _finding("c", "h2", cause="a")
    orphan = _finding("d", "h3", cause="gone")  # its cause is no finding of the run
    folded = fold([head, under, other, orphan])
    assert folded.heads == [head, other, orphan]
    assert folded.consequences_of(head) == [under] and folded.consequences_of(other) == []


def test_a_finding_is_verdict_json_and_back() -> None:
    finding = _finding("c", "h2", cause="a")
    doc = finding.to_json()
    assert doc["class"] == "rank_lost" and doc["cause"] == {"id": "a", "host": "h0", "test": "t"}
    assert Finding.from_json(json.loads(json.dumps(doc))) == finding
    assert _finding("a", "h0").to_json()["cause"] is None


def _wrong(message: str, hint: str) -> dict[str, Any]:
    return {
        "name": "all_reduce_sum",
        "status": "failed",
        "duration_s": 0.01,
        "message": message,
        "details": {"wrong": 1, "hint": hint},
        "bandwidth": [],
    }


def test_what_and_fix_stay_apart_even_when_a_node_writes_hint_in_its_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The finding takes the testcase's own fields: a message that says " Hint: " itself is
    never cut there (it was, when the JUnit message was split back into what and fix)."""
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).all_passed()
    message = "7 of 8 wrong Hint: the node's own words"
    path = run.dir / "node2" / "rank-1.json"
    doc = json.loads(path.read_text())
    doc["tests"] = [
        _wrong(message, "reseat the cable") if t["name"] == "all_reduce_sum" else t
        for t in doc["tests"]
    ]
    doc["status"] = "failed"
    path.write_text(json.dumps(doc))
    verdict = report(run, capsys)
    (found,) = [f for f in verdict["findings"] if f["test"] == "all_reduce_sum"]
    assert (found["what"], found["fix"]) == (message, "reseat the cable")
    # JUnit renders them joined for Jenkins' one message attribute; nothing reads it back.
    cases = ET.parse(run.dir / "junit.xml").getroot().iter("testcase")
    failures = [c.find("failure") for c in cases if c.get("name") == "all_reduce_sum"]
    (failure,) = [f for f in failures if f is not None]
    assert failure.get("message") == f"{message} Hint: reseat the cable"


def _lost_run(tmp_path: Path) -> RunDir:
    """node1's ranks passed; node2 unreachable: its ranks never started (consequences)."""
    run = RunDir(tmp_path, ["node1", "node2", "node3"], nproc=2).plan(unreachable=("node2",))
    for host in ("node1", "node3"):
        run.preflight(host).launch(host)
        for local in range(2):
            run.rank(host, local)
    return run


def test_the_judge_builds_the_model_once_and_every_writer_renders_it(tmp_path: Path) -> None:
    judged = judge_run(read_run(_lost_run(tmp_path).dir))
    ids = {f.id for f in judged.findings}
    # Every failed testcase of a rank, the run or a pre-flight names its finding in the model.
    bad = [
        (item, case)
        for item in judged.suites
        if item.kind in ("rank", "run", "preflight")
        for case in item.suite.cases
        if case.bad
    ]
    assert bad and all(case.finding in ids for _, case in bad)
    # The folding is made once, and it is a partition of the findings.
    folded = judged.folded
    under = [c for rest in folded.under.values() for c in rest]
    assert sorted(f.id for f in folded.heads + under) == sorted(ids)
    (head,) = [f for f in folded.heads if not f.consequence]
    assert (head.host, head.cls, head.test) == ("node2", "unreachable", "host reachable")
    assert {c.rank for c in folded.consequences_of(head)} == {2, 3}
    # verdict.json is the model's findings, word for word.
    doc = verdict_document(judged)
    assert doc["findings"] == [f.to_json() for f in judged.findings]
    # summary.md folds the ranks' lines under the host's own line, as the model does.
    markdown = summarize(judged)["markdown"]
    problems = markdown.split("Problems:", 1)[1]
    assert problems.count("  - consequence: nccl.node2.rank") == 2
    # The console renders the same folding from the model and from verdict.json alone.
    result = {**summarize(judged), "findings": doc["findings"], "run_id": judged.run_id}
    from_file = folded_verdict(doc["findings"])
    assert [f.to_json() for f in from_file.heads] == [f.to_json() for f in folded.heads]
    assert {k: [f.to_json() for f in v] for k, v in from_file.under.items()} == {
        k: [f.to_json() for f in v] for k, v in folded.under.items()
    }
    assert console_lines(result, judged.folded) == console_lines(result, from_file)
    assert any("consequence: node2 rank 2" in line for line in console_lines(result, from_file))
