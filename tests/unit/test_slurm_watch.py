# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/slurm/launch.py's Watch: the launch step's records judged as roles/launch's
watch judges its looks (core/run_watch.py): a rank killed on one node ends the others naming it;
a stall asks every node for its evidence, then ends every node's run with the stall's words."""

from __future__ import annotations

import base64
import io
import json
import tarfile
from pathlib import Path
from typing import Any

from nccl_preflight.core.run_watch import watch_hosts
from nccl_preflight.slurm.launch import Watch


class FakeStep:
    """The records a launch step would bring, and what the watch said to every node."""

    def __init__(self) -> None:
        self.said: list[dict[str, Any]] = []

    def say(self, message: dict[str, Any]) -> None:
        self.said.append(message)


def progress(node: str, rank: int, test: str, size: int, iface: str = "up") -> dict[str, Any]:
    entry = {
        "rank": rank,
        "status": "running",
        "test": test,
        "size": size,
        "index": 5,
        "count": 9,
        "age_s": 0.0,
    }
    return {
        "kind": "progress",
        "node": node,
        "progress": [entry],
        "interface": {"ifname": "fab0", "state": iface, "carrier": iface == "up"},
    }


def results(node: str, launch: dict[str, Any]) -> dict[str, Any]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = json.dumps(launch).encode()
        info = tarfile.TarInfo("launch.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return {"kind": "results", "node": node, "archive": base64.b64encode(buf.getvalue()).decode()}


LAYOUT = {
    "hosts": [{"host": "a", "ranks": [0]}, {"host": "b", "ranks": [1]}],
    "by_host": {"a": {"ranks": [0]}, "b": {"ranks": [1]}},
}
ENV = {
    "a": {"ifname": "fab0", "address": "10.0.0.1", "master_port": 29500},
    "b": {"ifname": "fab0", "address": "10.0.0.2", "master_port": 29500},
}
FACTS = {n: {"interfaces": {"fab0": {"state": "UP"}}} for n in "ab"}


def make_watch(tmp_path: Path, shown: list[str]) -> tuple[Watch, FakeStep]:
    step = FakeStep()
    hosts = watch_hosts(LAYOUT, ENV, FACTS)
    return Watch(step, tmp_path, hosts, 30.0, shown.append), step  # type: ignore[arg-type]


def test_watch_hosts_probe_the_next_node_of_the_ring_at_master_port() -> None:
    hosts = watch_hosts(LAYOUT, ENV, FACTS)
    assert hosts[0] == {
        "host": "a",
        "ranks": [0],
        "ifname": "fab0",
        "address": "10.0.0.1",
        "preflight_state": "UP",
        "probes": [{"host": "b", "address": "10.0.0.2", "port": 29500}],
    }
    assert hosts[1]["probes"] == [{"host": "a", "address": "10.0.0.1", "port": 29500}]


def test_a_rank_killed_on_one_node_ends_the_others_naming_it(tmp_path: Path) -> None:
    shown: list[str] = []
    watch, step = make_watch(tmp_path, shown)
    watch.note("a", progress("a", 0, "barrier", 0))
    watch.judge()
    assert step.said == []
    exits = [{"rank": 1, "root_cause": True, "signal": "SIGKILL", "text": "killed by SIGKILL"}]
    watch.results("b", results("b", {"rc": 1, "stopped_by": None, "rank_exits": exits}))
    watch.judge()
    assert step.said == [
        {
            "stop": "rank 1 on b killed by SIGKILL",
            "details": {
                "kind": "failure_elsewhere",
                "message": "rank 1 on b killed by SIGKILL",
                "seen_on": "another host",
            },
        }
    ]
    assert "a: ending the run: rank 1 on b killed by SIGKILL" in shown
    watch.judge()  # said once
    assert len(step.said) == 1
    assert json.loads((tmp_path / "b" / "progress.json").read_text())["running"] is False


def test_a_stall_with_a_link_down_asks_for_evidence_then_stops_every_node(tmp_path: Path) -> None:
    shown: list[str] = []
    watch, step = make_watch(tmp_path, shown)
    watch.note("a", progress("a", 0, "bandwidth_all_reduce", 1 << 20))
    watch.note("b", progress("b", 1, "bandwidth_all_reduce", 1 << 20, iface="down"))
    assert "b: rank 1 at bandwidth_all_reduce 1 MiB (5 of 9 tests) [fab0 DOWN]" in shown
    watch.judge()
    assert step.said == []  # the link is down, but not for its patience yet
    for state in watch.states.values():
        state["last_advance"] -= 11
    watch.judge()
    assert [list(m) for m in step.said] == [["diagnose"]]
    assert step.said[0]["diagnose"]["b"] == {
        "ifname": "fab0",
        "probes": [{"host": "a", "address": "10.0.0.1", "port": 29500}],
        "probe_timeout": 2.0,
        "source": "10.0.0.2",
    }
    watch.judge()  # waiting for the evidence of both nodes
    assert len(step.said) == 1
    down = {"ifname": "fab0", "state": "down", "carrier": None}
    for node, iface in (("a", {"ifname": "fab0", "state": "up", "carrier": True}), ("b", down)):
        watch.note(
            node,
            {"kind": "diagnosis", "node": node, "diagnosis": {"interface": iface, "probes": []}},
        )
    watch.judge()
    stop = step.said[-1]
    assert stop["stop"].startswith("stalled: b: fab0 is DOWN (was UP at the pre-flight) — ")
    assert "in bandwidth_all_reduce at 1 MiB" in stop["stop"]
    assert stop["details"]["kind"] == "stall" and "b" in stop["details"]["culprits"]
    assert stop["details"]["cause_named"] is True
    assert any(line.startswith("a, b: ending the run: stalled: b: fab0") for line in shown)
    state = json.loads((tmp_path / "a" / "progress.json").read_text())
    assert state["ending"]["stopped_by"] == stop["stop"]
