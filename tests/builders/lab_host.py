# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What a lab's teardown must leave as it was on the machine (network namespaces and links), and
the check that it did."""

from __future__ import annotations

import os
import re
import subprocess

from tests.lab import harness


def snapshot() -> dict[str, list[str]]:
    """What teardown must leave exactly as it was."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True)
    return {
        "netns": sorted(netns.stdout.splitlines()),
        "links": sorted(links.stdout.splitlines()),
        "etc_netns": sorted(os.listdir("/etc/netns")) if os.path.isdir("/etc/netns") else [],
        "state": sorted(os.listdir(harness.state_root())),
    }


def assert_restored(
    before: dict[str, list[str]], after: dict[str, list[str]], index: int | None, name: str | None
) -> None:
    """after == before, apart from labs of other sessions that came or went meanwhile."""
    assert index is not None and name is not None
    for key in before:
        changed = set(before[key]) ^ set(after[key])
        if key == "state":
            foreign = {entry for entry in changed if entry != name}
        else:
            found = {line: re.search(rf"\b{harness.PREFIX}(\d+)", line) for line in changed}
            foreign = {line for line, m in found.items() if m and int(m.group(1)) != index}
        assert changed - foreign == set(), f"{key} differs after teardown: {changed - foreign}"
