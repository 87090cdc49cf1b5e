# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Filters that say what is wrong with a host's nccl-preflight variables, before anything runs."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from nccl_preflight.core.metrics import textfile_dir_problem
from nccl_preflight.core.variables import VARIABLES
from nccl_preflight.node.collective_tables import BANDWIDTH_COLLECTIVES

# The kernel refuses empty names, "." and "..", names longer than IFNAMSIZ-1 (15), and names with
# "/", ":" or white space. We also refuse every shell metacharacter: names reach nccl.env and logs.
_IFNAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def nccl_ifname_problem(name: Any) -> str:
    """Say what is wrong with an interface name; "" when the kernel and a shell accept it."""
    if not isinstance(name, str) or not name:
        return "is empty"
    if len(name) > 15:
        return f"has {len(name)} characters, the kernel allows at most 15"
    if name in (".", ".."):
        return "is '.' or '..'"
    if not _IFNAME.match(name):
        return (
            "holds a character outside letters, digits, '_', '.', '-' (no spaces, slashes, "
            "colons or shell metacharacters; NCCL's '^' and '=' prefixes are not interface names)"
        )
    return ""


def nccl_cidr_problem(value: Any) -> str:
    """Say what is wrong with a CIDR, or "" when it is one (IPv4 or IPv6, host bits clear)."""
    if not isinstance(value, str) or "/" not in value:
        return "is not a CIDR such as 192.168.100.0/24"
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        return f"is not a CIDR: {exc}"
    return ""


def nccl_env_name_problem(name: Any) -> str:
    """Say what is wrong with an environment variable name, or "" when it is a valid one."""
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        return "is not an environment variable name (letters, digits, _; no leading digit)"
    return ""


KNOWN_BACKENDS = VARIABLES["nccl_backend"].choices or ()


def _choices(name: str) -> tuple[Any, ...]:
    return VARIABLES[name].choices or ()


def _default(name: str) -> Any:
    return VARIABLES[name].default


def _not_one_of(name: str, value: Any) -> str:
    """``NAME is VALUE, not one of A, B, C`` when the schema does not allow ``value``, else ""."""
    if value in _choices(name):
        return ""
    return f"{name} is {value!r}, not one of {', '.join(map(str, _choices(name)))}"


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _integer_problem(value: Any, low: int, high: int | None = None) -> str:
    number = _integer(value)
    if number is None:
        return f"is {value!r}, not an integer"
    if number < low or (high is not None and number > high):
        bound = f"{low}-{high}" if high is not None else f">= {low}"
        return f"is {number}, outside {bound}"
    return ""


# The variables nccl_input_problems judges beyond their schema types (ranges, names, paths).
INPUT_NAMES = (
    "nccl_socket_ifname",
    "nccl_fabric_cidr",
    "nccl_master_port",
    "nccl_backend",
    "nccl_nproc_per_node",
    "nccl_gpus_per_node",
    "nccl_run_timeout",
    "nccl_report_textfile_dir",
    "nccl_slots",
    "nccl_check_args",
    "nccl_extra_env",
    "nccl_expect_net",
    "nccl_python",
    "nccl_pairwise",
    "nccl_pair_min_ratio",
    "nccl_pair_rounds",
    "nccl_busbw_warn",
    "nccl_busbw_crit",
    "nccl_busbw_efficiency",
    "nccl_busbw_min_bytes",
    "nccl_expected_busbw",
)


def nccl_input_names(defined: list[str]) -> list[str]:
    """Those of INPUT_NAMES that are ``defined`` (the names of a host's variables): what the
    Ansible path looks up and gives nccl_input_problems."""
    have = set(defined)
    return [name for name in INPUT_NAMES if name in have]


