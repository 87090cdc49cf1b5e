# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/zipapp.py cached_build: what the launch sends every host (the rank
script's zipapp, look.pyz) is built once per ansible-playbook run, not once per host, and
rebuilt as soon as a source changes (roles/launch/action_plugins/nccl_torchrun.py)."""

from __future__ import annotations

import base64
import importlib.util
import multiprocessing
import stat
import time
from pathlib import Path

from nccl_preflight.core.zipapp import build_zipapp, cached_build, folder_sources, package_closure

ROOT = Path(__file__).resolve().parents[2]


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
