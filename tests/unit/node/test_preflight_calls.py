# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/node/preflight_calls.py: the pre-flight riding on the facts and probe calls.

The start as the facts call makes it (listener address "fabric" and the lock path's
{fabric_address} from the host's own fabric choice), the collect as the probe call makes it (a
bounded wait for every expected probe, then the stop; the run directory removed), with real
detached listener processes on loopback.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from ansible.module_utils.nccl_preflight.node.preflight_calls import (
    FABRIC,
    FABRIC_FIELD,
    for_fabric,
    node_backend,
    start,
    stop,
)
from ansible.module_utils.nccl_preflight.node.tcp_connect import tcp_connect

from tests.playbook_run import ROOT, ansible_playbook

FACTS = {
    "interfaces": {
        "lo": {"ipv4": [{"address": "127.0.0.1"}], "ipv6": []},
        "fab0": {"ipv4": [{"address": "10.9.0.5"}], "ipv6": []},
    },
    "route": {"interface": "fab0", "source": "10.9.0.5", "destination": "10.9.0.1"},
}


def start_params(path: Path, listeners: list[dict], **extra: object) -> dict:
    return {
        "path": str(path / "preflight"),
        "run_dir": str(path),
        "run_dir_mode": "0700",
        "python": None,
        "python_timeout": 5.0,
        "listeners": listeners,
        "check_port": None,
        "lock": None,
        "timeout": 30.0,
        "stop_timeout": 5.0,
        **extra,
    }


def stop_params(path: Path, wait: float, remove: bool = False, leave: bool = False) -> dict:
    return {
        "path": str(path / "preflight"),
        "wait": wait,
        "leave_unfinished": leave,
        "stop_timeout": 5.0,
        "remove_run_dir": str(path) if remove else None,
    }


def test_fabric_listeners_and_the_lock_path_take_the_hosts_own_fabric_address() -> None:
    p = {
        "listeners": [
            {"name": "master", "address": FABRIC, "port": 29500, "connections": 2},
            {"name": "ring", "address": FABRIC, "port": 0, "connections": 1},
        ],
        "lock": {"path": f"/tmp/nccl-preflight-lock-{FABRIC_FIELD}-29500.json"},
        "fabric": {"socket_ifname": "", "cidr": "10.9.0.0/24"},
    }
    done = for_fabric(p, FACTS)
    assert [s["address"] for s in done["listeners"]] == ["10.9.0.5", "10.9.0.5"]
    assert done["lock"]["path"] == "/tmp/nccl-preflight-lock-10.9.0.5-29500.json"
    assert done["fabric_address"] == "10.9.0.5"
    # An IPv6 address is made safe for a file name, as preflight_lock_path's regex_replace does.
    v6 = {**FACTS, "interfaces": {"fab0": {"ipv4": [], "ipv6": [{"address": "fd00::5"}]}}}
    done = for_fabric({**p, "fabric": {"socket_ifname": "fab0", "cidr": ""}}, v6)
    assert done["lock"]["path"] == "/tmp/nccl-preflight-lock-fd00__5-29500.json"


def test_without_a_fabric_address_no_fabric_listener_and_no_lock() -> None:
    p = {
        "listeners": [
            {"name": "ring", "address": FABRIC, "port": 0, "connections": 1},
            {"name": "other", "address": "127.0.0.1", "port": 0, "connections": 1},
        ],
        "lock": {"path": f"/tmp/lock-{FABRIC_FIELD}.json"},
        "fabric": {"socket_ifname": "", "cidr": "10.250.0.0/24"},  # nothing in it
    }
    done = for_fabric(p, FACTS)
    assert [s["name"] for s in done["listeners"]] == ["other"]
    assert done["lock"] is None and done["fabric_address"] == ""


