# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""bin/nccl-preflight on the lab: each exit class from a real fault, and report.html in Chromium.

What a pipeline and a person look at: the process's exit code (the class of the run), verdict.json
beside the JUnit, and report.html opened in a real browser: no console error, not blank, and on a
failing run the failing host's name on the first screen. When something is wrong the JUnit still
arrives whole and valid against the Jenkins schema: a pre-flight failure skips the launch (it
would only wait for the timeout) and every rank says why; an unreachable host is an error for
that host, and the ranks of the others, which cannot start without it, say so. (Exit 4, a
killed rank: test_run_faults_lab's SIGKILL run asserts its class and exit status.)
"""

from __future__ import annotations

import json
import os
import shutil
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core.junit import host_label
from nccl_preflight.node.run_start import parse_env_file
from tests import prom_text
from tests.browser import browser_unavailable_reason, distinct_colours, open_page
from tests.builders.lab_runs import pairwise_cases
from tests.jenkins_schema import validate_report_junit
from tests.lab.harness import Lab
from tests.lab.runs import (
    assert_nothing_left,
    inventory_with_unreachable_host,
    label,
    launch_records,
    leftovers,
    rank_suites,
    run_dir,
    validate,
)
from tests.playbook_run import ansible_playbook

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
WRAPPER = ROOT / "bin" / "nccl-preflight"
QUICK = ["--max-bytes", "16K", "--iters", "2", "--warmup", "1"]
CODES = {"passed": 0, "bad_input": 12, "unreachable": 11, "preflight_failed": 10}
CODES |= {"wrong_data": 7, "rank_lost": 4, "bandwidth": 8}

# A lab fault: rank RANK's all_reduce delivers its first element off by one (the transport
# corrupting data on the way to that rank). Loaded through PYTHONPATH by the wrapper Python below.
CORRUPT_SITECUSTOMIZE = """\
import os

if os.environ.get("RANK") == {rank!r}:
    import torch.distributed as dist

    _real_all_reduce = dist.all_reduce

    def all_reduce(tensor, *args, **kwargs):
        work = _real_all_reduce(tensor, *args, **kwargs)
        if tensor.numel() > 1:  # not the 1-element timing average
            tensor.view(-1)[0] += 1
        return work

    dist.all_reduce = all_reduce
"""


def preflight(
    inventory: Path, reports: Path, extra: dict[str, Any], timeout: float = 600
) -> tuple[int, dict[str, Any] | None, str]:
    """bin/nccl-preflight as a user runs it: (exit code, verdict.json of the run, output).
    ``nccl_run_id`` None in ``extra``: none is given, the run makes its own (reports/latest)."""
    run_id = extra.get("nccl_run_id", f"report-{time.time_ns():x}")
    variables = {"nccl_report_root": str(reports), **extra, "nccl_run_id": run_id}
    if run_id is None:
        del variables["nccl_run_id"]
    proc = ansible_playbook(
        "-i", str(inventory), "-e", json.dumps(variables), program=str(WRAPPER), timeout=timeout
    )
    path = reports / (run_id or "latest") / "verdict.json"
    verdict = json.loads(path.read_text()) if path.is_file() else None
    return proc.returncode, verdict, proc.stdout + proc.stderr


def junit_cases(report_dir: Path) -> dict[tuple[str, str], ET.Element]:
    root = ET.parse(report_dir / "junit.xml").getroot()
    return {(c.get("classname", ""), c.get("name", "")): c for c in root.iter("testcase")}


def rank_errors(cases: dict[tuple[str, str], ET.Element], host: str = "") -> list[ET.Element]:
    """The rank testcases (of ``host``'s ranks, else every host's) that are errors."""
    prefix = f"nccl.{host_label(host)}." if host else "nccl."
    mine = [case for (classname, _), case in cases.items() if classname.startswith(prefix)]
    return [error for case in mine if (error := case.find("error")) is not None]


def check_page(report_dir: Path, failing_host: str | None, shot: Path) -> str:
    """Open report.html in Chromium; return the text on its first screen."""
    reason = browser_unavailable_reason()
    if reason:
        pytest.skip(reason)
    view = open_page(report_dir / "report.html")
    shot.write_bytes(view.png)
    assert view.errors == [], view.errors
    assert distinct_colours(view.png) > 16, "the screenshot is blank"
    if failing_host is None:
        assert view.title.endswith("PASSED") and "PASSED" in view.first_screen_text
    else:
        assert view.title.endswith("FAILED")
        assert failing_host in view.first_screen_text, view.first_screen_text
    return view.first_screen_text


Healthy = tuple[Path, float, int, dict[str, Any] | None, str]


@pytest.fixture(scope="module")
def healthy(lab2: Lab, tmp_path_factory: pytest.TempPathFactory) -> Healthy:
    """One passing run, three ranks a host, pairwise rounds always, read by three tests (the exit
    and the page; the ranks, the JUnit and what is left; the pairwise rounds two hosts cannot
    judge): -> (report root, its start, exit code, verdict, output)."""
    tmp_path = tmp_path_factory.mktemp("healthy")
    extra = {
        "nccl_master_port": 29541,
        "nccl_slots": 3,
        "nccl_check_args": QUICK,
        "nccl_run_timeout": 90,
        "nccl_pairwise": "always",
    }
    textfile = tmp_path / "textfile"  # node_exporter's directory: the run's metrics
    textfile.mkdir()
    extra["nccl_report_textfile_dir"] = str(textfile)
    before = time.time()
    code, verdict, output = preflight(lab2.inventory_dir, tmp_path / "reports", extra)
    return tmp_path, before, code, verdict, output


def test_passing_run_exits_0_and_its_report_opens_clean(lab2: Lab, healthy: Healthy) -> None:
    tmp_path, before, code, verdict, output = healthy
    assert code == 0, output
    assert verdict is not None and verdict["class"] == "passed" and verdict["findings"] == []
    report_dir = tmp_path / "reports" / verdict["run_id"]
    found = prom_text.parse((tmp_path / "textfile" / "nccl_preflight_run.prom").read_text())
    assert found["nccl_preflight_verdict"].by("class")["passed"] == 1
    assert before < found["nccl_preflight_run_last_success_timestamp_seconds"].value()
    # the playbook's start (validate_inputs) reached the report: the run's whole duration
    assert 0 < found["nccl_preflight_run_duration_seconds"].value() < time.time() - before
    busbw = found["nccl_preflight_busbw_bytes_per_second"].by("collective")
    assert "all_reduce" in busbw and all(value > 0 for value in busbw.values()), busbw
    # Every torchrun left its exit barrier by itself: the watch ended nothing.
    launches = launch_records(report_dir, lab2.hosts).values()
    assert all(not launch["timed_out"] and launch["stopped_by"] is None for launch in launches)
    assert "ending the run" not in output
    html = (report_dir / "report.html").read_text()
    assert html.count("<svg") >= 5  # a busbw plot per bandwidth collective
    check_page(report_dir, None, tmp_path / "passed.png")


def test_two_hosts_three_ranks_each_pass_end_to_end(lab2: Lab, healthy: Healthy) -> None:
    """The same run's ranks, JUnit and nodes (test_launch_lab ran a run of its own for them)."""
    tmp_path, _, code, verdict, output = healthy
    assert code == 0 and verdict is not None, output[-6000:]
    reports, run_id = tmp_path / "reports", verdict["run_id"]
    report = reports / run_id
    assert os.readlink(reports / "latest") == run_id
    validate(report)
    suites = rank_suites(report / "junit.xml")
    expected = {f"nccl.{label(h)}.rank{h.rank * 3 + r}" for h in lab2.hosts for r in range(3)}
    assert set(suites) == expected
    for name, suite in suites.items():
        assert suite.get("failures") == "0" and suite.get("errors") == "0", name
        assert int(suite.get("tests")) > 10, name
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert props["world_size"] == "6" and props["backend"] == "gloo"
    assert "PASSED" in (report / "summary.md").read_text()
    assert "nccl-preflight run" in output  # the summary is shown at the end of the play
    # The stop after a failed start or wait is in the launch's rescue: no task of a healthy run.
    assert "End every process of this run" not in output
    for host in lab2.hosts:
        assert (report / host.inventory_name / "launch.json").is_file()
        # The environment play's copy of nccl.env stays beside the collected results.
        env = parse_env_file((report / host.inventory_name / "nccl.env").read_text())
        assert env["NODE_RANK"] == str(host.rank) and env["NPROC_PER_NODE"] == "3", env
        # every node's rank count reaches the check, which places a missing rank on its node
        launched = json.loads((report / host.inventory_name / "launch.json").read_text())
        cmd = launched["cmd"]
        assert cmd[cmd.index("--ranks-per-node") + 1] == "3,3", cmd
        # the pre-flight's torch probe became torchrun: torch imported once on the node
        assert launched["warm_start"] is True
        assert not run_dir(run_id, host).exists(), "the run directory must be removed"
    assert leftovers(run_id) == []

    # --tags report alone rebuilds the JUnit of the latest run from the collected files.
    merged = (report / "junit.xml").read_text()
    (report / "junit.xml").unlink()
    rebuilt = lab2.ansible_playbook(
        "playbooks/validate.yml",
        "--tags",
        "report",
        "-e",
        json.dumps({"nccl_report_root": str(reports)}),
        timeout=300,
    )
    assert rebuilt.returncode == 0, rebuilt.stdout[-4000:] + rebuilt.stderr[-2000:]
    assert set(rank_suites(report / "junit.xml")) == expected
    assert len((report / "junit.xml").read_text()) == len(merged)


def test_two_hosts_say_they_cannot_tell_and_show_each_hosts_own_figure(
    lab2: Lab, healthy: Healthy
) -> None:
    """nccl_pairwise always on two hosts: the rounds ran, but which host of the one pair is slow
    cannot be told; each host's own figure (its local ranks' pair) is shown instead."""
    tmp_path, _, code, verdict, output = healthy
    assert code == 0 and verdict is not None, output[-4000:]
    report_dir = tmp_path / "reports" / verdict["run_id"]
    summary = (report_dir / "summary.md").read_text()
    assert "two nodes cannot tell which of them is bad" in summary
    for host in lab2.hosts:
        assert f"within {host.inventory_name} local ranks 0-1:" in summary, summary
    cases = pairwise_cases(report_dir)
    assert len(cases) == 2 and all(c.find("skipped") is not None for c in cases.values())
    validate_report_junit(report_dir)


def test_wrong_data_exits_7_names_the_suspect_and_the_page_shows_the_host(
    lab2: Lab, tmp_path: Path
) -> None:
    site = tmp_path / "corrupt-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(CORRUPT_SITECUSTOMIZE.format(rank="1"))
    python = tmp_path / "python-corrupting-rank1"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site}\nexport PYTHONPATH\nexec {lab2.python} "$@"\n')
    python.chmod(0o755)
    # The passing node's torchrun waits at its end for the failed node's in torch elastic's exit
    # barrier, which never comes (a failed worker group skips it): the watch ends it once the
    # failed node's run ended. A long nccl_run_timeout: the run must end on that event, not on it.
    timeout = 240
    extra = {
        "nccl_master_port": 29542,
        "nccl_run_timeout": timeout,
        "nccl_python": str(python),
        "nccl_check_args": [*QUICK, "--tests", "all_reduce_sum,broadcast,bandwidth_all_reduce"],
    }
    began = time.monotonic()
    code, verdict, output = preflight(lab2.inventory_dir, tmp_path, extra)
    took = time.monotonic() - began
    assert verdict is not None, output
    assert (code, verdict["class"]) == (7, "wrong_data"), output
    passing, suspect = (h.inventory_name for h in lab2.hosts)  # rank 1: node rank 1's only rank
    launches = launch_records(tmp_path / verdict["run_id"], lab2.hosts)
    assert not any(launch["timed_out"] for launch in launches.values()), launches
    assert launches[suspect]["stopped_by"] is None and launches[suspect]["rc"] == 1
    said = f"torchrun waited in its exit barrier for {suspect}, whose ranks failed (rank 1 exited 1"
    assert str(launches[passing]["stopped_by"]).startswith(said), launches[passing]
    assert f"{passing}: ending the run: {said}" in output
    assert took < timeout, f"the play took {took:.0f} s, nccl_run_timeout is {timeout} s"
    assert_nothing_left(verdict["run_id"], lab2.hosts)
    wrong = [f for f in verdict["findings"] if f["class"] == "wrong_data"]
    assert wrong and all(f["host"] == suspect and f["rank"] == 1 for f in wrong)
    assert {f["test"] for f in wrong} == {"all_reduce_sum", "bandwidth_all_reduce"}
    assert all(f"Suspect: rank 1 on {suspect}" in f["fix"] for f in wrong)
    report_dir = tmp_path / verdict["run_id"]
    check_page(report_dir, suspect, tmp_path / "wrong-data.png")
    keep = os.environ.get("NCCL_PREFLIGHT_KEEP_SCREENSHOT")  # docs/report-failing.png is one
    if keep:
        shutil.copy(tmp_path / "wrong-data.png", keep)


