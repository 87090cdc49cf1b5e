# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What the node room's readers make of a real machine, without Ansible: printed as one JSON.

Run by tests/device/record_gpu.sh on a GPU machine (PYTHONPATH=src, the node room only).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from nccl_preflight.node.fabric_facts import gather_fabric
from nccl_preflight.node.gpu_health_read import read_gpu_health
from nccl_preflight.node.parse import parse_nvidia_smi_csv


class Runner:
    """The two calls the readers make of AnsibleModule, on subprocess."""

    def get_bin_path(
        self, arg: str, required: bool = False, opt_dirs: Sequence[str] | None = None
    ) -> str | None:
        return shutil.which(arg)

    def run_command(
        self, args: Sequence[str], environ_update: Mapping[str, str] | None = None, **kwargs: Any
    ) -> tuple[int, str, str]:
        try:
            done = subprocess.run(list(args), capture_output=True, text=True, check=False)
        except OSError as exc:
            return 127, "", str(exc)
        return done.returncode, done.stdout, done.stderr


def main() -> None:
    runner = Runner()
    csv = runner.run_command(
        [
            "nvidia-smi",
            "--query-gpu=index,name,driver_version,memory.total,uuid,pci.bus_id",
            "--format=csv,noheader,nounits",
        ]
    )[1]
    out = {
        "gpus": parse_nvidia_smi_csv(csv),
        "gpu_health": read_gpu_health(runner, "nvidia-smi", smi_timeout=30),
        "fabric": gather_fabric("/sys", "/proc"),
    }
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
