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
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nccl_preflight.core.junit import host_label
from tests.jenkins_schema import validate_report_junit
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


def assert_folded(
    lab: Lab, report_dir: Path, run_id: str, culprit: str, consequences: set[tuple[str, str]]
) -> dict[str, Any]:
    """verdict.json, report.html, summary.md and the JUnit fold ``consequences`` (host, check)
    under ``culprit``'s firewall, the only cause."""
    verdict = json.loads((report_dir / "verdict.json").read_text())
    assert verdict["class"] == "preflight_failed" and verdict["exit_code"] == 10
    causes = [f for f in verdict["findings"] if not f["consequence"]]
    assert [(f["host"], f["test"]) for f in causes] == [(culprit, "firewall")], causes
    pointer = {"id": f"{culprit}/firewall", "host": culprit, "test": "firewall"}
    linked = {(f["host"], f["test"]) for f in verdict["findings"] if f["rank"] is None}
    assert linked == consequences | {(culprit, "firewall")}
    assert all(f["cause"] == pointer for f in verdict["findings"] if f["consequence"])
    # Every planned rank never started, a consequence of the same firewall.
    ranks = [f for f in verdict["findings"] if f["rank"] is not None]
    assert sorted(f["rank"] for f in ranks) == list(range(len(lab.hosts)))

    assert headline(report_dir) == culprit
    html = (report_dir / "report.html").read_text()
    fold = html.split(f"consequence(s) of this firewall on {culprit}", 1)[1].split("</details>")[0]
    for host, check in consequences:
        assert host in fold and check in fold

    problems = (report_dir / "summary.md").read_text().split("Problems:", 1)[1].strip()
    top = [line for line in problems.splitlines() if line.startswith("- ")]
    assert len(top) == 1 and top[0].startswith(f"- preflight.{host_label(culprit)} firewall:")

    cases = junit_cases(report_dir / "junit.xml")
    of = f"(a consequence of {culprit}'s failed firewall check)"
    for host, check in consequences:
        failure = cases[(f"preflight.{host_label(host)}", check)].find("failure")
        assert failure is not None and of in failure.get("message", ""), (host, check)
    stopped = f"the run stopped at the pre-flight: {culprit} firewall: {culprit}: iptables"
    rank_errors = [c.find("error") for (n, _), c in cases.items() if n.startswith("nccl.")]
    assert len(rank_errors) == len(lab.hosts)
    assert all(e is not None and stopped in e.get("message", "") for e in rank_errors)
    validate_report_junit(report_dir)
    assert left_on_hosts(lab, run_id) == []
    return verdict


# roles/preflight: the task that stops the listeners still waiting for a peer's probe, after
# every host's probes (it runs when there are more hosts than forks).
STOP_TASK = "Stop the listeners that still waited for a peer's probe"


def tcp_cases(files: Iterable[Path]) -> dict[tuple[str, str], ET.Element]:
    """The pre-flight's tcp_master_port and tcp_ring test cases of the JUnit ``files``, by
    (classname, name)."""
    return {
        (case.get("classname"), case.get("name")): case
        for junit in files
        for case in ET.parse(junit).getroot().iter("testcase")
        if case.get("name") in ("tcp_master_port", "tcp_ring")
    }


def stopped_late_on(output: str) -> list[str]:
    """The hosts the stop task after every host's probes ran on (not skipped)."""
    task = output.split(f"TASK [preflight : {STOP_TASK}", 1)[1].split("TASK [", 1)[0]
    return re.findall(r"^(?:ok|changed): \[([^\]]+)\]", task, re.MULTILINE)
