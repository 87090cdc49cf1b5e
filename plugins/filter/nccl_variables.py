# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A host's variables that look like the project's and that it does not know (a typo, or a
name that went away), each with the file and line it came from: the one
part of the check that reads Ansible itself (where a value was loaded: ansible-core 2.19's origin
tags; older releases name the variable alone). The decision is the core's
(nccl_preflight.core.config unknown_variables, unknown_problem: the Slurm config's words).
And the project variables whose values the schema's types refuse, one short line each.
Both by the variables schema (nccl_preflight.core.variables), as the Slurm config is checked.
roles/validate_inputs refuses both before any host is touched."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nccl_preflight.core.config import (
    spec_names,
    spec_problems,
    unknown_problem,
    unknown_variables,
)

try:  # ansible-core >= 2.19: every value loaded from a file carries where it came from
    from ansible._internal._datatag._tags import Origin
except ImportError:  # pragma: no cover - older ansible-core: no origin
    Origin = None


def _where(host_vars: Mapping[str, Any], name: str) -> str:
    """FILE:LINE of ``name``'s value, else ""."""
    if Origin is None:
        return ""
    try:
        origin = Origin.get_tag(host_vars[name])
    except Exception:  # a value that cannot even be read: the name alone
        return ""
    if origin is None or not origin.path:
        return ""
    return f"{origin.path}:{origin.line_num}" if origin.line_num else str(origin.path)


def nccl_unknown_variables(host_vars: Mapping[str, Any]) -> list[str]:
    """One line per unknown nccl_*/preflight_* variable of a host (``hostvars[host]``)."""
    return [unknown_problem(name, _where(host_vars, name)) for name in unknown_variables(host_vars)]


def nccl_spec_problems(host_vars: Mapping[str, Any], refused: list[str]) -> list[str]:
    """One short line per project variable of a host that the schema's types refuse (not
    Ansible's whole argument-spec dump), leaving out those ``refused`` already names: the roles'
    own knobs (launch_*, report_*) too, as no role's argument spec is checked at its start."""
    values = {name: host_vars[name] for name in spec_names() if name in host_vars}
    return spec_problems(values, refused)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "nccl_unknown_variables": nccl_unknown_variables,
            "nccl_spec_problems": nccl_spec_problems,
        }
