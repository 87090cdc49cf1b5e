# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The multi-host lab: network namespaces + sshd on one machine (see harness.py)."""
