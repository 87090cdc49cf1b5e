# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The rank script's arguments (``nccl_check_args``, and the slurm command's arguments after
``--``) parsed on the control machine, before anything runs or is allocated, by the rank script's
own parser (node/rank_options.py, the ranks' nccl_check_options.py): an option it does not know,
a value it refuses, or one of the options the front-ends set themselves is named here instead of
failing every rank after the launch.

Both front-ends call ``rank_args_problem``: roles/validate_inputs (the ``nccl_rank_args_problems``
filter, on the control machine before any host is contacted) and the slurm command before salloc
(slurm/run_args.py). Standard library and the node room's tables only.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any

from nccl_preflight.node.collective_tables import (
    ALL_TESTS,
    BANDWIDTH_COLLECTIVES,
    DTYPE_ALIASES,
    DTYPE_NAMES,
    TEST_GROUPS,
)
from nccl_preflight.node.pair_schedule import DEFAULT_PAIR_ROUNDS
from nccl_preflight.node.rank_options import Names, build_parser, option_problems

from .zipapp import BundleError, imported_names

# The name the rank script imports its options under (files/nccl_check_options.py): a launch
# script of one's own that does not import it has options this parser does not know.
SHIPPED_AS = "nccl_check_options"

# Options the front-ends give every rank themselves (roles/launch/tasks/run.yml, slurm/run.py
# script_args) or that end a rank before it checks anything: one in nccl_check_args would come
# after theirs and win, and the run would break in a way no rank can report.
# argparse dest -> (the option, what to do instead).
FRONT_END_OPTIONS = {
    "out_dir": ("--out-dir", "the front-end sets the results directory that the report reads"),
    "backend": ("--backend", "set nccl_backend instead"),
    "timeout": ("--timeout", "set nccl_run_timeout instead (the ranks' --timeout follows it)"),
    "ranks_per_node": ("--ranks-per-node", "the front-end passes the rank layout it planned"),
    "init_method": ("--init-method", "torchrun gives every rank its rendezvous (env://)"),
    "rank": ("--rank", "torchrun gives every rank its rank"),
    "world_size": ("--world-size", "torchrun gives every rank the world size"),
    "local_rank": ("--local-rank", "torchrun gives every rank its local rank"),
    "list_tests": ("--list-tests", "every rank would print the test names and check nothing"),
}
HELP = "-h/--help is not accepted here: every rank would print its help and check nothing"
_UNSET = object()


class _Refused(Exception):
    """argparse's error (or its help), raised instead of printed with an exit."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's: NoReturn
        raise _Refused(message)

    def print_help(self, file: Any = None) -> None:
        raise _Refused(HELP)


@functools.cache
def rank_parser() -> argparse.ArgumentParser:
    """The rank script's parser, with the tables as the control machine names them; its
    errors raise instead of exiting."""
    names = Names(
        tests=ALL_TESTS,
        groups=TEST_GROUPS,
        bandwidth=BANDWIDTH_COLLECTIVES,
        dtypes=DTYPE_NAMES,
        dtype_aliases=DTYPE_ALIASES,
        pair_rounds=DEFAULT_PAIR_ROUNDS,
    )
    return build_parser(names, parser_class=_Parser)


def rank_args_problem(args: Any) -> str:
    """What is wrong with the rank script's arguments ``args``, in the parser's words naming the
    option; "" when the ranks will accept them. Not a list: left to nccl_input_problems."""
    if not isinstance(args, list):
        return ""
    parser = rank_parser()
    # an option given leaves its _UNSET in place of the default (argparse fills in only what
    # the namespace lacks), whichever spelling named it (--out-dir=X, an abbreviation --out)
    namespace = argparse.Namespace(**dict.fromkeys(FRONT_END_OPTIONS, _UNSET))
    try:
        parsed = parser.parse_args([str(arg) for arg in args], namespace)
    except _Refused as exc:
        return str(exc)
    for dest, (option, instead) in FRONT_END_OPTIONS.items():
        if getattr(parsed, dest) is not _UNSET:
            return f"{option} is not accepted here: {instead}"
        setattr(parsed, dest, parser.get_default(dest))
    problems = option_problems(parsed)
    return problems[0] if problems else ""


def runs_by_these_options(script_text: str) -> bool:
    """Whether a launch script takes the rank script's options (it imports them, as
    files/nccl_check.py does); a script of one's own that does not is left to parse its own."""
    try:
        return SHIPPED_AS in imported_names(script_text.encode("utf-8"), Path("launch_script"))
    except BundleError:
        return False


def nccl_rank_args_problems(args: Any, launch_script_text: str = "") -> list[str]:
    """Filter for roles/validate_inputs: ``nccl_check_args | nccl_rank_args_problems(text)``,
    text the user's own launch_script ("" when it is the project's): [the problem] or []."""
    if launch_script_text and not runs_by_these_options(launch_script_text):
        return []
    problem = rank_args_problem(args)
    return [f"nccl_check_args {problem}"] if problem else []
