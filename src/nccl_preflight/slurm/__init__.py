# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The Slurm front-end: `nccl-preflight slurm` (a run on an allocation: run.py), node-check
(node_check.py), the node bundle (bundle.py) and the commands' parsers (cli.py).

It may import the node and core rooms; neither imports it. The modules that run on the nodes
(stdin BOOT, node_step, node_check) are standard library only, so the bundle runs on a node's bare
Python.
"""
