# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""bin/nccl-preflight imports nccl_preflight.core normally: from the Python that runs it, else from
the project venv's Python, which it runs itself again with (a user may start it with any python3).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def tree_with_wrapper(tmp_path: Path, venv_python: str | None) -> Path:
    """A checkout holding bin/nccl-preflight and, if given, .venv/bin/python."""
    (tmp_path / "bin").mkdir()
    shutil.copy2(ROOT / "bin" / "nccl-preflight", tmp_path / "bin" / "nccl-preflight")
    if venv_python is not None:
        (tmp_path / ".venv" / "bin").mkdir(parents=True)
        python = tmp_path / ".venv" / "bin" / "python"
        python.write_text(venv_python)
        python.chmod(0o755)
    return tmp_path


def run_help(tree: Path) -> subprocess.CompletedProcess[str]:
    """``nccl-preflight --help`` under a Python that cannot import the package (-S: no site)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-S", str(tree / "bin" / "nccl-preflight"), "--help"],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_without_the_package_it_runs_again_under_the_venvs_python(tmp_path: Path) -> None:
    # The venv's Python: this one, with the package on its path.
    venv_python = f'#!/bin/sh\nPYTHONPATH={ROOT / "src"} exec {sys.executable} "$@"\n'
    proc = run_help(tree_with_wrapper(tmp_path, venv_python))
    assert proc.returncode == 0, proc.stderr
    assert "bad_input" in proc.stdout and " 12 " in proc.stdout  # the exit class table


def test_without_the_package_or_a_venv_it_says_how_to_install_it(tmp_path: Path) -> None:
    proc = run_help(tree_with_wrapper(tmp_path, None))
    assert proc.returncode == 1
    assert "nccl_preflight package is not installed: run make demo" in proc.stderr
