# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""tests/lab/runs.during, the fault injected mid-run: once the body ended its waits give up, so
a fault never comes after the undo, into the next test on the session's lab. Plain unit tests
(no lab, no root): a rank record that never comes is a file that is never written."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.lab.runs import during, wait_for_record


@pytest.fixture
def thread_errors(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[BaseException]]:
    errors: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    yield errors


def test_a_wait_still_going_when_the_body_ends_gives_up_and_never_acts(
    tmp_path: Path, thread_errors: list[BaseException]
) -> None:
    record = tmp_path / "rank-0.json"
    acted: list[str] = []
    undo: list[Callable[[], None]] = []

    def fault() -> None:
        wait_for_record(record, "barrier", timeout=120)
        acted.append("cut")
        undo.append(lambda: acted.append("undone"))

    started = time.monotonic()
    with during(fault, undo) as thread:
        time.sleep(0.3)  # the run ends before the rank reached barrier
    assert not thread.is_alive() and time.monotonic() - started < 10
    # Written after the body: a late record must not bring the fault into the next test.
    record.write_text('{"current_test": "barrier"}')
    time.sleep(0.5)
    assert acted == [] and thread_errors == []


def test_a_fault_that_came_is_undone_and_a_wait_that_timed_out_is_reported(
    tmp_path: Path, thread_errors: list[BaseException]
) -> None:
    record = tmp_path / "rank-0.json"
    record.write_text('{"current_test": "barrier", "pid": 7}')
    acted: list[str] = []
    undo: list[Callable[[], None]] = []

    def fault() -> None:
        doc = wait_for_record(record, "barrier", timeout=60)
        acted.append(f"kill {doc['pid']}")
        undo.append(lambda: acted.append("undone"))

    with during(fault, undo):
        deadline = time.monotonic() + 30
        while not acted and time.monotonic() < deadline:
            time.sleep(0.05)
    assert acted == ["kill 7", "undone"]

    # While the body still runs, a wait that ran out is the action's own error.
    with during(lambda: wait_for_record(tmp_path / "never.json", "barrier", timeout=0.2)):
        time.sleep(1)
    assert [str(e) for e in thread_errors] == [f"{tmp_path / 'never.json'} never reached barrier"]
