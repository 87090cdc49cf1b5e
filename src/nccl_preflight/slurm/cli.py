# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""`nccl-preflight node-check|slurm ...`: the Slurm front-end's commands, one subparser each."""

from __future__ import annotations

import argparse

from .run_args import add_slurm_parser


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="nccl-preflight")
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_slurm_parser(subparsers)
    args = parser.parse_args(argv)
    return int(args.func(args))
