# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A test double of nvidia-smi for the lab (never shipped, never installed on a real node).

It replays the recordings in the directory named by NVIDIA_SMI_REPLAY (the lab sets it per host
with sshd's SetEnv): query.csv for the facts' --query-gpu, q.txt for -q, topo.txt for topo -m,
nvlink.txt for nvlink -s. A subdirectory named after the host's name (each lab host has its own
UTS hostname) wins for the files it holds: one NVIDIA_SMI_REPLAY for every node, as a Slurm step
passes the same environment to all, still gives each host its own GPUs. Any other invocation
exits 2 saying it was not recorded, so a check that starts asking nvidia-smi something new fails
loudly instead of reading nothing.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

QUERY = "--query-gpu=index,name,driver_version,memory.total,uuid,pci.bus_id"
ANSWERS = {
    (QUERY, "--format=csv,noheader,nounits"): "query.csv",
    ("-q",): "q.txt",
    ("topo", "-m"): "topo.txt",
    ("nvlink", "-s"): "nvlink.txt",
}


def main(argv: list[str]) -> int:
    directory = os.environ.get("NVIDIA_SMI_REPLAY")
    name = ANSWERS.get(tuple(argv))
    places = [Path(directory) / socket.gethostname(), Path(directory)] if directory else []
    found = [place / name for place in places if name is not None and (place / name).is_file()]
    if not found:
        print(
            f"nvidia-smi test double: {' '.join(argv)!r} not recorded in {directory}",
            file=sys.stderr,
        )
        return 2
    sys.stdout.write(found[0].read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
