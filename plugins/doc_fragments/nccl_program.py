# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The options of a module whose action plugin runs it on the node as a small program instead
(nccl_facts, nccl_preflight_start, nccl_preflight_observe): one text for the three."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  program_python:
    description:
      - The node's Python that runs this call as a program - the inventory's
        C(ansible_python_interpreter), or the C(module_python) M(nccl_facts) returns. Given, this
        call runs as a small program of the standard library, sent on the call's standard input
        and started with this Python, instead of as a module - the same options, checks and
        result, without Ansible's module start on the node (about 0.3 CPU seconds a call) and
        without building a module payload on the control machine. It unpacks into a private
        temporary directory that it removes. When that program cannot run, the module runs
        instead.
      - Empty, or an interpreter-discovery setting (C(auto), C(auto_silent), C(auto_legacy),
        C(auto_legacy_silent)) - the module runs (with Ansible's interpreter discovery, when
        it is on).
    type: str
    default: ""
  run_id:
    description: The run's identifier, in the name of O(program_python)'s temporary directory
      (C(nccl-preflight-<run_id>-*)).
    type: str
    default: ""
"""
