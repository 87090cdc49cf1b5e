# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/zipapp.py: the rank script and the modules beside it that it imports, as
one zipapp that the node's Python runs exactly as it runs the .py (argv, prog, exit status,
output, tracebacks with their source lines); the same sources give the same bytes."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from nccl_preflight.core.zipapp import (
    BundleError,
    build_zipapp,
    bundle_modules,
    imported_names,
    main,
)

ROOT = Path(__file__).resolve().parents[3]

ENTRY = textwrap.dedent(
    """\
    import argparse
    import json
    import sys

    import helper_a


    def crash():
        from helper_c import explode  # a nested import is a sibling too

        explode()


    if __name__ == "__main__":
        parser = argparse.ArgumentParser(description="a tiny rank script")
        parser.add_argument("--code", type=int, default=0)
        parser.add_argument("--crash", action="store_true")
        parser.add_argument("words", nargs="*")
        args = parser.parse_args()
        print(json.dumps({"prog": parser.prog, "argv": sys.argv[1:], "name": __name__,
                          "a": helper_a.greet(args.words)}))
        if args.crash:
            crash()
        sys.exit(args.code)
    """
)
HELPER_A = textwrap.dedent(
    """\
    def greet(words):
        from helper_b import VALUE

        return "a" * VALUE + "+" + ",".join(words)
    """
)
HELPER_B = "VALUE = 2\n"
HELPER_C = textwrap.dedent(
    """\
    def explode():
        raise RuntimeError("exploded in a sibling")
    """
)


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    """A tiny entry and its siblings (helper_b only through helper_a); unused.py is not imported."""
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "check.py").write_text(ENTRY)
    (folder / "helper_a.py").write_text(HELPER_A)
    (folder / "helper_b.py").write_text(HELPER_B)
    (folder / "helper_c.py").write_text(HELPER_C)
    (folder / "unused.py").write_text("raise SystemExit('never bundled')\n")
    (folder / "__main__.py").write_text("raise SystemExit('never bundled either')\n")
    return folder


def names_in(data: bytes) -> list[str]:
    return zipfile.ZipFile(io.BytesIO(data)).namelist()


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-u", *argv], capture_output=True, text=True, cwd=cwd, timeout=60
    )


def test_imported_names_are_top_level_names_of_absolute_imports_at_any_depth() -> None:
    source = textwrap.dedent(
        """\
        import os.path, torch as t
        from a.b import c
        from . import rel
        from .d import e
        def f():
            if True:
                import g
        class K:
            from h import i
        """
    ).encode()
    assert imported_names(source, Path("x.py")) == {"os", "torch", "a", "g", "h"}


def test_siblings_are_found_transitively_and_nothing_else(scripts: Path) -> None:
    modules = bundle_modules(scripts / "check.py")
    assert sorted(modules) == ["check", "helper_a", "helper_b", "helper_c"]
    assert modules["helper_b"] == HELPER_B.encode()
    assert names_in(build_zipapp(scripts / "check.py")) == [
        "__main__.py",
        "check.py",
        "helper_a.py",
        "helper_b.py",
        "helper_c.py",
    ]


def test_a_script_without_siblings_is_a_bundle_of_one(tmp_path: Path) -> None:
    entry = tmp_path / "mine.py"
    entry.write_text("import os, torch\nprint(os.getpid())\n")
    (tmp_path / "other.py").write_text("x = 1\n")
    assert names_in(build_zipapp(entry)) == ["__main__.py", "mine.py"]


def test_the_project_check_bundles_with_its_own_siblings_only() -> None:
    """files/nccl_check.py and exactly the files/nccl_check_*.py it imports (none before the
    split): the zipapp holds what the entry needs, never the whole folder."""
    check = ROOT / "files" / "nccl_check.py"
    names = names_in(build_zipapp(check))
    assert names[:2] == ["__main__.py", "nccl_check.py"]
    imported = imported_names(check.read_bytes(), check)
    for name in names[2:]:
        assert name.startswith("nccl_check_") and name.endswith(".py"), name
    direct = {f"{n}.py" for n in imported if (check.parent / f"{n}.py").is_file()}
    assert direct <= set(names)


def test_the_same_sources_give_the_same_bytes(scripts: Path) -> None:
    first = build_zipapp(scripts / "check.py")
    for path in scripts.iterdir():
        os.utime(path, (1_700_000_000, 1_700_000_000))
        path.chmod(0o600)
    assert build_zipapp(scripts / "check.py") == first
    (scripts / "helper_b.py").write_text("VALUE = 3\n")
    assert build_zipapp(scripts / "check.py") != first
    for info in zipfile.ZipFile(io.BytesIO(first)).infolist():
        assert info.date_time == (1980, 1, 1, 0, 0, 0)
        assert stat.S_IMODE(info.external_attr >> 16) == 0o644


