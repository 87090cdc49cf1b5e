# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Who runs this validation, for the run lock on the master (src/nccl_preflight/node/run_lock.py):
a second run of the same master and port is refused naming this run, its start, the control
machine and the user; and how many hosts it runs a task on at once (``forks``), for the
pre-flight's collect (roles/preflight/tasks/main.yml). Runs on the control machine, where the
filter is evaluated."""

from __future__ import annotations

import getpass
import os
import re
import socket
import time
from typing import Any

from ansible import context
from ansible.constants import config

# validate_inputs makes run ids as YYYYmmddTHHMMSS-<6 hex>, in UTC.
_GENERATED = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})-[0-9a-f]+$")


def started_at(run_id: str, now: float | None = None) -> str:
    """The run's start in ISO 8601 UTC: from a generated run id, else ``now``."""
    match = _GENERATED.match(run_id or "")
    if match:
        y, mo, d, h, mi, s = match.groups()
        return f"{y}-{mo}-{d}T{h}:{mi}:{s}Z"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return f"uid {os.getuid()}"


def nccl_run_owner(run_id: str) -> dict[str, Any]:
    """{run_id, started_at, control_host, control_user} of this run."""
    return {
        "run_id": str(run_id),
        "started_at": started_at(str(run_id)),
        "control_host": socket.gethostname(),
        "control_user": _user(),
    }


def run_forks(cli_args: Any = None) -> int:
    """This ansible-playbook run's forks: ``-f``/``--forks``, else ansible.cfg's or
    ANSIBLE_FORKS (what the command line's default holds), else the configured default."""
    forks = (context.CLIARGS if cli_args is None else cli_args).get("forks")
    return int(forks or config.get_config_value("DEFAULT_FORKS"))


def nccl_fits_forks(host_count: Any, cli_args: Any = None) -> bool:
    """Whether ``host_count`` hosts run one task all at once in this run: no more than its
    forks. With more, Ansible's linear strategy runs the task on ``forks`` hosts at a time and
    starts a host only when an earlier one finished it."""
    return int(host_count) <= run_forks(cli_args)


class FilterModule:
    """The run's owner, for the run lock; whether a task runs on every host at once."""

    def filters(self) -> dict[str, Any]:
        return {"nccl_run_owner": nccl_run_owner, "nccl_fits_forks": nccl_fits_forks}
