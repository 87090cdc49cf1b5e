# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A look at a launched run on its node, and the run's end: what library/nccl_torchrun.py does
with ``state=finished`` (without ``stop_reason`` or ``diagnose``), as plain functions of its
options.

The watch on the control machine looks at every node every few seconds while the ranks run. A
module call per look costs a module start on the node (about 0.3 CPU s: Ansible's payload and
its imports) that the ranks, sharing the node's cores, pay for; so the launch's start writes this
room into the run directory as one zipapp (``look.pyz``, :func:`zipapp_files`) and the watch
runs ``python -I -S <run dir>/look.pyz '<options as JSON>'``, which prints the same result the
module returns (:func:`main`). The module itself calls the same functions, so both say the same.
Standard library only.
"""

from __future__ import annotations

import ast
import base64
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from .run_collect import pack_results
from .run_progress import read_progress, touch_watch
from .supervisor import (
    FINISH_MARGIN_S,
    RESULTS_DIR,
    STILL_RUNNING,
    WATCH_FILE,
    running_look,
    stop_run,
    wait_supervisor,
)

# The zipapp of this room in the run directory (written by the start, run by the watch's looks).
LOOK_ZIPAPP = "look.pyz"
# Its __main__: run main() below with the arguments after the zipapp's name.
LOOK_MAIN = (
    '"""A look at a launched run (nccl_preflight.node.run_look, shipped by nccl-preflight)."""\n'
    "import sys\n\n"
    "from nccl_preflight.node.run_look import main\n\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


class RefusedRemoval(ValueError):
    """remove_run_dir named a directory that is no private run directory."""


def look_at_run(
    run_dir: Path, watch_s: float, watch_stale_s: float, watch_ifname: str | None
) -> dict[str, Any] | str | None:
    """Wait (with ``watch_s``, only that long) for the run.

    -> the look's result when the run is still alive after ``watch_s``, else why the run must be
    ended now (None: it ended by itself)."""
    until = time.time() + watch_s if watch_s > 0 else None
    if until is not None:
        touch_watch(run_dir / WATCH_FILE, watch_stale_s)
    reason = wait_supervisor(run_dir, FINISH_MARGIN_S, until=until)
    if reason != STILL_RUNNING:
        return reason
    touch_watch(run_dir / WATCH_FILE, watch_stale_s)
    return running_look(run_dir, watch_ifname)


def finish(
    run_dir: Path,
    result: dict[str, Any],
    collect: bool,
    collect_log_max_bytes: int,
    remove_run_dir: bool,
) -> dict[str, Any]:
    """The end of a finished or stopped call: pack the results, then remove the run directory.
    RefusedRemoval for ``/`` or the home directory."""
    if collect and run_dir.is_dir():
        archive, names, truncated = pack_results(run_dir, collect_log_max_bytes)
        result["collected_archive"] = base64.b64encode(archive).decode("ascii")
        result["collected"] = names
        result["truncated"] = truncated
    result["run_dir_removed"] = False
    if remove_run_dir and run_dir.is_dir():
        if run_dir.resolve() in (Path("/"), Path.home().resolve()):
            raise RefusedRemoval(f"refusing to remove {run_dir}: not a private run directory")
        shutil.rmtree(run_dir)
        result["run_dir_removed"] = True
        result["changed"] = True
    return result


def lost_look(run_dir: Path) -> dict[str, Any]:
    """The answer of a call that found the run directory gone: the run was ended on this node
    by something else than this call (its warden, or its supervisor when no look came), and
    nothing of it (results, logs, launch.json) is left to bring back. Never a quiet success:
    ``lost`` says so, and the watch reports the host's ranks as lost (core/run_watch.py
    lost_record)."""
    return {
        "changed": False,
        "running": False,
        "progress": [],
        "run_dir_removed": False,
        "lost": f"the run directory {run_dir} is gone: the run was ended on this node without "
        "its results",
    }


def finished(params: dict[str, Any]) -> dict[str, Any]:
    """state=finished with ``params`` (the module's options; ``stop_reason`` ends the run at
    once): a look while the run is alive, else its end with the results (lost_look when the
    run directory is gone)."""
    run_dir = Path(os.path.expanduser(str(params["run_dir"])))
    if not run_dir.is_dir():
        return lost_look(run_dir)
    reason = params.get("stop_reason") or None
    if reason is None:
        stale = params.get("watch_stale_s")
        looked = look_at_run(
            run_dir,
            float(params.get("watch_s") or 0),
            30.0 if stale is None else float(stale),
            params.get("watch_ifname") or None,
        )
        if isinstance(looked, dict):
            return looked
        if not run_dir.is_dir():  # removed while this call waited: nothing left to collect
            return lost_look(run_dir)
        reason = looked
    result = stop_run(
        run_dir,
        int(params.get("kill_grace", 5)),
        int(params.get("timeout", 300)),
        int(params.get("rank_offset") or 0),
        reason,
        params.get("stop_details"),
    )
    result["running"] = False
    result["progress"] = read_progress(run_dir / RESULTS_DIR)
    return finish(
        run_dir,
        result,
        bool(params.get("collect") or params.get("collect_to")),
        int(params.get("collect_log_max_bytes") or 4 * 1024 * 1024),
        bool(params.get("remove_run_dir")),
    )


def zipapp_files() -> dict[str, bytes]:
    """{name in the zip: bytes} of look.pyz: this file and the files of this room it imports
    (relative imports, followed to the end), their package, and the __main__."""
    node = Path(__file__).resolve().parent
    files: dict[str, bytes] = {}
    pending = ["__init__", Path(__file__).stem]
    while pending:
        name = pending.pop()
        key = f"nccl_preflight/node/{name}.py"
        if key in files:
            continue
        files[key] = (node / f"{name}.py").read_bytes()
        for found in ast.walk(ast.parse(files[key])):
            if isinstance(found, ast.ImportFrom) and found.level == 1 and found.module:
                pending.append(found.module.split(".")[0])
    files["nccl_preflight/__init__.py"] = b""
    files["__main__.py"] = LOOK_MAIN.encode("utf-8")
    return files


def main(argv: list[str]) -> int:
    """``look.pyz '<options as JSON>'``: print the result as the module would return it."""
    try:
        [options] = argv
        result = finished(json.loads(options))
    except RefusedRemoval as exc:
        result = {"failed": True, "msg": str(exc)}
    except (ValueError, KeyError, TypeError) as exc:
        print(f"look.pyz: bad options: {exc}", file=sys.stderr)
        return 2
    json.dump(result, sys.stdout)
    return 0
