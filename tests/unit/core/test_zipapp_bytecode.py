# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/zipapp.py ``with_bytecode``: the node programs' zipapps carry this
interpreter's bytecode beside each source. A node with the same Python runs the bytecode (no
compile on every call), any other Python runs the sources, and both give the same answer."""

from __future__ import annotations

import glob
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from nccl_preflight.core.stdin_ship import program_zipapp
from nccl_preflight.core.zipapp import with_bytecode, zip_bytes
from nccl_preflight.node.facts_call import FACTS_ENTRY

MAIN = b"import sys\nfrom mod import VALUE\nsys.stdout.write(VALUE)\n"


def other_python() -> str | None:
    """An interpreter of another minor version than this one, where one is installed."""
    mine = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for pattern in (
        "/usr/bin/python3.*",
        "/usr/local/bin/python3.*",
        "/root/.pyenv/versions/3.*/bin/python3.*",
    ):
        for path in sorted(glob.glob(pattern)):
            name = os.path.basename(path)
            versioned = name.count(".") == 1 and name[len("python3.") :].isdigit()
            if versioned and name != mine and os.access(path, os.X_OK):
                return path
    return None


def run(python: str, zipapp: bytes, tmp_path: Path, stdin: str = "") -> str:
    path = tmp_path / "app.pyz"
    path.write_bytes(zipapp)
    done = subprocess.run(
        [python, str(path)], input=stdin, capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def test_a_pyc_sits_beside_each_source_and_the_sources_stay() -> None:
    files = {"__main__.py": MAIN, "mod.py": b"VALUE = 'source'\n", "data.json": b"{}"}
    both = with_bytecode(files, "app.pyz")
    assert set(both) == {*files, "__main__.pyc", "mod.pyc"}
    assert all(both[name] == body for name, body in files.items())
    assert both["mod.pyc"].startswith(__import__("importlib.util").util.MAGIC_NUMBER)


def test_this_python_runs_the_bytecode_another_the_source(tmp_path: Path) -> None:
    """The bytecode of another source is put beside mod.py: what runs says which was taken."""
    files = {"__main__.py": MAIN, "mod.py": b"VALUE = 'source'\n"}
    zipapp = with_bytecode(files, "app.pyz")
    zipapp["mod.pyc"] = with_bytecode({"mod.py": b"VALUE = 'bytecode'\n"}, "app.pyz")["mod.pyc"]
    assert run(sys.executable, zip_bytes(zipapp), tmp_path) == "bytecode"
    other = other_python()
    if other is None:
        pytest.skip("no Python of another minor version here to run the sources")
    assert run(other, zip_bytes(zipapp), tmp_path) == "source"


def test_the_facts_program_answers_the_same_from_bytecode_and_from_source(tmp_path: Path) -> None:
    zipapp = program_zipapp(FACTS_ENTRY, None)
    names = zipfile.ZipFile(io.BytesIO(zipapp)).namelist()
    sources = [n for n in names if n.endswith(".py")]
    assert sorted(n for n in names if n.endswith(".pyc")) == sorted(f"{n}c" for n in sources)
    params = {
        "route_to": "127.0.0.1",
        "python": "",
        "query_python": False,
        "nvidia_smi": "nvidia-smi",
        "query_gpus": False,
        "gpu_health": False,
        "dcgm_diag_level": 0,
        "dcgm_diag_timeout": 300,
        "npu_smi": "npu-smi",
        "query_xpu": False,
        "preflight": None,
    }
    request = json.dumps({"params": params, "check_mode": False}) + "\n"
    answers = [json.loads(run(sys.executable, zipapp, tmp_path, request))]
    other = other_python()
    if other is not None:
        answers.append(json.loads(run(other, zipapp, tmp_path, request)))
    routes = [answer["ansible_facts"]["nccl"]["route"] for answer in answers]
    assert routes[0]["interface"] == "lo" and all(route == routes[0] for route in routes)
