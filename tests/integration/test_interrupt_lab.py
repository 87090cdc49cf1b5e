# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A validation whose control machine goes away leaves nothing on any node: the lab, real
ansible-playbook over SSH, ended in every way a control machine goes (tests/lab/interrupt.py).

Each node's warden (src/nccl_preflight/node/run_warden.py), held by the control machine's tether
(src/nccl_preflight/core/tether.py), ends the run there by itself: the warm torch probe, the
pre-flight's listeners, the run lock's keeper, torchrun's tree, the run directory and BOOT's
directories. Asserted with a generous bound (CLEAN_BOUND_S: the requirement is 10 s, a loaded
machine must not fail it); the time each took is printed (bench/interrupt.py records them in
BENCHMARKS.md).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.lab.fixtures import LabFactory
from tests.lab.harness import Lab
from tests.lab.interrupt import CLEAN_BOUND_S, CONTROLLER_STAYS, WAYS, end_mid_run
from tests.lab.module_signal import end_module_call
from tests.lab.runs import new_run_id


@pytest.fixture(scope="module")
def lab2_own_tmp(lab_factory: LabFactory, tmp_path_factory: pytest.TempPathFactory) -> Lab:
    """A 2-host lab whose hosts' SSH sessions have a TMPDIR of their own (a node's /tmp, not the
    /tmp every engineer's run on this machine shares): AnsiballZ unpacks each module call and
    BOOT each program there, so what is left there is this lab's runs' (tests/lab/interrupt.py
    remains)."""
    base = tmp_path_factory.mktemp("node-tmp")
    host_env = {}
    for rank in range(2):
        (base / f"host{rank}").mkdir()
        host_env[rank] = {"TMPDIR": str(base / f"host{rank}")}
    return lab_factory(2, host_env=host_env)


def assert_left_nothing(times: dict) -> None:
    print(
        f"{times['way']} during the {times['phase']}: ansible-playbook ended "
        f"{times['control_end_s']} s after it, the nodes were clean {times['node_clean_s']} s "
        f"after it, everything {times['clean_s']} s after ansible-playbook ended"
    )
    assert times["remains"] == [], times["output"]
    assert times["clean_s"] is not None and times["clean_s"] <= CLEAN_BOUND_S, times
    if times["way"] in CONTROLLER_STAYS:
        # ansible-playbook goes on (its node is cut off): the node must not wait for its end.
        assert times["node_clean_s"] is not None and times["node_clean_s"] <= CLEAN_BOUND_S


@pytest.mark.lab
@pytest.mark.parametrize("way", WAYS)
def test_the_pre_flight_ended_any_way_leaves_nothing_on_any_node(
    lab2_own_tmp: Lab, tmp_path: Path, way: str
) -> None:
    """Since the warm start the torch probe held on until its listener's deadline (~75 s) and the
    run directory stayed for good after a Ctrl-C while the pre-flight ran."""
    assert_left_nothing(end_mid_run(lab2_own_tmp, new_run_id(), tmp_path, way, "preflight"))


@pytest.mark.lab
@pytest.mark.parametrize("way", ["sigint_group", "sigkill_all", "connection_cut"])
def test_the_ranks_ended_any_way_leave_nothing_on_any_node(
    lab2_own_tmp: Lab, tmp_path: Path, way: str
) -> None:
    """The ranks run (rank 0 paused before barrier: nothing ends by itself before
    nccl_run_timeout, 300 s): torchrun's tree ends at once, not at the watch mark's 30 s."""
    assert_left_nothing(end_mid_run(lab2_own_tmp, new_run_id(), tmp_path, way, "launch"))


@pytest.mark.lab
def test_ctrl_c_during_a_launch_alone_leaves_nothing_on_any_node(
    lab2_own_tmp: Lab, tmp_path: Path
) -> None:
    """--tags launch: no pre-flight, no warm probe; the facts call still starts the warden and
    torchrun starts cold under it."""
    times = end_mid_run(
        lab2_own_tmp, new_run_id(), tmp_path, "sigint_group", "launch", "--tags", "launch"
    )
    assert_left_nothing(times)


@pytest.mark.lab
@pytest.mark.parametrize(
    ("state", "way"),
    [
        ("stopped", signal.SIGTERM),  # a node shutting down, logind ending the session
        ("stopped", signal.SIGHUP),  # a tty's hangup (modules on a tty: no pipelining)
        ("finished", signal.SIGKILL),  # the OOM killer, a stop timeout's end
    ],
    ids=["sigterm", "sighup", "sigkill"],
)
def test_a_module_call_the_node_ends_by_a_signal_leaves_no_payload_directory(
    lab2_own_tmp: Lab, tmp_path: Path, state: str, way: signal.Signals
) -> None:
    """AnsiballZ's payload directory ($TMPDIR/ansible_nccl_torchrun_payload_*) stayed on the
    node for good whenever a module process of ours died by a signal (30 of them in this
    machine's /tmp, from labs torn down mid-launch); each module now removes it first thing
    (src/nccl_preflight/node/payload.py)."""
    ended = end_module_call(lab2_own_tmp, tmp_path, state, way)
    print(
        f"{way.name} to nccl_torchrun state={state}: payload while it ran {ended['payload_during']}"
    )
    assert ended["left"] == [], ended["output"][-3000:]
