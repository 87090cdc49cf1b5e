# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/slurm/bundle.py: `bin/nccl-preflight bundle -o PATH` writes one zipapp that
runs node-check with the nodes' Python (torch and the standard library only) and with a Python
from which every control-machine package is hidden."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from nccl_preflight.slurm import bundle
from tests import prom_text
from tests.builders.node_check import HEALTHY, fake_python
from tests.lab.base import node_python

ROOT = Path(__file__).resolve().parents[3]
# What only the control machine has: a bundle that imports one of them fails on a node.
CONTROL_PACKAGES = ("yaml", "jinja2", "ansible", "matplotlib", "junit_xml", "xmlschema")
# Runs the bundle (argv[1:]) as `python bundle.pyz ...`, with the control machine's packages
# made unimportable (an import of one raises ModuleNotFoundError naming it).
BLOCKED_RUN = """
import runpy, sys
BLOCKED = set(sys.argv[1].split(","))
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"blocked: {name} (a control-machine package)", name=name)
sys.meta_path.insert(0, Block())
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.fixture(scope="module")
def pyz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "nccl-preflight.pyz"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bin" / "nccl-preflight"), "bundle", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{out}: ")
    return out


def test_the_bundle_holds_the_package_the_defaults_and_the_rank_script(pyz: Path) -> None:
    names = set(zipfile.ZipFile(pyz).namelist())
    for name in (
        "__main__.py",
        "nccl_preflight/__init__.py",
        "nccl_preflight/node/facts.py",
        "nccl_preflight/core/preflight/judge.py",
        "nccl_preflight/slurm/cli.py",
        "nccl_preflight/core/variables.py",  # the variables schema: defaults, types
        "nccl_preflight/slurm/node_step.py",
        "nccl_preflight/_vendor/yaml/__init__.py",  # PyYAML, pure Python, as released
        "nccl_preflight/_vendor/yaml/LICENSE",  # ... with its licence
        "nccl_preflight/_vendor/SOURCE.md",
        "nccl_check.pyz",
    ):
        assert name in names, name
    # the rank script and the siblings it imports, as the run's ranks and the Ansible path run it
    rank = zipfile.ZipFile(io.BytesIO(zipfile.ZipFile(pyz).read("nccl_check.pyz"))).namelist()
    assert {"__main__.py", "nccl_check.py", "nccl_check_tables.py"} <= set(rank)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert pyz.read_bytes() == bundle.build_bundle(), "the same sources give the same bytes"
    assert os.access(pyz, os.X_OK)


def run_pyz(python: list[str], pyz: Path, *args: str, tmp: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SLURMD_NODENAME")}
    return subprocess.run(
        [*python, str(pyz), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=120,
        check=False,
    )


def test_the_nodes_python_runs_node_check_from_the_bundle(pyz: Path, tmp_path: Path) -> None:
    python = node_python()
    if not Path(python).is_file():
        pytest.skip(f"no node Python at {python} (NCCL_LAB_NODE_PYTHON)")
    done = run_pyz([python, "-I"], pyz, "node-check", "--help", tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "usage: nccl-preflight node-check" in done.stdout
    config = tmp_path / "node.yml"
    config.write_text(HEALTHY.replace("PYTHON", str(fake_python(tmp_path))))
    state = ["--state-dir", str(tmp_path / "state")]  # this test's own lock and verdict
    done = run_pyz([python, "-I"], pyz, "node-check", "--config", str(config), *state, tmp=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "interface: passed: " in done.stdout and "healthy" in done.stdout
    # no site-packages at all (-S): the bundle's own PyYAML reads the config, names the line
    config.write_text(HEALTHY.replace("PYTHON", str(fake_python(tmp_path))) + "nccl_debug: [x\n")
    argv = ["node-check", "--config", str(config), *state]
    done = run_pyz([python, "-I", "-S"], pyz, *argv, tmp=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{config}:5: while parsing a flow sequence (line 4)" in done.stderr


def test_node_check_imports_no_control_machine_package(pyz: Path, tmp_path: Path) -> None:
    """This Python has PyYAML, jinja2 and Ansible: hidden, node-check still runs (and a
    config error still names its file), so the bundle never needs them."""
    for name in CONTROL_PACKAGES[:3]:
        __import__(name)  # present here: the block below is what hides them
    blocked = [sys.executable, "-I", "-c", BLOCKED_RUN, ",".join(CONTROL_PACKAGES)]
    config = tmp_path / "node.yml"
    config.write_text(HEALTHY.replace("PYTHON", str(fake_python(tmp_path))))
    state = ["--state-dir", str(tmp_path / "state")]  # this test's own lock and verdict
    textfile = tmp_path / "textfile"  # its metrics too (core/metrics.py), without them
    textfile.mkdir()
    args = ["--json", "--textfile", str(textfile), *state]
    done = run_pyz(blocked, pyz, "node-check", "--config", str(config), *args, tmp=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"exit": 0' in done.stdout
    found = prom_text.parse((textfile / "nccl_preflight.prom").read_text())
    assert set(found["nccl_preflight_check"].by("check").values()) == {1}
    config.write_text(HEALTHY + "nccl_backend: nosuch\n")
    done = run_pyz(blocked, pyz, "node-check", "--config", str(config), *state, tmp=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "node.yml" in done.stderr and "blocked" not in done.stderr
    importer = tmp_path / "imports_yaml.py"
    importer.write_text("import yaml\n")
    check = run_pyz(blocked, importer, tmp=tmp_path)
    assert check.returncode == 1 and "blocked: yaml" in check.stderr  # the block works


def test_the_bundle_command_needs_a_checkout(pyz: Path, tmp_path: Path) -> None:
    done = run_pyz([sys.executable, "-I"], pyz, "bundle", "-o", str(tmp_path / "x"), tmp=tmp_path)
    assert done.returncode == 2
    assert (
        "run nccl-preflight bundle from the project's checkout or an installed nccl-preflight"
        in done.stderr
    )
    assert not (tmp_path / "x").exists()


def test_the_bundle_has_the_commands_version_and_usage_errors(pyz: Path, tmp_path: Path) -> None:
    """The bundle's command line is bin/nccl-preflight's (slurm/cli.py): the same version, and
    a typo is a usage error (2) with the nearest command, on a bare python3."""
    from nccl_preflight import __version__

    done = run_pyz([sys.executable, "-I"], pyz, "--version", tmp=tmp_path)
    assert (done.returncode, done.stdout) == (0, f"nccl-preflight {__version__}\n"), done.stderr
    done = run_pyz([sys.executable, "-I"], pyz, "nodecheck", tmp=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "unknown command 'nodecheck'; did you mean node-check?" in done.stderr


def test_the_bundle_bytes_are_a_zip_after_a_shebang() -> None:
    data = bundle.build_bundle()
    assert data.startswith(b"#!/usr/bin/env python3\n")
    assert zipfile.ZipFile(io.BytesIO(data)).testzip() is None


def test_the_steps_bundle_holds_only_what_a_step_runs(tmp_path: Path) -> None:
    """The slurm command's steps get node_step, the modules it imports and the rank zipapp:
    none of the control machine's code, less than half the whole bundle, and every import of
    `node-step` resolves in it with the control machine's packages hidden (the step then stops
    at its empty stdin, where it reads its settings first)."""
    step = bundle.build_node_bundle()
    names = set(zipfile.ZipFile(io.BytesIO(step)).namelist())
    assert {"__main__.py", "nccl_check.pyz", "nccl_preflight/slurm/node_step.py"} <= names
    assert {"nccl_preflight/node/supervisor.py", "nccl_preflight/node/facts.py"} <= names
    assert not [n for n in names if n.startswith("nccl_preflight/core/")], sorted(names)
    assert "nccl_preflight/slurm/run.py" not in names
    assert len(step) < len(bundle.build_bundle()) / 2
    path = tmp_path / "step.pyz"
    path.write_bytes(step)
    blocked = [sys.executable, "-I", "-c", BLOCKED_RUN, ",".join(CONTROL_PACKAGES)]
    for what in ("run", "launch"):
        done = run_pyz(blocked, path, "node-step", what, tmp=tmp_path)
        assert done.returncode == 1, done.stderr
        assert done.stderr.endswith("no step settings on stdin\n"), done.stderr
