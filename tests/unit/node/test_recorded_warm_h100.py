# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The warm start on a real GPU: the held torch probe becoming torchrun with the nccl backend on
one NVIDIA H100 80GB HBM3 (the VM of tests/unit/core/preflight/test_recorded_h100.py: driver
580.159.04, torch 2.11.0+cu130, NCCL 2.28.9), recorded by tests/device/record_warm.sh
(tests/device/warm_gpu.py) on 2026-11-26 (tests/fixtures/README.md, "The warm start on the
H100"). Each test feeds a recording to the project's code and asserts what it makes of it."""

from __future__ import annotations

import json

from nccl_preflight.core.transport import describe, parse_nccl_log
from nccl_preflight.node.parse import parse_python_probe
from nccl_preflight.node.warm_torchrun import WARM_TAIL
from tests.recorded_gpu import FIXTURES, text

WARM = "warm/h100-vm-"


def test_the_held_probe_answered_as_the_plain_probe_does() -> None:
    probe = parse_python_probe(text(WARM + "warm-probe.json"))
    assert (probe["torch_version"], probe["cuda_available"], probe["device_count"]) == (
        "2.11.0+cu130",
        True,
        1,
    )
    assert (probe["nccl_version"], probe["reason"]) == ("2.28.9", "")


def test_the_launchs_nccl_variables_reached_nccl_in_the_rank_of_a_warm_start() -> None:
    """torchrun's process imported torch before the launch's variables were laid over its
    environment; the rank is a fresh process and NCCL there read them."""
    parsed = parse_nccl_log(text(WARM + "warm-nccl.log"), "nccl.1174.log")
    assert parsed["env"] == {"NCCL_SOCKET_IFNAME": "eth0"}
    assert parsed["bootstrap_interface"] == "eth0" and parsed["net"] == "Socket"
    assert parsed["pids"] == [1174] and parsed["nccl_version"] == "2.28.9+cuda13.0"
    assert describe(parsed).startswith("network Socket chosen")


def test_the_warm_rank_ended_as_the_cold_recording_did() -> None:
    warm = json.loads(text(WARM + "warm-rank-0.json"))
    cold = json.loads(text("rank_json/h100-nccl-one-rank/rank-0.json"))
    assert (warm["backend"], warm["device"], warm["world_size"]) == ("nccl", "cuda:0", 1)
    outcome = [(t["name"], t["status"]) for t in warm["tests"]]
    assert outcome == [(t["name"], t["status"]) for t in cold["tests"]]
    assert sum(status == "passed" for _, status in outcome) == 15


def test_the_supervisor_said_warm() -> None:
    launch = json.loads(text(WARM + "warm-launch.json"))
    assert (launch["warm_start"], launch["rc"], launch["timed_out"]) == (True, 0, False)
    assert launch["cmd"][1:3] == ["-m", "torch.distributed.run"]  # what a cold start would run


def test_the_old_warm_tail_ran_torchrun_twice_and_said_so() -> None:
    """The recorded torchrun.log of the runpy tail; the tail now calls torchrun's main()."""
    assert "found in sys.modules" in text(WARM + "warm-torchrun.log")
    assert "runpy" not in WARM_TAIL and "torch.distributed.run.main()" in WARM_TAIL


def test_every_recording_here_is_listed_in_the_fixture_readme() -> None:
    readme = text("README.md")
    for path in sorted((FIXTURES / "warm").iterdir()):
        assert f"`{path.name}`" in readme, path.name
