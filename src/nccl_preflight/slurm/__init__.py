# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The Slurm front-end: node-check (slurm/node_check.py), the node bundle (slurm/bundle.py) and
the commands' parsers (slurm/cli.py). May import the node and core rooms; they never import it."""
