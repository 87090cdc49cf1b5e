# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The tables both sides of a run need: the collectives the rank script checks and times, its
tests by name, and which collective each backend runs on which device (the support table).

One file, two names (docs/design.md, "The tables of the rank script"): the control machine
imports it as ``nccl_preflight.node.collective_tables``; the rank script imports it as
``nccl_check_tables``, the sibling files/nccl_check_tables.py, a symbolic link to this file, so
``torchrun files/nccl_check.py`` in a checkout finds it beside the script and the zipapp of the
launch (src/nccl_preflight/core/zipapp.py) ships it as it ships every sibling. Standard library
only (the control machine may have no torch) and no import of the project: plain data and the
table's own lookup, ``support_of``, the same function on a rank and on the controller.
"""

from __future__ import annotations

from typing import Any, NamedTuple

# Every collective the rank script checks, in the order of its tests (--list-tests), with the
# reductions it checks, one test each (`<collective>_<op>`); none: one test, the collective's name.
COLLECTIVE_OPS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("sum", "product", "min", "max", "avg"),
    "broadcast": (),
    "reduce": (),
    "all_gather": (),
    "gather": (),
    "scatter": (),
    "reduce_scatter": (),
    "all_to_all": (),
    "send_recv": (),
    "barrier": (),
}
# The collectives the rank script times, in the sweep's order (nccl-tests' binaries'): the names
# of its bandwidth tests, of --min-busbw-for and --pair-trigger, and nccl_expected_busbw's keys.
BANDWIDTH_COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "send_recv",
)


def tests_of(collective: str) -> tuple[str, ...]:
    """The correctness tests of a collective: all_reduce_sum, ... or the collective's name."""
    return tuple(f"{collective}_{op}" for op in COLLECTIVE_OPS[collective]) or (collective,)


CORRECTNESS_TESTS = tuple(test for coll in COLLECTIVE_OPS for test in tests_of(coll))
BANDWIDTH_TESTS = tuple(f"bandwidth_{coll}" for coll in BANDWIDTH_COLLECTIVES)
ALL_TESTS = CORRECTNESS_TESTS + BANDWIDTH_TESTS
TEST_GROUPS = {"all": ALL_TESTS, "correctness": CORRECTNESS_TESTS, "bandwidth": BANDWIDTH_TESTS}
COLLECTIVE_OF = {test: coll for coll in COLLECTIVE_OPS for test in (coll, *tests_of(coll))}
# --dtype's names (torch's dtype attribute names) and aliases (torch's own short names).
DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8")
DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "bf16": "bfloat16"}

# Which collective each backend runs on which device (docs/design.md, "The support table").
SUPPORT_SOURCE = "torch.distributed docs, Backends table"
SUPPORT: dict[str, dict[str, dict[str, str]]] = {  # "*": every collective not named
    "gloo": {"cpu": {"*": "yes"}, "gpu": {"*": "yes", "send_recv": "no", "barrier": "no"}},
    "mpi": {
        "cpu": {"*": "yes", "reduce_scatter": "no"},
        "gpu": {"*": "maybe", "reduce_scatter": "no"},
    },
    "nccl": {"cpu": {"*": "no"}, "gpu": {"*": "yes"}},
    "xccl": {"cpu": {"*": "no"}, "gpu": {"*": "yes"}},
}
# Narrower refusals, each recorded on a real backend (tests/fixtures/torch/refusals.json; on CUDA
# tensors tests/fixtures/rank_json/h100-gloo-cuda/).
SUPPORT_RULES: list[dict[str, Any]] = [
    {
        "backend": "gloo",
        "devices": ["cpu", "gpu"],
        "tests": ["all_reduce_avg"],
        "dtypes": ["int32", "int64", "int8", "uint8"],
        "reason": "gloo has no AVG on integer tensors (it divides the sum in the tensor's dtype)",
        "source": "recorded on torch 2.13.0+cpu and, on CUDA tensors, torch 2.11.0+cu130: "
        "RuntimeError: result type Float can't be cast to the desired output type Int",
    },
]


class Support(NamedTuple):
    """What the table says about one test on one backend and device, and why."""

    state: str  # "yes", "no", "maybe" or "unknown" (the table has no such backend or device)
    reason: str


def collective_of(test: str) -> str | None:
    """all_reduce_sum -> all_reduce, bandwidth_reduce -> reduce; None for checkin/init."""
    return COLLECTIVE_OF.get(test.removeprefix("bandwidth_"))


def support_of(backend: str, device_type: str, test: str, dtype: str) -> Support:
    """The table's prediction for `test` (a test name of --list-tests) with these settings."""
    kind = "cpu" if device_type == "cpu" else "gpu"
    where = "CPU" if kind == "cpu" else f"{device_type.upper()} (GPU column)"
    for rule in SUPPORT_RULES:
        if (
            rule["backend"] == backend
            and kind in rule["devices"]
            and dtype in rule["dtypes"]
            and test.removeprefix("bandwidth_") in rule["tests"]
        ):
            return Support("no", f"{rule['reason']}; {rule['source']}")
    coll = collective_of(test)
    row = SUPPORT.get(backend, {}).get(kind, {})
    state = row.get(coll or "", row.get("*", "unknown")) if coll else "unknown"
    reasons = {
        "no": f"{backend} has no {coll} on {where} tensors ({SUPPORT_SOURCE})",
        "maybe": f"{backend}'s {coll} on {where} tensors is '?' in the {SUPPORT_SOURCE}",
        "unknown": f"the support table has no {backend} on {where} tensors",
        "yes": f"{backend} runs {coll} on {where} tensors ({SUPPORT_SOURCE})",
    }
    return Support(state, reasons[state])