def test_firewall_drop_exits_10_every_rank_says_why_and_the_page_names_the_host(
    lab2: Lab, tmp_path: Path
) -> None:
    master = lab2.hosts[0]
    port = 29543
    undo = lab2.firewall_drop(master, port)
    try:
        # The listener behind the drop waits for probes that never come: 1 s of
        # preflight_collect_wait (not 8), then the stop task after every probe collects it.
        # No run id: the run makes its own, as when a user runs it (reports/latest).
        extra = {
            "nccl_master_port": port,
            "nccl_check_args": QUICK,
            "preflight_collect_wait": 1,
            "nccl_run_id": None,
        }
        code, verdict, output = preflight(lab2.inventory_dir, tmp_path, extra)
    finally:
        undo()
    assert verdict is not None, output
    assert (code, verdict["class"]) == (10, "preflight_failed"), output
    assert "FAILED" in output and master.inventory_name in output
    causes = [f for f in verdict["findings"] if not f["consequence"]]
    assert causes[0]["host"] == master.inventory_name and causes[0]["fix"]
    report_dir = (tmp_path / "latest").resolve()
    assert report_dir.name == verdict["run_id"] != "latest"
    cases = junit_cases(report_dir)
    failure = cases[(f"preflight.{host_label(master.inventory_name)}", "firewall")].find("failure")
    assert failure is not None and str(port) in failure.get("message", "") + (failure.text or "")
    # Both hosts' ranks are in the JUnit, as errors that name the stage and the cause.
    assert len({c for c, _ in cases if c.startswith("nccl.")}) == len(lab2.hosts)
    stopped = f"the run stopped at the pre-flight: {master.inventory_name} firewall: "
    errors = rank_errors(cases)
    assert errors and all(stopped in e.get("message", "") for e in errors)
    validate_report_junit(report_dir)
    # Nothing of the run is left on the nodes.
    assert not list(Path("/tmp").glob(f"nccl-preflight-{report_dir.name}-*"))
    check_page(report_dir, master.inventory_name, tmp_path / "firewall.png")


