# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What the slurm command sends to each job step, by number of nodes (BENCHMARKS.md section 7).

Measured with the command's own functions on fake node lists, no Slurm involved (the helpers of
tests/unit/test_slurm_step_size.py, which bounds the same numbers): the bytes on each step's stdin
beyond the node bundle (the settings' line; for observe also the one message of every node's ports
and address), srun's longest argument and its whole command line, and the bundle itself.

    .venv/bin/python -m bench.slurm_sizes
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from nccl_preflight.core.config import load_config
from nccl_preflight.slurm.bundle import build_bundle
from tests.unit.test_slurm_step_size import step_bytes

SIZES = (8, 128, 512, 1024)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "nccl.yml"
        path.write_text('nccl_fabric_cidr: "10.0.0.0/8"\nnccl_nproc_per_node: 8\n')
        config = load_config(path)
    bundle = len(build_bundle())
    print(f"node bundle: {bundle} bytes (sent on every step's stdin, to every node)")
    print(
        "| nodes | observe stdin beyond the bundle | launch stdin beyond the bundle | "
        "longest srun argument | srun command line | out of the control machine per step |"
    )
    print("|---|---|---|---|---|---|")
    for n in SIZES:
        size = step_bytes(config, n)
        fan_out = n * (bundle + max(size["observe"], size["launch"]))
        print(f"| {n} | {size['observe']} B | {size['launch']} B | {size['longest_arg']} B | "
              f"{size['argv']} B | {fan_out / 1e6:.1f} MB |")  # fmt: skip


if __name__ == "__main__":
    main()
