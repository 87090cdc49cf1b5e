# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Wait, bounded, for something a detached process or a lab host does in its own time."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(predicate: Callable[[], object], timeout: float = 10, poll: float = 0.05) -> bool:
    """Poll ``predicate`` every ``poll`` s for up to ``timeout`` s; -> whether it came true (it is
    asked once more at the end, so a condition that came true at the deadline counts)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll)
    return bool(predicate())


def wait_or_fail(
    predicate: Callable[[], object],
    timeout: float = 60,
    what: str = "the condition",
    poll: float = 0.1,
    give_up: Callable[[], object] | None = None,
) -> None:
    """:func:`wait_for`, and an AssertionError naming ``what`` when it did not come true within
    ``timeout`` s (at once when ``give_up()`` came true first: the thing waited on has ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not (give_up is not None and give_up()):
        if predicate():
            return
        time.sleep(poll)
    if not predicate():
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")
