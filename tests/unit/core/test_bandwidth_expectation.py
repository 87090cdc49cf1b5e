# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/bandwidth_expectation.py: busbw against the expected figure (explicit
or from the fabric link), two thresholds, and the baseline; through nccl_junit's hooks (JUnit
valid for Jenkins)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nccl_preflight.core import bandwidth_expectation as nccl_expect
from nccl_preflight.core.html import TEMPLATE as HTML_TEMPLATE
from tests.builders.bandwidth import MIB, write_run
from tests.jenkins_schema import validate_report_junit
from tests.report_build import build_report as report


def bandwidth_cases(run_dir: Path) -> dict[tuple[str, str], ET.Element]:
    path = run_dir / "junit" / "bandwidth.xml"
    if not path.exists():
        return {}
    return {(c.get("classname"), c.get("name")): c for c in ET.parse(path).iter("testcase")}


def test_below_crit_of_an_explicit_expectation_fails_with_both_figures(tmp_path: Path) -> None:
    run_dir = write_run(
        tmp_path,
        "r1",
        {"all_reduce": {MIB: 0.01, 64 * MIB: 0.11}},
        bandwidth={"expected_busbw": {"all_reduce": 0.25}},
    )
    summary = report(run_dir)
    assert summary["verdict"] == "failed"
    failure = bandwidth_cases(run_dir)[("bandwidth.all_reduce", "expected_busbw")].find("failure")
    assert failure is not None
    message = failure.get("message")
    assert "0.11 GB/s" in message and "0.25 GB/s" in message and "44% of" in message
    assert "nccl_expected_busbw" in message
    assert "- CRIT: all_reduce" in summary["markdown"]
    validate_report_junit(run_dir)


def test_fabric_link_speed_sets_the_expectation_and_warn_does_not_fail(tmp_path: Path) -> None:
    # 10000 Mb/s x 0.9 = 1.125 GB/s; 1.0 is 89% (ok), 0.8 is 71% (warn: below 80%).
    run_dir = write_run(
        tmp_path, "r1", {"all_reduce": {64 * MIB: 1.0}, "all_gather": {64 * MIB: 0.8}}
    )
    summary = report(run_dir)
    assert summary["verdict"] == "passed", summary["problems"]
    cases = bandwidth_cases(run_dir)
    assert all(c.find("failure") is None for c in cases.values())
    assert "- WARN: all_gather" in summary["markdown"]
    assert "| all_reduce | 67108864 | 1 | 1.125 | 88.9% | ok |" in summary["markdown"]
    assert "10.0.0.1's fabric link 10000 Mb/s x 0.9" in summary["markdown"]
    # Per-rank truth in the rank's own result, which the rank's JUnit file names.
    props = {
        p.get("name"): p.get("value")
        for p in ET.parse(run_dir / "junit" / "rank-0.xml").iter("property")
    }
    tests = json.loads((run_dir / str(props["file.result"])).read_text())["tests"]
    rows = [row for test in tests for row in test.get("bandwidth") or []]
    assert {(row["size_bytes"], row["rank_busbw_gbps"]) for row in rows} >= {(64 * MIB, 1.0)}


def test_a_sweep_that_never_reaches_the_size_is_not_judged_and_says_so(tmp_path: Path) -> None:
    run_dir = write_run(
        tmp_path,
        "r1",
        {"all_reduce": {MIB: 0.001}, "broadcast": {MIB: 0.001}},
        bandwidth={"expected_busbw": {"all_reduce": 100.0}},
    )
    summary = report(run_dir)
    assert summary["verdict"] == "passed"
    assert bandwidth_cases(run_dir) == {}  # nothing judged: no testcase, no noise
    assert (
        "- not judged (all_reduce, broadcast): the sweep never reached 33554432 B"
        in (summary["markdown"])
    )


def test_unknown_link_speed_is_not_judged(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "r1", {"all_reduce": {64 * MIB: 0.001}}, speed=None)
    summary = report(run_dir)
    assert summary["verdict"] == "passed"
    assert "link speed unknown on 10.0.0.1, 10.0.0.2" in summary["markdown"]


def test_baseline_names_the_collective_that_dropped(tmp_path: Path) -> None:
    base = write_run(tmp_path, "base", {"all_reduce": {MIB: 1.0}, "broadcast": {MIB: 1.0}})
    report(base)
    run_dir = write_run(
        tmp_path,
        "now",
        {"all_reduce": {MIB: 0.6}, "broadcast": {MIB: 0.95}},
        bandwidth={"baseline": str(base)},
    )
    summary = report(run_dir)
    assert summary["verdict"] == "failed"
    failure = bandwidth_cases(run_dir)[("bandwidth.baseline", "baseline")].find("failure")
    assert failure is not None
    # The percent is now's share of then: 60%, not the 40% it dropped.
    assert "all_reduce at 1048576 B: 0.6 GB/s, was 1 (60%)" in failure.get("message")
    assert "broadcast" not in failure.get("message")  # 5% is within the 10%
    validate_report_junit(run_dir)


