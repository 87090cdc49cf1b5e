# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""reports/<run-id>/ built step by step, as the contracts in docs/design.md give it (the rank
documents in the shape files/nccl_check.py writes), and the report built from it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import nccl_report
import pytest
from ansible.module_utils.testing import patch_module_args

from nccl_preflight.core.html import TEMPLATE as HTML_TEMPLATE
from tests.verdict_schema import validate_verdict

COLLECTIVES = ["checkin", "init", "all_reduce_sum", "broadcast", "all_gather", "reduce_scatter"]
BANDWIDTH = ["bandwidth_all_reduce", "bandwidth_all_gather"]


def bw_rows(world: int, scale: float) -> list[dict[str, Any]]:
    rows = []
    for size in (1024, 4096, 65536):
        algbw = scale * size / 65536
        rows.append(
            {
                "size_bytes": size,
                "count": size // 4,
                "type": "float32",
                "redop": "sum",
                "root": -1,
                "time_us": 12.5 * size / 1024,
                "algbw_gbps": algbw,
                "busbw_gbps": algbw * 2 * (world - 1) / world,
                "wrong": 0,
            }
        )
    return rows


def rank_doc(
    host: str,
    rank: int,
    local_rank: int,
    node_rank: int,
    world: int,
    nproc: int,
    failed: dict[str, str] | None = None,
    bw_scale: float = 1.0,
    status: str | None = None,
    current_test: str | None = None,
    stop_after: str | None = None,
) -> dict[str, Any]:
    failed = failed or {}
    tests = []
    for name in COLLECTIVES + BANDWIDTH:
        if stop_after is not None and len(tests) and tests[-1]["name"] == stop_after:
            break
        test: dict[str, Any] = {
            "name": name,
            "status": "failed" if name in failed else "passed",
            "duration_s": 0.0123456,
            "message": failed.get(name, ""),
            "details": {"expected": 6.0, "got": 5.0, "hint": "check the fabric MTU"}
            if name in failed
            else {},
            "bandwidth": bw_rows(world, bw_scale) if name.startswith("bandwidth_") else [],
        }
        tests.append(test)
    finished = stop_after is None
    overall = status or ("failed" if failed else "passed")
    return {
        "schema": 1,
        "host": host,
        "global_rank": rank,
        "local_rank": local_rank,
        "node_rank": node_rank,
        "world_size": world,
        "local_world_size": nproc,
        "device": "cpu",
        "backend": "gloo",
        "dtype": "float32",
        "pid": 1000 + rank,
        "versions": {
            "python": "3.11.7",
            "torch": "2.13.0+cpu",
            "cuda": None,
            "nccl": None,
            "driver": None,
        },
        "env": {"GLOO_SOCKET_IFNAME": "fab0", "MASTER_ADDR": "10.77.0.1", "RANK": str(rank)},
        "status": overall if finished else "running",
        "current_test": current_test,
        "missing_ranks": [],
        "started_at": "2025-01-01T12:00:00.000+00:00",
        "finished_at": "2025-01-01T12:00:05.000+00:00" if finished else None,
        "tests": tests,
    }


def preflight_doc(host: str, failed: bool = False) -> dict[str, Any]:
    results = [
        {
            "check": "fabric_interface",
            "host": host,
            "status": "passed",
            "message": "fab0 up",
            "hint": "",
        },
        {
            "check": "gpu_present",
            "host": host,
            "status": "skipped",
            "message": "backend gloo needs no GPU",
            "hint": "",
        },
    ]
    if failed:
        results.append(
            {
                "check": "firewall_master_port",
                "host": host,
                "status": "failed",
                "message": f"{host} drops TCP 29500",
                "hint": "iptables -D INPUT -p tcp --dport 29500 -j DROP",
            }
        )
    return {"host": host, "results": results}


