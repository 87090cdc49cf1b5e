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
