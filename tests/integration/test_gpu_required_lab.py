# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""No false pass on a GPU cluster (issue 36 item 2), on the lab, through both front-ends and
node-check, with the defaults: nccl_backend and nccl_require_gpu are not set anywhere (the lab
inventory's group_vars copied without them, a --config without them), so auto and true apply.

- The lab hosts have no GPU and no nvidia-smi: both front-ends end at the pre-flight, class
  preflight_failed (exit 10), every node failing the check gpu, named, with the same findings;
  node-check of a lab host fails gpu (exit 1).
- The count: an nvidia-smi test double (tests/integration/nvidia_smi_double.py, never shipped)
  on every host's PATH replays a recorded 8 x H100 node (tests/fixtures/nvidia-smi/h100x8.csv)
  on hosts 1 and 3 and the same node missing GPU 5 (h100x7-missing-one.csv) on host 2, each host
  by its own hostname: with nccl_gpus_per_node unset host 2 alone fails for its count, on both
  front-ends; node-check with nccl_gpus_per_node 8 fails host 2 and only host 2 for its count.

Tests marked `lab` need root, the node Python (NCCL_LAB_NODE_PYTHON) and Debian's Slurm packages.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.builders.lab_slurm import (
    Run,
    assert_agree,
    environment,
    what_was_found,
)
from tests.lab.fixtures import LabFactory, require_slurm
from tests.lab.harness import SBIN_PATH, Lab
from tests.lab.runs import QUICK, new_run_id

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
WRAPPER = ROOT / "bin" / "nccl-preflight"
FIXTURES = ROOT / "tests" / "fixtures"
DOUBLE = Path(__file__).resolve().parent / "nvidia_smi_double.py"
ODD = 1  # 0-based: the host whose recording misses GPU 5
# The lab inventory's values that would say "a CPU run": left out, so the defaults apply.
CPU_RUN = ("nccl_backend", "nccl_require_gpu")


@pytest.fixture(scope="module")
def smi_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """<root>/bin (where nvidia-smi may be: absent unless a test puts the double there) and
    <root>/replay (the recordings: the 8 x H100 node's, host 2's own query in its subdirectory)."""
    root = tmp_path_factory.mktemp("smi")
    (root / "bin").mkdir()
    replay = root / "replay"
    replay.mkdir()
    for source, target in (
        ("nvidia-smi/h100x8.csv", "query.csv"),
        ("gpu/q-h100x8.txt", "q.txt"),
        ("gpu/topo-h100x8-nv18.txt", "topo.txt"),
        ("gpu/nvlink-a100x8.txt", "nvlink.txt"),
    ):
        shutil.copyfile(FIXTURES / source, replay / target)
    root.chmod(0o755)
    return root


@pytest.fixture(scope="module")
def lab3(lab_factory: LabFactory, smi_root: Path) -> Lab:
    """Three hosts with sshd and slurmd; every SSH session's PATH starts with <root>/bin."""
    require_slurm()
    env = {"PATH": f"{smi_root / 'bin'}:{SBIN_PATH}", "NVIDIA_SMI_REPLAY": str(smi_root / "replay")}
    lab = lab_factory(3, slurm=True, host_env={i: env for i in range(3)})
    odd = smi_root / "replay" / lab.hosts[ODD].hostname
    odd.mkdir(exist_ok=True)
    shutil.copyfile(FIXTURES / "nvidia-smi/h100x7-missing-one.csv", odd / "query.csv")
    return lab


def install_double(root: Path) -> Path:
    tool = root / "bin" / "nvidia-smi"
    tool.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{DOUBLE}" "$@"\n')
    tool.chmod(0o755)
    return tool


def defaults_inventory(lab: Lab, where: Path) -> Path:
    """The lab's inventory without CPU_RUN's lines: nccl_backend and nccl_require_gpu default."""
    inventory = where / "inventory"
    shutil.copytree(lab.inventory_dir, inventory)
    values = inventory / "group_vars" / "all.yml"
    lines = values.read_text().splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith(tuple(f"{n}:" for n in CPU_RUN))]
    assert len(kept) == len(lines) - len(CPU_RUN), lines
    values.write_text("".join(kept))
    return inventory


