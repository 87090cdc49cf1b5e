# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/node/run_dir.py on a real file system (tmp_path): the checks and the mode that
the pre-flight's first call (nccl_facts' preflight option) and the launch's start (nccl_torchrun)
apply to the run's private directory, whichever reaches a node first."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nccl_preflight.node.run_dir import (
    bad_file_name,
    make_private_dir,
    parse_mode,
    private_dir_problem,
)


def test_a_new_directory_gets_exactly_its_mode_whatever_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "run"
    assert private_dir_problem(str(path)) == ""
    old_umask = os.umask(0o077)
    try:
        assert make_private_dir(str(path), 0o750) is True
    finally:
        os.umask(old_umask)
    assert path.stat().st_mode & 0o7777 == 0o750


def test_an_existing_own_directory_is_kept_and_a_wider_mode_tightened(tmp_path: Path) -> None:
    path = tmp_path / "run"
    path.mkdir(mode=0o755)
    (path / "keep").write_text("x")
    assert private_dir_problem(str(path)) == ""
    assert make_private_dir(str(path), 0o700) is False
    assert path.stat().st_mode & 0o7777 == 0o700 and (path / "keep").exists()


def test_a_link_put_there_between_the_check_and_the_mkdir_is_not_taken(tmp_path: Path) -> None:
    path = tmp_path / "run"
    assert private_dir_problem(str(path)) == ""
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs").chmod(0o777)
    path.symlink_to(tmp_path / "theirs")  # somebody else, in a shared /tmp, was faster
    with pytest.raises(FileExistsError, match="is a symbolic link"):
        make_private_dir(str(path), 0o700)
    assert (tmp_path / "theirs").stat().st_mode & 0o777 == 0o777  # its mode was not touched


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_another_users_directory_put_there_after_the_check_is_not_taken(tmp_path: Path) -> None:
    path = tmp_path / "run"
    assert private_dir_problem(str(path)) == ""
    path.mkdir()
    path.chmod(0o777)
    os.chown(path, 65534, 65534)
    with pytest.raises(FileExistsError, match="owned by uid 65534"):
        make_private_dir(str(path), 0o700)
    assert path.stat().st_mode & 0o777 == 0o777


def test_a_symlink_is_refused_with_the_path_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "run"
    link.symlink_to(tmp_path / "elsewhere")
    problem = private_dir_problem(str(link))
    assert problem.startswith(f"{link} is a symbolic link")
    assert "set nccl_run_root" in problem


def test_a_file_in_place_of_the_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run").write_text("")
    assert "exists and is not a directory" in private_dir_problem(str(tmp_path / "run"))


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_directory_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run"
    path.mkdir(mode=0o777)
    os.chown(path, 65534, 65534)
    assert "is owned by uid 65534" in private_dir_problem(str(path))


def test_a_missing_parent_and_a_relative_path_are_named(tmp_path: Path) -> None:
    missing = private_dir_problem(str(tmp_path / "absent" / "run"))
    assert missing.startswith(f"{tmp_path / 'absent'} does not exist")
    assert private_dir_problem("run") == "path 'run' must be absolute"


@pytest.mark.parametrize(("text", "mode"), [("0700", 0o700), ("750", 0o750), ("8", None),
                                            ("rwx", None), ("17777", None)])  # fmt: skip
def test_modes_are_octal_strings(text: str, mode: int | None) -> None:
    assert parse_mode(text) == mode


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", ".", "", "a\0b"])
def test_a_file_name_with_a_directory_part_is_bad(name: str) -> None:
    assert bad_file_name(name) and not bad_file_name("nccl.env")
