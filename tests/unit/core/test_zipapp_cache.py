# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/zipapp.py cached_build: what the runs send every host (the node
programs' zipapps, the rank script's, look.pyz) is built once and kept between runs
(user_cache_dir), not once per host or run, and rebuilt as soon as a source, the Python or the
builder changes (plugins/action/nccl_facts.py, roles/launch/action_plugins/nccl_torchrun.py)."""

from __future__ import annotations

import base64
import importlib.util
import multiprocessing
import os
import stat
import time
from pathlib import Path

import pytest

from nccl_preflight.core import zipapp
from nccl_preflight.core.zipapp import build_zipapp, cached_build, folder_sources, package_closure

ROOT = Path(__file__).resolve().parents[3]


def _counting_build(log: Path, data: bytes):
    def build() -> bytes:
        with open(log, "a") as out:
            out.write("built\n")
        time.sleep(0.3)  # long enough that the other processes ask while it builds
        return data

    return build


def _ask(cache: str, log: str, out: str) -> None:
    data = cached_build(cache, "thing", {"a": b"1"}, _counting_build(Path(log), b"payload"))
    Path(out).write_bytes(data)


def test_built_once_while_the_sources_stay_the_same(tmp_path: Path) -> None:
    log = tmp_path / "log"
    cache = tmp_path / "cache"
    first = cached_build(cache, "thing", {"a": b"1"}, _counting_build(log, b"one"))
    again = cached_build(cache, "thing", {"a": b"1"}, _counting_build(log, b"two"))
    assert first == again == b"one"
    assert log.read_text().count("built") == 1
    [kept] = [p for p in cache.iterdir() if not p.name.endswith(".lock")]
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    changed = cached_build(cache, "thing", {"a": b"2"}, _counting_build(log, b"three"))
    assert changed == b"three"
    assert log.read_text().count("built") == 2


def test_processes_asking_at_once_build_it_once(tmp_path: Path) -> None:
    log, cache = tmp_path / "log", tmp_path / "cache"
    context = multiprocessing.get_context("fork")
    outs = [tmp_path / f"out{i}" for i in range(3)]
    procs = [context.Process(target=_ask, args=(str(cache), str(log), str(o))) for o in outs]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    assert [o.read_bytes() for o in outs] == [b"payload"] * 3
    assert log.read_text().count("built") == 1


def test_without_a_cache_directory_it_builds_every_time(tmp_path: Path) -> None:
    log = tmp_path / "log"
    cached_build(None, "thing", {"a": b"1"}, _counting_build(log, b"x"))
    cached_build(None, "thing", {"a": b"1"}, _counting_build(log, b"x"))
    assert log.read_text().count("built") == 2


def test_a_build_of_another_python_or_builder_is_not_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept bytes hold pycs of the Python that built them (with_bytecode): a control machine
    that now runs another Python, or a changed builder, builds again."""
    log, cache = tmp_path / "log", tmp_path / "cache"
    cached_build(cache, "thing", {"a": b"1"}, _counting_build(log, b"one"))
    monkeypatch.setattr(zipapp.importlib.util, "MAGIC_NUMBER", b"\x00\x00\r\n")
    assert cached_build(cache, "thing", {"a": b"1"}, _counting_build(log, b"two")) == b"two"
    assert log.read_text().count("built") == 2