def run_both(lab: Lab, where: Path, env: dict[str, str]) -> tuple[Run, Run]:
    """validate.yml over SSH and `slurm -N 3 --config`, the defaults on both: (exit, verdict,
    output) of each."""
    variables = {"nccl_run_timeout": 120, "nccl_check_args": QUICK}
    run_id = new_run_id()
    reports = where / "ansible"
    extra = {"nccl_run_id": run_id, "nccl_report_root": str(reports), **variables}
    argv = [sys.executable, str(WRAPPER), "-i", str(defaults_inventory(lab, where))]
    done = subprocess.run(
        [*argv, "-e", json.dumps(extra)], capture_output=True, text=True, env=env, cwd=ROOT,
        timeout=600, check=False,
    )  # fmt: skip
    verdict = reports / run_id / "verdict.json"
    assert verdict.is_file(), (done.stdout + done.stderr)[-3000:]
    ansible = (done.returncode, json.loads(verdict.read_text()), done.stdout + done.stderr)
    config = {"nccl_fabric_cidr": lab.fabric_cidr, "nccl_python": lab.python, **variables}
    assert not set(config) & set(CPU_RUN)
    reports = where / "slurm"
    reports.mkdir()
    path = reports / "nccl.yml"
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in config.items()))
    # The lab's Slurm has no GPU GRES: as on a cluster that schedules whole nodes without GRES,
    # --gpus-per-node 0 asks for none (the default would ask for one per rank and be refused).
    argv = [sys.executable, str(WRAPPER), "slurm", "-N", "3", "--gpus-per-node", "0"]
    argv += ["--config", str(path)]
    done = subprocess.run(
        [*argv, "--report-root", str(reports)], capture_output=True, text=True, env=env,
        cwd=ROOT, timeout=600, check=False,
    )  # fmt: skip
    verdicts = [p for p in reports.glob("*/verdict.json") if p.parent.name != "latest"]
    assert len(verdicts) == 1, (done.stdout + done.stderr)[-3000:]
    slurm = (done.returncode, json.loads(verdicts[0].read_text()), done.stdout + done.stderr)
    return ansible, slurm


def gpu_finding(verdict: dict[str, Any], host: str) -> dict[str, Any]:
    (found,) = [f for f in verdict["findings"] if f["host"] == host and f["test"] == "gpu"]
    return found


def recorded_python(where: Path) -> Path:
    """A 'python' whose torch probe answers what the lab nodes' Python answered (recorded:
    tests/fixtures/torch/probe-cpu-lab-node.json): node-check's torch import, which on this
    loaded machine can outrun node-check's own deadline, is not what these tests judge."""
    script = where / "python-recorded"
    script.write_text(f"#!/bin/sh\ncat {FIXTURES / 'torch' / 'probe-cpu-lab-node.json'}\n")
    script.chmod(0o755)
    return script


def node_check(lab: Lab, i: int, where: Path, config: str, env: dict[str, str]) -> tuple[int, str]:
    """bin/nccl-preflight node-check on lab host i (its netns and hostname), its torch probe the
    recorded one: (exit, stdout)."""
    path = where / f"node-check-{i}.yml"
    path.write_text(
        f"nccl_socket_ifname: {lab.hosts[i].fabric_ifname}\n"
        f"nccl_python: {recorded_python(where)}\n" + config
    )
    argv = [sys.executable, str(WRAPPER), "node-check", "--config", str(path)]
    done = lab.run(i, argv, check=False, timeout=180, env=env)
    return done.returncode, done.stdout + done.stderr