def nccl_input_problems(values: dict[str, Any]) -> list[str]:
    """Return one sentence per bad variable, naming it; an empty list when all are good."""
    problems: list[str] = []

    def check(name: str, problem: str) -> None:
        if problem:
            problems.append(f"{name} {problem}")

    ifname = values.get("nccl_socket_ifname") or ""
    if ifname:
        check(f"nccl_socket_ifname {ifname!r}", nccl_ifname_problem(ifname))
    cidr = values.get("nccl_fabric_cidr") or ""
    if cidr:
        check(f"nccl_fabric_cidr {cidr!r}", nccl_cidr_problem(cidr))
    check("nccl_master_port", _integer_problem(values.get("nccl_master_port"), 1024, 65535))
    problems += filter(None, [_not_one_of("nccl_backend", values.get("nccl_backend"))])
    check("nccl_nproc_per_node", _integer_problem(values.get("nccl_nproc_per_node"), 1))
    if "nccl_gpus_per_node" in values:
        check("nccl_gpus_per_node", _integer_problem(values["nccl_gpus_per_node"], 0))
    check("nccl_run_timeout", _integer_problem(values.get("nccl_run_timeout"), 1))
    textfile = values.get("nccl_report_textfile_dir") or ""
    if textfile:  # on the control machine, where the report writes it
        check(f"nccl_report_textfile_dir {textfile!r}", textfile_dir_problem(str(textfile)))
    if "nccl_slots" in values and values["nccl_slots"] is not None:
        check("nccl_slots", _integer_problem(values["nccl_slots"], 1))

    args = values.get("nccl_check_args")
    if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
        check("nccl_check_args", f"is {args!r}, not a list of strings")
    extra_env = values.get("nccl_extra_env")
    if not isinstance(extra_env, dict):
        check("nccl_extra_env", f"is {extra_env!r}, not a mapping of NAME: value")
    else:
        for key in extra_env:
            check(f"nccl_extra_env key {key!r}", nccl_env_name_problem(key))
    expect_net = values.get("nccl_expect_net", _default("nccl_expect_net"))
    problems += filter(None, [_not_one_of("nccl_expect_net", expect_net)])
    python = values.get("nccl_python") or ""
    if python and (not python.startswith("/") or any(c.isspace() for c in python)):
        check("nccl_python", f"is {python!r}, not an absolute path without spaces")
    problems += pairwise_problems(values)
    return problems


def pairwise_problems(values: dict[str, Any]) -> list[str]:
    """nccl_pairwise, nccl_pair_min_ratio and nccl_pair_rounds (absent: the schema's defaults)."""
    mode = values.get("nccl_pairwise", _default("nccl_pairwise"))
    problems = list(filter(None, [_not_one_of("nccl_pairwise", mode)]))
    ratio = values.get("nccl_pair_min_ratio", _default("nccl_pair_min_ratio"))
    try:
        number = float(ratio)
    except (TypeError, ValueError):
        number = float("nan")
    if not 0 < number <= 1:
        problems.append(f"nccl_pair_min_ratio is {ratio!r}, not a number above 0 and at most 1")
    rounds = values.get("nccl_pair_rounds", _default("nccl_pair_rounds"))
    if isinstance(rounds, bool) or not str(rounds).strip().isdigit():
        problems.append(f"nccl_pair_rounds is {rounds!r}, not a whole number >= 0 (0: every round)")
    for name in ("nccl_busbw_warn", "nccl_busbw_crit", "nccl_busbw_efficiency"):
        value = _fraction(values.get(name, _default(name)))
        if value is None:
            problems.append(f"{name} is {values.get(name)!r}, not a number above 0 and at most 1")
    warn, crit = (
        _fraction(values.get("nccl_busbw_warn", _default("nccl_busbw_warn"))),
        _fraction(values.get("nccl_busbw_crit", _default("nccl_busbw_crit"))),
    )
    if warn is not None and crit is not None and crit > warn:
        problems.append(f"nccl_busbw_crit ({crit:g}) is above nccl_busbw_warn ({warn:g})")
    if "nccl_busbw_min_bytes" in values:
        problem = _integer_problem(values["nccl_busbw_min_bytes"], 1)
        if problem:
            problems.append(f"nccl_busbw_min_bytes {problem}")
    expected = values.get("nccl_expected_busbw", {})
    if not isinstance(expected, dict):
        problems.append(f"nccl_expected_busbw is {expected!r}, not a mapping of collective: GB/s")
    else:
        for key, value in expected.items():
            if key not in BANDWIDTH_COLLECTIVES:
                known = ", ".join(BANDWIDTH_COLLECTIVES)
                problems.append(f"nccl_expected_busbw key {key!r} is not one of {known}")
            elif _fraction(value, high=float("inf")) is None:
                problems.append(f"nccl_expected_busbw[{key!r}] is {value!r}, not a positive number")
    return problems


def _fraction(value: Any, high: float = 1.0) -> float | None:
    """The number when it is above 0 and at most `high`, else None."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if 0 < number <= high else None
