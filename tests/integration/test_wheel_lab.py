# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pip package: a wheel built from a copy of the tree's sources, installed into a fresh venv,
gives the ``nccl-preflight`` command, which works from a directory outside any checkout with
nothing of the checkout on its path: --version, --help, bundle (the same bytes as the
checkout's), node-check, and a validate run against the lab whose reports land in the working
directory's reports/.

The venv gets the wheel alone (pip --no-deps --no-index: no index is reached); the control
machine's requirements (ansible-core, jinja2, junit-xml, matplotlib) are this test venv's, seen
through a .pth file (which adds their directory only: the checkout's editable install there is
not loaded), and its ansible-playbook is the entry point pip writes for ansible-core.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

from nccl_preflight import __version__
from nccl_preflight.core.content import SHARED
from nccl_preflight.slurm import bundle
from tests.builders.node_check import HEALTHY, fake_python
from tests.lab.fixtures import LabFactory, require_slurm
from tests.lab.harness import Lab

ROOT = Path(__file__).resolve().parents[2]
# What a source distribution holds besides SHARED (MANIFEST.in).
BUILD_FILES = ("pyproject.toml", "setup.py", "MANIFEST.in", "LICENSE", "README.md", "src")
BUILD_FILES += ("requirements.txt", "requirements-node.txt")
ANSIBLE_PLAYBOOK_ENTRY = "#!{python}\nimport sys\nfrom ansible.cli.playbook import main\n"
ANSIBLE_PLAYBOOK_ENTRY += "sys.exit(main())\n"
IMPORTED = "import nccl_preflight.command as c, ansible; print(c.__file__); print(ansible.__file__)"


@dataclass
class Installed:
    venv: Path
    work: Path  # the working directory: outside any checkout

    def run(
        self, *argv: str, timeout: float = 120, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {**clean_env(), "ANSIBLE_NOCOLOR": "1", **(env or {})}
        return subprocess.run(
            [str(self.venv / "bin" / "nccl-preflight"), *argv],
            cwd=self.work,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def clean_env() -> dict[str, str]:
    """This environment without what points into the checkout (tests/conftest.py's PYTHONPATH)."""
    drop = ("PYTHONPATH", "ANSIBLE_CONFIG", "SLURMD_NODENAME")
    return {k: v for k, v in os.environ.items() if k not in drop}


def ignore(_directory: str, names: list[str]) -> set[str]:
    return {n for n in names if n in ("__pycache__", "build") or n.endswith(".egg-info")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    for name in (*BUILD_FILES, *SHARED):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    wheels = base / "wheels"
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)]
    subprocess.run(build, check=True, timeout=600, cwd=base, env=clean_env())
    (wheel,) = wheels.glob("nccl_preflight-*.whl")
    venv = base / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", str(venv)], check=True, timeout=300, env=clean_env()
    )
    install = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*install, "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
        timeout=300,
        env=clean_env(),
    )
    site = Path(
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_path('purelib'))",
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()
    )
    (site / "control_requirements.pth").write_text(sysconfig.get_path("purelib") + "\n")
    entry = venv / "bin" / "ansible-playbook"
    entry.write_text(ANSIBLE_PLAYBOOK_ENTRY.format(python=venv / "bin" / "python"))
    entry.chmod(0o755)
    work = base / "work"
    work.mkdir()
    return Installed(venv, work)


def test_the_installed_package_is_the_wheels_not_the_checkouts(installed: Installed) -> None:
    done = subprocess.run(
        [
            str(installed.venv / "bin" / "python"),
            "-c",
            IMPORTED,
        ],
        cwd=installed.work,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    package, ansible = done.stdout.splitlines()
    assert package.startswith(str(installed.venv)), package
    assert not ansible.startswith(str(installed.venv))  # the control venv's, through the .pth


def test_version_help_bundle_and_node_check_run_from_the_wheel(
    installed: Installed, tmp_path: Path
) -> None:
    done = installed.run("--version")
    assert (done.returncode, done.stdout) == (0, f"nccl-preflight {__version__}\n"), done.stderr
    done = installed.run("--help")
    assert done.returncode == 0, done.stderr
    for word in ("slurm", "node-check", "bundle", "bad_input"):
        assert word in done.stdout
    pyz = tmp_path / "nccl-preflight.pyz"
    done = installed.run("bundle", "-o", str(pyz))
    assert done.returncode == 0, done.stderr
    # Built from the installed copy: the same bytes as from the checkout it was built from.
    assert pyz.read_bytes() == bundle.build_bundle()
    config = tmp_path / "node.yml"
    config.write_text(HEALTHY.replace("PYTHON", str(fake_python(tmp_path))))
    state = ["--state-dir", str(tmp_path / "state")]
    done = installed.run("node-check", "--config", str(config), "--json", *state)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["exit"] == 0
    config.write_text(HEALTHY + "nccl_fabirc_cidr: 10.0.0.0/8\n")
    done = installed.run("node-check", "--config", str(config), *state)
    assert done.returncode == 2 and "node.yml" in done.stderr, done.stderr
    assert "nccl_fabric_cidr" in done.stderr


@pytest.mark.lab
def test_a_validate_run_against_the_lab_reports_in_the_working_directory(
    installed: Installed, lab2: Lab
) -> None:
    quick = ["--max-bytes", "16K", "--iters", "2", "--warmup", "1"]
    extra = {"nccl_master_port": 29547, "nccl_check_args": quick, "nccl_run_timeout": 90}
    done = installed.run(
        "-i",
        str(lab2.inventory_dir),
        "-e",
        json.dumps({**extra, "nccl_run_id": "wheel-run"}),
        timeout=600,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    verdict = json.loads((installed.work / "reports" / "wheel-run" / "verdict.json").read_text())
    assert verdict["class"] == "passed"
    assert (installed.work / "reports" / "wheel-run" / "junit.xml").is_file()
    assert "nccl-preflight: passed (exit 0)" in done.stderr


@pytest.mark.lab
def test_the_slurm_command_runs_from_the_wheel_on_a_slurm_lab(
    installed: Installed, lab_factory: LabFactory
) -> None:
    """`nccl-preflight slurm` from the wheel: its report template, rank script and bundle come
    from the installed copy; the run passes and writes its report where it is asked to."""
    require_slurm()
    lab = lab_factory(2, slurm=True)
    config = installed.work / "slurm.yml"
    values = {
        "nccl_fabric_cidr": lab.fabric_cidr,
        "nccl_backend": "gloo",
        "nccl_require_gpu": False,
        "nccl_python": lab.python,
        "nccl_run_timeout": 120,
        "nccl_check_args": ["--max-bytes", "16K", "--iters", "2", "--warmup", "1"],
        "nccl_run_id": "wheel-slurm",
    }
    config.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items()))
    env = {k: v for k, v in clean_env().items() if not k.startswith(("SLURM_", "SBATCH_"))}
    env |= lab.slurm_env()
    reports = installed.work / "slurm-reports"
    done = installed.run(
        "slurm", "-N", "2", "--gpus-per-node", "0", "--config", str(config),
        "--report-root", str(reports), timeout=600, env=env,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    report = reports / "wheel-slurm"
    assert json.loads((report / "verdict.json").read_text())["class"] == "passed"
    assert "<html" in (report / "report.html").read_text()[:2000].lower()
