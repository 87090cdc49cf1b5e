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

from pathlib import Path

import pytest

from tests.lab.harness import Lab
from tests.lab.interrupt import CLEAN_BOUND_S, CONTROLLER_STAYS, WAYS, end_mid_run
from tests.lab.runs import new_run_id


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
    lab2: Lab, tmp_path: Path, way: str
) -> None:
    """Since the warm start the torch probe held on until its listener's deadline (~75 s) and the
    run directory stayed for good after a Ctrl-C while the pre-flight ran."""
    assert_left_nothing(end_mid_run(lab2, new_run_id(), tmp_path, way, "preflight"))


@pytest.mark.lab
@pytest.mark.parametrize("way", ["sigint_group", "sigkill_all", "connection_cut"])
def test_the_ranks_ended_any_way_leave_nothing_on_any_node(
    lab2: Lab, tmp_path: Path, way: str
) -> None:
    """The ranks run (rank 0 paused before barrier: nothing ends by itself before
    nccl_run_timeout, 300 s): torchrun's tree ends at once, not at the watch mark's 30 s."""
    assert_left_nothing(end_mid_run(lab2, new_run_id(), tmp_path, way, "launch"))


@pytest.mark.lab
def test_ctrl_c_during_a_launch_alone_leaves_nothing_on_any_node(lab2: Lab, tmp_path: Path) -> None:
    """--tags launch: no pre-flight, no warm probe; the facts call still starts the warden and
    torchrun starts cold under it."""
    times = end_mid_run(lab2, new_run_id(), tmp_path, "sigint_group", "launch", "--tags", "launch")
    assert_left_nothing(times)
