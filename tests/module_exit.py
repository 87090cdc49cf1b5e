# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Run a module's main() in the test process, as Ansible would hand it its arguments.

AnsibleModule.exit_json and fail_json end the process; here they raise ModuleExit instead, so a
test reads what the module returned and whether it failed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class ModuleExit(Exception):
    """What a module passed to exit_json (failed False) or fail_json (failed True)."""

    def __init__(self, result: dict[str, Any], failed: bool) -> None:
        super().__init__(result)
        self.result, self.failed = result, failed


def capture_module_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make exit_json and fail_json raise ModuleExit for the rest of the test."""

    def exit_json(self: basic.AnsibleModule, **result: Any) -> None:
        raise ModuleExit(result, failed=False)

    def fail_json(self: basic.AnsibleModule, **result: Any) -> None:
        raise ModuleExit(result, failed=True)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


def run_module_main(
    monkeypatch: pytest.MonkeyPatch, main: Callable[[], None], args: dict[str, Any]
) -> ModuleExit:
    """main() with these module arguments; how it ended."""
    capture_module_exit(monkeypatch)
    with patch_module_args(args), pytest.raises(ModuleExit) as ended:
        main()
    return ended.value
