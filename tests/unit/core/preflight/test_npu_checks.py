# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""core/preflight/npu_checks.py: npu, npu_model, hccl_ports on transcribed npu-smi tables."""

from __future__ import annotations

import copy

from nccl_preflight.core.preflight import npu_checks as npu
from nccl_preflight.node.accel_facts import (
    board_firmware,
    parse_npu_smi_board,
    parse_npu_smi_info,
)
from tests.builders.facts import fixture

B2 = parse_npu_smi_info(fixture("npu-smi/910b2-info.txt"))
A3 = parse_npu_smi_info(fixture("npu-smi/ascend910-a3-info.txt"))
FW = board_firmware(parse_npu_smi_board(fixture("npu-smi/910-board-info.txt")))  # 7.1.0.7.220
FW_200 = board_firmware(parse_npu_smi_board(fixture("npu-smi/atlas200ia2-board-info.txt")))
GOOD_PY = {
    "executable": "/opt/py/bin/python",
    "torch_version": "2.1.0",
    "npu_version": "2.1.0.post8",
    "npu_available": True,
    "reason": "",
}


def obs(
    table: dict = B2, nproc: int = 2, backend: str = "hccl", fw: str | None = FW, **kw: object
) -> dict:
    chips = [{**c, "firmware_version": fw} for c in copy.deepcopy(table["chips"])]
    base = {
        "backend": backend,
        "nproc_per_node": nproc,
        "python": "/opt/py/bin/python",
        "python_facts": dict(GOOD_PY),
        "facts": {
            "ip_local_port_range": [32768, 60999],
            "accelerators": {
                "npus": chips,
                "npu_smi_version": table["version"],
                "npus_reason": "",
                "npu_firmware_reason": ""
                if fw
                else "npu-smi info -t board -i 0 prints no Firmware Version (NA: not root?)",
                "ip_local_reserved_ports": "60000-60015",
            },
        },
    }
    base.update(kw)
    return base


def judge(observations: dict, extra: dict | None = None) -> dict[str, dict[str, dict]]:
    settings = {"order": list(observations), "extra_env_by_host": extra or {}}
    out = npu.nccl_npu_checks_add({h: [] for h in observations}, observations, settings)
    return {h: {r["check"]: r for r in results} for h, results in out.items()}


def test_two_healthy_910b2_hosts_pass_every_check() -> None:
    got = judge({"n1": obs(), "n2": obs()})
    for host in ("n1", "n2"):
        assert {c: r["status"] for c, r in got[host].items()} == {
            "npu": "passed",
            "npu_model": "passed",
            "hccl_ports": "passed",
            "tcp_hccl_port": "skipped",  # no probe in these observations
        }
    assert got["n1"]["npu"]["message"] == "n1: 2 NPU chips (910B2) for 2 ranks"
    assert got["n1"]["npu_model"]["message"] == (
        "n1: 910B2, npu-smi 25.2.0, firmware 7.1.0.7.220, like the other hosts"
    )


def test_every_check_is_skipped_with_the_reason_on_other_backends() -> None:
    got = judge({"n1": obs(backend="gloo")})
    for check in ("npu", "npu_model", "hccl_ports"):
        assert got["n1"][check]["status"] == "skipped"
        assert got["n1"][check]["message"] == "n1: the backend is gloo, no NPU check applies"


def test_fewer_chips_than_ranks_and_an_unhealthy_chip_fail() -> None:
    few = judge({"n1": obs(nproc=3)})["n1"]["npu"]
    assert few["status"] == "failed" and few["message"] == "n1 has 2 NPU chips, 3 ranks planned"
    sick = obs()
    sick["facts"]["accelerators"]["npus"][1]["health"] = "Alarm"
    got = judge({"n1": sick})["n1"]["npu"]
    assert got["status"] == "failed"
    assert got["message"] == "n1: unhealthy NPU chips: NPU 1 chip 0 (0000:C2:00.0): Alarm"


def test_torch_npu_missing_mismatched_or_blind_fails_naming_the_command() -> None:
    cases = {
        "missing": (
            {"npu_version": None, "reason": "No module named 'torch_npu'"},
            "torch_npu is not importable by /opt/py/bin/python (No module named 'torch_npu')",
        ),
        "mismatch": ({"npu_version": "2.3.1"}, "torch_npu 2.3.1 is not made for torch 2.1.0"),
        "blind": (
            {"npu_available": False},
            "torch_npu 2.1.0.post8 sees no NPU: torch.npu.is_available() is False",
        ),
    }
    for name, (change, words) in cases.items():
        host = obs()
        host["python_facts"].update(change)
        got = judge({"n1": host})["n1"]["npu"]
        assert got["status"] == "failed", name
        assert words in got["message"], (name, got["message"])
        assert got["hint"].startswith('/opt/py/bin/python -c "import torch, torch_npu;'), name


