# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What every rank of a run will skip without calling the backend, known before the launch.

The support table and its lookup are the rank script's own, imported
(src/nccl_preflight/node/collective_tables.py, shipped to the ranks as nccl_check_tables.py):
this module applies them to the run's backend and the script's arguments as the ranks will
(--device auto: the backend's device; --dtype with its aliases; --tests with its groups), for
plan.json's ``predicted_skips`` (src/nccl_preflight/core/support.py). Standard library only.
"""

from __future__ import annotations

from pathlib import Path

from nccl_preflight.node.collective_tables import (
    ALL_TESTS,
    DTYPE_ALIASES,
    TEST_GROUPS,
    support_of,
)

from .zipapp import BundleError, imported_names

# The name the rank script imports the tables under (files/nccl_check_tables.py): a launch
# script that imports it runs by the table.
SHIPPED_AS = "nccl_check_tables"
# The device each backend's ranks use with --device auto (nccl_check.open_device: gloo and
# mpi stay on the CPU; the others take the accelerator their backend is for).
BACKEND_DEVICE = {"gloo": "cpu", "mpi": "cpu", "nccl": "cuda", "hccl": "npu", "xccl": "xpu"}


def runs_by_the_table(script_text: str) -> bool:
    """Whether a launch script imports the tables (files/nccl_check.py does; a wrapper of one's
    own that runs it some other way, or a file that is not Python, does not)."""
    try:
        return SHIPPED_AS in imported_names(script_text.encode("utf-8"), Path("launch_script"))
    except BundleError:
        return False


def _option(args: list[str], name: str) -> list[str]:
    """Every value of --name V / --name=V in args, in order."""
    found = []
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            found.append(args[i + 1])
        elif arg.startswith(name + "="):
            found.append(arg.split("=", 1)[1])
    return found


def selected_tests(check_args: list[str]) -> list[str]:
    """The tests --tests selects (groups all, correctness, bandwidth expanded), each once, in the
    order asked; every test without --tests."""
    asked: list[str] = []
    for value in _option(check_args, "--tests"):
        for name in (n.strip() for n in value.split(",") if n.strip()):
            asked.extend(TEST_GROUPS.get(name, [name]))
    return list(dict.fromkeys(asked)) if asked else list(ALL_TESTS)


def predicted_skips(backend: str, check_args: list[str] | None = None) -> list[dict[str, str]]:
    """[{test, reason}] every rank will skip without calling the backend, for this run."""
    args = [str(a) for a in check_args or []]
    device = (_option(args, "--device") or ["auto"])[-1]
    if device == "auto":
        device = BACKEND_DEVICE.get(backend, "")
    dtype = (_option(args, "--dtype") or ["float32"])[-1]
    dtype = DTYPE_ALIASES.get(dtype, dtype)
    if not device:  # ucc with --device auto: the device is the node's, unknown here
        return []
    skips = []
    for test in selected_tests(args):
        state, reason = support_of(backend, device, test, dtype)
        if state == "no":
            skips.append({"test": test, "reason": reason})
    return skips


def nccl_predicted_skips(
    script_text: str, backend: str, check_args: list[str] | None = None
) -> list[dict[str, str]]:
    """Filter: `lookup('file', launch_script) | nccl_predicted_skips(backend, nccl_check_args)`.

    A launch_script of one's own that does not import the table (a wrapper that runs
    files/nccl_check.py after some set-up, as the lab's tests use) predicts nothing: its ranks
    still report every skip, and a refusal the table did not predict is judged by the rank
    script itself."""
    return predicted_skips(backend, check_args) if runs_by_the_table(script_text) else []
