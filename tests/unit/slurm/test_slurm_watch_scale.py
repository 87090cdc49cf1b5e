# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The Slurm launch watch at size (src/nccl_preflight/slurm/launch.py): every node sends a
progress record a second, so at 1,024 nodes the watch reads a thousand records a second. It
judges the run once a second (and at once on a node's end), asks failure_elsewhere about the
failed hosts only, and writes a node's progress.json when its test or link changes; the same
stops, with the same words, as when it judged every record, and a node gone silent is still
named within a second of SILENT_S (BENCHMARKS.md, section 7)."""

from __future__ import annotations

import json
import queue
import types
from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core.run_watch import failure_elsewhere, new_watch_state
from nccl_preflight.slurm import launch
from nccl_preflight.slurm.launch import SILENT_S, Watch, failed_states
from tests.builders.slurm import progress, results


class Clock:
    """A clock the test moves (time.monotonic and time.time of slurm/launch.py)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        fake = types.SimpleNamespace(monotonic=lambda: self.now, time=lambda: 1.7e9 + self.now)
        monkeypatch.setattr(launch, "time", fake)


class RecordStep:
    """A launch step whose records are given in advance; each read moves the clock."""

    def __init__(self, records: list[dict[str, Any]], clock: Clock, per_record_s: float) -> None:
        self.records, self.clock, self.per_record_s = list(records), clock, per_record_s
        self.said: list[dict[str, Any]] = []

    def next_record(self, timeout: float | None) -> dict[str, Any] | None:
        if not self.records:
            self.clock.now += timeout or 0.0  # waited that long for nothing
            raise queue.Empty
        self.clock.now += self.per_record_s
        return self.records.pop(0)

    def say(self, message: dict[str, Any]) -> None:
        self.said.append({**message, "at": self.clock.now})


def hosts_of(nodes: list[str]) -> list[dict[str, Any]]:
    return [
        {"host": node, "ranks": [i], "ifname": "fab0", "probes": [], "address": f"10.0.0.{i + 1}"}
        for i, node in enumerate(nodes)
    ]


def ended(rc: int, **extra: Any) -> dict[str, Any]:
    return {"rc": rc, "rank_exits": [], **extra}


def test_failure_elsewhere_over_the_failed_states_names_what_it_names_over_all() -> None:
    killed = [{"rank": 3, "root_cause": True, "signal": "SIGKILL", "text": "killed by SIGKILL"}]
    states = {f"n{i}": new_watch_state(f"n{i}", 100.0 + i) for i in range(8)}
    states["n1"].update(ended=ended(0), running=False)  # passed: names nothing
    states["n2"].update(ended=ended(1), running=False)  # a failed check: names nothing
    states["n3"].update(ended={"rc": 1, "rank_exits": killed}, running=False)
    states["n4"]["ending"] = {"stopped_by": "stalled: n6: fab0 is DOWN", "stop": {}}
    states["n5"].update(ended=ended(-9), running=False)  # torchrun itself killed
    states["n7"]["not_started"] = {"reason": "the start failed"}
    failed = failed_states(states)
    assert sorted(failed) == ["n3", "n4", "n5", "n7"]
    for me in states:
        assert failure_elsewhere(me, failed) == failure_elsewhere(me, states), me
    healthy = {f"n{i}": new_watch_state(f"n{i}", 100.0) for i in range(4)}
    healthy["n0"].update(ended=ended(0), running=False)
    assert failed_states(healthy) == {}


def test_a_large_run_is_judged_once_a_second_and_at_once_on_a_nodes_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    clock.install(monkeypatch)
    nodes = [f"n{i:03d}" for i in range(100)]
    seconds = 5
    records = [
        progress(node, i, "bandwidth_all_reduce", 1024 << (k % 4))
        for k in range(seconds)
        for i, node in enumerate(nodes)
    ]
    killed = [{"rank": 7, "root_cause": True, "signal": "SIGKILL", "text": "killed by SIGKILL"}]
    records.append(results("n007", {"rc": 1, "stopped_by": None, "rank_exits": killed}))
    step = RecordStep(records, clock, 1.0 / len(nodes))  # each node once a second
    watch = Watch(step, tmp_path, hosts_of(nodes), 300.0, lambda line: None)  # type: ignore[arg-type]
    judged: list[float] = []
    judge = watch.judge
    monkeypatch.setattr(watch, "judge", lambda: (judged.append(clock.now), judge())[1])
    ended_at = clock.now + len(records) * step.per_record_s  # when the results are read
    missing = watch.run(bound=60.0)
    # once per simulated second of records, not once per record (500 of them)
    before = [at for at in judged if at < ended_at - 1e-6]
    assert seconds - 1 <= len(before) <= seconds + 1, before
    # the node's end is judged at once: every other node is told at that record
    stops = [m for m in step.said if "stop" in m]
    assert [m["stop"] for m in stops] == ["rank 7 on n007 killed by SIGKILL"]
    assert stops[0]["at"] == pytest.approx(ended_at)
    assert any(m.get("alive") for m in step.said)  # the heartbeat goes on
    assert "n007" not in missing and len(missing) == len(nodes) - 1


def test_progress_json_follows_the_test_and_is_otherwise_written_every_few_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    clock.install(monkeypatch)
    writes: list[tuple[str, float]] = []
    write = launch.write_atomically
    monkeypatch.setattr(
        launch, "write_atomically", lambda path, data, *a: (writes.append((data, clock.now)),
                                                            write(path, data, *a))[1]
    )  # fmt: skip
    watch = Watch(RecordStep([], clock, 0), tmp_path, hosts_of(["a"]), 300.0, lambda line: None)  # type: ignore[arg-type]
    watch.note("a", progress("a", 0, "all_reduce", 1024))  # first look: written
    for size in (2048, 4096, 8192):  # the same test, a second apart: held back
        clock.now += 1.0
        watch.note("a", progress("a", 0, "all_reduce", size))
    assert len(writes) == 1
    clock.now += 1.0
    watch.note("a", progress("a", 0, "all_gather", 1024))  # another test: written at once
    assert len(writes) == 2 and '"all_gather"' in writes[-1][0]
    for _ in range(5):
        clock.now += 1.0
        watch.note("a", progress("a", 0, "all_gather", 2048))
    assert len(writes) == 3 and writes[-1][1] - writes[-2][1] == launch.WRITE_EVERY_S
    clock.now += 1.0
    watch.note("a", progress("a", 0, "all_gather", 4096, iface="down"))  # its link: at once
    assert len(writes) == 4 and '"down"' in writes[-1][0]
    assert (tmp_path / "a" / "progress.json").read_text() == writes[-1][0]


def test_a_node_silent_among_a_flood_of_records_is_named_and_written_at_once_it_speaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """n005 stops sending after 2 s while 39 nodes go on a record a second each: judged once a
    second, it is named silent within a second of SILENT_S; when it speaks again its
    progress.json says so at once, not WRITE_EVERY_S later."""
    clock = Clock()
    clock.install(monkeypatch)
    nodes = [f"n{i:03d}" for i in range(40)]
    seconds = 16
    records = [
        progress(node, i, "bandwidth_all_reduce", 1024 << (k % 4))
        for k in range(seconds)
        for i, node in enumerate(nodes)
        if node != "n005" or k < 2
    ]
    step = RecordStep(records, clock, 1.0 / len(nodes))
    shown: list[str] = []
    watch = Watch(step, tmp_path, hosts_of(nodes), 300.0, shown.append)  # type: ignore[arg-type]
    last_heard = clock.now + (len(nodes) + 5 + 1) * step.per_record_s  # n005's second record
    named: list[float] = []
    listen = watch.listen
    monkeypatch.setattr(
        watch, "listen", lambda now: (listen(now), watch.silent() and named.append(clock.now))[0]
    )
    watch.run(bound=float(seconds) - 0.5)  # ends while the others still send
    assert watch.silent() == ["n005"], shown[-5:]
    assert any(line.startswith("n005: silent: no record from its task for 1") for line in shown)
    assert last_heard + SILENT_S < named[0] <= last_heard + SILENT_S + 1.0 + 1e-6, named[0]
    path = tmp_path / "n005" / "progress.json"
    assert json.loads(path.read_text())["silent"]["since"] == pytest.approx(1.7e9 + last_heard)
    clock.now += 1.0
    watch.note("n005", progress("n005", 5, "bandwidth_all_reduce", 2048))  # it speaks again
    assert json.loads(path.read_text())["silent"] is None
