# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Action plugin for library/nccl_torchrun.py: unpack the results the node sent back.

With ``collect_to``, the module (state=finished or state=stopped) packs the run's results into a
gzip tar archive in its result; this plugin, on the control machine, takes the archive out of the
result (so it is never shown or kept in a registered variable) and writes its files into
``collect_to``. The files come back in the same SSH round trip that waited for the run: no fetch
per file, no stat, no second session.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import io
import os
import re
import tarfile
from pathlib import Path
from typing import Any

from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

# Exactly the files docs/design.md lists under reports/<run-id>/<host>/: flat, nothing else.
COLLECTED_NAME = re.compile(
    r"^(rank-\d+\.(json|log)|torchrun\.log|launch\.json|nccl-(rank|pid)-\d+\.log)$"
)


def unpack_results(archive: bytes, dest: Path) -> list[str]:
    """Write the archive's files into dest; refuse anything but the flat, known result files.

    Every member must be a regular file named rank-<R>.json, rank-<R>.log, torchrun.log,
    launch.json or nccl-rank-<R>.log / nccl-pid-<P>.log (the ranks' NCCL logs) (no directory
    part, no link, no device), so nothing can be written outside dest.
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
            tmp = dest / f".{member.name}.tmp"
            # Never through a link someone left at the temporary name: a new file or nothing.
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            with os.fdopen(os.open(tmp, flags, 0o644), "wb") as out:
                out.write(stream.read())
            os.replace(tmp, target)  # replaces a link at target itself, never its target
            written.append(str(target))
    return written


class ActionModule(ActionBase):
    """Run nccl_torchrun on the node; unpack its collected archive on the control machine."""

    TRANSFERS_FILES = False
    _supports_check_mode = False
    _supports_async = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp
        module_args = dict(self._task.args)
        collect_to = module_args.pop("collect_to", None)
        if collect_to:
            module_args["collect"] = True
        try:
            module_result = self._execute_module(
                module_name=self._task.action, module_args=module_args, task_vars=task_vars
            )
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        archive = module_result.pop("collected_archive", None)
        result.update(module_result)
        if not collect_to or archive is None or result.get("failed"):
            return result
        dest = Path(os.path.expanduser(to_text(collect_to)))
        try:
            data = base64.b64decode(archive, validate=True)
            result["collected_files"] = unpack_results(data, dest)
        except (ValueError, binascii.Error, tarfile.TarError, OSError) as exc:
            result.update(
                failed=True,
                msg=f"cannot unpack the results from the node into {dest}: {exc}",
                collected_to=str(dest),
            )
            return result
        result["collected_to"] = str(dest)
        return result