def test_baseline_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    run_dir = write_run(
        tmp_path, "now", {"all_reduce": {MIB: 1.0}}, bandwidth={"baseline": str(tmp_path / "gone")}
    )
    report(run_dir)
    error = bandwidth_cases(run_dir)[("bandwidth.baseline", "baseline")].find("error")
    assert error is not None and "no rank result under" in error.get("message")


def test_baseline_compares_node_pairs() -> None:
    pair = {"pass": 1, "a": "h0", "b": "h1", "rail": 0}
    drops = nccl_expect.compare_baseline(
        [], [], [{**pair, "busbw_gbps": 1.5}], [{**pair, "busbw_gbps": 2.0}]
    )
    assert drops == [
        {
            "what": "pair h0 - h1 rail 0",
            "size_bytes": None,
            "now_gbps": 1.5,
            "then_gbps": 2.0,
            "percent": 75.0,
        }
    ]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"nccl_busbw_warn": 0.5, "nccl_busbw_crit": 0.8}, "nccl_busbw_crit (0.8) is above"),
        ({"nccl_busbw_crit": 0}, "nccl_busbw_crit is 0, not a number above 0"),
        ({"nccl_expected_busbw": {"all_reduce": "fast"}}, "nccl_expected_busbw['all_reduce']"),
        ({"nccl_expected_busbw": [1]}, "nccl_expected_busbw is [1], not a mapping"),
        ({"nccl_busbw_min_bytes": 0}, "nccl_busbw_min_bytes is 0, outside >= 1"),
    ],
)
def test_expectation_variables_are_validated(values: dict, expected: str) -> None:
    from nccl_preflight.core.inputs import pairwise_problems

    problems = pairwise_problems(values)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_every_busbw_table_shows_measured_against_expected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """summary.md's busbw table (also the console's summary) and report.html carry measured /
    expected in %; a latency-bound size shows it too, marked as not judged."""
    from tests.builders.report import module_result

    # 10000 Mb/s x 0.9 = 1.125 GB/s: 1.0 is 88.9%; all_gather's 1 MiB is below min_bytes.
    write_run(tmp_path, "r1", {"all_reduce": {64 * MIB: 1.0}, "all_gather": {MIB: 0.5}})
    template = HTML_TEMPLATE
    args = {"report_root": str(tmp_path), "run_id": "r1", "html_template": str(template)}
    result = module_result(args, capsys)
    rows = {r["collective"]: r for r in result["bandwidth"]}
    assert rows["bandwidth_all_reduce"]["percent_of_expected"] == 88.9
    assert rows["bandwidth_all_gather"]["percent_of_expected"] == 44.4
    markdown = (tmp_path / "r1" / "summary.md").read_text()
    assert "| min | median | max | slowest rank | median / expected |" in markdown
    assert "| bandwidth_all_reduce | 64 MiB | 2 | 1.000 | 1.000 | 1.000 | 0 | 88.9% |" in markdown
    assert "| 0.500 | 0 | 44.4% (latency-bound, not judged) |" in markdown
    assert "\n".join(result["summary_lines"]) + "\n" == markdown  # the console shows the same
    html = (tmp_path / "r1" / "report.html").read_text()
    table = html.split('id="expected"')[1].split("</section>")[0]
    assert "<td>all_reduce</td>" in table and "<td>88.9%</td>" in table and "<td>ok</td>" in table
    assert "10.0.0.1&#39;s fabric link 10000 Mb/s x 0.9" in table
    assert "not judged (all_gather): the sweep never reached 33554432 B" in table


def test_the_summary_spread_is_each_ranks_own_figure_not_the_shared_one(tmp_path: Path) -> None:
    """nccl-tests' busbw is the same on every rank (the slowest time); the summary's min, median,
    max and slowest rank come from each rank's own time (rank_busbw_gbps), so they differ."""
    run_dir = write_run(tmp_path, "r1", {"all_reduce": {MIB: 0.5}})
    for node, own in ((0, 0.9), (1, 0.5)):
        path = run_dir / f"10.0.0.{node + 1}" / f"rank-{node}.json"
        doc = json.loads(path.read_text())
        doc["tests"][0]["bandwidth"][0]["rank_busbw_gbps"] = own
        path.write_text(json.dumps(doc))
    summary = report(run_dir)
    row = summary["bandwidth"][0]
    assert (row["busbw_min_gbps"], row["busbw_max_gbps"]) == (0.5, 0.9)
    assert row["busbw_median_gbps"] == pytest.approx(0.7) and row["slowest_rank"] == 1
    assert "| bandwidth_all_reduce | 1 MiB | 2 | 0.500 | 0.700 | 0.900 | 1 |" in summary["markdown"]
