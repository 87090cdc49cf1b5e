# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""docs/design.md names only what exists in the tree.

Every repository path it names (``src/nccl_preflight/node/x.py``, ``roles/...``, ``tests/...``,
backticked or not; ``<placeholder>`` and ``*`` match any name) must exist, and every bare
``name.py`` it names must be a file somewhere in the tree. It once named
``playbooks/group_vars/all`` for the defaults.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DESIGN = ROOT / "docs" / "design.md"
SKIP_DIRS = {"reports", "node_modules", "__pycache__"}


def top_dirs(root: Path) -> list[str]:
    """The repository's top-level directories (what a named path starts with)."""
    return sorted(
        p.name
        for p in root.iterdir()
        if p.is_dir() and not p.name.startswith(".") and p.name not in SKIP_DIRS
    )


def named_paths(text: str, tops: list[str]) -> list[str]:
    """Every path under one of ``tops`` that ``text`` names, in order, without repeats."""
    pattern = re.compile(r"(?<![\w./<>-])((?:" + "|".join(map(re.escape, tops)) + r")/[\w./<>*-]*)")
    found = [m.group(1).rstrip(".") for m in pattern.finditer(text)]
    return list(dict.fromkeys(found))


def named_modules(text: str) -> list[str]:
    """Every bare ``name.py`` (no directory before it) that ``text`` names."""
    return list(dict.fromkeys(re.findall(r"(?<![\w/.<>-])([\w-]+\.py)\b", text)))


def exists(root: Path, path: str) -> bool:
    """``path`` is in the tree; ``<anything>`` and ``*`` match any one name."""
    pattern = re.sub(r"<[^>]*>", "*", path).rstrip("/")
    if "*" in pattern:
        return any(root.glob(pattern))
    return (root / pattern).exists()


def missing(text: str, root: Path) -> list[str]:
    """What ``text`` names that ``root`` lacks."""
    files = {
        p.name
        for p in root.rglob("*.py")
        if not any(part in SKIP_DIRS or part.startswith(".") for part in p.relative_to(root).parts)
    }
    return [p for p in named_paths(text, top_dirs(root)) if not exists(root, p)] + [
        name for name in named_modules(text) if name not in files
    ]


def test_design_names_only_paths_that_exist() -> None:
    text = DESIGN.read_text()
    assert len(named_paths(text, top_dirs(ROOT))) > 30  # the extraction finds the paths it names
    assert missing(text, ROOT) == []


def test_a_path_that_is_not_there_is_named(tmp_path: Path) -> None:
    for path in (
        "src/nccl_preflight/node/run_dir.py",
        "roles/nccl_defaults/defaults/main/launch.yml",
    ):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    (tmp_path / "playbooks").mkdir()
    text = (
        "Defaults in `playbooks/group_vars/all/*.yml` and roles/nccl_defaults/defaults/main/.\n"
        "src/nccl_preflight/node/run_dir.py refuses links; "
        "src/nccl_preflight/node/firewall_<tool>.py judges.\n"
        "The parser (run_dir.py, gone.py) and reports/<run-id>/plan.json.\n"
    )
    assert named_paths(text, top_dirs(tmp_path)) == [
        "playbooks/group_vars/all/*.yml",
        "roles/nccl_defaults/defaults/main/",
        "src/nccl_preflight/node/run_dir.py",
        "src/nccl_preflight/node/firewall_<tool>.py",
    ]
    assert missing(text, tmp_path) == [
        "playbooks/group_vars/all/*.yml",
        "src/nccl_preflight/node/firewall_<tool>.py",
        "gone.py",
    ]
