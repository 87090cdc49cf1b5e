# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Under torchrun: the issue's documented examples, through nccl_check's own check functions,
each on the world size it is written for (6, 4 and 2 ranks, in one launch).

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
# The worlds the examples are written for, largest first: torchrun starts the first.
WORLDS = (6, 4, 2)


def main() -> None:
    """One process per rank of the largest world; each smaller world is its first ranks, met
    again through a file of its own after the larger one ended (one import of torch a rank)."""
    out_dir = Path(sys.argv[1])
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    rank = dist.get_rank()
    cases: dict[str, Any] = {}
    for n in WORLDS:
        if n != dist.get_world_size():
            dist.destroy_process_group()
            if rank >= n:
                break
            dist.init_process_group(
                "gloo",
                init_method=(out_dir / f"init-{n}").as_uri(),
                rank=rank,
                world_size=n,
                timeout=datetime.timedelta(seconds=30),
            )
        ctx = ex.Context.make(rank, n, torch.device("cpu"), torch.float32)

        def run(name: str, body: Any, ctx: Any = ctx, n: int = n) -> None:
            try:
                cases[f"{name}/{n}"] = {"status": "passed", **body(ctx)}
            except ex.Fail as exc:
                cases[f"{name}/{n}"] = {"status": "failed", "message": str(exc), **exc.details}

        if n == 6:  # all_reduce of [2, 3] + 2 * rank gives [42, 48]
            run("all_reduce", lambda c: ex.verify_all_reduce(c, "sum", base=[2, 3], step=2))
        if n == 4:  # reduce of [rank] to dst 0 gives [6]; all_reduce gives 6 everywhere
            run("reduce", lambda c: ex.verify_reduce(c, base=[0], step=1))
            run("all_reduce", lambda c: ex.verify_all_reduce(c, "sum", base=[0], step=1))
        if n == 2:  # reduce_scatter of [2r+1, 2r+2] gives 4 and 6; scatter of [ones, fives]
            run("reduce_scatter", lambda c: ex.verify_reduce_scatter(c, base=[1, 2], step=2))
            run("scatter", lambda c: ex.verify_scatter(c, base=[1, 1], step=4))
    else:
        dist.destroy_process_group()
    (out_dir / f"example-{rank}.json").write_text(json.dumps(cases))


if __name__ == "__main__":
    main()
