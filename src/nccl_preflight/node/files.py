# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Replace a file atomically: the one way our code writes what another process reads.

Standard library only: shipped to the nodes inside every module that imports it
(``ansible.module_utils.nccl_preflight.node.files``). The action plugins on the control machine
import it as ``nccl_preflight.node.files`` (plugins/action/nccl_report_file.py,
roles/launch/action_plugins/nccl_torchrun.py).
"""

from __future__ import annotations

import contextlib
import os


def write_atomically(
    path: str | os.PathLike[str], data: bytes | str, mode: int | None = None
) -> None:
    """Replace ``path`` with ``data``: a reader sees the old file or all of the new one.

    The data goes to a temporary file beside ``path`` (never followed if it is a link), which is
    then renamed over it. ``mode``: the exact permission bits of the file; None leaves the
    default of a new file (0666 less the umask). Text is written as UTF-8.
    """
    target = os.fspath(path)
    directory, name = os.path.split(target)
    temporary = os.path.join(directory, f".{name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    fd = os.open(temporary, flags, 0o666 if mode is None else mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode)  # the umask may have taken bits from `mode`
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
