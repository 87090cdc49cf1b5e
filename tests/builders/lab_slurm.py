# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The slurm command on a lab's Slurm as the Slurm lab tests run it (its config, argv and
environment), the rank records and launches it left, and both front-ends' findings compared."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.lab.harness import Lab
from tests.lab.runs import (
    QUICK,
    leftovers,
)
from tests.playbook_run import ROOT


def write_config(lab: Lab, path: Path, **extra: Any) -> Path:
    """The run's --config: the lab inventory's nccl_* values and the node Python."""
    values = {
        "nccl_fabric_cidr": lab.fabric_cidr,
        "nccl_backend": "gloo",
        "nccl_require_gpu": False,  # the lab has no GPU: a CPU run, said so
        "nccl_python": lab.python,
        "nccl_run_timeout": 120,
        "nccl_check_args": QUICK,
        **extra,
    }
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items()))
    return path


def slurm_argv(
    lab: Lab, tmp_path: Path, run_id: str, *args: str, **config: Any
) -> tuple[list[str], dict[str, str]]:
    """bin/nccl-preflight slurm -N <all hosts> on the lab, from the control machine (no
    allocation yet): its argv and environment."""
    cfg = write_config(lab, tmp_path / "nccl.yml", nccl_run_id=run_id, **config)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
    env.update(lab.slurm_env())
    argv = [
        sys.executable,
        str(ROOT / "bin" / "nccl-preflight"),
        "slurm",
        "-N",
        str(len(lab.hosts)),
    ]
    argv += ["--config", str(cfg), "--report-root", str(tmp_path / "reports")]
    return [*argv, *args], env


def slurm_command(
    lab: Lab, tmp_path: Path, run_id: str, *args: str, **config: Any
) -> subprocess.CompletedProcess[str]:
    """The command run to its end."""
    argv, env = slurm_argv(lab, tmp_path, run_id, *args, **config)
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)


def assert_nothing_left(lab: Lab, run_id: str, out: str) -> None:
    """No temporary directory or process of the run on any node, and the allocation released."""
    assert not [p for p in os.listdir("/tmp") if p.startswith(f"nccl-preflight-{run_id}-")]
    assert leftovers(run_id) == []
    job = re.search(r"on job (\d+)", out)
    assert job, out
    assert lab.slurm_wait_job(job.group(1)) in {"CANCELLED", "COMPLETED"}
    assert lab.slurm_cmd("squeue", "-h", "-o", "%i").stdout.split() == []
    lab.slurm_wait_idle()


def rank_file(run_id: str, rank: int) -> Path | None:
    """The rank's result file in its node's private directory (stdin BOOT's mkdtemp; the lab's
    hosts share this machine's /tmp), once it exists."""
    found = glob.glob(f"/tmp/nccl-preflight-{run_id}-*/run/results/rank-{rank}.json")
    return Path(found[0]) if found else None


def rank_doc(run_id: str, rank: int) -> dict[str, Any]:
    path = rank_file(run_id, rank)
    try:
        return json.loads(path.read_text()) if path else {}
    except (OSError, ValueError):
        return {}


def launch_records(report: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    return {n: json.loads((report / n / "launch.json").read_text()) for n in names}


def environment(lab: Lab) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
    env.update(lab.slurm_env())
    env.update({"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"})
    return env


# What a front-end's run gave: (exit code, verdict.json, output).
Run = tuple[int, dict[str, Any], str]


def what_was_found(verdict: dict[str, Any], names: list[str]) -> list[tuple]:
    """(class, node<i>, rank, check, consequence) of every finding, host names made plain."""
    plain = {name: f"node{i}" for i, name in enumerate(names)}
    return sorted(
        (
            f["class"],
            plain.get(f["host"], f["host"]),
            f["rank"] if f["rank"] is not None else -1,
            f["test"],
            f["consequence"],
        )
        for f in verdict["findings"]
    )


def assert_agree(lab: Lab, ansible: Run, slurm: Run, expected: tuple[str, int]) -> list[tuple]:
    """Both front-ends gave ``expected`` (class, exit code) and the same findings; -> them."""
    (a_code, a_verdict, a_out), (s_code, s_verdict, s_out) = ansible, slurm
    a_found = what_was_found(a_verdict, [h.inventory_name for h in lab.hosts])
    s_found = what_was_found(s_verdict, lab.slurm_nodes)
    said = f"validate.yml:\n{a_out[-2500:]}\nslurm:\n{s_out[-2500:]}"
    # the fault is what each front-end saw (a test that cannot pass vacuously)
    assert (a_verdict["class"], a_code) == expected, said
    assert (s_verdict["class"], s_code) == (a_verdict["class"], a_code), said
    assert s_verdict["classes"] == a_verdict["classes"], said
    assert s_found == a_found, said
    return a_found