def test_old_builds_of_a_name_go_and_the_others_stay(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    log = tmp_path / "log"
    cached_build(cache, "thing", {"a": b"1"}, _counting_build(log, b"one"))
    cached_build(cache, "other", {"a": b"1"}, _counting_build(log, b"other"))
    old = time.time() - zipapp.STALE_BUILD_S - 10
    for path in cache.iterdir():
        os.utime(path, (old, old))
    cached_build(cache, "thing", {"a": b"2"}, _counting_build(log, b"two"))
    names = sorted(p.name.split("-")[0] + ("/lock" if p.name.endswith(".lock") else "")
                   for p in cache.iterdir())  # fmt: skip
    # The old "thing" and its lock went; "other" (another name) and the new "thing" stayed.
    assert names == ["other", "other/lock", "thing", "thing/lock"]
    assert cached_build(cache, "thing", {"a": b"2"}, _counting_build(log, b"x")) == b"two"
    # A build of the same name asked for within the hour stays (two checkouts side by side),
    # also when it was written long ago: reading it back counts as asking.
    for path in cache.iterdir():
        os.utime(path, (old, old))
    assert cached_build(cache, "thing", {"a": b"2"}, _counting_build(log, b"x")) == b"two"
    cached_build(cache, "thing", {"a": b"3"}, _counting_build(log, b"three"))
    assert cached_build(cache, "thing", {"a": b"2"}, _counting_build(log, b"x")) == b"two"
    assert log.read_text().count("built") == 4  # one, other, two, three


def test_a_cache_directory_that_cannot_be_used_only_costs_a_build(tmp_path: Path) -> None:
    log = tmp_path / "log"
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory\n")
    for _ in range(2):
        assert (
            cached_build(blocked / "cache", "thing", {"a": b"1"}, _counting_build(log, b"x"))
            == b"x"
        )
    assert log.read_text().count("built") == 2


def test_the_cache_is_the_users_own_unless_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NCCL_PREFLIGHT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/var/cache/someone")
    assert zipapp.user_cache_dir() == "/var/cache/someone/nccl-preflight"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", "/home/operator")
    assert zipapp.user_cache_dir() == "/home/operator/.cache/nccl-preflight"
    monkeypatch.setenv("NCCL_PREFLIGHT_CACHE_DIR", "/srv/builds")
    assert zipapp.user_cache_dir() == "/srv/builds"


def test_the_rank_scripts_key_follows_every_module_beside_it(tmp_path: Path) -> None:
    (tmp_path / "check.py").write_text("import helper\n")
    (tmp_path / "helper.py").write_text("VALUE = 1\n")
    (tmp_path / "notes.txt").write_text("not Python\n")
    before = folder_sources(tmp_path / "check.py")
    assert set(before) == {"entry", "check.py", "helper.py"}
    (tmp_path / "helper.py").write_text("VALUE = 2\n")
    assert folder_sources(tmp_path / "check.py") != before
    assert folder_sources(tmp_path / "helper.py")["entry"] == b"helper.py"


def test_the_launch_sends_the_same_bytes_cached_or_not(tmp_path: Path) -> None:
    path = ROOT / "roles" / "launch" / "action_plugins" / "nccl_torchrun.py"
    spec = importlib.util.spec_from_file_location("zipapp_cache_nccl_torchrun", path)
    assert spec is not None and spec.loader is not None
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    script = str(ROOT / "files" / "nccl_check.py")
    fresh = plugin.zipapp_argument(script)
    assert base64.b64decode(fresh) == build_zipapp(script)
    assert plugin.zipapp_argument(script, str(tmp_path)) == fresh
    assert plugin.zipapp_argument(script, str(tmp_path)) == fresh
    assert plugin.look_argument(str(tmp_path)) == plugin.look_argument(None)
    assert len([p for p in tmp_path.iterdir() if not p.name.endswith(".lock")]) == 2


def test_package_closure_follows_relative_lazy_and_parenthesized_imports(tmp_path: Path) -> None:
    """core/zipapp.package_closure (what the Slurm steps' bundle holds): from the entry, every
    module of the package it imports, however written, and the packages on the way; a module
    nothing imports stays out."""
    pkg = tmp_path / "pkg"
    for folder in (pkg, pkg / "a", pkg / "b"):
        folder.mkdir()
        (folder / "__init__.py").write_text("")
    (pkg / "a" / "entry.py").write_text(
        "import os\n"
        "from ..b import (\n    one,\n    two as second,\n)\n"
        "from . import sibling\n"
        "def later():\n    import pkg.b.three\n    return pkg.b.three\n"
    )
    for name in ("one", "two", "three", "unused"):
        (pkg / "b" / f"{name}.py").write_text("from pkg.a.helper import VALUE\n")
    (pkg / "a" / "sibling.py").write_text("X = 1\n")
    (pkg / "a" / "helper.py").write_text("VALUE = 2\n")
    found = {p.relative_to(tmp_path).as_posix() for p in package_closure(tmp_path, "pkg.a.entry")}
    assert found == {
        "pkg/__init__.py", "pkg/a/__init__.py", "pkg/a/entry.py", "pkg/a/sibling.py",
        "pkg/a/helper.py", "pkg/b/__init__.py", "pkg/b/one.py", "pkg/b/two.py", "pkg/b/three.py",
    }  # fmt: skip