def test_gpu_less_nodes_fail_the_preflight_under_the_defaults_on_both_front_ends(
    lab3: Lab, smi_root: Path, tmp_path: Path
) -> None:
    (smi_root / "bin" / "nvidia-smi").unlink(missing_ok=True)  # a CPU node: no nvidia-smi at all
    ansible, slurm = run_both(lab3, tmp_path, environment(lab3))
    found = assert_agree(lab3, ansible, slurm, ("preflight_failed", 10))
    causes = {(node, test) for _, node, _, test, consequence in found if not consequence}
    assert causes == {("node0", "gpu"), ("node1", "gpu"), ("node2", "gpu")}, found
    for (_, verdict, _), names in (
        (ansible, [h.inventory_name for h in lab3.hosts]),
        (slurm, lab3.slurm_nodes),
    ):
        for name in names:
            gpu = gpu_finding(verdict, name)
            head, gloo, *causes_said = gpu["what"].splitlines()
            assert head.startswith(f"{name}: no NVIDIA GPU visible (nvidia-smi not found"), head
            assert head.endswith("; nccl_require_gpu is true")
            assert "fall back to gloo" in gloo and "NCCL would never run" in gloo
            assert causes_said[1].startswith("- no NVIDIA driver on this node")
            assert "nccl_require_gpu: false" in gpu["fix"]


def test_node_check_of_a_gpu_less_lab_host_fails_gpu_under_the_defaults(
    lab3: Lab, smi_root: Path, tmp_path: Path
) -> None:
    (smi_root / "bin" / "nvidia-smi").unlink(missing_ok=True)
    code, out = node_check(lab3, 0, tmp_path, "", environment(lab3))
    assert code == 1, out
    name = lab3.hosts[0].hostname
    assert f"gpu: failed: {name}: no NVIDIA GPU visible (nvidia-smi not found" in out
    assert f"node-check: {name}: 1 check(s) failed" in out
    # said to be a CPU node, the same node is healthy
    code, out = node_check(lab3, 0, tmp_path, "nccl_require_gpu: false\n", environment(lab3))
    assert code == 0, out


def test_the_node_with_fewer_gpus_fails_on_both_front_ends_and_in_node_check(
    lab3: Lab, smi_root: Path, tmp_path: Path
) -> None:
    install_double(smi_root)
    env = environment(lab3)  # the Slurm steps get the control machine's environment
    env["PATH"] = f"{smi_root / 'bin'}:{env['PATH']}"
    env["NVIDIA_SMI_REPLAY"] = str(smi_root / "replay")
    try:
        ansible, slurm = run_both(lab3, tmp_path, env)
        checks = []
        for i in range(3):
            checks.append(node_check(lab3, i, tmp_path, "nccl_gpus_per_node: 8\n", env))
    finally:
        (smi_root / "bin" / "nvidia-smi").unlink()
    for (code, verdict, out), names in (
        (ansible, [h.inventory_name for h in lab3.hosts]),
        (slurm, lab3.slurm_nodes),
    ):
        assert (verdict["class"], code) == ("preflight_failed", 10), out[-3000:]
        odd = gpu_finding(verdict, names[ODD])
        assert odd["what"].startswith(
            f"{names[ODD]}: nvidia-smi lists 7 GPUs, other hosts 8 (nccl_gpus_per_node unset"
        ), odd
        for i in (0, 2):  # their count is right: torch here is the CPU build, and says so
            gpu = gpu_finding(verdict, names[i])
            assert "is a CPU build (torch.version.cuda is None)" in gpu["what"], gpu
    a_found = what_was_found(ansible[1], [h.inventory_name for h in lab3.hosts])
    s_found = what_was_found(slurm[1], lab3.slurm_nodes)
    assert [f for f in a_found if f[3] == "gpu"] == [f for f in s_found if f[3] == "gpu"]
    for i, (code, out) in enumerate(checks):
        assert code == 1, out  # every host fails gpu: the odd one for its count, the others
        count = f"gpu: failed: {lab3.hosts[i].hostname}: nvidia-smi lists 7 GPUs, "
        if i == ODD:
            assert count + "nccl_gpus_per_node is 8 (1 missing" in out, out
        else:
            assert count not in out and "is a CPU build" in out, out