class RunDir:
    """A reports/<run-id>/ directory built step by step."""

    def __init__(
        self, root: Path, hosts: list[str], nproc: int, run_id: str = "20250101T120000-abcdef"
    ):
        self.root = root
        self.run_id = run_id
        self.dir = root / run_id
        self.dir.mkdir(parents=True)
        self.hosts = hosts
        self.nproc = nproc
        self.world = nproc * len(hosts)

    def plan(self, unreachable: tuple[str, ...] = (), launch_skipped: str = "") -> RunDir:
        doc = {
            "run_id": self.run_id,
            "world_size": self.world,
            "master_addr": "10.77.0.1",
            "master_port": 29500,
            "backend": "gloo",
            "launch_skipped": launch_skipped,
            "hosts": [
                {
                    "host": h,
                    "node_rank": i,
                    "nproc_per_node": self.nproc,
                    "rank_offset": i * self.nproc,
                    "address": f"10.77.0.{i + 1}",
                    "ifname": "fab0",
                    "reachable": h not in unreachable,
                }
                for i, h in enumerate(self.hosts)
            ],
        }
        (self.dir / "plan.json").write_text(json.dumps(doc))
        return self

    def preflight(self, host: str, failed: bool = False) -> RunDir:
        (self.dir / "preflight").mkdir(exist_ok=True)
        (self.dir / "preflight" / f"{host}.json").write_text(
            json.dumps(preflight_doc(host, failed))
        )
        return self

    def host_dir(self, host: str) -> Path:
        path = self.dir / host
        path.mkdir(exist_ok=True)
        return path

    def launch(self, host: str, rc: int | None = 0, timed_out: bool = False) -> RunDir:
        doc = {
            "rc": rc,
            "timed_out": timed_out,
            "killed_pids": [4242] if timed_out else [],
            "timeout_s": 60,
            "stopped_by": None,
        }
        (self.host_dir(host) / "launch.json").write_text(json.dumps(doc))
        (self.host_dir(host) / "torchrun.log").write_text("torchrun says hello\n")
        return self

    def rank(
        self,
        host: str,
        local_rank: int,
        doc: dict[str, Any] | None = None,
        log: str | None = "rank log line\n",
        **kw: Any,
    ) -> RunDir:
        node_rank = self.hosts.index(host)
        rank = node_rank * self.nproc + local_rank
        if doc is None:
            doc = rank_doc(host, rank, local_rank, node_rank, self.world, self.nproc, **kw)
        if doc:
            (self.host_dir(host) / f"rank-{rank}.json").write_text(json.dumps(doc))
        if log is not None:
            (self.host_dir(host) / f"rank-{rank}.log").write_text(log)
        return self

    def all_passed(self) -> RunDir:
        self.plan()
        for host in self.hosts:
            self.preflight(host).launch(host)
            for local_rank in range(self.nproc):
                self.rank(host, local_rank)
        return self


def module_result(args: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit):
        nccl_report.main()
    return json.loads(capsys.readouterr().out)


def build(run: RunDir, capsys: pytest.CaptureFixture[str], **kw: Any) -> dict[str, Any]:
    # report.html only when a test asks for it (a template given): it costs jinja2 and matplotlib.
    html = "html_template" in kw
    return module_result(
        {"report_root": str(run.root), "run_id": run.run_id, "html": html, **kw}, capsys
    )


def suites(path: Path) -> dict[str, ET.Element]:
    return {s.get("name"): s for s in ET.parse(path).getroot().iter("testsuite")}


def case(suite: ET.Element, name: str) -> ET.Element:
    found = [c for c in suite.iter("testcase") if c.get("name") == name]
    assert found, f"no testcase {name} in {suite.get('name')}"
    return found[0]


TEMPLATE = HTML_TEMPLATE


def report(run: RunDir, capsys: pytest.CaptureFixture[str], **kw: Any) -> dict[str, Any]:
    result = build(run, capsys, html_template=str(TEMPLATE), **kw)
    verdict = validate_verdict(json.loads((run.dir / "verdict.json").read_text()))
    assert verdict["class"] == result["exit_class"] and verdict["exit_code"] == result["exit_code"]
    return verdict


class Text(HTMLParser):
    """The visible text of a page (script and style left out) and its links."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.links: list[str] = []
        self.tags: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag in ("style", "script"):
            self._skip += 1
        if tag == "a":
            self.links += [v for k, v in attrs if k == "href" and v]

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.text.append(data)


def page(run: RunDir) -> Text:
    parser = Text()
    parser.feed((run.dir / "report.html").read_text())
    return parser


def params(run_dir: Path) -> dict[str, Any]:
    return {
        "report_root": str(run_dir.parent),
        "run_id": run_dir.name,
        "fallback_to_latest": False,
        "ranks_launched": True,
        "update_latest": True,
        "html_template": str(HTML_TEMPLATE),
        "run_check_mode": False,
        "verdict_copy": "",
    }
