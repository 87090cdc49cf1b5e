# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Callback plugin: load the Jinja filter and test plugins once, in ansible-playbook's own process.

Ansible runs every task of every host in a worker forked from ansible-playbook's process, and a
worker's first filter or test (``| int``, ``is failed``) makes it import every filter and test
plugin file it can find: ansible-core's and this project's (plugins/filter). The import is cached
in the plugin loader of the process that did it, so it is redone in each worker: 0.17-0.19 CPU s
per worker measured on the lab's machine, and 0.35-0.39 where Python writes no bytecode
(PYTHONDONTWRITEBYTECODE, a read-only checkout): every worker then compiles the project's filters
again. Done here once, before the first task, the workers inherit the loaded plugins through
fork. BENCHMARKS.md, "Overhead".

It prints nothing and changes no result: a plugin that cannot load is skipped by Ansible as it
would be in a worker, and a worker still loads what it finds missing.
"""

from __future__ import annotations

DOCUMENTATION = """
name: nccl_preload
type: aggregate
short_description: Load the filter and test plugins once before the first task (speed only)
description:
  - "Fills the Jinja plugin loaders' cache in ansible-playbook's process when the playbook starts,
    so that the task workers forked from it do not each import every filter and test plugin."
  - "Enabled by ansible.cfg's O(callback_plugins) path; it needs no O(callbacks_enabled) entry."
"""

from typing import Any

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import filter_loader, test_loader


class CallbackModule(CallbackBase):
    """Preload the Jinja plugins; show nothing."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "nccl_preload"
    CALLBACK_NEEDS_ENABLED = False

    def v2_playbook_on_start(self, playbook: Any) -> None:
        for loader in (filter_loader, test_loader):
            for _plugin in loader.all():
                pass