def test_unreachable_host_exits_11_and_is_an_error_for_that_host(lab2: Lab, tmp_path: Path) -> None:
    # The lab's inventory plus a third node at an address of the lab's own management network
    # where nothing answers.
    inventory, ghost = inventory_with_unreachable_host(lab2, tmp_path, 98)
    code, verdict, output = preflight(
        inventory, tmp_path, {"nccl_master_port": 29544, "nccl_check_args": QUICK}
    )
    assert verdict is not None, output
    assert (code, verdict["class"]) == (11, "unreachable"), output
    assert verdict["findings"][0]["host"] == ghost
    report_dir = tmp_path / verdict["run_id"]
    cases = junit_cases(report_dir)
    ghost_errors = [
        error
        for (classname, _), case in cases.items()
        if host_label(ghost) in classname and (error := case.find("error")) is not None
    ]
    assert ghost_errors, sorted(cases)
    assert any("unreachable" in (e.get("message", "") + (e.text or "")) for e in ghost_errors)
    # The reachable hosts' ranks did not start (static rendezvous needs every node) and say so.
    for host in lab2.hosts:
        mine = [c for (c, _) in cases if c.startswith(f"nccl.{host_label(host.inventory_name)}.")]
        assert mine and len(rank_errors(cases, host.inventory_name)) == len(mine)
    validate_report_junit(report_dir)


def test_min_busbw_no_link_reaches_exits_8_with_threshold_and_link(
    lab2: Lab, tmp_path: Path
) -> None:
    extra = {
        "nccl_master_port": 29546,
        "nccl_run_timeout": 90,
        "nccl_check_args": [*QUICK, "--tests", "bandwidth_all_reduce", "--min-busbw", "5000"],
    }
    code, verdict, output = preflight(lab2.inventory_dir, tmp_path, extra)
    assert verdict is not None, output
    assert (code, verdict["class"]) == (8, "bandwidth"), output
    fixes = [f["fix"] for f in verdict["findings"]]
    assert fixes and all("below the required 5000.0 GB/s" in fix for fix in fixes)
    assert all("judged against" in fix for fix in fixes)