def test_the_hccl_listener_is_held_where_the_node_would_use_hccl() -> None:
    """nccl_backend hccl: on every node; auto: where the node's own facts find Ascend NPUs and
    no NVIDIA GPU (nccl_backend_choice's order); other backends: nowhere."""
    hccl = {"name": "hccl", "address": FABRIC, "port": 60000, "connections": 1, "backend": "hccl"}
    ring = {"name": "ring", "address": FABRIC, "port": 0, "connections": 1, "backend": ""}
    p = {"listeners": [ring, hccl], "lock": None, "fabric": {"cidr": "10.9.0.0/24"}}
    npu = {**FACTS, "accelerators": {"npus": [{"npu": 0, "chip": 0}]}}
    gpu_npu = {**npu, "gpus": [{"name": "H100"}]}

    def names(requested: str, facts: dict) -> list[str]:
        done = for_fabric({**p, "backend": requested}, facts)
        assert all("backend" not in s for s in done["listeners"])
        return [s["name"] for s in done["listeners"]]

    assert names("hccl", FACTS) == ["ring", "hccl"]
    assert names("auto", npu) == ["ring", "hccl"]
    assert names("auto", FACTS) == ["ring"]
    assert names("auto", gpu_npu) == ["ring"]
    assert names("nccl", npu) == ["ring"]
    assert [node_backend(f, "auto") for f in (FACTS, npu, gpu_npu)] == ["", "hccl", "nccl"]


def test_node_backend_agrees_with_the_controllers_auto_choice_on_nccl_and_hccl() -> None:
    from nccl_preflight.core.preflight.backend_checks import nccl_backend_choice

    for facts in (
        FACTS,
        {**FACTS, "accelerators": {"npus": [{"npu": 0, "chip": 0, "name": "910B2"}]}},
        {**FACTS, "gpus": [{"name": "H100"}], "accelerators": {"npus": [{"npu": 0}]}},
        {**FACTS, "accelerators": {"xpus": [{"name": "Max 1550"}]}},
    ):
        chosen = nccl_backend_choice(facts, "auto")["backend"]
        assert node_backend(facts, "auto") == (chosen if chosen in ("nccl", "hccl") else "")


