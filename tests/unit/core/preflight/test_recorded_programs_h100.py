# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A whole run's node calls as the Ansible front-end sends them, each a program on stdin through
BOOT (no module start), on the lent H100 VM with the nccl backend (recorded by
tests/device/programs_gpu.py on 2026-11-27; tests/fixtures/README.md, "A run's node calls as
programs on the H100"): what the project's code makes of every answer."""

from __future__ import annotations

import json
from typing import Any

from nccl_preflight.core.preflight import gpu_checks, host_checks
from nccl_preflight.core.transport import describe, parse_nccl_log
from nccl_preflight.node.parse import parse_nvidia_smi_csv
from tests.recorded_gpu import FIXTURES, LONE_HEALTHY_GPU, text

REC = "programs/h100-vm-"
HOST = "vm"


def calls() -> dict[str, dict[str, Any]]:
    """The recorded calls by program: facts_call, observe_call, start_call, look (look.pyz)."""
    document = json.loads(text(REC + "programs.json"))
    return {call["program"].removesuffix(".pyz").split(".")[-1]: call for call in document["calls"]}


def test_every_call_answered_and_nothing_of_the_run_is_left_on_the_vm() -> None:
    document = json.loads(text(REC + "programs.json"))
    assert document["python"] == "3.12.3 /opt/torch/.venv/bin/python3"  # not the lab's 3.11
    assert [call["rc"] for call in document["calls"]] == [0, 0, 0, 0]
    assert all(call["answer"] for call in document["calls"])
    assert not any(call["stderr"] for call in document["calls"])
    left = (document["run_dir_left"], document["processes_left"], document["boot_dirs_left"])
    assert left == (False, [], [])
    # The calls' own CPU seconds on the node, well under a module start's (about 0.3 s) each but
    # the facts call, which runs nvidia-smi's queries.
    assert all(call["cpu_s"] < 0.5 for call in document["calls"])


def test_the_facts_call_saw_the_h100_and_started_the_warm_pre_flight() -> None:
    answer = calls()["facts_call"]["answer"]
    facts = answer["ansible_facts"]["nccl"]
    assert facts["module_python"] == "/opt/torch/.venv/bin/python3"
    assert facts["gpus"] == parse_nvidia_smi_csv(
        "0, NVIDIA H100 80GB HBM3, 580.159.04, 81559, GPU-13ceac83-3e32-77ed-1bcd-c08467188f3b, "
        "00000000:00:06.0"
    )
    assert facts["interfaces"]["eth0"]["ipv4"] == [{"address": "192.0.2.2", "prefixlen": 24}]
    started = answer["preflight"]
    assert started["fabric_address"] == "192.0.2.2" and started["port_owner"]["free"] is True
    assert [(s["name"], s["address"], s["port"]) for s in started["listeners"]] == [
        ("master", "192.0.2.2", 29741)
    ]


def test_the_collect_brought_the_held_probes_cuda_torch() -> None:
    answer = calls()["observe_call"]["answer"]
    assert [(r["name"], r["ok"]) for r in answer["results"]] == [("master", True)]
    collect = answer["collect"]
    assert (collect["ended"], collect["timed_out"], collect["killed"]) == ("complete", False, False)
    assert collect["listeners"][0]["accepted"] == ["192.0.2.2"]
    probe = collect["python"]
    assert (probe["torch_version"], probe["cuda_available"], probe["device_count"]) == (
        "2.11.0+cu130",
        True,
        1,
    )
    assert (probe["cuda_version"], probe["nccl_version"], probe["reason"]) == ("13.0", "2.28.9", "")


def test_the_pre_flight_judges_the_programs_answers_a_healthy_gpu() -> None:
    facts = calls()["facts_call"]["answer"]["ansible_facts"]["nccl"]
    observation = {
        "backend": "nccl",
        "ifname": "eth0",
        "nproc_per_node": 1,
        "python": facts["module_python"],
        "python_facts": calls()["observe_call"]["answer"]["collect"]["python"],
        "facts": facts,
    }
    results = gpu_checks.nccl_gpu_health_results(
        {HOST: observation}, HOST, {"require_gpu": True, "order": [HOST]}
    )
    assert {r["check"]: r["status"] for r in results} == LONE_HEALTHY_GPU


def test_the_start_was_warm_and_ran_the_rank_zipapp_with_nccl() -> None:
    started = calls()["start_call"]["answer"]
    assert (started["warm_start"], started["changed"]) == (True, True)
    cmd = started["cmd"]
    assert cmd[1:3] == ["-m", "torch.distributed.run"]
    assert "/tmp/nccl-preflight-devprog/nccl_check.pyz" in cmd
    assert cmd[cmd.index("--backend") + 1] == "nccl"
    launch = json.loads(text(REC + "launch.json"))
    assert (launch["warm_start"], launch["rc"], launch["timed_out"]) == (True, 0, False)


def test_the_look_collected_the_run_and_removed_its_directory() -> None:
    look = calls()["look"]["answer"]
    assert (look["running"], look["torchrun_rc"], look["run_dir_removed"]) == (False, 0, True)
    assert look["collected"] == [
        "rank-0.json",
        "rank-0.log",
        "torchrun.log",
        "launch.json",
        "nccl-rank-0.log",
    ]
    assert look["progress"][0]["status"] == "passed"


def test_the_rank_ended_as_the_cold_recording_did_and_nccl_read_the_launchs_variables() -> None:
    rank = json.loads(text(REC + "rank-0.json"))
    cold = json.loads(text("rank_json/h100-nccl-one-rank/rank-0.json"))
    assert (rank["backend"], rank["device"], rank["status"]) == ("nccl", "cuda:0", "passed")
    outcome = [(t["name"], t["status"]) for t in rank["tests"]]
    assert outcome == [(t["name"], t["status"]) for t in cold["tests"]]
    parsed = parse_nccl_log(text(REC + "nccl-rank-0.log"), "nccl-rank-0.log")
    assert parsed["env"] == {"NCCL_SOCKET_IFNAME": "eth0"}
    assert (parsed["net"], parsed["bootstrap_interface"]) == ("Socket", "eth0")
    assert describe(parsed).startswith("network Socket chosen")
    # torchrun's main() ran once in the held probe: no runpy warning (warm/'s old recording has it).
    assert "found in sys.modules" not in text(REC + "torchrun.log")


def test_node_check_from_the_bundle_of_this_tree_failed_only_the_hostname() -> None:
    lines = text(REC + "node-check.txt").splitlines()
    assert lines[-1].startswith("node-check: vm: 1 check(s) failed (21 checks, ")
    failed = [line.split(":")[0] for line in lines[:-1] if ": failed: " in line]
    assert failed == ["hostname"]


def test_every_recording_here_is_listed_in_the_fixture_readme() -> None:
    readme = text("README.md")
    for path in sorted((FIXTURES / "programs").iterdir()):
        assert f"`{path.name}`" in readme, path.name


def test_the_vms_loopback_hostname_warns_in_a_run_of_it_alone_and_fails_for_a_cluster() -> None:
    """validate.yml on the VM alone stopped at this (tests/fixtures/validate_gpu, as-is); a run
    of one host has no other peer, so it now only warns; node-check, judging the node for the
    cluster it joins, still fails it."""
    facts = calls()["facts_call"]["answer"]["ansible_facts"]["nccl"]
    assert (facts["hostname"], facts["hostname_addresses"]) == ("vm", ["127.0.0.1"])
    obs = {"host": HOST, "facts": facts, "address": "192.0.2.2", "ifname": "eth0"}
    alone = host_checks.check_hostname(obs, run_alone=True)
    assert alone["status"] == "passed" and "warning" in alone["message"]
    assert "map vm to its fabric address 192.0.2.2" in alone["hint"]
    assert host_checks.check_hostname(obs)["status"] == "failed"
