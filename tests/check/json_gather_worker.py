# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Under torchrun (gloo), on a Python where numpy cannot be imported: Context.all_gather_json.

Writes OUT_DIR/gather-<rank>.json = {"numpy": whether `import numpy` worked here,
"object_collective": what dist.all_gather_object said (the call the rank script no longer
makes), "everyone": what all_gather_json gave this rank}.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.check.support import load_part

ex = load_part("nccl_check_verify")


def sent_by(rank: int) -> Any:
    """Rank r's object: a tuple, text beyond ASCII, floats, and a length that grows with r."""
    rows = [
        {"pass": "intra" if i % 2 else 1, "busbw_gbps": i / 3, "rank": rank}
        for i in range(rank * 40)
    ]
    return (rank, f"nöde-{rank}", rows)


def main() -> None:
    import torch
    import torch.distributed as dist

    out_dir = Path(sys.argv[1])
    try:
        import numpy  # noqa: F401

        has_numpy = True
    except ImportError:
        has_numpy = False
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    n, rank = dist.get_world_size(), dist.get_rank()
    ctx = ex.Context.make(rank, n, torch.device("cpu"), torch.float32)
    everyone = ctx.all_gather_json(sent_by(rank))
    try:
        dist.all_gather_object([None] * n, rank)
        object_collective = "worked"
    except RuntimeError as exc:
        object_collective = str(exc)
    result = {"numpy": has_numpy, "object_collective": object_collective, "everyone": everyone}
    (out_dir / f"gather-{rank}.json").write_text(json.dumps(result))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