def test_a_sibling_that_does_not_parse_names_its_file_and_line(scripts: Path) -> None:
    (scripts / "helper_b.py").write_text("VALUE = 2\ndef broken(:\n")
    with pytest.raises(BundleError) as caught:
        build_zipapp(scripts / "check.py")
    assert f"cannot parse {scripts / 'helper_b.py'}, line 2" in str(caught.value)


def test_a_missing_script_is_named(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match=f"cannot read the rank script {tmp_path / 'gone.py'}"):
        build_zipapp(tmp_path / "gone.py")


@pytest.mark.parametrize("name", ["__main__.py", "json.py", "my.check.py", "check.txt"])
def test_a_script_name_that_cannot_run_from_a_zip_is_refused(tmp_path: Path, name: str) -> None:
    entry = tmp_path / name
    entry.write_text("print(1)\n")
    with pytest.raises(BundleError, match=str(entry).replace(".", r"\.")):
        build_zipapp(entry)


def test_the_zipapp_runs_as_the_script_does(scripts: Path, tmp_path: Path) -> None:
    """The real Python on the entry and on its zipapp, elsewhere (no sibling on the path):
    the same output, argv, prog and exit status; argparse's errors the same."""
    node = tmp_path / "node"
    node.mkdir()
    (node / "check.pyz").write_bytes(build_zipapp(scripts / "check.py"))
    for argv in (["--code", "3", "x", "y z"], ["--bogus"], ["--help"]):
        by_hand = run([str(scripts / "check.py"), *argv], node)
        shipped = run(["check.pyz", *argv], node)
        assert (shipped.returncode, shipped.stdout, shipped.stderr) == (
            by_hand.returncode,
            by_hand.stdout,
            by_hand.stderr,
        ), argv
    assert by_hand.returncode == 0 and "a tiny rank script" in by_hand.stdout
    out = run(["check.pyz", "--code", "3", "x", "y z"], node)
    assert out.returncode == 3
    assert out.stdout == (
        '{"prog": "check.py", "argv": ["--code", "3", "x", "y z"], "name": "__main__", '
        '"a": "aa+x,y z"}\n'
    )


def test_a_crash_reads_as_in_the_script_with_the_zip_in_the_path(
    scripts: Path, tmp_path: Path
) -> None:
    """A rank's traceback (what its log tail in the JUnit shows): the same frames and source
    lines as the .py's, the files named <pyz>/<module>.py."""
    node = tmp_path / "node"
    node.mkdir()
    pyz = node / "check.pyz"
    pyz.write_bytes(build_zipapp(scripts / "check.py"))
    by_hand = run([str(scripts / "check.py"), "--crash"], node)
    shipped = run([str(pyz), "--crash"], node)
    assert by_hand.returncode == shipped.returncode == 1
    assert 'raise RuntimeError("exploded in a sibling")' in by_hand.stderr
    assert "crash()" in by_hand.stderr and "runpy" not in by_hand.stderr
    assert shipped.stderr == by_hand.stderr.replace(str(scripts), str(pyz))
    assert f'File "{pyz}/check.py", line 11, in crash' in shipped.stderr


def test_an_exception_in_a_thread_reads_as_in_the_script(tmp_path: Path) -> None:
    entry = tmp_path / "threads.py"
    entry.write_text(
        "import threading\n\n\ndef work():\n    raise ValueError('in a thread')\n\n\n"
        "worker = threading.Thread(target=work, name='watchdog')\nworker.start()\nworker.join()\n"
        "print('main goes on')\n"
    )
    pyz = tmp_path / "node" / "threads.pyz"
    pyz.parent.mkdir()
    pyz.write_bytes(build_zipapp(entry))
    by_hand, shipped = run([str(entry)], tmp_path), run([str(pyz)], tmp_path)
    assert "Exception in thread watchdog:" in by_hand.stderr
    assert "    raise ValueError('in a thread')\n" in by_hand.stderr
    assert (shipped.returncode, shipped.stdout) == (0, "main goes on\n")
    assert shipped.stderr == by_hand.stderr.replace(str(entry), f"{pyz}/threads.py")


def test_make_rank_script_writes_the_same_file_the_launch_ships(
    scripts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "build" / "check.pyz"
    assert main([str(scripts / "check.py"), "-o", str(out)]) == 0
    assert out.read_bytes() == build_zipapp(scripts / "check.py")
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    assert "__main__.py, check.py, helper_a.py" in capsys.readouterr().out
    (scripts / "helper_c.py").write_text("def explode(:\n")
    assert main([str(scripts / "check.py"), "-o", str(out)]) == 1
    assert f"cannot parse {scripts / 'helper_c.py'}, line 1" in capsys.readouterr().err
