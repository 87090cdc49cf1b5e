# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The `slurm` subcommand's arguments and entry (cli.py adds it as one subparser).

Everything is checked before anything runs or is allocated, each refusal one line naming the
option, variable or command, exit 12 (bad_input): the options and the SALLOC_* variables
(salloc_options.py), the --config file (core/config.py), the rank script's arguments (the
config's nccl_check_args or those after --, core/rank_args.py), the allocation options given
inside an allocation, and the Slurm commands the run will call. An unknown option is a usage
error instead (exit 2, with the nearest known option: cli.py), as on every command.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

from ..core.config import load_config
from ..core.exit_classes import BY_NAME
from ..core.metrics import textfile_option_problem
from ..core.rank_args import rank_args_problem
from .salloc_options import (
    DEFAULT_WAIT_S,
    OptionError,
    inside_allocation_problem,
    missing_commands,
    salloc_request,
)

PROG = "nccl-preflight slurm"
DESCRIPTION = """\
Validate NODES nodes under Slurm: pre-flight, ranks, report, verdict (exit codes: README).

Outside an allocation it takes one of its own: salloc -N NODES --no-shell, with salloc's options
below (salloc's names and meanings; the command line wins over salloc's input environment
variables SALLOC_PARTITION, SALLOC_ACCOUNT, SALLOC_QOS, SALLOC_RESERVATION, SALLOC_CONSTRAINT,
SALLOC_TIMELIMIT, SALLOC_GPUS_PER_NODE, SALLOC_EXCLUSIVE, as with salloc; any other SALLOC_*
reaches salloc as it is). It prints the salloc command line, the job id and Slurm's reason while
the job pends (again every 30 s and when the reason changes), gives up after --wait-allocation
seconds, and cancels the job (scancel) however it ends, Ctrl-C and SIGTERM included.
Inside an allocation (SLURM_JOB_ID set, e.g. in an sbatch script) it uses that allocation's first
NODES nodes, and refuses salloc's options: the allocation exists already."""


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer (a node count)")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return value


def exclusive_value(text: str) -> str:
    if text.lower() not in ("exclusive", "user", "mcs"):
        raise argparse.ArgumentTypeError(f"{text!r}: salloc takes --exclusive, =user or =mcs")
    return text.lower()


def _allocation_options(p: argparse.ArgumentParser) -> None:
    """salloc's options (own allocation only)."""
    group = p.add_argument_group(
        "the allocation (salloc's options and meanings; only when it takes its own)"
    )
    add = group.add_argument
    add("-p", "--partition", help="partitions to allocate from (SALLOC_PARTITION)")
    add("-A", "--account", help="account to charge (SALLOC_ACCOUNT)")
    add("-q", "--qos", help="quality of service (SALLOC_QOS)")
    add("--reservation", help="reservations to allocate from (SALLOC_RESERVATION)")
    add("-C", "--constraint", help="node features required, e.g. 'a100&ib' (SALLOC_CONSTRAINT)")
    add(
        "-t",
        "--time",
        help="time limit: minutes, minutes:seconds, hours:minutes:seconds, "
        "days-hours[:minutes[:seconds]] or UNLIMITED (SALLOC_TIMELIMIT; default: the "
        "partition's)",
    )
    add("-w", "--nodelist", help="these nodes (a hostlist such as gpu[01-04], or a file)")
    add("-x", "--exclude", help="never these nodes (a hostlist or a file)")
    add(
        "--gpus-per-node",
        metavar="[TYPE:]N",
        help="GPUs on each node (SALLOC_GPUS_PER_NODE); "
        "default, when the run needs GPUs (nccl_backend nccl, or auto with nccl_require_gpu): "
        "nccl_gpus_per_node, else nccl_nproc_per_node; none for gloo or when SALLOC_GPUS/"
        "SALLOC_GRES ask for them; 0: ask for none. An exclusive job's steps see only the GPUs "
        "it asked for",
    )
    excl = group.add_mutually_exclusive_group()
    excl.add_argument(
        "--exclusive",
        nargs="?",
        const="exclusive",
        type=exclusive_value,
        metavar="user|mcs",
        help="nodes not shared with other jobs (=user: other "
        "users; SALLOC_EXCLUSIVE): the DEFAULT, since bandwidth measured beside "
        "another job's traffic is not the node's, and the ranks need every CPU",
    )
    excl.add_argument(
        "-s",
        "--oversubscribe",
        action="store_true",
        default=None,
        help="share the nodes with other jobs instead (no --exclusive)",
    )
    add(
        "--wait-allocation",
        type=seconds,
        metavar="SECONDS",
        help=f"give up (and cancel the job) when it still pends after SECONDS (default "
        f"{DEFAULT_WAIT_S:g}; 0: wait for ever)",
    )


def add_slurm_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "slurm",
        help="validate NODES nodes of a Slurm allocation (the caller's, or one of its own)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-N", "--nodes", type=positive_int, required=True, help="how many nodes")
    p.add_argument("--config", required=True, help="YAML file of nccl_* variables")
    p.add_argument(
        "--drain",
        action="store_true",
        help="drain the nodes the run names as bad (never for a cluster-wide cause)",
    )
    p.add_argument("--report-root", default="", help="where reports/<run-id>/ goes")
    p.add_argument(
        "--textfile",
        default="",
        metavar="DIR",
        help="also write DIR/nccl_preflight_run.prom for node_exporter's textfile collector: "
        "the run's class, busbw per collective and node pair, duration, last success time "
        "(the config's nccl_report_textfile_dir otherwise)",
    )
    _allocation_options(p)
    p.add_argument(
        "check_args",
        nargs="*",
        help="after --: arguments of the rank script (instead of the config's nccl_check_args)",
    )
    p.set_defaults(command=slurm_main)


def refusal(args: argparse.Namespace, config: dict[str, Any], environ: Mapping[str, str]) -> str:
    """Why the run must not start (one line), or "": the rank script's arguments, the
    allocation options (and SALLOC_*), then the Slurm commands it will call."""
    check_args = list(args.check_args) if args.check_args else config.get("nccl_check_args")
    problem = rank_args_problem(check_args)
    if problem:
        where = "the arguments after --" if args.check_args else f"{args.config}: nccl_check_args"
        return f"{where}: {problem}"
    # the config's nccl_report_textfile_dir is checked with the other variables (core/inputs.py)
    problem = textfile_option_problem(args.textfile)
    if problem:
        return problem
    job = environ.get("SLURM_JOB_ID", "")
    if job:
        problem = inside_allocation_problem(args, job)
    else:
        try:
            args.salloc = salloc_request(args, environ, config)
        except OptionError as exc:
            problem = str(exc)
    if problem:
        return problem
    missing = missing_commands(not job, environ)
    if missing:
        return (
            f"{', '.join(missing)}: not found on PATH; run it where Slurm's client commands are "
            "installed (a login node) or put their directory on PATH"
        )
    return ""


def slurm_main(args: argparse.Namespace) -> int:
    from .run import run_command

    try:
        config = load_config(args.config)
    except (OSError, ValueError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return BY_NAME["bad_input"].code
    args.salloc = None
    problem = refusal(args, config, os.environ)
    if problem:
        print(f"{PROG}: {problem}", file=sys.stderr)
        return BY_NAME["bad_input"].code
    return run_command(args, config)
