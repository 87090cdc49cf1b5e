# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The slurm command's node bundle kept by its sources' content hash (slurm/bundle.py
build_node_bundle(cache_dir)): built once, read back while the sources are unchanged, built
again when one changes, never taken from a file another user owns."""

from __future__ import annotations

import io
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from nccl_preflight.core.content import TREE, Tree
from nccl_preflight.core.zipapp import content_key
from nccl_preflight.slurm import bundle as builder


def _kept(cache: Path) -> list[Path]:
    """The bundles kept in ``cache`` (not the lock files beside them)."""
    return [p for p in cache.iterdir() if p.suffix != ".lock"]


def test_the_bundle_is_built_once_and_read_back_while_its_sources_are_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "reports" / ".bundle"
    built = []
    real_build = builder._build
    monkeypatch.setattr(builder, "_build", lambda sources: built.append(1) or real_build(sources))
    first = builder.build_node_bundle(cache)
    assert builder.build_node_bundle(cache) == first
    assert len(built) == 1
    (kept,) = _kept(cache)
    assert kept.stat().st_mode & 0o777 == 0o600 and cache.stat().st_mode & 0o777 == 0o700
    names = zipfile.ZipFile(io.BytesIO(first)).namelist()
    assert {"__main__.py", "nccl_check.pyz", "nccl_preflight/slurm/node_step.py"} <= set(names)
    # without a cache directory: built every time, the same bytes
    assert builder.build_node_bundle() == first and len(built) == 2


def test_a_changed_source_builds_a_new_bundle(tmp_path: Path) -> None:
    """A copy of the checkout's src/ and files/: a step module changed there, the next run's
    bundle is built again and carries the change; the first stays kept beside it."""
    checkout = tmp_path / "checkout"
    for part in ("src", "files"):
        shutil.copytree(
            TREE.content / part, checkout / part, ignore=shutil.ignore_patterns("__pycache__")
        )
    tree = Tree(checkout / "src" / "nccl_preflight", checkout)
    cache = tmp_path / ".bundle"
    first = builder.build_node_bundle(cache, tree)
    assert builder.build_node_bundle(cache, tree) == first
    step = checkout / "src" / "nccl_preflight" / "slurm" / "node_step.py"
    step.write_bytes(step.read_bytes() + b"\n# changed\n")
    second = builder.build_node_bundle(cache, tree)
    assert second != first
    member = "nccl_preflight/slurm/node_step.py"
    assert zipfile.ZipFile(io.BytesIO(second)).read(member).endswith(b"# changed\n")
    assert len(_kept(cache)) == 2


def test_a_cached_file_another_user_owns_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / ".bundle"
    key = content_key(builder.key_sources())
    cache.mkdir()
    planted = cache / f"node-step-bundle-{key}"
    planted.write_bytes(b"not the bundle")
    monkeypatch.setattr(os, "getuid", lambda: os.stat(planted).st_uid + 1)
    bundle = builder.build_node_bundle(cache)
    assert bundle != b"not the bundle"
    assert "__main__.py" in zipfile.ZipFile(io.BytesIO(bundle)).namelist()
