# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""core/forked.py: a share of the report step in a forked child, never a different result.

Real forks: the child's share comes back pickled, in order; a child that raises, dies by a
signal or is never started leaves its share to the parent; the parent's own failure ends and
reaps the child; the child never runs the parent's signal handlers."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from nccl_preflight.core import forked
from nccl_preflight.core.forked import Forked, split_map
from tests.polling import wait_for

pytestmark = pytest.mark.skipif(not forked.usable(), reason="no fork or a single core here")


def squares(items: Sequence[int]) -> list[tuple[int, int]]:
    return [(n * n, os.getpid()) for n in items]


def test_the_tail_is_the_childs_and_the_order_is_kept() -> None:
    done = split_map(squares, list(range(10)), child_share=0.4, least=4)
    assert [value for value, _ in done] == [n * n for n in range(10)]
    pids = [pid for _, pid in done]
    assert pids[:6] == [os.getpid()] * 6  # the head here, the last 40 % in one child
    assert len(set(pids[6:])) == 1 and pids[6] != os.getpid()


def test_fewer_items_than_least_stay_in_this_process() -> None:
    done = split_map(squares, [1, 2, 3], child_share=0.5, least=4)
    assert done == [(1, os.getpid()), (4, os.getpid()), (9, os.getpid())]


def test_a_child_that_raises_or_dies_leaves_its_share_to_the_parent() -> None:
    parent = os.getpid()

    def raises(items: Sequence[int]) -> list[int]:
        if os.getpid() != parent:
            raise RuntimeError("the child's share breaks")
        return [n + 1 for n in items]

    def dies(items: Sequence[int]) -> list[int]:
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return [n + 1 for n in items]

    assert split_map(raises, list(range(8)), child_share=0.5, least=2) == list(range(1, 9))
    assert split_map(dies, list(range(8)), child_share=0.5, least=2) == list(range(1, 9))


def test_a_result_that_does_not_pickle_is_redone_here() -> None:
    given, value = Forked(lambda: lambda: None).result()  # a lambda does not pickle
    assert (given, value) == (False, None)


def test_the_parents_failure_ends_and_reaps_the_child(tmp_path: Path) -> None:
    marker = tmp_path / "child"
    parent = os.getpid()

    def slow_child(items: Sequence[int]) -> list[int]:
        if os.getpid() != parent:
            marker.with_suffix(".new").write_text(str(os.getpid()))
            marker.with_suffix(".new").replace(marker)
            time.sleep(120)
            return list(items)
        assert wait_for(marker.exists, 60), "the child never started"
        raise KeyboardInterrupt  # the parent's own share fails while the child works

    with pytest.raises(KeyboardInterrupt):
        split_map(slow_child, list(range(4)), child_share=0.5, least=2)
    pid = int(marker.read_text())
    with pytest.raises(ChildProcessError):  # ended and reaped: no zombie is left
        os.waitpid(pid, os.WNOHANG)
    assert not Path(f"/proc/{pid}").exists()


def test_the_child_runs_no_handler_of_the_parents(tmp_path: Path) -> None:
    ran = tmp_path / "handler ran"
    previous = signal.signal(signal.SIGTERM, lambda *_: ran.write_text(str(os.getpid())))
    started = tmp_path / "started"
    try:
        child = Forked(lambda: (started.write_text("x"), time.sleep(120)))
        assert wait_for(started.exists, 60), "the child never started"
        os.kill(child.pid, signal.SIGTERM)  # as a process group's Ctrl-C or scancel would
        assert child.result() == (False, None)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not ran.exists(), "the child ran the parent's SIGTERM handler"
