# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The report of a big run (issue 37): the lean junit.xml and the full junit/ files, the console's
40 lines, summary.md and report.html failing first with the healthy hosts folded into one row,
the compact bandwidth rows and the Slurm hostlists. The run is bench/report_scale.py's synthetic
run directory (made from the two recorded real runs in tests/fixtures/report_scale/) at a size a
test affords; the timings at 128 to 1,024 nodes are the benchmark's (BENCHMARKS.md)."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from bench.report_scale import PER_NODE, WRONG_LOCAL, read_source, report_params, synthesize
from nccl_preflight.core import forked, report_run
from nccl_preflight.core.bandwidth_rows import (
    COLUMNS,
    READ,
    BandwidthRows,
    compact,
    run_bandwidth,
    size_values,
)
from nccl_preflight.core.console import MAX_LINES, console_lines
from nccl_preflight.core.findings import folded_verdict
from nccl_preflight.core.hostlist import compress, expand
from nccl_preflight.core.report_run import run_report
from tests.browser import browser_unavailable_reason, open_page
from tests.jenkins_schema import validate_report_junit

NODES = 20  # gpu0017 holds the wrong rank; 19 healthy hosts: gpu[0001-0016,0018-0020]
WRONG = 16 * PER_NODE + WRONG_LOCAL
FORKED_NODES = 64  # core/run_data.py FORK_FROM_HOSTS; 512 suites: report_run.FORK_FROM_SUITES


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The synthetic run of NODES x 8 ranks, reported as the report play reports it."""
    root = tmp_path_factory.mktemp("reports")
    made = synthesize(read_source(), root, NODES)
    return Path(made["run_dir"]), run_report(report_params(root, made["run_id"]), False)


def test_the_findings_name_the_one_wrong_rank(big: tuple[Path, dict[str, Any]]) -> None:
    _, result = big
    assert result["exit_class"] == "wrong_data"
    assert {(f["host"], f["rank"]) for f in result["findings"]} == {("gpu0017", WRONG)}
    assert all(f"Suspect: rank {WRONG} on gpu0017" in f["fix"] for f in result["findings"])
    assert [row["host"] for row in result["hosts"] if not row["ok"]] == ["gpu0017"]


def test_junit_xml_is_lean_and_junit_keeps_the_details(big: tuple[Path, dict[str, Any]]) -> None:
    run_dir, _ = big
    validate_report_junit(run_dir)
    merged = ET.parse(run_dir / "junit.xml").getroot()
    ranks = [s for s in merged.iter("testsuite") if s.get("name", "").startswith("nccl.")]
    assert len(ranks) == NODES * PER_NODE  # every planned rank
    # A passed or skipped testcase carries no system-out; a rank suite no bandwidth rows.
    assert merged.find(".//system-out") is None
    assert not [p for p in merged.iter("property") if p.get("name", "").startswith("bandwidth.")]
    wrong = next(s for s in ranks if s.get("name") == f"nccl.gpu0017.rank{WRONG}")
    failure = next(c for c in wrong.iter("testcase") if c.get("name") == "all_reduce_sum")
    assert "Hint: Suspect: rank" in failure.find("failure").get("message")  # type: ignore[union-attr]
    assert json.loads(failure.find("failure").text)["got"] == 4  # type: ignore[union-attr,arg-type]
    # The rank's own file names the rank's result (every bandwidth row) and log in the run
    # directory, copies no row; the host's holds what every passed check saw.
    own = ET.parse(run_dir / "junit" / f"rank-{WRONG}.xml").getroot()
    props = {p.get("name"): p.get("value") for p in own.iter("property")}
    assert not [n for n in props if n and n.startswith("bandwidth.")]
    assert (props["file.result"], props["file.log"]) == (
        f"gpu0017/rank-{WRONG}.json",
        f"gpu0017/rank-{WRONG}.log",
    )
    result = json.loads((run_dir / str(props["file.result"])).read_text())
    assert result["global_rank"] == WRONG
    assert sum(len(t["bandwidth"]) for t in result["tests"]) == 77
    assert "all_reduce_sum" in (run_dir / str(props["file.log"])).read_text()
    # ... and the same testcases as the merged file, the failures in full.
    assert [ET.tostring(c) for c in own.iter("testcase")] == [
        ET.tostring(c) for c in wrong.iter("testcase")
    ]
    pre = ET.parse(run_dir / "junit" / "preflight-gpu0001.xml").getroot()
    assert "MTU 65536" in "".join(pre.itertext())
    assert sorted(p.name for p in (run_dir / "junit").glob("rank-*.xml")) == sorted(
        f"rank-{r}.xml" for r in range(NODES * PER_NODE)
    )


def test_the_console_folds_the_healthy_hosts_into_one_line(
    big: tuple[Path, dict[str, Any]],
) -> None:
    _, result = big
    lines = result["console"]
    assert len(lines) <= MAX_LINES
    hosts = lines[lines.index("Hosts (20: 1 failing, 19 ok):") + 1 :][:2]
    assert hosts[0].split() == ["failing", "1", "gpu0017"]
    assert hosts[1].split() == ["ok", "19", "gpu[0001-0016,0018-0020]"]
    assert "Failures (6):" in lines and "  6. gpu0017 rank 129 bandwidth_all_reduce: " in "\n".join(
        lines
    )


def test_the_console_says_where_the_failures_it_has_no_room_for_are() -> None:
    hosts = [
        {"host": f"gpu{i:04d}", "node_rank": i, "reachable": i >= 50, "preflight": "not run",
         "ranks_passed": 0, "ranks_failed": 0 if i >= 50 else 8, "ranks": [], "ok": i >= 50}
        for i in range(1024)
    ]  # fmt: skip
    found = [
        {"id": f"gpu{i:04d}/host reachable", "class": "unreachable", "host": f"gpu{i:04d}",
         "rank": None, "test": "host reachable", "what": f"gpu{i:04d} was unreachable",
         "fix": f"ansible gpu{i:04d} -m ansible.builtin.ping\nsee the play output",
         "consequence": False, "cause": None}
        for i in range(50)
    ]  # fmt: skip
    lines = console_lines(
        {"run_id": "r", "verdict": "failed", "hosts": hosts, "findings": found, "totals": {}},
        folded_verdict(found),
    )
    assert len(lines) <= MAX_LINES
    assert "  failing     50  gpu[0000-0049]" in lines
    assert "  ok         974  gpu[0050-1023]" in lines
    more = [line for line in lines if line.startswith("  ... and ")]
    assert len(more) == 1 and "more in verdict.json and summary.md, on" in more[0]
    left = int(more[0].split()[2])
    assert more[0].endswith(f"host(s): gpu[{50 - left:04d}-0049]")


class Page(HTMLParser):
    """The sections of report.html in order, each with its text and its table rows."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.text: dict[str, list[str]] = {}
        self.rows: dict[str, int] = {}
        self.details: dict[str, int] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "section":
            self.sections.append(dict(attrs).get("id") or "")
        elif self.sections and tag in ("tr", "details"):
            counts = self.rows if tag == "tr" else self.details
            counts[self.sections[-1]] = counts.get(self.sections[-1], 0) + 1

    def handle_data(self, data: str) -> None:
        if self.sections and data.strip():
            self.text.setdefault(self.sections[-1], []).append(data.strip())


