# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/node/files.py: the atomic replace every module uses for files others read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nccl_preflight.node import files as nccl_files
from nccl_preflight.node.files import write_atomically


def test_the_mode_is_exact_whatever_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "nccl.env"
    old = os.umask(0o077)
    try:
        write_atomically(target, "A=1\n", 0o640)
    finally:
        os.umask(old)
    assert target.read_text() == "A=1\n"
    assert target.stat().st_mode & 0o7777 == 0o640


def test_without_a_mode_a_new_file_follows_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "launch.json"
    old = os.umask(0o027)
    try:
        write_atomically(target, b"{}\n")
    finally:
        os.umask(old)
    assert target.read_bytes() == b"{}\n"
    assert target.stat().st_mode & 0o7777 == 0o640


def test_an_existing_file_is_replaced_and_no_temporary_file_stays(tmp_path: Path) -> None:
    target = tmp_path / "listener.json"
    target.write_text("old")
    write_atomically(target, "new \u00e9", 0o600)
    assert target.read_text(encoding="utf-8") == "new \u00e9"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["listener.json"]


def test_a_link_in_place_of_the_temporary_file_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("keep")
    (tmp_path / f".x.json.{os.getpid()}.tmp").symlink_to(elsewhere)
    with pytest.raises(OSError):
        write_atomically(tmp_path / "x.json", "data", 0o600)
    assert elsewhere.read_text() == "keep"
    assert not (tmp_path / "x.json").exists()


def test_a_failed_rename_leaves_the_old_file_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "summary.md"
    target.write_text("old")

    def refuse(src: str, dst: str) -> None:
        raise PermissionError(13, "refused", dst)

    monkeypatch.setattr(nccl_files.os, "replace", refuse)
    with pytest.raises(PermissionError):
        write_atomically(target, "new")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.md"]
