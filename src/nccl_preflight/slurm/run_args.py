# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The `slurm` subcommand's arguments and entry (cli.py adds it as one subparser)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..core.config import load_config
from ..core.exit_classes import BY_NAME


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
    p.add_argument("check_args", nargs="*", help="after --: arguments of the rank script")
    p.set_defaults(command=slurm_main)


def slurm_main(args: argparse.Namespace) -> int:
    from .run import run_command

    if args.nodes < 1:
        print("nccl-preflight slurm: -N must be 1 or more", file=sys.stderr)
        return BY_NAME["bad_input"].code
    try:
        config = load_config(args.config)
    except (OSError, ValueError) as exc:
        print(f"nccl-preflight slurm: {exc}", file=sys.stderr)
        return BY_NAME["bad_input"].code
    return run_command(args, config)
