# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The run's closing summary on the console (src/nccl_preflight/core/console.py,
plugins/callback/nccl_console.py): plain aligned lines, the verdict, every failure with its fix,
the bandwidth table and where the report is; nothing a node answered moves a terminal's cursor."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

from nccl_preflight.core.console import console_lines as render
from nccl_preflight.core.console import plain, rank_span, table
from nccl_preflight.core.findings import folded_verdict
from tests.playbook_run import column_starts
from tests.plugin_files import load_plugin

HOSTILE = "evil\x1b[2J\x1b[31mnode\r\nrm -rf /\x07"


def console_lines(result: dict[str, Any]) -> list[str]:
    """The closing summary of ``result``, its findings folded as a verdict.json reader's."""
    return render(result, folded_verdict(result.get("findings") or []))


def result(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "run_id": "20261126T004807-af5379",
        "verdict": "failed",
        "check_mode": False,
        "totals": {"tests": 12, "failures": 1, "errors": 0, "skipped": 2},
        "hosts": [
            {
                "host": "node-a.example",
                "node_rank": 0,
                "reachable": True,
                "preflight": "11 passed, 0 failed, 2 skipped",
                "ranks_passed": 4,
                "ranks_failed": 0,
                "ranks": [0, 1, 2, 3],
            },
            {
                "host": "n2",
                "node_rank": 1,
                "reachable": True,
                "preflight": "10 passed, 1 failed, 2 skipped",
                "ranks_passed": 2,
                "ranks_failed": 2,
                "ranks": [4, 5, 6, 7],
            },
        ],
        "bandwidth": [
            {
                "collective": "bandwidth_all_reduce",
                "size_bytes": 4194304,
                "ranks": 8,
                "busbw_min_gbps": 0.123,
                "busbw_median_gbps": 10.5,
                "busbw_max_gbps": 11.25,
                "slowest_rank": 5,
                "percent_of_expected": 42.5,
                "judged_size": True,
            }
        ],
        "findings": [
            {
                "class": "preflight_failed",
                "host": "n2",
                "rank": None,
                "test": "firewall",
                "what": "n2: port 29500 is dropped",
                "fix": "iptables -I INPUT -p tcp --dport 29500 -j ACCEPT  (on n2)",
                "consequence": False,
            }
        ],
        "exit_class": "preflight_failed",
        "exit_code": 4,
        "report_dir": "/srv/reports/20261126T004807-af5379",
        "junit": "/srv/reports/20261126T004807-af5379/junit.xml",
        "html": "/srv/reports/20261126T004807-af5379/report.html",
    }
    return {**base, **changes}


def section(lines: list[str], title: str) -> list[str]:
    """The lines of a section: from its title to the next empty line."""
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start, len(lines)) if not lines[i]), len(lines))
    return lines[start + 1 : end]


def test_the_verdict_failures_with_their_fixes_and_the_report_path() -> None:
    lines = console_lines(result())
    assert lines[0] == "nccl-preflight run 20261126T004807-af5379: FAILED"
    assert "class preflight_failed (exit code 4 with bin/nccl-preflight)" in lines[1]
    failures = section(lines, "Failures (1):")
    assert failures == [
        "  1. n2 firewall: n2: port 29500 is dropped",
        "     fix: iptables -I INPUT -p tcp --dport 29500 -j ACCEPT  (on n2)",
    ]
    assert "Report: /srv/reports/20261126T004807-af5379/report.html" in lines
    assert not any(line != line.rstrip() for line in lines)  # no trailing blanks
    text = "\n".join(lines)
    assert "\\n" not in text and "|" not in text and "#" not in text


def test_the_hosts_and_bandwidth_tables_are_aligned_columns() -> None:
    lines = console_lines(result())
    hosts = section(lines, "Hosts:")
    names = ["host", "node rank", "ranks", "pre-flight", "status"]
    starts = column_starts(hosts[0], names)
    for row in hosts[1:]:
        # Left-aligned columns start where their header does; the node rank ends where it does.
        for name, start in zip(names, starts, strict=True):
            if name != "node rank":
                assert row[start] != " " and row[start - 1] == " ", (name, row)
        end = starts[1] + len("node rank") - 1
        assert row[end].isdigit() and row[end + 1] == " ", row
    assert hosts[1].split()[:3] == ["node-a.example", "0", "0-3"] and hosts[1].endswith(" ok")
    assert hosts[2].endswith("FAILED: 2 of 4 ranks failed")
    bandwidth = section(lines, "Bus bandwidth")
    median_end = bandwidth[0].index("median") + len("median")
    assert bandwidth[1][median_end - len("10.500") : median_end] == "10.500"
    assert bandwidth[1].split()[:3] == ["all_reduce", "4", "MiB"]
    assert bandwidth[1].endswith("42.5%")


