# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""validate.yml on a lab as the fault tests run it (the ranks kept small, a sweep that hangs or
lasts), what a run left on the hosts, the JUnit's cases, the one cause a report names first, the
pairwise links and cases, the pre-flight's run and its port range."""

from __future__ import annotations

import json
import re
import shutil
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.lab.harness import Lab

FAST, SLOW = "200mbit", "50mbit"  # the slow link: a quarter of the others


CHECK_ARGS = [
    "--tests",
    "all_reduce_sum,bandwidth_all_reduce",
    "--max-bytes",
    "16K",
    "--iters",
    "2",
    "--warmup",
    "1",
    "--pair-bytes",
    "1M",
    "--pair-iters",
    "3",
]


# The all_reduce bandwidth test at 4 MiB only.
ALL_REDUCE_4M = ["--tests", "bandwidth_all_reduce", "--min-bytes", "4M", "--max-bytes", "4M"]


@contextmanager
def links(lab: Lab, slow: Any | None) -> Iterator[None]:
    """Every fabric link at FAST, the slow host's at SLOW; undone on the way out."""
    undo = [lab.rate_limit(h, SLOW if h is slow else FAST) for h in lab.hosts]
    try:
        yield
    finally:
        for step in undo:
            step()


def pairwise_cases(report_dir: Path) -> dict[str, ET.Element]:
    root = ET.parse(report_dir / "junit.xml").getroot()
    return {
        c.get("classname"): c
        for c in root.iter("testcase")
        if c.get("classname", "").startswith("pairwise.")
    }


# One all_reduce of 4M: on a link of a few hundred kbit/s it cannot finish, so the run stalls.
HANGING_SWEEP = [*ALL_REDUCE_4M, "--iters", "1", "--warmup", "0"]


def assert_only_cause(report: Path, host: str, rank: int) -> dict[str, Any]:
    """verdict.json: the finding of ``rank`` on ``host`` is the first and only cause, every other
    finding points at it (core/run_cause.py); report.html's headline ("Failing:") names ``host``
    alone. Both front-ends' fault tests use it."""
    verdict = json.loads((report / "verdict.json").read_text())
    causes = [f for f in verdict["findings"] if not f["consequence"]]
    assert [(f["host"], f["rank"]) for f in causes] == [(host, rank)], causes
    assert verdict["findings"][0] == causes[0]
    pointer = {k: causes[0][k] for k in ("id", "host", "test")}
    assert all(f["cause"] == pointer for f in verdict["findings"][1:]), verdict["findings"]
    html = (report / "report.html").read_text()
    assert html.split('<div class="hosts">Failing: ', 1)[1].split("</div>", 1)[0] == host
    return causes[0]


# Enough work that the ranks are still inside the collectives when a link is cut.
LONG_SWEEP = ["--max-bytes", "4M", "--iters", "40", "--warmup", "1"]


SMALL_CHECK = {"nccl_check_args": ["--max-bytes", "65536", "--iters", "2", "--warmup", "1"]}


def validate(lab: Lab, report_root: Path, run_id: str, *args: str, **variables: object):
    values = {
        "nccl_run_id": run_id,
        "nccl_report_root": str(report_root),
        "nccl_run_timeout": 60,
        **SMALL_CHECK,
        **variables,
    }
    return lab.ansible_playbook(
        "playbooks/validate.yml",
        "-e",
        json.dumps(values),
        *args,
        env={"ANSIBLE_NOCOLOR": "1"},
        timeout=400,
    )


def junit_cases(junit: Path) -> dict[tuple[str, str], ET.Element]:
    root = ET.parse(junit).getroot()
    return {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}


def left_on_hosts(lab: Lab, run_id: str) -> list[str]:
    """What this run left on the lab's hosts: run directories (the hosts share this machine's
    /tmp) and processes whose command line names the run."""
    left = [str(p) for p in Path("/tmp").glob(f"nccl-preflight-{run_id}-*")]
    for host in lab.hosts:
        ps = lab.run(host, ["ps", "-eo", "pid=,args="], check=False).stdout
        left += [f"{host.inventory_name}: {line}" for line in ps.splitlines() if run_id in line]
    return left


PLAYBOOK = "playbooks/validate.yml"


class Run:
    """One `validate.yml --tags preflight` run and what it left on the control machine."""

    def __init__(self, lab: Lab, inventory: Path, report_root: Path, *extra: str) -> None:
        self.run_id = f"pftest-{uuid.uuid4().hex[:8]}"
        self.lab = lab
        # ansible_playbook() passes the lab's own inventory; a second -i adds the private copy's
        # host_vars on top (same hosts, same group_vars).
        extra_inventory = ["-i", str(inventory)] if inventory != lab.inventory_dir else []
        try:
            self.proc = lab.ansible_playbook(
                PLAYBOOK,
                *extra_inventory,
                "--tags",
                "preflight",
                "-e",
                f"nccl_run_id={self.run_id}",
                "-e",
                f"nccl_report_root={report_root}",
                *extra,
                timeout=240,
            )
        finally:
            # A failed pre-flight ends the play before the clean-up play: remove the run dirs.
            run_dirs = [
                Path(f"/tmp/nccl-preflight-{self.run_id}-{h.inventory_name}") for h in lab.hosts
            ]
            self.leftover_run_dirs = [d for d in run_dirs if d.exists()]
            for d in run_dirs:
                shutil.rmtree(d, True)
        self.output = self.proc.stdout + self.proc.stderr
        self.results: dict[str, dict[str, dict]] = {}
        for h in lab.hosts:
            path = report_root / self.run_id / "preflight" / f"{h.inventory_name}.json"
            data = json.loads(path.read_text())
            assert data["host"] == h.inventory_name
            self.results[h.inventory_name] = {r["check"]: r for r in data["results"]}

    def result(self, host_index: int, check: str) -> dict:
        return self.results[self.lab.hosts[host_index].inventory_name][check]

    def failed(self) -> set[tuple[int, str]]:
        names = [h.inventory_name for h in self.lab.hosts]
        return {
            (names.index(host), check)
            for host, checks in self.results.items()
            for check, r in checks.items()
            if r["status"] == "failed"
        }


def ephemeral_range(lab: Lab, index: int) -> tuple[int, int]:
    lo, hi = lab.run(index, ["cat", "/proc/sys/net/ipv4/ip_local_port_range"]).stdout.split()
    return int(lo), int(hi)


FIX = re.compile(r"allow it \(on ([^)]+)\): (.+?)(?=; allow it \(on |$)")


def headline(report_dir: Path) -> str:
    html = (report_dir / "report.html").read_text()
    return html.split('<div class="hosts">Failing: ', 1)[1].split("</div>", 1)[0]
