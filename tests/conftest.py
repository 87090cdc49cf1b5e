# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Shared pytest set-up: our Ansible code importable, and the multi-host lab fixtures."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import ansible.module_utils
import pytest

ROOT = Path(__file__).resolve().parent.parent

# The modules in library/ import the node room as ansible.module_utils.nccl_preflight.node.<name>,
# the name Ansible ships it under (ansible.cfg: module_utils = src); pytest imports those modules
# as files, so only this makes that name resolve (the one loader step left, tests only). The
# plugins, bench/ and the tests import nccl_preflight.core / .node normally (the venv installs it);
# a test of a library/ module imports the node modules that module calls by the module's name for
# them, so that a patch reaches the very module object the module uses.
ansible.module_utils.__path__.append(str(ROOT / "src"))
# Every Python a test starts (ansible-playbook and its plugins, bin/nccl-preflight) imports this
# checkout's package, not another checkout's that a shared venv may have installed editable.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT / "src"), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
)
# Ansible loads modules and plugins by their file path; the tests import them by file name.
for extra in (ROOT / "library", ROOT / "plugins" / "inventory", ROOT / "plugins" / "filter"):
    sys.path.insert(0, str(extra))

# The multi-host lab: session-scoped fixtures that skip, with the reason, where no lab can be built.
from tests.lab.fixtures import lab2, lab4, lab_factory  # noqa: F401

# The signals a test may take over in this process (the supervisor, the tether, the allocation and
# node-check's guard ignore or catch them while they work). What a process ignores or blocks, the
# processes it starts inherit across exec: a later test's child would outlive its SIGTERM.
KEPT_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGCHLD)


@pytest.fixture(autouse=True)
def _signals_as_they_were() -> Iterator[None]:
    """Every test leaves this process's signal dispositions and mask as it found them."""
    handlers = {sig: signal.getsignal(sig) for sig in KEPT_SIGNALS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    for sig, handler in handlers.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)
