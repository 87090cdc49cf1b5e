# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The exit classes of a run: what failed, as one exit code a pipeline can branch on.

The one home of the table. src/nccl_preflight/core/verdict.py puts the class of a run into
reports/<run-id>/verdict.json; bin/nccl-preflight exits with its code. Standard library only:
bin/nccl-preflight loads this file by path, outside Ansible.

Codes follow nccl-tests where the meaning matches: 4 is its testTimeout, 7 the code it exits
with when a data check found wrong elements (testNumResults in the nccl-tests releases that have
testNotImplemented and testSkipped). nccl-tests exits 7 for a bandwidth below NCCL_TESTS_MIN_BW
too; here bandwidth has a code of its own (8), so that slow is never mistaken for corrupt.
nccl-tests' 2 (CUDA error) and 3 (NCCL error) are not used: a CUDA or NCCL error ends a rank
(class rank_lost) or fails the gpu pre-flight check (class preflight_failed). 1 is nccl-tests'
testInternalError: the run gave no verdict at all.

The same file holds node-check's codes (one node's health, for Slurm's HealthCheckProgram or
Prolog: slurm/node_command.py exits with them) and the command line's own refusal (USAGE), so
that ``nccl-preflight --help`` and README's "Exit codes" show one table for every command.
"""

from __future__ import annotations

import textwrap
from typing import NamedTuple


class ExitClass(NamedTuple):
    name: str
    code: int
    meaning: str


PASSED = ExitClass("passed", 0, "every check and every rank passed (skipped counts as passed)")
NO_VERDICT = ExitClass(
    "no_verdict",
    1,
    "the run ended without a verdict (interrupted, or ansible-playbook failed in an unforeseen "
    "way): read the play output",
)

# Most severe first: when a run has several, the first one found here is the run's class. A
# cause comes before its consequences (an unreachable host or a failed pre-flight skips the
# launch, so every rank then "never started"); among rank failures, wrong data is worst (a job
# would train on it without a word), a lost rank next, a slow link last.
CLASSES: tuple[ExitClass, ...] = (
    ExitClass(
        "bad_input",
        12,
        "the hostfile, a variable or an option's value is invalid; the run stopped before any "
        "node was touched",
    ),
    ExitClass("unreachable", 11, "a host could not be reached (SSH) or failed before launch"),
    ExitClass(
        "preflight_failed", 10, "a pre-flight check failed on a host; the launch was skipped"
    ),
    ExitClass("wrong_data", 7, "a collective delivered wrong data to a rank"),
    ExitClass("rank_lost", 4, "a rank hung, crashed, errored or never started"),
    ExitClass("bandwidth", 8, "busbw below the required threshold (--min-busbw)"),
)

BY_NAME: dict[str, ExitClass] = {c.name: c for c in (PASSED, NO_VERDICT, *CLASSES)}


# node-check (slurm/node_command.py): a node's own health, not a run's; 2 is also what argparse
# exits with for a refused option, so any refusal of node-check's input is "refused".
NODE_CHECK: tuple[ExitClass, ...] = (
    ExitClass("healthy", 0, "every check passed on this node"),
    ExitClass("failed", 1, "a check failed on this node (--drain under Slurm: drained)"),
    ExitClass("refused", 2, "the config or an option was refused; nothing checked or drained"),
    ExitClass(
        "unfinished",
        3,
        "node-check could not finish within --timeout, or was stopped; drains nothing "
        "(0 as a Prolog or Epilog)",
    ),
)

# Any command: no command, an unknown command or an unknown option ("did you mean" follows).
# A refused value (slurm -N two) or file is the run's bad_input, node-check's refused.
USAGE = ExitClass("usage", 2, "no command, an unknown command or an unknown option: nothing ran")

TABLE_TITLE = "exit codes"
SECTIONS: tuple[tuple[str, tuple[ExitClass, ...]], ...] = (
    (
        "a run (-i INVENTORY ..., slurm): its class, as in verdict.json (several: the first)",
        (PASSED, *CLASSES, NO_VERDICT),
    ),
    ("node-check: this node's health", NODE_CHECK),
    ("every command", (USAGE,)),
)


def table_lines(width: int = 79) -> list[str]:
    """The table for a terminal (--help), every section: "  <code>  <name>  <meaning>"."""
    lines = [f"{TABLE_TITLE}:"]
    for title, rows in SECTIONS:
        lines.append(f"  {title}")
        for c in rows:
            lines += textwrap.wrap(
                c.meaning,
                width,
                initial_indent=f"  {c.code:4d}  {c.name:17s} ",
                subsequent_indent=" " * 26,
            )
    return lines


def most_severe(names: list[str] | set[str]) -> ExitClass:
    """The class of a run that found every class in names (PASSED when there is none)."""
    for item in CLASSES:
        if item.name in names:
            return item
    return PASSED


def code_table() -> dict[str, int]:
    """{class name: exit code}, every class, in severity order after passed."""
    return {c.name: c.code for c in (PASSED, *CLASSES, NO_VERDICT)}
