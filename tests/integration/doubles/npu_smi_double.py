# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A test double of Ascend's npu-smi for the lab (never shipped, never installed on a real node).

`npu-smi info` prints the recording named by NPU_SMI_REPLAY (the lab sets it per host with
sshd's SetEnv; tests/fixtures/npu-smi/, transcribed from public posts). Any other invocation
exits 2 saying it was not recorded, so a check that starts asking npu-smi something new fails
loudly instead of reading nothing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    recording = os.environ.get("NPU_SMI_REPLAY", "")
    if argv != ["info"] or not Path(recording).is_file():
        print(
            f"npu-smi test double: {' '.join(argv)!r} not recorded ({recording})", file=sys.stderr
        )
        return 2
    sys.stdout.write(Path(recording).read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
