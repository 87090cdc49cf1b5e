# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The `slurm` subcommand's arguments and entry (cli.py adds it as one subparser)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from ..core.exit_classes import BY_NAME

# A run id names reports/<run-id>/ and the nodes' temporary directories: a plain name.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def add_slurm_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "slurm",
        help="validate NODES nodes of a Slurm allocation (the caller's, or one of its own)",
        description="Validate NODES nodes under Slurm: pre-flight, ranks, report, verdict.",
    )
    p.add_argument("-N", "--nodes", type=int, required=True, help="how many nodes")
    p.add_argument("--config", required=True, help="YAML file of nccl_* variables")
    p.add_argument("--partition", default="", help="salloc --partition (own allocation only)")
    p.add_argument("--time", default="", help="salloc --time (own allocation only)")
    p.add_argument(
        "--drain",
        action="store_true",
        help="drain the nodes the run names as bad (never for a cluster-wide cause)",
    )
    p.add_argument("--report-root", default="", help="where reports/<run-id>/ goes")
    p.add_argument(
        "--run-id", default="", help="the run's id (default: YYYYmmddTHHMMSS-<6 hex>, as Ansible's)"
    )
    p.add_argument("check_args", nargs="*", help="after --: arguments of the rank script")
    p.set_defaults(func=slurm_main)


def load_config(path: str) -> dict[str, Any]:
    """core/config.py's load_config (the one loader); until it lands on main, the defaults of
    roles/nccl_defaults overlaid with the file, Jinja-templated defaults dropped."""
    try:
        from ..core.config import load_config as core_load  # type: ignore[import-not-found]
    except ImportError:
        pass
    else:
        return core_load(path)
    import yaml

    root = Path(__file__).resolve().parents[3] / "roles" / "nccl_defaults" / "defaults" / "main"
    config: dict[str, Any] = {}
    for file in sorted(root.glob("*.yml")):
        for key, value in (yaml.safe_load(file.read_text()) or {}).items():
            if not (isinstance(value, str) and "{{" in value):
                config[key] = value
    user = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(user, dict):
        raise ValueError(f"{path}: expected a mapping of nccl_* variables")
    unknown = sorted(set(user) - set(config) - {"nccl_python", "nccl_report_root"})
    if unknown:
        raise ValueError(f"{path}: unknown variable(s) {', '.join(unknown)}")
    return {**config, **user}


def slurm_main(args: argparse.Namespace) -> int:
    from .run import run_command

    if args.nodes < 1:
        print("nccl-preflight slurm: -N must be 1 or more", file=sys.stderr)
        return BY_NAME["bad_input"].code
    if args.run_id and not RUN_ID.fullmatch(args.run_id):
        print(
            f"nccl-preflight slurm: --run-id {args.run_id!r}: use up to 64 letters, digits, "
            "'.', '_' or '-', starting with a letter or digit",
            file=sys.stderr,
        )
        return BY_NAME["bad_input"].code
    try:
        config = load_config(args.config)
    except (OSError, ValueError) as exc:
        print(f"nccl-preflight slurm: {exc}", file=sys.stderr)
        return BY_NAME["bad_input"].code
    return run_command(args, config)
