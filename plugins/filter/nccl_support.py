# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The backend x operation support table of files/nccl_check.py, read on the control machine.

nccl_check.py (the ranks' entry script; torch + standard library) holds the table as plain
literals: SUPPORT, SUPPORT_RULES and SUPPORT_SOURCE, beside its COLLECTIVES records and
BANDWIDTH_COLLECTIVES. The control machine may have no torch, so this module reads those
literals from the script's text with ``ast`` (never importing or running it) and predicts,
for a backend and the script's arguments, which tests every rank will skip and why. The
prediction is the script's own ``support_of``; tests/unit/test_support_table.py checks both
agree for every backend, device, dtype and test.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

# The device each backend's ranks use with --device auto (nccl_check.open_device: gloo and
# mpi stay on the CPU; the others take the accelerator their backend is for).
BACKEND_DEVICE = {"gloo": "cpu", "mpi": "cpu", "nccl": "cuda", "hccl": "npu", "xccl": "xpu"}
DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "bf16": "bfloat16"}


@dataclass(frozen=True)
class SupportTable:
    support: dict[str, dict[str, dict[str, str]]]
    rules: list[dict[str, Any]]
    source: str
    tests_of: dict[str, list[str]]  # collective -> its correctness tests, in script order
    bandwidth: list[str]  # BANDWIDTH_COLLECTIVES

    @property
    def all_tests(self) -> list[str]:
        correctness = [t for tests in self.tests_of.values() for t in tests]
        return correctness + [f"bandwidth_{c}" for c in self.bandwidth]


def _literal(node: ast.AST | None, name: str) -> Any:
    if node is None:
        raise ValueError(f"nccl_check.py has no {name} assignment")
    return ast.literal_eval(node)


def _collectives(call: ast.AST) -> dict[str, list[str]]:
    """The Collective("name", check, ops=(...)) records of the COLLECTIVES assignment."""
    tests: dict[str, list[str]] = {}
    for node in ast.walk(call):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Collective"):
            continue
        name = ast.literal_eval(node.args[0])
        ops = next((ast.literal_eval(k.value) for k in node.keywords if k.arg == "ops"), ())
        tests[name] = [f"{name}_{op}" for op in ops] or [name]
    return tests


def load_table(script_text: str) -> SupportTable:
    """The table of nccl_check.py's text. ValueError when an assignment is missing."""
    values: dict[str, ast.AST] = {}
    for node in ast.parse(script_text).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            values[node.target.id] = node.value
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    values[target.id] = node.value
    if "COLLECTIVES" not in values:
        raise ValueError("nccl_check.py has no COLLECTIVES assignment")
    return SupportTable(
        support=_literal(values.get("SUPPORT"), "SUPPORT"),
        rules=_literal(values.get("SUPPORT_RULES"), "SUPPORT_RULES"),
        source=_literal(values.get("SUPPORT_SOURCE"), "SUPPORT_SOURCE"),
        tests_of=_collectives(values["COLLECTIVES"]),
        bandwidth=list(_literal(values.get("BANDWIDTH_COLLECTIVES"), "BANDWIDTH_COLLECTIVES")),
    )


def collective_of(table: SupportTable, test: str) -> str | None:
    name = test.removeprefix("bandwidth_")
    for coll, tests in table.tests_of.items():
        if name == coll or name in tests:
            return coll
    return None


def support_of(
    table: SupportTable, backend: str, device_type: str, test: str, dtype: str
) -> tuple[str, str]:
    """(state, reason), as nccl_check.support_of: yes, no, maybe or unknown."""
    kind = "cpu" if device_type == "cpu" else "gpu"
    where = "CPU" if kind == "cpu" else f"{device_type.upper()} (GPU column)"
    for rule in table.rules:
        if (
            (rule["backend"], rule["device"]) == (backend, kind)
            and dtype in rule["dtypes"]
            and test.removeprefix("bandwidth_") in rule["tests"]
        ):
            return "no", f"{rule['reason']}; {rule['source']}"
    coll = collective_of(table, test)
    row = table.support.get(backend, {}).get(kind, {})
    state = row.get(coll or "", row.get("*", "unknown")) if coll else "unknown"
    if state == "no":
        return "no", f"{backend} has no {coll} on {where} tensors ({table.source})"
    if state == "maybe":
        return "maybe", f"{backend}'s {coll} on {where} tensors is '?' in the {table.source}"
    if state == "unknown":
        return "unknown", f"the support table has no {backend} on {where} tensors"
    return "yes", f"{backend} runs {coll} on {where} tensors ({table.source})"


def _option(args: list[str], name: str) -> list[str]:
    """Every value of --name V / --name=V in args, in order."""
    found = []
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            found.append(args[i + 1])
        elif arg.startswith(name + "="):
            found.append(arg.split("=", 1)[1])
    return found


def selected_tests(table: SupportTable, check_args: list[str]) -> list[str]:
    """The tests --tests selects (groups all, correctness, bandwidth), in the script's order."""
    every = table.all_tests
    groups = {
        "all": every,
        "correctness": [t for t in every if not t.startswith("bandwidth_")],
        "bandwidth": [t for t in every if t.startswith("bandwidth_")],
    }
    asked: list[str] = []
    for value in _option(check_args, "--tests"):
        for name in (n.strip() for n in value.split(",") if n.strip()):
            asked.extend(groups.get(name, [name]))
    return list(dict.fromkeys(asked)) if asked else every


def predicted_skips(
    script_text: str, backend: str, check_args: list[str] | None = None
) -> list[dict[str, str]]:
    """[{test, reason}] every rank will skip without calling the backend, for this run."""
    table = load_table(script_text)
    args = [str(a) for a in check_args or []]
    device = (_option(args, "--device") or ["auto"])[-1]
    if device == "auto":
        device = BACKEND_DEVICE.get(backend, "")
    dtype = (_option(args, "--dtype") or ["float32"])[-1]
    dtype = DTYPE_ALIASES.get(dtype, dtype)
    if not device:  # ucc with --device auto: the device is the node's, unknown here
        return []
    skips = []
    for test in selected_tests(table, args):
        state, reason = support_of(table, backend, device, test, dtype)
        if state == "no":
            skips.append({"test": test, "reason": reason})
    return skips


def nccl_predicted_skips(
    script_text: str, backend: str, check_args: list[str] | None = None
) -> list[dict[str, str]]:
    """Filter: `lookup('file', launch_script) | nccl_predicted_skips(backend, nccl_check_args)`.

    A launch_script of one's own without the table (a wrapper that runs files/nccl_check.py
    after some set-up, as the lab's tests use) predicts nothing: its ranks still report every
    skip, and a refusal the table did not predict is judged by the rank script itself."""
    try:
        return predicted_skips(script_text, backend, check_args)
    except (ValueError, SyntaxError):
        return []


class FilterModule:
    """The support table of files/nccl_check.py, on the control machine."""

    def filters(self) -> dict[str, Any]:
        return {"nccl_predicted_skips": nccl_predicted_skips}