def test_the_odd_model_or_driver_fails_with_the_table() -> None:
    got = judge({"n1": obs(), "n2": obs(), "n3": obs(A3, nproc=3)})
    assert got["n1"]["npu_model"]["status"] == "passed"
    odd = got["n3"]["npu_model"]
    assert odd["status"] == "failed"
    assert odd["message"].startswith(
        "n3: NPU model and driver Ascend910, npu-smi 25.2.1 differ from the other hosts "
        "(910B2, npu-smi 25.2.0)"
    )
    assert "  n3  Ascend910, npu-smi 25.2.1" in odd["message"]


def test_the_odd_firmware_fails_with_the_table_and_unknown_firmware_says_why() -> None:
    got = judge({"n1": obs(), "n2": obs(), "n3": obs(fw=FW_200), "n4": obs(fw=None)})
    assert got["n2"]["npu_model"]["status"] == "passed"
    odd = got["n3"]["npu_model"]
    assert odd["status"] == "failed"
    assert odd["message"] == (
        "n3: NPU firmware 7.1.0.4.218 differ from the other hosts (7.1.0.7.220); host -> NPU:\n"
        "  n1  7.1.0.7.220\n  n2  7.1.0.7.220\n  n3  7.1.0.4.218"
    )
    assert odd["hint"].startswith("npu-smi info -t board -i <NPU>  (on every host)")
    # n4's firmware could not be read: not a failure, and the message says why
    unknown = got["n4"]["npu_model"]
    assert unknown["status"] == "passed"
    assert unknown["message"] == (
        "n4: 910B2, npu-smi 25.2.0, like the other hosts; firmware unknown: npu-smi info -t "
        "board -i 0 prints no Firmware Version (NA: not root?)"
    )


def test_no_npu_found_fails_with_npu_smis_reason() -> None:
    host = obs()
    host["facts"]["accelerators"] = {"npus": [], "npus_reason": "npu-smi not found on PATH"}
    got = judge({"n1": host})["n1"]
    assert got["npu"]["message"] == "n1: no NPU found: npu-smi not found on PATH"
    assert got["npu_model"]["status"] == "skipped"


def test_hccl_ports_must_be_reserved_where_they_are_ephemeral() -> None:
    host = obs()
    host["facts"]["accelerators"]["ip_local_reserved_ports"] = ""
    got = judge({"n1": host})["n1"]["hccl_ports"]
    assert got["status"] == "failed"
    assert got["message"].startswith(
        "n1: HCCL's host ports 60000-60015 (HCCL_IF_BASE_PORT 60000): 16 of them lie in the "
        "ephemeral range 32768-60999 and are not reserved"
    )
    assert got["hint"].startswith("sysctl -w net.ipv4.ip_local_reserved_ports=60000-60015")
    # a base port outside the ephemeral range needs nothing reserved
    moved = judge({"n1": host}, {"n1": {"HCCL_IF_BASE_PORT": "20000"}})["n1"]["hccl_ports"]
    assert moved["status"] == "passed"
    assert "20000-20015 (HCCL_IF_BASE_PORT 20000) are outside the ephemeral" in moved["message"]


def test_hosts_that_dropped_out_stay_none() -> None:
    out = npu.nccl_npu_checks_add({"n1": None}, {"n1": obs()}, {})
    assert out == {"n1": None}


def test_the_ring_peers_hccl_port_is_probed_where_it_listens() -> None:
    from nccl_preflight.core.preflight import host_checks as pf

    ports = {
        "n1": {"master": {"port": 29500, "error": ""}, "ring": {"port": 40001, "error": ""}},
        "n2": {"ring": {"port": 40002, "error": ""}, "hccl": {"port": 60000, "error": ""}},
    }
    addrs = {"n1": "10.0.0.11", "n2": "10.0.0.12"}
    plan = pf.nccl_preflight_probe_plan(ports, "n1", "n1", ["n1", "n2"], addrs)
    assert plan["targets"][-1] == {
        "name": "hccl",
        "host": "n2",
        "address": "10.0.0.12",
        "port": 60000,
    }
    ports["n2"]["hccl"] = {"port": 60000, "error": "[Errno 98] Address already in use"}
    plan = pf.nccl_preflight_probe_plan(ports, "n1", "n1", ["n1", "n2"], addrs)
    assert [t["name"] for t in plan["targets"]] == ["master", "ring"]
    assert plan["skip"]["hccl"] == (
        "n2 could not listen on HCCL's port: [Errno 98] Address already in use"
    )
    # other backends: no hccl listener, no hccl probe, nothing to skip
    del ports["n2"]["hccl"]
    plan = pf.nccl_preflight_probe_plan(ports, "n1", "n1", ["n1", "n2"], addrs)
    assert "hccl" not in plan["skip"] and len(plan["targets"]) == 2


