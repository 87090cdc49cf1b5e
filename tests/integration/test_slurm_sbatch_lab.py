# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""README's sbatch example, as written there, on the lab's real Slurm: the batch script runs
`bin/nccl-preflight slurm -N "$SLURM_NNODES"` inside the job's own allocation (no salloc), and
`sbatch --wait` returns the verdict's exit code.

Tests marked `lab` need root, the node Python (NCCL_LAB_NODE_PYTHON) and Debian's Slurm packages.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.builders.lab_slurm import write_config
from tests.lab.fixtures import LabFactory, require_slurm
from tests.lab.harness import Lab

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.lab


def readme_sbatch_script() -> str:
    """The indented block after README's "An `sbatch` script" line, unindented."""
    text = (ROOT / "README.md").read_text()
    after = text.split("An `sbatch` script", 1)[1].split("\n\n", 1)[1]
    block = []
    for line in after.splitlines():
        if line and not line.startswith("    "):
            break
        block.append(line[4:])
    return "\n".join(block).strip() + "\n"


@pytest.fixture(scope="module")
def lab(lab_factory: LabFactory) -> Lab:
    require_slurm()
    return lab_factory(2, slurm=True)


def submit(lab: Lab, config: Path) -> tuple[str, int, str]:
    """README's script for this lab's nodes and ``config``, through `sbatch --wait`: (job id,
    sbatch's exit status, the job's output file)."""
    script = readme_sbatch_script().replace("--nodes=4", f"--nodes={len(lab.hosts)}")
    script = script.replace("/shared/nccl-preflight", str(ROOT))
    script = script.replace("/etc/nccl-preflight.yaml", str(config))
    done = lab.slurm_cmd("sbatch", "--wait", "--parsable", input=script, check=False, timeout=600)
    job = done.stdout.strip().split(";")[0]
    output = (lab.slurm_dir / "jobs" / f"nccl-preflight-{job}.out").read_text(errors="replace")
    return job, done.returncode, done.stderr + output


def test_the_readme_sbatch_example_runs_in_its_own_allocation(lab: Lab, tmp_path: Path) -> None:
    assert readme_sbatch_script().startswith("#!/bin/bash\n#SBATCH")
    assert '-N "$SLURM_NNODES"' in readme_sbatch_script()
    config = write_config(lab, tmp_path / "nccl.yml", nccl_report_root=str(tmp_path / "reports"))
    job, code, output = submit(lab, config)
    assert code == 0, output
    # inside the job's allocation: no salloc of its own, the job's nodes, then released by Slurm
    assert re.search(rf"run \S+ on job {job}: {', '.join(lab.slurm_nodes)}", output), output
    (verdict,) = (tmp_path / "reports").glob("2*/verdict.json")
    assert json.loads(verdict.read_text())["class"] == "passed"
    assert lab.slurm_wait_job(job) == "COMPLETED"
    assert lab.slurm_cmd("squeue", "-h", "-o", "%i").stdout.split() == []


def test_sbatch_wait_returns_the_verdicts_exit_code(lab: Lab, tmp_path: Path) -> None:
    """A config refused before anything runs: the job, and so `sbatch --wait`, exits 12."""
    config = tmp_path / "nccl.yml"
    config.write_text("nccl_master_port: 99999999\n")
    job, code, output = submit(lab, config)
    assert code == 12, output
    assert f"{config}:1: nccl_master_port: is 99999999, outside 1024-65535" in output
    assert lab.slurm_wait_job(job) == "FAILED"
