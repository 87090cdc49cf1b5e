# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Third-party code shipped inside the package, each with its own licence beside it (SOURCE.md
says what, from where, which version and what was left out).

- ``yaml``: PyYAML's pure-Python package, so that a node with only the standard library and
  torch reads a config as the control machine does (core/yaml_file.py, the one importer).
  Import it as ``from nccl_preflight._vendor import yaml``.
"""
