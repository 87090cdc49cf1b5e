# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The node room: facts and observations, probes, firewall readers, listeners, the supervisor.

Standard library and torch only, and relative imports inside the room only, so that the Ansible
modules (library/) ship it to a node as ``ansible.module_utils.nccl_preflight.node`` and it runs
there on a Python without Ansible. The control machine imports it as ``nccl_preflight.node``.
"""
