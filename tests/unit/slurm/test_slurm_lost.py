# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A node Slurm set down and a job it ended (NODE_FAIL) are a consequence, not a verdict
(src/nccl_preflight/slurm/lost.py, SlurmRun.lost): read from what the lab's real Slurm 22.05 said
of a node cut off under an allocation (tests/fixtures/slurm/, recorded).

The lab's cut-off test (tests/integration/test_slurm_faults_lab.py) runs at Slurm's default
SlurmdTimeout (300 s), where the watch names the node first. Its twin at SlurmdTimeout=30 never
reached this path on the lab: the command ended about 20 s after the cut, and Slurm ends the job
30-40 s after SlurmdTimeout's own 10 s (the recording), so the decision is tested here.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nccl_preflight.slurm import allocation as allocation_mod
from nccl_preflight.slurm import lost as lost_mod
from nccl_preflight.slurm import run as run_mod
from nccl_preflight.slurm.allocation import SlurmError, job_state
from nccl_preflight.slurm.lost import NODE_ENDED, bad_nodes, lost_to_slurm

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "slurm"
NODE_DOWN = (FIXTURES / "scontrol-show-node-down.txt").read_text()
JOB_NODE_FAIL = (FIXTURES / "scontrol-show-job-node-fail.txt").read_text()
NODES = ["lab5-node01", "lab5-node02"]
SAID = "Slurm set it DOWN+NOT_RESPONDING (Not responding [root@2026-11-28T21:18:55])"


def test_scontrol_names_the_node_it_set_down_with_its_state_and_reason() -> None:
    assert bad_nodes(NODE_DOWN, NODES) == {"lab5-node02": SAID}
    assert bad_nodes(NODE_DOWN, ["lab5-node01"]) == {}  # IDLE: nothing said of it
    assert bad_nodes(NODE_DOWN, ["other"]) == {}  # not a node of the run


def test_the_job_slurm_ended_for_its_node_is_node_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocation_mod, "slurm", lambda argv, env=None: JOB_NODE_FAIL)
    assert job_state("1") == "NODE_FAIL" and "NODE_FAIL" in NODE_ENDED


def test_the_lost_nodes_record_says_what_slurm_said_and_how_the_job_ended() -> None:
    lost = {"lab5-node02": {"lost": "lab5-node02 was silent for 20 s", "cut_short": True}}
    got = lost_to_slurm("1", "NODE_FAIL", lost, {"lab5-node02": SAID})
    why = f"{SAID} and ended job 1 (NODE_FAIL)"
    assert got == {"lab5-node02": {"lost": f"lab5-node02 was silent for 20 s; {why}",
                                   "cut_short": True, "slurm": why}}  # fmt: skip
    assert lost_to_slurm("1", "NODE_FAIL", lost, {}) == lost  # Slurm said nothing of it


class FakeWatch:
    def __init__(self, named: bool) -> None:
        self._named = named

    def named(self) -> bool:
        return self._named

    def lost_record(self, node: str) -> dict[str, Any]:
        return {"cut_short": True, "lost": f"no results came back from {node}", "rc": None}


def lost_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: str, named: bool, missing: list[str]
) -> tuple[Any, list[str]]:
    """SlurmRun.lost of a run on NODES whose job ended in ``state`` while Slurm said
    NODE_DOWN of its nodes. -> (the run, what it said)."""
    monkeypatch.setattr(run_mod, "ended_state", lambda job, env=None: state)
    monkeypatch.setattr(lost_mod, "slurm", lambda argv, env=None: NODE_DOWN)
    said: list[str] = []
    run = SimpleNamespace(
        alloc=SimpleNamespace(job_id="1", env=lambda: {}),
        nodes=NODES,
        run_dir=tmp_path,
        say=said.append,
        job_ended="",
    )
    run_mod.SlurmRun.lost(run, FakeWatch(named), missing, "")  # type: ignore[arg-type]
    return run, said


@pytest.mark.parametrize("named", [False, True], ids=["slurm-first", "watch-first"])
def test_a_job_slurm_ended_node_fail_is_a_consequence_and_its_node_the_lost_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, named: bool
) -> None:
    """Whether or not the watch named the node first, the job Slurm ended (NODE_FAIL) is no
    verdict of its own: the node it set down gets its launch.json with what Slurm said, even
    when the watch did not miss it; the run says the job's end is a consequence."""
    run, said = lost_of(tmp_path, monkeypatch, "NODE_FAIL", named, missing=[])
    record = json.loads((tmp_path / "lab5-node02" / "launch.json").read_text())
    assert record["lost"].endswith(f"; {SAID} and ended job 1 (NODE_FAIL)"), record
    assert record["slurm"] == f"{SAID} and ended job 1 (NODE_FAIL)"
    assert not (tmp_path / "lab5-node01").exists()  # Slurm said nothing of it
    assert run.job_ended == "NODE_FAIL"
    assert said[-1] == (
        "job 1 ended (NODE_FAIL): Slurm ended it because of lab5-node02, a consequence, no "
        "verdict of its own"
    ), said


def test_a_job_ended_from_outside_with_nothing_named_gives_no_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The contrast: a job ended otherwise (scancel: CANCELLED) while nothing was named cut the
    run short; that is no verdict."""
    with pytest.raises(SlurmError, match=r"job 1 ended \(CANCELLED\) while the ranks ran"):
        lost_of(tmp_path, monkeypatch, "CANCELLED", False, missing=["lab5-node02"])
