# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Under torchrun: the issue's documented examples, through nccl_check's own check functions.

Writes OUT_DIR/example-<rank>.json = {case: details-or-failure}; the test asserts the values.
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


def main() -> None:
    out_dir = Path(sys.argv[1])
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    n, rank = dist.get_world_size(), dist.get_rank()
    ctx = ex.Context.make(rank, n, torch.device("cpu"), torch.float32)
    cases: dict[str, Any] = {}

    def run(name: str, body: Any) -> None:
        try:
            cases[name] = {"status": "passed", **body()}
        except ex.Fail as exc:
            cases[name] = {"status": "failed", "message": str(exc), **exc.details}

    if n == 4:  # reduce of [rank] to dst 0 gives [6]; all_reduce gives 6 everywhere
        run("reduce", lambda: ex.verify_reduce(ctx, base=[0], step=1))
        run("all_reduce", lambda: ex.verify_all_reduce(ctx, "sum", base=[0], step=1))
    if n == 2:  # reduce_scatter of [2r+1, 2r+2] gives 4 and 6; scatter of [ones, fives]
        run("reduce_scatter", lambda: ex.verify_reduce_scatter(ctx, base=[1, 2], step=2))
        run("scatter", lambda: ex.verify_scatter(ctx, base=[1, 1], step=4))
    if n == 6:  # all_reduce of [2, 3] + 2 * rank gives [42, 48]
        run("all_reduce", lambda: ex.verify_all_reduce(ctx, "sum", base=[2, 3], step=2))
    (out_dir / f"example-{rank}.json").write_text(json.dumps(cases))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