def test_report_html_and_summary_md_show_the_failing_host_first(
    big: tuple[Path, dict[str, Any]],
) -> None:
    run_dir, _ = big
    page = Page()
    page.feed((run_dir / "report.html").read_text())
    assert page.sections[:2] == ["failures", "hosts"]
    hosts = page.text["hosts"]
    # The failing host's row, then one row for the 19 healthy ones, their own rows folded.
    assert hosts[hosts.index("ranks failed") + 1] == "gpu0017"
    said = " ".join(" ".join(hosts).split())
    assert "19 healthy hosts : gpu[0001-0016,0018-0020]" in said
    assert page.details["hosts"] == 1 and page.rows["hosts"] == 1 + 1 + 1 + 1 + 19
    # The host x check grid only for hosts that did not pass every check: none here.
    assert "20 hosts passed every check they ran" in page.text["preflight"]
    assert "preflight" not in page.rows
    summary = (run_dir / "summary.md").read_text()
    table = summary.split("| host | node rank |", 1)[1]
    assert table.index("| gpu0017 | 16 |") < table.index("(19 healthy hosts)")
    assert "| gpu\\[0001-0016,0018-0020\\] (19 healthy hosts) | |" in summary
    assert "<details><summary>19 healthy hosts, one row each</summary>" in summary