def test_collect_waits_for_the_last_probe_then_removes_the_run_directory(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    ring = [{"name": "ring", "address": "127.0.0.1", "port": 0, "connections": 2}]
    started = start(start_params(run_dir, ring), check_mode=False)
    assert started["changed"] and not started.get("failed"), started
    port = started["ports"]["ring"]["port"]
    assert tcp_connect("127.0.0.1", port, "", 2.0, 0.0)["ok"]
    # The second peer probes while the collect already waits (hosts probe at once).
    late = threading.Timer(0.5, tcp_connect, ("127.0.0.1", port, "", 2.0, 0.0))
    late.start()
    began = time.monotonic()
    collected = stop(stop_params(run_dir, wait=10, remove=True), check_mode=False)
    late.join()
    assert time.monotonic() - began < 5  # ended as soon as the last probe came, not at 10 s
    assert collected["waited"] == {"seconds": 10, "ended_alone": True}
    assert (collected["ended"], collected["timed_out"]) == ("complete", False)
    assert collected["listeners"][0]["accepted"] == ["127.0.0.1", "127.0.0.1"]
    assert collected["run_dir_removed"] is True and not run_dir.exists()


def test_collect_stops_listeners_still_waiting_after_the_bound_and_says_so(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    ring = [{"name": "ring", "address": "127.0.0.1", "port": 0, "connections": 2}]
    started = start(start_params(run_dir, ring), check_mode=False)
    port = started["ports"]["ring"]["port"]
    assert tcp_connect("127.0.0.1", port, "", 2.0, 0.0)["ok"]
    began = time.monotonic()
    collected = stop(stop_params(run_dir, wait=0.5), check_mode=False)
    assert 0.4 <= time.monotonic() - began < 5
    assert collected["waited"] == {"seconds": 0.5, "ended_alone": False}
    assert (collected["ended"], collected["timed_out"]) == ("stop file", True)
    assert collected["listeners"][0]["accepted"] == ["127.0.0.1"]
    refused = tcp_connect("127.0.0.1", port, "", 2.0, 0.0)
    assert refused["error_kind"] == "refused"  # a peer coming later finds nothing


@pytest.mark.parametrize("wait", [0.0, 0.3])
def test_a_collect_leaves_listeners_waiting_for_a_later_batch_running_until_the_last_stop(
    tmp_path: Path, wait: float
) -> None:
    """More hosts than forks: a peer probes only after this host's probe call ended. The call
    leaves the waiting listeners (and the run directory) to the stop after every host's probes."""
    run_dir = tmp_path / "run"
    ring = [{"name": "ring", "address": "127.0.0.1", "port": 0, "connections": 2}]
    started = start(start_params(run_dir, ring), check_mode=False)
    port = started["ports"]["ring"]["port"]
    assert tcp_connect("127.0.0.1", port, "", 2.0, 0.0)["ok"]
    left = stop(stop_params(run_dir, wait=wait, remove=True, leave=True), check_mode=False)
    assert left["pending"] is True and not left["changed"], left
    assert left["waited"] == {"seconds": wait, "ended_alone": False}
    assert isinstance(left["clock"], float) and "listeners" not in left
    assert run_dir.is_dir()
    # The peer of the later batch probes after that call ended: the listener is still there.
    assert tcp_connect("127.0.0.1", port, "", 2.0, 0.0)["ok"]
    collected = stop(stop_params(run_dir, wait=0, remove=True), check_mode=False)
    assert (collected["ended"], collected["timed_out"]) == ("complete", False), collected
    assert collected["listeners"][0]["accepted"] == ["127.0.0.1", "127.0.0.1"]
    assert collected["run_dir_removed"] is True and not run_dir.exists()


@pytest.mark.parametrize("check_mode", [True, False])
def test_a_collect_of_listeners_never_started_is_recorded_not_raised(
    tmp_path: Path, check_mode: bool
) -> None:
    collected = stop(stop_params(tmp_path / "never", wait=1), check_mode=check_mode)
    assert isinstance(collected["clock"], float)
    if check_mode:
        assert collected["msg"] == "check mode" and not collected.get("failed")
    else:
        assert collected["failed"] and "the listeners were not started" in collected["msg"]


def test_a_probe_refused_by_listeners_that_reached_their_bound_says_so() -> None:
    from nccl_preflight.core.preflight.host_checks import _probe_check

    probe = {
        "name": "ring",
        "host": "b",
        "address": "10.9.0.6",
        "port": 40000,
        "ok": False,
        "error": "refused",
        "error_kind": "refused",
        "source": "10.9.0.5",
    }
    stopped = {"listeners": {"ended": "timeout", "timed_out": True}}
    observations = {"a": {"probes": [probe]}, "b": stopped}
    result = _probe_check("tcp_ring", observations, "a", "ring", "the ring neighbour")
    assert result["status"] == "failed"
    assert "the listeners on b had already ended at their bound" in result["message"]
    assert "preflight_listen_timeout" in result["message"]
    # Listeners stopped after every host's probes (the stop file): the refusal is the path's,
    # whatever the probe call waited; no advice to tune a wait.
    for waited in ({"seconds": 8.0, "ended_alone": False}, {"seconds": 8.0, "ended_alone": True}):
        observations["b"] = {"listeners": {"ended": "stop file", "waited": waited}}
        result = _probe_check("tcp_ring", observations, "a", "ring", "the ring neighbour")
        assert result["status"] == "failed"
        assert "ended at their bound" not in result["message"]
        assert "preflight_collect_wait" not in result["message"]


def test_the_probe_call_waits_only_when_every_host_probes_at_once() -> None:
    """nccl_fits_forks: no more hosts than -f (else the configured forks) run a task at once."""
    from nccl_run_owner import nccl_fits_forks, run_forks

    assert nccl_fits_forks(3, {"forks": 3}) and nccl_fits_forks("1", {"forks": 3})
    assert not nccl_fits_forks(3, {"forks": 1})
    assert not nccl_fits_forks(1000, {"forks": 50})
    # No -f on the command line's arguments: the configured forks (ansible.cfg's 50 here).
    assert run_forks({}) == 50


def test_the_forks_of_the_command_line_reach_the_filter() -> None:
    """-f and ANSIBLE_FORKS, as ansible-playbook runs the pre-flight's probe task."""
    play = ROOT / "playbooks" / f".test-forks-{os.getpid()}.yml"
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        '    - ansible.builtin.debug:\n        msg: "fits={{ 3 | nccl_fits_forks }}"\n'
    )
    try:
        runs = {
            "-f 1": ansible_playbook(str(play), "-f", "1"),
            "-f 3": ansible_playbook(str(play), "-f", "3"),
            "ANSIBLE_FORKS=2": ansible_playbook(str(play), env={"ANSIBLE_FORKS": "2"}),
            "ansible.cfg": ansible_playbook(str(play)),
        }
    finally:
        play.unlink()
    fits = {how: ("fits=True" in r.stdout, "fits=False" in r.stdout) for how, r in runs.items()}
    assert fits == {
        "-f 1": (False, True),
        "-f 3": (True, False),
        "ANSIBLE_FORKS=2": (False, True),
        "ansible.cfg": (True, False),
    }, {how: r.stdout + r.stderr for how, r in runs.items()}
