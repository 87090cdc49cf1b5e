# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Callback plugin: release every node's warden when the playbook ran to its end.

The facts call's action plugin (plugins/action/nccl_facts.py) starts a tether per node
(src/nccl_preflight/core/tether.py), whose warden ends the run on the node when ansible-playbook
goes away. A playbook that ran to its end (its recap is due, whatever its verdict) has nothing
left to end there, and may keep a run directory on purpose (``launch_keep_run_dir``): here,
in ansible-playbook's own process, every tether named by a task's result is told to release
its warden, and ansible-playbook ends only once they are gone, so no process of the run is left
when it exits. An interrupted or killed ansible-playbook never gets here: its tethers see it go
and their wardens end the run.

It prints nothing and changes no result.
"""

from __future__ import annotations

DOCUMENTATION = """
name: nccl_tether
type: aggregate
short_description: Release the nodes' wardens when the playbook ran to its end
description:
  - "Keeps the tether of each node's warden that a task result names (nccl_facts' tether), and
    when the playbook ends by itself tells them to release their wardens and waits for them."
  - "Enabled by ansible.cfg's O(callback_plugins) path; it needs no O(callbacks_enabled) entry."
"""

from typing import Any

from ansible.plugins.callback import CallbackBase

from nccl_preflight.core.tether import release


class CallbackModule(CallbackBase):
    """Collect the tethers; release them at the recap."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "nccl_tether"
    CALLBACK_NEEDS_ENABLED = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tethers: dict[str, int] = {}

    def _keep(self, result: Any) -> None:
        tether = (getattr(result, "_result", None) or {}).get("tether")
        if isinstance(tether, dict) and isinstance(tether.get("pid"), int):
            self.tethers[result._host.get_name()] = tether["pid"]

    def v2_runner_on_ok(self, result: Any) -> None:
        self._keep(result)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._keep(result)

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._keep(result)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        release(sorted(set(self.tethers.values())))
        self.tethers.clear()