def test_a_dropped_hccl_port_fails_naming_host_address_and_port() -> None:
    assert npu.nccl_hccl_base_port({}) == 60000
    assert npu.nccl_hccl_base_port({"HCCL_IF_BASE_PORT": "61000"}) == 61000
    assert npu.nccl_hccl_base_port({"HCCL_IF_BASE_PORT": "99999"}) == 60000
    ok = {"name": "hccl", "host": "n2", "address": "10.0.0.12", "port": 60000, "ok": True}
    dropped = {
        **ok,
        "ok": False,
        "source": "10.0.0.11",
        "error": "timed out after 3.0 s",
        "error_kind": "timeout",
    }
    got = judge({"n1": obs(probes=[dropped]), "n2": obs(probes=[{**ok, "host": "n1"}])})
    bad = got["n1"]["tcp_hccl_port"]
    assert bad["status"] == "failed"
    assert bad["message"] == (
        "n1: cannot open TCP to n2 at 10.0.0.12:60000 (HCCL's host port, HCCL_IF_BASE_PORT "
        "60000) from 10.0.0.11: timed out after 3.0 s: packets are dropped (a firewall on the "
        "peer or in between)"
    )
    assert bad["hint"].startswith("nc -zv 10.0.0.12 60000  (on n1); allow TCP port 60000")
    assert got["n2"]["tcp_hccl_port"]["status"] == "passed"
    none = judge({"n1": obs(probe_skip={"hccl": "n2 could not listen on HCCL's port: busy"})})
    assert none["n1"]["tcp_hccl_port"] == {
        "check": "tcp_hccl_port",
        "host": "n1",
        "status": "skipped",
        "message": "n1: HCCL's port not tested: n2 could not listen on HCCL's port: busy",
        "hint": "",
    }
    check_mode = {"ring": "check mode: no listener is started, so nothing to connect to"}
    assert judge({"n1": obs(probe_skip=check_mode)})["n1"]["tcp_hccl_port"]["message"] == (
        "n1: HCCL's port not tested: check mode: no listener is started, so nothing to connect to"
    )
    assert judge({"n1": obs(backend="gloo")})["n1"]["tcp_hccl_port"]["status"] == "skipped"


def test_a_peer_without_an_hccl_listener_is_still_probed_on_hccls_port() -> None:
    """nccl_backend auto: the facts call starts the hccl listener only where the node would use
    hccl itself; the run's backend hccl (the master's choice) still probes the other peers."""
    from nccl_preflight.core.preflight import host_checks as pf

    ports = {
        "n1": {"master": {"port": 29500, "error": ""}, "ring": {"port": 40001, "error": ""}},
        "n2": {"ring": {"port": 40002, "error": ""}},
    }
    addrs = {"n1": "10.0.0.11", "n2": "10.0.0.12"}
    plan = pf.nccl_preflight_probe_plan(ports, "n1", "n1", ["n1", "n2"], addrs, False, 61000)
    assert plan["targets"][-1] == {
        "name": "hccl",
        "host": "n2",
        "address": "10.0.0.12",
        "port": 61000,
    }
    # a peer that started no listener at all (its start failed): nothing to probe there
    ports["n2"] = {}
    plan = pf.nccl_preflight_probe_plan(ports, "n1", "n1", ["n1", "n2"], addrs, False, 61000)
    assert [t["name"] for t in plan["targets"]] == ["master"]


def test_a_failed_probe_of_a_peer_without_an_hccl_listener_says_why() -> None:
    refused = {
        "name": "hccl",
        "host": "n2",
        "address": "10.0.0.12",
        "port": 60000,
        "ok": False,
        "source": "10.0.0.11",
        "error": "[Errno 111] Connection refused",
        "error_kind": "refused",
    }
    ring_only = {"listeners": [{"name": "ring", "port": 40002, "accepted": ["10.0.0.11"]}]}
    cpu = obs(listeners=ring_only)
    cpu["facts"]["accelerators"]["npus"] = []
    got = judge({"n1": obs(probes=[refused]), "n2": cpu})
    assert got["n1"]["tcp_hccl_port"]["message"] == (
        "n1: cannot open TCP to n2 at 10.0.0.12:60000 (HCCL's host port, HCCL_IF_BASE_PORT "
        "60000) from 10.0.0.11: [Errno 111] Connection refused; n2 has no HCCL listener: it "
        "found no Ascend NPU and would not use hccl; see backend_choice"
    )
    gpu = obs(listeners=ring_only)
    gpu["facts"]["gpus"] = [{"name": "H100"}]
    got = judge({"n1": obs(probes=[refused]), "n2": gpu})
    assert got["n1"]["tcp_hccl_port"]["message"].endswith(
        "n2 has no HCCL listener: it found NVIDIA GPUs and would use nccl; see backend_choice"
    )
    # a peer that did listen on it: the refusal alone
    held = {"listeners": [*ring_only["listeners"], {"name": "hccl", "port": 60000}]}
    got = judge({"n1": obs(probes=[refused]), "n2": obs(listeners=held)})
    assert got["n1"]["tcp_hccl_port"]["message"].endswith("[Errno 111] Connection refused")
