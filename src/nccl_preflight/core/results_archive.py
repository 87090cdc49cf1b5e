# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A node's results archive unpacked on the control machine, for both front-ends: roles/launch's
action plugin (nccl_torchrun) and the Slurm launch's watch (slurm/launch.py). The archive is
node/run_collect.py pack_results' flat gzip tar; only the names it packs (COLLECTED_NAME) are
accepted, so nothing can be written outside the host's report directory."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from nccl_preflight.node.files import write_atomically
from nccl_preflight.node.run_collect import COLLECTED_NAME


def unpack_results(archive: bytes, dest: Path) -> list[str]:
    """Write the archive's files into dest; refuse anything but the flat, known result files.

    Every member must be a regular file named rank-<R>.json, rank-<R>.log, torchrun.log,
    launch.json or nccl-rank-<R>.log / nccl-pid-<P>.log (the ranks' NCCL logs) (no directory
    part, no link, no device), so nothing can be written outside dest. -> the paths written.
    """
    dest.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar:
            if not member.isfile() or not COLLECTED_NAME.match(member.name):
                raise ValueError(
                    f"unexpected member {member.name!r} in the archive from the node "
                    f"(only flat rank-<R>.json, rank-<R>.log, torchrun.log, launch.json, "
                    f"nccl-rank-<R>.log)"
                )
            stream = tar.extractfile(member)
            if stream is None:
                raise ValueError(f"cannot read {member.name!r} from the archive")
            target = dest / member.name
            write_atomically(target, stream.read(), 0o644)  # a link at target is replaced
            written.append(str(target))
    return written
