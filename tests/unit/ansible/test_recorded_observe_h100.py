# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight's observation as the Ansible action sends it (node/observe_call.py on stdin
through BOOT), run by the lent H100 VM's own Python 3.12 (recorded by tests/device/observe_gpu.sh
on 2026-11-27; tests/fixtures/README.md, "The pre-flight's observation as a program on the
H100"): its answer has the module's shape, and what the pre-flight judges of it."""

from __future__ import annotations

import json
from typing import Any

import nccl_preflight_observe

from tests.module_exit import run_module_main
from tests.recorded_gpu import text


def recorded() -> dict[str, Any]:
    return json.loads(text("gpu/observe-h100-vm.json"))


def test_the_vm_answered_with_the_result_the_module_returns(monkeypatch) -> None:
    answer = recorded()
    # The module, given no option here, returns the same keys with the same kinds of values.
    module = run_module_main(monkeypatch, nccl_preflight_observe.main, {})
    assert answer.keys() == module.result.keys() == {"changed", "results", "firewall"}
    assert answer["changed"] is False
    master, ring = answer["results"]
    assert (master["name"], master["ok"], master["error_kind"]) == ("master", True, "")
    assert (ring["name"], ring["ok"], ring["error_kind"]) == ("ring", False, "refused")
    assert ring["error"] == "Connection refused" and ring["source"] == "127.0.0.1"


def test_the_vm_has_no_firewall_tool_so_nothing_is_found() -> None:
    firewall = recorded()["firewall"]
    assert firewall["findings"] == []
    assert set(firewall["tools"]) == {"ufw", "firewalld", "iptables", "ip6tables", "nftables"}
    assert not any(tool["present"] for tool in firewall["tools"].values())


def test_boot_left_nothing_behind_on_the_vm_and_its_python_is_not_the_labs() -> None:
    notes = text("gpu/observe-h100-vm.txt")
    assert "python: 3.12.3 " in notes and "rc 0," in notes
    assert "before: 0 BOOT directories" in notes and "after: 0 BOOT directories" in notes
