# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""How ``nccl-preflight node-check`` runs, as a health check operators can leave on
(docs/slurm.md): what each exit status means, one node-check at a time, and every process it
starts ending with it.

    the state directory and the config, refused before anything runs (exit 2, nothing drained)
    the node's lock (slurm/node_lock.py): a second node-check while one runs exits at once
        (``busy``), with the last verdict (fresh) or 0, having checked nothing and imported
        nothing heavy (this module, the config's, the lock's and the guard's)
    the check itself (slurm/node_check.py, imported then) under the guard (slurm/node_guard.py):
        every process it starts, and what those leave, ends with it, whichever way it ends
    the verdict kept beside the lock with its time, for the next busy one

Exit statuses: HEALTHY 0, FAILED 1 (a finding about the node; drains with --drain), REFUSED 2
(the config or an option), UNFINISHED 3 (node-check could not finish in its own time, or was
stopped: its own slowness drains nothing), as a Prolog or Epilog 0 instead, since Slurm drains a
node whose Prolog or Epilog fails (SLURM_SCRIPT_CONTEXT says which program runs). Stopped by a
signal: 128 + its number, as a shell says it. Standard library only (the node bundle runs it).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from nccl_preflight.core.metrics import textfile_option_problem
from nccl_preflight.slurm.node_guard import Ending, run_guarded
from nccl_preflight.slurm.node_lock import (
    VERDICT_FRESH_S,
    NodeLock,
    StateDirError,
    default_state_dir,
    fresh_verdict,
    prepare_state_dir,
    running_for,
)
from nccl_preflight.slurm.node_options import (
    HEALTHY,
    REFUSED,
    UNFINISHED,
    NodeCheckOptions,
    NodeCheckRefused,
    node_name,
    one_line,
    require_fabric,
    status_of,
    unfinished_status,
)


def busy(lock: NodeLock, node: str, as_json: bool) -> int:
    """Another node-check holds the lock: say so, exit at once with its last verdict (fresh) or
    0, check nothing."""
    state = lock.state()
    pid, since = running_for(state)
    who = f" (pid {pid}, for {since:.1f} s)" if pid is not None and since is not None else ""
    last = fresh_verdict(state)
    status = HEALTHY if last is None else status_of(str(last.get("verdict")))
    if last is None:
        said = f"no verdict from the last {VERDICT_FRESH_S:.0f} s: exit 0"
    else:
        said = f"the last verdict, {last['age']:.0f} s ago: {one_line(last.get('summary'))}"
    line = (
        f"another node-check is running on this node{who}: this one checks nothing and exits "
        f"at once; {said}"
    )
    if as_json:
        doc = {"host": node, "exit": status, "busy": line, "last": last, "results": []}
        print(json.dumps(doc, indent=1, sort_keys=True))
    else:
        print(f"node-check: {one_line(node)}: {line}")
    return status


def _config(options: NodeCheckOptions, node: str) -> dict[str, Any] | None:
    """The node's config (nccl_node_vars applied), or None after saying why it is refused."""
    from nccl_preflight.core.config import ConfigError, load_config, node_values

    try:
        config = node_values(load_config(options.config), node)
        require_fabric(config)
    except ConfigError as exc:
        print(f"node-check: {one_line(exc)}", file=sys.stderr)
        return None
    except NodeCheckRefused as exc:
        print(f"node-check: {options.config}: {one_line(exc)}", file=sys.stderr)
        return None
    return config


def _note(problem: str) -> None:
    if problem:
        print(f"node-check: {one_line(problem)}", file=sys.stderr)


def run_node_check(options: NodeCheckOptions) -> int:
    """The command (module docstring); -> its exit status."""
    start = time.monotonic()
    node = node_name()
    try:
        lock = NodeLock(prepare_state_dir(options.state_dir or default_state_dir()), node)
        config = _config(options, node)
        if config is None:
            return REFUSED
        problem = textfile_option_problem(options.textfile)
        if problem:
            print(f"node-check: {one_line(problem)}", file=sys.stderr)
            return REFUSED
        if not lock.acquire():
            return busy(lock, node, options.json)
    except StateDirError as exc:
        print(f"node-check: {one_line(exc)}", file=sys.stderr)
        return REFUSED
    _note(lock.record_running(os.getpid()))
    from nccl_preflight.slurm.node_check import check_and_report

    def work() -> int:
        verdict = check_and_report(config, options, start, lock.torch_path)
        _note(lock.record_verdict(verdict))
        return int(verdict["exit"])

    def on_unfinished(ending: Ending) -> None:
        summary = f"unfinished: {ending.why()}; nothing drained"
        lock.record_verdict({"exit": UNFINISHED, "verdict": "unfinished", "summary": summary})

    ending = run_guarded(work, on_unfinished)
    if ending.code is not None:
        return ending.code
    print(
        f"node-check: {one_line(node)}: unfinished: {ending.why()}; every process it started "
        "was ended; nothing drained",
        file=sys.stderr,
    )
    if ending.stopped and ending.signal:
        return 128 + ending.signal
    return unfinished_status()
