# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""pytest fixtures for the multi-host lab. Import them in conftest.py:

    from tests.lab.fixtures import lab2, lab4, lab_factory  # noqa: F401

Importing builds nothing. Each fixture skips with `lab_unavailable_reason()` when a lab cannot be
built here (not root, no namespaces, no sshd, NCCL_LAB=0), so a non-root run still runs every
unit test.

The labs are shared by the whole session: a test that injects a fault must undo it (call the undo
a fault helper returns, or `lab.reset_faults()`, in a `finally`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.lab.harness import Lab, lab_unavailable_reason
from tests.lab.slurm import slurm_unavailable_reason

# lab4 has heterogeneous fabric interface names, as on a real mixed cluster.
LAB4_FABRIC_IFNAMES = ["enp1s0f0np0", "enp1s0f1np1"]

LabFactory = Callable[..., Lab]


def require_lab() -> None:
    """Skip the calling test (or fixture) when no lab can be built on this machine."""
    reason = lab_unavailable_reason()
    if reason:
        pytest.skip(reason)


def require_slurm() -> None:
    """Skip the calling test when no lab with Slurm can be built here (the lab's reason, or
    Debian's Slurm packages missing)."""
    reason = slurm_unavailable_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def lab_factory() -> Iterator[LabFactory]:
    """lab_factory(n, **Lab kwargs) -> an up Lab; the same arguments give the same lab again.

    Every lab it made is torn down at the end of the session; a test may call lab.down() earlier
    to free it (a later call with the same arguments then builds a fresh one).
    """
    labs: dict[str, Lab] = {}

    def make(n_hosts: int = 2, **kwargs: Any) -> Lab:
        require_lab()
        key = repr((n_hosts, sorted(kwargs.items())))
        lab = labs.get(key)
        if lab is None or not lab.is_up:
            lab = Lab(n_hosts, **kwargs)
            labs[key] = lab
            lab.up()
        return lab

    try:
        yield make
    finally:
        for lab in labs.values():
            lab.down()


@pytest.fixture(scope="session")
def lab2(lab_factory: LabFactory) -> Lab:
    """A 2-host lab; both hosts' fabric interface is `fab0`."""
    return lab_factory(2)


@pytest.fixture(scope="session")
def lab4(lab_factory: LabFactory) -> Lab:
    """A 4-host lab; fabric interfaces alternate enp1s0f0np0 / enp1s0f1np1."""
    return lab_factory(4, fabric_ifnames=LAB4_FABRIC_IFNAMES)
