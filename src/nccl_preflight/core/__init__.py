# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The core room: what plans and judges on the control machine (JUnit, summary, report.html,
plots, verdict, the run's watch, the rank script's zipapp, the checks' shared records).

Plain Python, imported with a normal ``import nccl_preflight.core.<module>`` by the plugins,
bin/nccl-preflight, bench/ and the tests; it imports nothing from Ansible.
"""
