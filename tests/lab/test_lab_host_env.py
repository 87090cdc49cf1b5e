# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Lab(host_env=...): each host's SSH sessions get their own environment (sshd's SetEnv)."""

from __future__ import annotations

import pytest

from tests.lab.fixtures import require_lab
from tests.lab.harness import SBIN_PATH, Lab

pytestmark = pytest.mark.lab


def test_host_env_reaches_ssh_sessions_of_that_host_only() -> None:
    require_lab()
    env = {
        0: {"PATH": f"/opt/lab-bin:{SBIN_PATH}", "LAB_ROLE": "first"},
        "node02": {"LAB_ROLE": "two words"},
    }
    with Lab(2, host_env=env) as lab:
        first = lab.ssh(0, 'printf "%s|%s" "$PATH" "$LAB_ROLE"').stdout
        second = lab.ssh(1, 'printf "%s|%s" "$PATH" "$LAB_ROLE"').stdout
    path, role = first.split("|")
    # The login user's shell start-up files may put their own directories in front.
    assert path.endswith(f"/opt/lab-bin:{SBIN_PATH}") and role == "first"
    path, role = second.split("|")
    assert role == "two words"
    assert not path.startswith("/opt/lab-bin")


def test_host_env_refuses_what_sshd_cannot_carry() -> None:
    with pytest.raises(ValueError, match="cannot go into sshd's SetEnv"):
        Lab(2, host_env={0: {"BAD NAME": "x"}})
    with pytest.raises(ValueError, match="cannot go into sshd's SetEnv"):
        Lab(2, host_env={0: {"X": 'quote"inside'}})
