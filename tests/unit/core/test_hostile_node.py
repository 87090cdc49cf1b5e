# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What a node sends back is data, never markup or a path: a hostile or broken node cannot write
outside reports/<run-id>/<host>/, break the JUnit, or inject markup into the JUnit or summary.md.

The node's answers that reach a report: the collected archive (names, links, contents), rank
results (test names, messages, versions, timestamps), launch.json (errors), logs, and the
pre-flight's observations (interface names, port owners' command lines) in check messages.
"""

from __future__ import annotations

import json
import os
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nccl_preflight.core import junit as nccl_junit
from tests.builders.launch import action, archive
from tests.jenkins_schema import validate_report_junit
from tests.report_build import build_report

HOSTILE = (
    "</failure><testcase name='injected'/>]]><!-- \x00\x1b[31m\x07 <script>alert(1)</script>"
    " [click](http://evil.example) ![img](http://evil.example/x.png) | col | `code` **bold** "
    "&amp; &#x3C;b&#x3E;"
)


# --------------------------------------------------------------------------- the collect path
def test_a_link_planted_where_a_result_lands_is_replaced_not_followed(tmp_path: Path) -> None:
    dest = tmp_path / "reports" / "run1" / "node1"
    dest.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.write_text("keep")
    (dest / "rank-0.json").symlink_to(outside)
    (dest / ".rank-0.log.tmp").symlink_to(outside)
    action.unpack_results(archive(("rank-0.json", b"{}"), ("rank-0.log", b"log\n")), dest)
    assert outside.read_text() == "keep"
    assert not (dest / "rank-0.json").is_symlink() and (dest / "rank-0.json").read_text() == "{}"
    assert (dest / "rank-0.log").read_text() == "log\n"


@pytest.mark.parametrize(
    "member",
    [
        ("../../escape.json", tarfile.REGTYPE, ""),
        ("rank-0.json", tarfile.SYMTYPE, "../../../escape.json"),
        ("rank-1.json", tarfile.LNKTYPE, "/etc/passwd"),
        ("rank-2.log", tarfile.FIFOTYPE, ""),
    ],
)
def test_nothing_lands_outside_the_host_directory(tmp_path: Path, member: tuple) -> None:
    name, kind, target = member
    dest = tmp_path / "reports" / "run1" / "node1"
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    with pytest.raises(ValueError, match="unexpected member"):
        action.unpack_results(archive(("launch.json", b"{}"), info), dest)
    everything = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert everything == [
        "reports",
        "reports/run1",
        "reports/run1/node1",
        "reports/run1/node1/launch.json",
    ]


# --------------------------------------------------------------------------- JUnit and summary
def hostile_run(root: Path) -> Path:
    """A run whose node sent markup and control characters in every field it controls."""
    run = root / "R1"
    (run / "node1").mkdir(parents=True)
    (run / "preflight").mkdir()
    (run / "plan.json").write_text(
        json.dumps(
            {
                "run_id": "R1",
                "world_size": 2,
                "backend": "gloo",
                "hosts": [{"host": "node1", "node_rank": 0, "nproc_per_node": 2, "rank_offset": 0}],
            }
        )
    )
    rank0 = {
        "host": HOSTILE,
        "global_rank": 0,
        "status": "failed",
        "versions": {"torch": HOSTILE, "python": {"not": "a string"}, "cuda": 12},
        "started_at": HOSTILE,
        "finished_at": "2026-01-01T00:00:00Z",
        "tests": [
            {
                "name": HOSTILE,
                "status": "failed",
                "duration_s": "not a number",
                "message": HOSTILE,
                "details": {"hint": HOSTILE},
                "bandwidth": [{"size_bytes": 1024, "busbw_gbps": 1.0, "type": HOSTILE}],
            },
            {"name": "barrier", "status": HOSTILE, "message": HOSTILE},
        ],
    }
    (run / "node1" / "rank-0.json").write_text(json.dumps(rank0))
    (run / "node1" / "launch.json").write_text(json.dumps({"rc": 1, "error": HOSTILE}))
    (run / "node1" / "torchrun.log").write_text(HOSTILE)
    (run / "preflight" / "node1.json").write_text(
        json.dumps(
            {
                "host": "node1",
                "results": [
                    {
                        "check": "master_port_free",
                        "status": "failed",
                        "message": HOSTILE,
                        "hint": HOSTILE,
                    },
                    {"check": "interface", "status": "passed", "message": HOSTILE},
                ],
            }
        )
    )
    return run


def test_markup_from_a_node_stays_text_in_the_junit(tmp_path: Path) -> None:
    run = hostile_run(tmp_path)
    build_report(run)
    validate_report_junit(run)  # well-formed and valid: control characters are gone
    root = ET.parse(run / "junit.xml").getroot()
    names = [c.get("name") for c in root.iter("testcase")]
    assert "injected" not in names  # no element came from the node's text
    clean = nccl_junit.clean_text(HOSTILE)
    texts = [e.get("message") for e in root.iter("failure")] + [
        p.get("value") for p in root.iter("property")
    ]
    assert any(t and clean in t for t in texts)  # the text itself survives, as text
    raw = (run / "junit.xml").read_text()
    assert "<script>" not in raw and "\x1b" not in raw and "\x00" not in raw
    # Rank 1 never reported: its error says why with the node's launch error, escaped.
    assert "&lt;script&gt;" in raw


def test_markup_from_a_node_is_escaped_in_summary_md(tmp_path: Path) -> None:
    run = hostile_run(tmp_path)
    build_report(run)
    text = (run / "summary.md").read_text()
    for active in ("<script>", "![", "`code`", "**bold**", "\x1b"):
        assert active not in text, active
    assert text.count("](") == text.count("\\](")  # no link can form
    assert text.count("&") == text.count("\\&")  # no entity can form
    # Every row of a table keeps its header's columns: a '|' from a node is escaped.
    header_bars = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header_bars = None
            continue
        bars = line.replace("\\|", "").count("|")
        header_bars = header_bars or bars
        assert bars == header_bars, line
    # Each problem stays one line.
    problems = text.split("Problems:", 1)[1].strip().splitlines()
    assert all(line.startswith("- ") for line in problems)


def test_md_escape_keeps_plain_text_readable() -> None:
    assert nccl_junit.md_escape("all_reduce 10.0.0.1:29500 (fab0)") == (
        "all_reduce 10.0.0.1:29500 (fab0)"
    )
    assert nccl_junit.md_escape("<a>|[x](y)`*&") == "\\<a\\>\\|\\[x\\](y)\\`\\*\\&"
    assert nccl_junit.md_escape("# title") == "\\# title"
    assert os.linesep not in nccl_junit.md_escape("a\nb")
