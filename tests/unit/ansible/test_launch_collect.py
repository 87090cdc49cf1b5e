# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""roles/launch/action_plugins/nccl_torchrun.py: the results the node sends back land in
reports/<run-id>/<host>/ as the report expects, and an archive can never write anywhere else."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from tests.builders.launch import action, archive


def test_the_result_files_land_flat_in_the_host_directory(tmp_path: Path) -> None:
    dest = tmp_path / "reports" / "run1" / "node1"
    files = [
        ("rank-0.json", b'{"status": "passed"}'),
        ("rank-0.log", b"log of rank 0\n"),
        ("rank-12.json", b"{}"),
        ("torchrun.log", b"torchrun\n"),
        ("launch.json", b'{"rc": 0}'),
    ]
    written = action.unpack_results(archive(*files), dest)
    assert sorted(Path(p).name for p in written) == sorted(name for name, _ in files)
    for name, data in files:
        assert (dest / name).read_bytes() == data
    assert sorted(p.name for p in dest.iterdir()) == sorted(name for name, _ in files)


def test_the_nccl_env_the_environment_play_wrote_there_is_kept(tmp_path: Path) -> None:
    """roles/nccl_env writes reports/<run-id>/<host>/nccl.env before the launch: the unpack adds
    the results beside it and neither removes nor refuses it."""
    dest = tmp_path / "reports" / "run1" / "node1"
    dest.mkdir(parents=True)
    (dest / "nccl.env").write_text("MASTER_PORT='29500'\n")
    action.unpack_results(archive(("launch.json", b'{"rc": 0}')), dest)
    assert sorted(p.name for p in dest.iterdir()) == ["launch.json", "nccl.env"]
    assert (dest / "nccl.env").read_text() == "MASTER_PORT='29500'\n"


@pytest.mark.parametrize(
    "name",
    ["../rank-0.json", "/etc/rank-0.json", "sub/rank-0.json", "rank-0.json/..", "nccl.env", ""],
)
def test_a_member_outside_the_known_flat_names_is_refused(tmp_path: Path, name: str) -> None:
    dest = tmp_path / "host"
    with pytest.raises(ValueError, match="unexpected member"):
        action.unpack_results(archive((name, b"x")), dest)
    assert not (tmp_path / "rank-0.json").exists()
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


@pytest.mark.parametrize(
    "kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.DIRTYPE, tarfile.CHRTYPE]
)
def test_links_directories_and_devices_are_refused(tmp_path: Path, kind: bytes) -> None:
    member = tarfile.TarInfo("rank-0.log")
    member.type = kind
    member.linkname = "/etc/passwd"
    with pytest.raises(ValueError, match="unexpected member"):
        action.unpack_results(archive(member), tmp_path / "host")
    assert not (tmp_path / "host" / "rank-0.log").exists()
