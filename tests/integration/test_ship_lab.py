# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The rank script reaches the nodes as one zipapp with the modules beside it that it imports
(src/nccl_preflight/core/zipapp.py), on the lab: real ansible-playbook over SSH, real torchrun.

A `launch_script` of one's own under tmp_path imports a sibling module (as files/nccl_check.py
imports its files/nccl_check_*.py) and then runs the project's check. The sibling is nowhere on
the nodes' paths: only the zipapp brings it. A rank that crashes in the sibling is an error in
the JUnit whose log tail names the file inside the zipapp with its line; a sibling that does not
parse stops the launch, naming the file, before anything starts on a node.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.lab.harness import Lab
from tests.lab.runs import (
    QUICK,
    launch,
    launch_records,
    leftovers,
    new_run_id,
    rank_suites,
    run_dir,
    validate,
)

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "files" / "nccl_check.py"

ENTRY = """\
# A launch_script of one's own beside a module it imports; then the project's check.
import runpy
import sys

import ship_part

ship_part.say()
sys.path.insert(0, {files!r})  # the check's own modules beside it, if any
sys.argv[0] = {check!r}
runpy.run_path({check!r}, run_name="__main__")
"""

PART = """\
import os


def say():
    rank = int(os.environ["RANK"])
    print("ship_part speaking on rank", rank, flush=True)
    if rank == {crash}:
        raise RuntimeError("rank {crash} crashed in ship_part")
"""


def own_script(folder: Path, crash: int, part: str = PART) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    entry = folder / "my_check.py"
    entry.write_text(ENTRY.format(files=str(CHECK.parent), check=str(CHECK)))
    (folder / "ship_part.py").write_text(part.format(crash=crash))
    return entry


def settings(script: Path, port: int) -> dict[str, object]:
    return {
        "nccl_slots": 2,
        "nccl_run_timeout": 90,
        "launch_check_timeout": 40,
        "nccl_master_port": port,
        "nccl_check_args": QUICK,
        "launch_script": str(script),
    }


@pytest.mark.lab
def test_a_launch_script_and_its_sibling_run_from_one_zipapp(lab2: Lab, tmp_path: Path) -> None:
    run_id = new_run_id()
    script = own_script(tmp_path / "src", crash=-1)
    result = launch(lab2, run_id, tmp_path / "reports", settings(script, 29583))
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    report = tmp_path / "reports" / run_id
    validate(report)
    records = launch_records(report, lab2.hosts)
    for node, host in enumerate(lab2.hosts):
        cmd = records[host.inventory_name]["cmd"]
        assert cmd[cmd.index("--redirects") + 2] == str(run_dir(run_id, host) / "nccl_check.pyz")
        for rank in (2 * node, 2 * node + 1):
            log = (report / host.inventory_name / f"rank-{rank}.log").read_text()
            assert f"ship_part speaking on rank {rank}" in log, log[-2000:]
    suites = rank_suites(report / "junit.xml")
    assert len(suites) == 4
    assert all(s.get("failures") == "0" and s.get("errors") == "0" for s in suites.values())
    assert leftovers(run_id) == []


@pytest.mark.lab
def test_a_rank_crashing_in_a_sibling_names_it_inside_the_zipapp(lab2: Lab, tmp_path: Path) -> None:
    run_id = new_run_id()
    script = own_script(tmp_path / "src", crash=3)
    # A rank that exits by itself ends nothing elsewhere (core/run_watch.failure_elsewhere): the
    # first node's ranks wait at check-in for ranks 2 and 3 until their --timeout. 15 s instead
    # of 40: their ending is not what this test asserts (measured: the first node's ranks ran
    # 96 s, to nccl_run_timeout, with 40 s at load 24; the crashing node's 40 s).
    variables = {**settings(script, 29584), "launch_check_timeout": 15}
    result = launch(lab2, run_id, tmp_path / "reports", variables)
    assert result.returncode != 0, "a crashed rank must fail the play"
    report = tmp_path / "reports" / run_id
    validate(report)
    suites = rank_suites(report / "junit.xml")
    victim = suites[next(name for name in suites if name.endswith(".rank3"))]
    [error] = [e for c in victim.iter("testcase") for e in c.iter("error")]
    shipped = run_dir(run_id, lab2.hosts[1]) / "nccl_check.pyz"
    text = error.text or ""
    assert "--- tail of rank-3.log ---" in text, ET.tostring(victim)
    assert f'File "{shipped}/my_check.py", line 7, in <module>\n    ship_part.say()' in text
    assert f'File "{shipped}/ship_part.py", line 8, in say\n' in text
    assert 'raise RuntimeError("rank 3 crashed in ship_part")' in text
    assert "RuntimeError: rank 3 crashed in ship_part" in text and "runpy" not in text
    assert leftovers(run_id) == []


@pytest.mark.lab
def test_a_sibling_that_does_not_parse_stops_the_launch_naming_it(
    lab2: Lab, tmp_path: Path
) -> None:
    run_id = new_run_id()
    script = own_script(tmp_path / "src", crash=-1, part="def say(:\n    pass\n")
    result = launch(lab2, run_id, tmp_path / "reports", settings(script, 29585))
    assert result.returncode != 0
    part = tmp_path / "src" / "ship_part.py"
    assert f"cannot parse {part}, line 1" in result.stdout, result.stdout[-6000:]
    report = tmp_path / "reports" / run_id
    validate(report)
    suites = rank_suites(report / "junit.xml")
    assert len(suites) == 4
    # The play's output names the file (above); with --tags launch no call made a run
    # directory, so no launch record comes back and every rank "never started".
    for suite in suites.values():
        [error] = [e for c in suite.iter("testcase") for e in c.iter("error")]
        assert "never started" in (error.get("message") or ""), ET.tostring(suite)
    for host in lab2.hosts:
        assert not (report / host.inventory_name / "rank-0.log").exists()
        assert not run_dir(run_id, host).exists()
    assert leftovers(run_id) == []