def test_hostile_text_from_the_nodes_reaches_no_terminal_control() -> None:
    hostile = result(
        run_id=HOSTILE,
        hosts=[{**result()["hosts"][0], "host": HOSTILE}],
        bandwidth=[{**result()["bandwidth"][0], "collective": HOSTILE}],
        findings=[{**result()["findings"][0], "host": HOSTILE, "what": HOSTILE, "fix": HOSTILE}],
    )
    lines = console_lines(hostile)
    for line in lines:
        assert not re.search(r"[\x00-\x1f\x7f-\x9f]", line), repr(line)
    assert "evil [2J [31mnode" in lines[0]
    failures = section(lines, "Failures (1):")
    # A multi-line message keeps its lines, each indented under its finding, each plain.
    assert failures[1] == "     rm -rf /"
    assert plain("a\tb\x1b[0m\n") == "a b [0m"


def test_check_mode_and_a_passing_run_without_failures() -> None:
    hosts = [{**row, "ranks": [], "ranks_failed": 0} for row in result()["hosts"]]
    lines = console_lines(
        result(verdict="passed", check_mode=True, findings=[], html="", hosts=hosts)
    )
    assert lines[0] == "nccl-preflight run 20261126T004807-af5379: PASSED (check mode)"
    rows = section(lines, "Hosts:")[1:]
    assert rows[1].split()[:3] == ["n2", "1", "-"], rows
    assert rows[1].endswith("10 passed, 1 failed, 2 skipped  ok, not launched"), rows
    assert not any(line.startswith("Failures") for line in lines)
    assert "Report: /srv/reports/20261126T004807-af5379/summary.md" in lines


def test_more_findings_than_shown_say_how_many_more() -> None:
    many = [{**result()["findings"][0], "host": f"n{i}"} for i in range(25)]
    lines = console_lines(result(findings=many))
    assert "Failures (25):" in lines
    # As many as the 40 lines leave room for (issue 37), then the rest counted, with their hosts.
    assert len(lines) <= 40
    assert "  ... and 14 more in verdict.json and summary.md, on 14 host(s): n[11-24]" in lines


def test_rank_spans_and_tables() -> None:
    assert rank_span([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert rank_span([]) == "-"
    assert table(["a", "bb"], [["xyz", 1]], right=frozenset({1})) == ["  a    bb", "  xyz   1"]


def load_callback() -> Any:
    return load_plugin("plugins/callback/nccl_console.py", "nccl_console_callback").CallbackModule()


def task_result(action: str, returned: dict[str, Any]) -> SimpleNamespace:
    return SimpleNamespace(task=SimpleNamespace(action=action), result=returned)


def test_the_callback_prints_the_report_tasks_lines_at_the_end_only(capsys: Any) -> None:
    callback = load_callback()
    callback.v2_runner_on_ok(task_result("ansible.builtin.debug", {"console": ["not this"]}))
    callback.v2_runner_on_ok(task_result("nccl_report", {"console": ["line one", "  two"]}))
    assert capsys.readouterr().out == ""  # nothing before the playbook ends
    callback.v2_playbook_on_stats(None)
    assert capsys.readouterr().out == "line one\n  two\n"


def test_the_callback_prints_nothing_without_a_report() -> None:
    callback = load_callback()
    callback.v2_playbook_on_stats(None)
    assert callback.console == []


def test_consequences_are_folded_under_their_cause_and_their_hosts_not_failing() -> None:
    cause = {
        "id": "n2/firewall",
        "class": "preflight_failed",
        "host": "n2",
        "rank": None,
        "test": "firewall",
        "what": "n2: drops its own ephemeral range 32768-60999",
        "fix": "iptables -D INPUT -p tcp --dport 32768:60999 -j DROP  (on n2)",
        "consequence": False,
        "cause": None,
    }
    probe = {
        "id": "node-a.example/tcp_ring",
        "class": "preflight_failed",
        "host": "node-a.example",
        "rank": None,
        "test": "tcp_ring",
        "what": "node-a.example: cannot open TCP to n2 at 29555: timed out",
        "fix": "open the port on n2",
        "consequence": True,
        "cause": {"id": "n2/firewall", "host": "n2", "test": "firewall"},
    }
    hosts = [{**row, "ranks_failed": 0} for row in result()["hosts"]]
    lines = console_lines(result(findings=[probe, cause], hosts=hosts))
    failures = section(lines, "Failures (1, plus 1 folded under their causes):")
    assert failures == [
        "  1. n2 firewall: n2: drops its own ephemeral range 32768-60999",
        "     fix: iptables -D INPUT -p tcp --dport 32768:60999 -j DROP  (on n2)",
        "     consequence: node-a.example tcp_ring: node-a.example: cannot open TCP to n2 at "
        "29555: timed out",
    ]
    rows = section(lines, "Hosts:")
    assert rows[1].endswith("affected (a consequence of another host's failure)")
    assert rows[2].endswith("FAILED")
