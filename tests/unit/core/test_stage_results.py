# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A node's results archive is unpacked by one function for both front-ends
(core/results_archive.py unpack_results): roles/launch's action plugin and the Slurm launch's
watch call it, and it refuses a member outside the flat result names the node packs."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from nccl_preflight.core.results_archive import unpack_results
from nccl_preflight.node.run_collect import COLLECTED_NAME
from nccl_preflight.slurm import launch
from tests.plugin_files import load_plugin


def archive(*members: tuple[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_both_front_ends_unpack_with_the_one_function() -> None:
    action = load_plugin("roles/launch/action_plugins/nccl_torchrun.py", "stage_nccl_torchrun")
    assert action.unpack_results is unpack_results
    assert launch.unpack_results is unpack_results
    assert not hasattr(action, "COLLECTED_NAME") and not hasattr(launch, "unpack")


def test_the_names_the_node_packs_are_written_and_nothing_else(tmp_path: Path) -> None:
    written = unpack_results(archive(("rank-0.json", b"{}"), ("torchrun.log", b"x")), tmp_path)
    assert sorted(Path(p).name for p in written) == ["rank-0.json", "torchrun.log"]
    assert (tmp_path / "rank-0.json").read_bytes() == b"{}"
    for bad in ("../rank-0.json", "sub/launch.json", "rank-x.json"):
        assert not COLLECTED_NAME.match(bad)
        with pytest.raises(ValueError, match="unexpected member"):
            unpack_results(archive((bad, b"{}")), tmp_path / "other")
    assert not (tmp_path.parent / "rank-0.json").exists()
