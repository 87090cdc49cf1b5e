# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight's start and stop in a test, as the playbook's calls run them.

The start is what nccl_preflight_start runs for its ``preflight`` option:
src/nccl_preflight/node/preflight_calls.py' ``start`` with the options validated against the same
argument spec (``START_SPEC``). It is called directly rather than through the module's main()
because the start call always runs the torch probe (its ``python`` defaults to the module's
interpreter); a test of the listeners alone passes no ``python``. The stop
is nccl_preflight_observe's main() with only its ``collect`` option, exactly the probe call's
collect.

Both return a :class:`~tests.module_exit.ModuleExit`: the pre-flight part of the result, and
whether it failed (the start and probe calls report a failed start or collect in their result
rather than failing the module).
"""

from __future__ import annotations

from typing import Any

import nccl_preflight_observe
import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.nccl_preflight.node.preflight_calls import START_SPEC, start

from tests.module_exit import ModuleExit, run_module_main


def start_call(
    monkeypatch: pytest.MonkeyPatch, args: dict[str, Any], check_mode: bool = False
) -> ModuleExit:
    """The start call's start of the pre-flight with these options; -> its result."""
    del monkeypatch  # the same signature as stop_call; nothing to patch for a direct call
    validated = ArgumentSpecValidator(START_SPEC).validate(args)
    assert not validated.error_messages, validated.error_messages
    result = start(validated.validated_parameters, check_mode)
    return ModuleExit(result, failed=bool(result.pop("failed", False)))


def stop_call(
    monkeypatch: pytest.MonkeyPatch, args: dict[str, Any], check_mode: bool = False
) -> ModuleExit:
    """nccl_preflight_observe with only ``collect: args`` (no target), as the probe call collects
    the pre-flight; -> the collect part of its result."""
    module_args = {"collect": args, "_ansible_check_mode": check_mode}
    ended = run_module_main(monkeypatch, nccl_preflight_observe.main, module_args)
    assert not ended.failed and ended.result["results"] == [], (
        ended.result
    )  # the module never fails
    collect = ended.result["collect"]
    assert ended.result["changed"] is bool(collect.get("changed"))
    return ModuleExit(collect, failed=bool(collect.pop("failed", False)))
