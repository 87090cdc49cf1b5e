# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What more than one test builds, one home each (a test module never imports another test
module): report directories, recorded node answers, the modules' and commands' runs."""

from __future__ import annotations
