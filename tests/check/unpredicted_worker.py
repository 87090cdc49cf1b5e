# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Under torchrun: files/nccl_check.py's own main() with the SUPPORT_RULES of its tables
(files/nccl_check_tables.py) emptied, so the table
no longer predicts gloo's refusal of AVG on integer tensors and the real backend refuses it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.check.support import load_part, load_script

nc = load_script()

if __name__ == "__main__":
    load_part("nccl_check_tables").SUPPORT_RULES.clear()
    sys.exit(nc.main(sys.argv[1:]))
