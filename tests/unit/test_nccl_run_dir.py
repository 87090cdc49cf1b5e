"""library/nccl_run_dir.py on a real file system (tmp_path), through patch_module_args."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import nccl_run_dir
import pytest

from tests.module_exit import ModuleExit, run_module_main


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch) -> Callable[[dict], ModuleExit]:
    return lambda args: run_module_main(monkeypatch, nccl_run_dir.main, args)


def env_file(content: str = "MASTER_PORT=29500\n", mode: str = "0600") -> dict:
    return {"name": "nccl.env", "content": content, "mode": mode}


def test_creates_the_directory_and_file_with_exact_modes_whatever_the_umask(
    tmp_path: Path, run: Callable[[dict], ModuleExit]
) -> None:
    path = tmp_path / "run"
    old_umask = os.umask(0o077)
    try:
        result = run({"path": str(path), "mode": "0750", "files": [env_file(mode="0640")]})
    finally:
        os.umask(old_umask)
    assert not result.failed, result.result
    assert result.result["changed"] and result.result["created"]
    assert result.result["written"] == [str(path / "nccl.env")]
    assert path.stat().st_mode & 0o7777 == 0o750
    assert (path / "nccl.env").read_text() == "MASTER_PORT=29500\n"
    assert (path / "nccl.env").stat().st_mode & 0o7777 == 0o640
    assert sorted(os.listdir(path)) == ["nccl.env"]  # no temporary file left behind


def test_a_second_identical_call_changes_nothing_and_a_new_content_rewrites(
    tmp_path: Path, run: Callable[[dict], ModuleExit]
) -> None:
    path = tmp_path / "run"
    assert not run({"path": str(path), "files": [env_file()]}).failed
    again = run({"path": str(path), "files": [env_file()]})
    assert (again.result["changed"], again.result["created"], again.result["written"]) == (
        False,
        False,
        [],
    )
    newer = run({"path": str(path), "files": [env_file("MASTER_PORT=29501\n")]})
    assert newer.result["changed"] and newer.result["written"] == [str(path / "nccl.env")]
    assert (path / "nccl.env").read_text() == "MASTER_PORT=29501\n"


def test_a_wider_existing_directory_is_tightened(
    tmp_path: Path, run: Callable[[dict], ModuleExit]
) -> None:
    path = tmp_path / "run"
    path.mkdir(mode=0o755)
    path.chmod(0o755)
    result = run({"path": str(path)})
    assert result.result["changed"] and not result.result["created"]
    assert path.stat().st_mode & 0o7777 == 0o700


def test_check_mode_reports_and_creates_nothing(
    tmp_path: Path, run: Callable[[dict], ModuleExit]
) -> None:
    path = tmp_path / "run"
    result = run({"path": str(path), "files": [env_file()], "_ansible_check_mode": True})
    assert result.result["changed"] and result.result["created"]
    assert not path.exists()


def test_a_symlink_in_place_of_the_directory_is_refused(
    tmp_path: Path, run: Callable[[dict], ModuleExit]
) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "run").symlink_to(target)
    result = run({"path": str(tmp_path / "run"), "files": [env_file()]})
    assert result.failed
    assert "is a symbolic link" in result.result["msg"]
    assert "nccl_run_root" in result.result["msg"]
    assert list(target.iterdir()) == []


def test_a_file_in_place_of_the_directory_is_refused(
    tmp_path: Path, run: Callable[[dict], ModuleExit]
) -> None:
    (tmp_path / "run").write_text("x")
    result = run({"path": str(tmp_path / "run")})
    assert result.failed and "is not a directory" in result.result["msg"]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_directory_owned_by_another_user_is_refused(
    tmp_path: Path, run: Callable[[dict], ModuleExit]
) -> None:
    path = tmp_path / "run"
    path.mkdir(mode=0o777)
    os.chown(path, 65534, 65534)
    result = run({"path": str(path), "files": [env_file()]})
    assert result.failed
    assert "owned by uid 65534" in result.result["msg"]
    assert not (path / "nccl.env").exists()


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", ""])
def test_a_file_name_with_a_directory_part_is_refused(
    tmp_path: Path, name: str, run: Callable[[dict], ModuleExit]
) -> None:
    result = run({"path": str(tmp_path / "run"), "files": [{"name": name, "content": "x"}]})
    assert result.failed and repr(name) in result.result["msg"]
    assert not (tmp_path / "run").exists() and not (tmp_path / "escape").exists()


def test_a_missing_parent_is_named(tmp_path: Path, run: Callable[[dict], ModuleExit]) -> None:
    result = run({"path": str(tmp_path / "absent" / "run")})
    assert result.failed
    assert result.result["msg"].startswith(f"{tmp_path / 'absent'} does not exist")
