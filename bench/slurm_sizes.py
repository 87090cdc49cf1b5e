# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What the slurm command sends to each job step, by number of nodes (BENCHMARKS.md section 7).

Measured with the command's own functions on fake node lists, no Slurm involved
(tests/unit/slurm/test_slurm_step_size.py bounds the same numbers with these helpers): the bytes on
each step's stdin beyond the node bundle (the settings' line; for the run step also the one
message of every node's ports and address and the launch's message), srun's longest argument
and its whole command line, and the bundle itself.

    .venv/bin/python -m bench.slurm_sizes
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from nccl_preflight.core.config import load_config, node_values
from nccl_preflight.slurm import observe
from nccl_preflight.slurm.bundle import build_node_bundle
from nccl_preflight.slurm.run import SlurmRun
from nccl_preflight.slurm.step import step_argv, step_input

SIZES = (8, 128, 512, 1024)


def fake_nodes(n: int) -> list[str]:
    return [f"gpu-node-{i:04d}" for i in range(n)]


def started(nodes: list[str]) -> observe.Observed:
    """What every node's "started" record would bring: ports and a fabric address."""
    obs = observe.Observed()
    for i, node in enumerate(nodes):
        ports = {"ring": {"port": 40000 + i, "error": ""}}
        if i == 0:
            ports["master"] = {"port": 29500, "error": ""}
        obs.facts[node] = {}
        obs.started[node] = {"ports": ports}
        address = f"10.1.{i // 250}.{i % 250 + 1}"
        obs.choices[node] = {"ifname": "ib0", "address": address, "reason": ""}
    return obs


def launch_doc(config: dict[str, Any], nodes: list[str], obs: observe.Observed) -> dict:
    """The launch step's settings document, as SlurmRun.launch makes it."""
    run = SlurmRun.__new__(SlurmRun)  # no allocation, no bundle: only the settings
    run.config, run.nodes, run.python = config, nodes, "python3"
    run.node_config = {node: node_values(config, node) for node in nodes}
    run.run_id, run.alloc = "20260101T000000-abcdef", SimpleNamespace(job_id="7", nodes=nodes)
    run.env_by_node, run.layout, run.results, run.pair_triggers = {}, {}, {}, []
    run.environment(obs)
    _, args = run.script_args()
    return run.launch_settings(args, 600, "rdzv")


def step_bytes(config: dict[str, Any], n: int) -> dict[str, int]:
    """Bytes on each step's stdin beyond the bundle, and the longest argument of srun."""
    nodes, obs = fake_nodes(n), started(fake_nodes(n))
    settings = {"shared": observe.observe_settings(config, nodes, "python3"), "own": {}}
    plan_message = len(json.dumps(observe.shared_inputs(nodes, obs, settings["shared"]))) + 1
    argv = step_argv("7", nodes, "python3", "20260101T000000-abcdef", "launch")
    launch = len(step_input(b"", launch_doc(config, nodes, obs))) - 2  # less the "0\n" header
    launch_message = len(json.dumps({"launch": launch_doc(config, nodes, obs)})) + 1
    return {
        # the run step: its settings, the probe plan's message, then the launch's message
        "run": len(step_input(b"", settings)) - 2 + plan_message + launch_message,
        "launch": launch,  # the pairwise relaunch's own step
        "longest_arg": max(len(a) for a in argv),
        "argv": sum(len(a) + 1 for a in argv),
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "nccl.yml"
        path.write_text('nccl_fabric_cidr: "10.0.0.0/8"\nnccl_nproc_per_node: 8\n')
        config = load_config(path)
    bundle = len(build_node_bundle())
    print(f"steps' bundle: {bundle} bytes (sent on every step's stdin, to every node)")
    print(
        "| nodes | run step's stdin beyond the bundle | relaunch step's beyond the bundle | "
        "longest srun argument | srun command line | out of the control machine per step |"
    )
    print("|---|---|---|---|---|---|")
    for n in SIZES:
        size = step_bytes(config, n)
        fan_out = n * (bundle + max(size["run"], size["launch"]))
        print(f"| {n} | {size['run']} B | {size['launch']} B | {size['longest_arg']} B | "
              f"{size['argv']} B | {fan_out / 1e6:.1f} MB |")  # fmt: skip


if __name__ == "__main__":
    main()
