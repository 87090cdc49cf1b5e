# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Under torchrun (gloo): which gloo operations torch runs for the collectives nccl_check times.

Writes OUT_DIR/ops-<rank>.json = {call: [the gloo:* operations torch.profiler recorded, in order]}.
"""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.check.support import load_part

ex = load_part("nccl_check_verify")


def main() -> None:
    out_dir = Path(sys.argv[1])
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    n, rank = dist.get_world_size(), dist.get_rank()
    whole, part = torch.ones(4 * n), torch.empty(4)
    calls: dict[str, Callable[[], object]] = {
        "reduce_scatter_single": lambda: ex.reduce_scatter_single(part, whole),
        "reduce_scatter_list": lambda: dist.reduce_scatter(part, list(whole.chunk(n))),
        "all_gather_single": lambda: ex.all_gather_single(whole, part),
        "broadcast": lambda: dist.broadcast(whole, src=0),
    }
    ops: dict[str, list[str]] = {}
    for name, call in calls.items():
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            call()
        ops[name] = [e.name for e in prof.events() if e.name.startswith("gloo:")]
    ops["reduce_scatter_list_result"] = part.tolist()  # n everywhere when it really reduced
    (out_dir / f"ops-{rank}.json").write_text(json.dumps(ops))
    # Every rank has left its last collective before any tears the group down: a rank still in
    # the broadcast while another destroyed the group died once with "terminate called without
    # an active exception" (SIGABRT).
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