def test_report_html_opens_with_the_failing_host_on_its_first_screen(
    big: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    reason = browser_unavailable_reason()
    if reason:
        pytest.skip(reason)
    run_dir, _ = big
    view = open_page(run_dir / "report.html")
    assert view.errors == [] and view.title.endswith("FAILED")
    first = view.first_screen_text
    assert "Failing: gpu0017" in first and "1 of 1027 elements wrong" in first
    assert "gpu0001" not in first  # the healthy hosts are folded, further down


def test_hostlists_as_slurm_writes_them() -> None:
    names = [f"gpu{i:04d}" for i in range(1, 1025) if i != 17]
    assert compress(names) == "gpu[0001-0016,0018-1024]"
    for names in (
        ["gpu9", "gpu10", "gpu11"],
        ["gpu0999", "gpu1000", "gpu1001"],
        ["rack1-gpu01", "rack1-gpu02", "rack2-gpu01"],
        ["node-a.example", "n2", "10.0.0.1", "10.0.0.2"],
        ["n1", "n01", "x"],
    ):
        assert sorted(expand(compress(names))) == sorted(names), names
    assert compress(["gpu9", "gpu10", "gpu11"]) == "gpu[9-11]"
    assert compress(["gpu0999", "gpu1000"]) == "gpu[0999-1000]"
    assert compress(["h"]) == "h"


def test_bandwidth_rows_are_held_compact_and_read_back_as_written() -> None:
    rows = [
        {"size_bytes": 1024 << i, "count": 256 << i, "type": "float", "redop": "sum", "root": -1,
         "time_us": 10.5 * i, "algbw_gbps": 0.1 * i, "busbw_gbps": 0.2 * i,
         "rank_time_us": 11.0, "rank_busbw_gbps": 0.19 * i, "wrong": 0}
        for i in range(4)
    ]  # fmt: skip
    held = compact([dict(row) for row in rows])
    assert isinstance(held, BandwidthRows) and len(held) == 4
    assert list(held) == rows and held[-1] == rows[-1] and held[1:3] == rows[1:3]
    assert size_values(held) == [(r["size_bytes"], r["busbw_gbps"]) for r in rows]
    assert size_values(held, "rank_busbw_gbps") == size_values(rows, "rank_busbw_gbps")
    # A row the rank script does not write (a key more or less) leaves the rows as they are.
    odd = [dict(row) for row in rows[:2]] + [{**rows[2], "note": "x"}]
    short = [{k: rows[0][k] for k in COLUMNS[:-1]}]
    assert compact(odd) is odd and compact(short) is short
    assert compact([]) == [] and compact("text") == "text"
    # A passed test's rows: only the columns the report reads of them (READ).
    lean = compact([dict(row) for row in rows], lean=True)
    assert isinstance(lean, BandwidthRows) and len(lean) == 4 and lean.names == READ
    assert list(lean) == [{key: row[key] for key in READ} for row in rows]
    assert size_values(lean, "rank_busbw_gbps") == size_values(rows, "rank_busbw_gbps")
    assert compact(odd, lean=True) is odd and compact(short, lean=True) is short


def test_run_bandwidth_reads_a_failed_sweeps_details_only_for_the_plots() -> None:
    rows = [
        {"size_bytes": 1024 << i, "count": 256 << i, "type": "float", "redop": "sum", "root": -1,
         "time_us": 10.0, "algbw_gbps": 0.1, "busbw_gbps": 0.2 * (i + 1),
         "rank_time_us": 11.0, "rank_busbw_gbps": 0.1 * (i + 1), "wrong": 0}
        for i in range(2)
    ]  # fmt: skip

    def rank(own: bool, threshold: float | None = None) -> dict[str, Any]:
        details: dict[str, Any] = {} if own else {"bandwidth": [dict(r) for r in rows]}
        if threshold is not None:
            details["threshold_gbps"] = threshold
        test = {"name": "bandwidth_all_reduce", "details": details}
        test["bandwidth"] = compact([dict(r) for r in rows]) if own else []
        return {"tests": [test, {"name": "init", "details": ["not", "a", "dict"]}]}

    every = run_bandwidth([(0, rank(True, 0.5)), (1, rank(True))])
    both = {1024: ([0, 1], [0.2, 0.2]), 2048: ([0, 1], [0.4, 0.4])}
    assert every.busbw == every.measured == {"bandwidth_all_reduce": both}
    assert every.rank_busbw["bandwidth_all_reduce"][2048] == ([0, 1], [0.2, 0.2])
    assert every.measured is every.busbw  # its readers only read it: one reading, not two
    assert every.thresholds == {"all_reduce": 0.5}
    # Rank 1's sweep failed: its rows are in its details only, which the plots read too.
    failed = run_bandwidth([(0, rank(True)), (1, rank(False))])
    assert failed.busbw == {"bandwidth_all_reduce": {1024: ([0], [0.2]), 2048: ([0], [0.4])}}
    assert failed.measured == {"bandwidth_all_reduce": both}


def test_a_second_core_writes_the_very_same_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From 64 hosts (512 ranks) on, forked children read the last hosts and write report.html
    (core/forked.py): every file is byte for byte the one a single process writes."""
    made = synthesize(read_source(), tmp_path, FORKED_NODES)
    run_dir = tmp_path / made["run_id"]
    started = []

    class Counted(forked.Forked):
        def __init__(self, fn: Any) -> None:
            started.append(fn)
            super().__init__(fn)

    with monkeypatch.context() as patch:
        patch.setattr(forked, "Forked", Counted)
        patch.setattr(report_run, "Forked", Counted)
        run_report(report_params(tmp_path, made["run_id"]), False)
    assert len(started) == 2  # the last hosts read, report.html
    two = {p.relative_to(run_dir): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    monkeypatch.setattr(os, "cpu_count", lambda: 1)  # forked.usable(): no second core
    run_report(report_params(tmp_path, made["run_id"]), False)
    one = {p.relative_to(run_dir): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    assert sorted(two) == sorted(one)
    assert [name for name in one if one[name] != two[name]] == []
    assert len(list((run_dir / "junit").glob("rank-*.xml"))) == FORKED_NODES * PER_NODE
