# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""nccl-preflight's command line: the Slurm front-end's commands, one argparse subparser each,
under the top level that ``--help`` shows (every command with an example, the exit codes of
core/exit_classes.py) and ``--version``; bin/nccl-preflight and the node bundle's __main__.py
call ``main(argv)`` (argv without the program name):

    node-check --config FILE [--drain] [--json] [--timeout S] [--state-dir DIR]
               [--torch-max-age S] [--textfile DIR]             slurm/node_check.py
    bundle -o PATH                                               slurm/bundle.py
    slurm -N NODES --config FILE [salloc's options] [-- ARGS]    slurm/run_args.py, run.py

The validate run (``-i INVENTORY [ansible-playbook option ...]``) is bin/nccl-preflight's:
ansible-playbook's options pass through it unchanged, so only its help is here. No command, an
unknown command or an unknown option (named with the nearest known one: core/command_line.py)
exits 2 (USAGE) before anything runs; every other refusal of the slurm command is the run's
bad_input (12), as a bad hostfile is on the Ansible path.

Standard library only at import time: the node bundle runs this with a bare python3.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence

from nccl_preflight import __version__
from nccl_preflight.core.command_line import did_you_mean, unknown_option
from nccl_preflight.core.exit_classes import BY_NAME, USAGE, table_lines
from nccl_preflight.slurm import node_command, node_options, node_torch
from nccl_preflight.slurm.run_args import add_slurm_parser

PROG = "nccl-preflight"
Command = Callable[[argparse.Namespace], int]
TIMEOUT_MAX_S = 3600.0  # node-check --timeout: above it, a mistake (minutes for hours)


def seconds_in(low: float, high: float, low_too: bool = False) -> Callable[[str], float]:
    """An argparse type: a number of seconds, finite, above ``low`` (or equal to it with
    ``low_too``) and at most ``high``; argparse names the option in its error ("argument
    --timeout: ...", exit 2) before anything runs."""
    above = f"at least {low:g}" if low_too else f"greater than {low:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and (low < value or (low_too and value == low))):
            value = math.nan
        if not value <= high:
            raise argparse.ArgumentTypeError(
                f"{text!r}: give a number of seconds {above} and at most {high:g}"
            )
        return value

    return parse


def absolute_dir(text: str) -> str:
    """An argparse type: an absolute path (the directory itself is checked when used)."""
    if not text.startswith("/"):
        raise argparse.ArgumentTypeError(f"{text!r}: give an absolute path")
    return text


def _node_check(args: argparse.Namespace) -> int:
    options = node_options.NodeCheckOptions(
        config=args.config,
        drain=args.drain,
        json=args.json,
        timeout=args.timeout,
        state_dir=args.state_dir or "",
        torch_max_age=args.torch_max_age,
        textfile=args.textfile or "",
    )
    return node_command.run_node_check(options)


def _bundle(args: argparse.Namespace) -> int:
    from nccl_preflight.core.content import TREE
    from nccl_preflight.slurm import bundle

    if not TREE.complete:
        print(
            f"{PROG} bundle: no roles/ and files/nccl_check.py in {TREE.content}: run "
            "nccl-preflight bundle from the project's checkout or an installed nccl-preflight",
            file=sys.stderr,
        )
        return 2
    print(bundle.write_bundle(args.output))
    return 0


def add_node_check(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "node-check",
        help="check this node alone (GPU health, RDMA, limits, fabric interface, versions...)",
        description="Run every pre-flight check that needs no peer on this node, print one line "
        "per finding and exit 0 (healthy), 1 (a check failed), 2 (the config or an option was "
        "refused) or 3 (it could not finish within --timeout: drains nothing; 0 as a Prolog). "
        "One runs at a time per node. For Slurm's HealthCheckProgram or Prolog "
        "(docs/slurm.md).",
    )
    parser.add_argument(
        "--config", required=True, help="YAML file of nccl_* variables (as group_vars)"
    )
    parser.add_argument(
        "--drain",
        action="store_true",
        help="under Slurm (SLURMD_NODENAME set), drain this node when a check fails: "
        "scontrol update nodename=$SLURMD_NODENAME state=drain reason='nccl-preflight: ...'; "
        "never resumes a node",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--timeout",
        type=seconds_in(0, TIMEOUT_MAX_S),
        default=node_options.DEFAULT_TIMEOUT,
        metavar="S",
        help="seconds after which every command still running (and the torch probe) is killed "
        f"and the check is reported unfinished, which drains nothing (more than 0, at most "
        f"{TIMEOUT_MAX_S:g}; default %(default)s: Slurm kills a HealthCheckProgram after 60 s)",
    )
    parser.add_argument(
        "--state-dir",
        type=absolute_dir,
        default=None,
        metavar="DIR",
        help="where the node's lock (one node-check at a time: another one exits at once with "
        "the last verdict) and that verdict live (default: /run/nccl-preflight for root, "
        "else <tmp>/nccl-preflight-<uid>; made 0700; refused when open to others)",
    )
    parser.add_argument(
        "--torch-max-age",
        type=seconds_in(0, TIMEOUT_MAX_S, low_too=True),
        default=node_torch.DEFAULT_MAX_AGE,
        metavar="S",
        help="reuse this node's last torch reading (versions, torch's devices) for S seconds "
        "instead of importing torch every time: the GPUs are read afresh every time (0: always "
        f"import; at most {TIMEOUT_MAX_S:g}; default %(default)s: at most one import a minute "
        "at any HealthCheckInterval)",
    )
    parser.add_argument(
        "--textfile",
        type=absolute_dir,
        default=None,
        metavar="DIR",
        help="also write DIR/nccl_preflight.prom for node_exporter's textfile collector "
        "(--collector.textfile.directory=DIR): each check 1 passed / 0 failed, the verdict, "
        "the duration and the last success time; replaced atomically (docs/slurm.md)",
    )
    parser.set_defaults(command=_node_check)


def add_bundle(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "bundle",
        help="write the node bundle nccl-preflight.pyz",
        description="Write nccl-preflight.pyz: one file that runs node-check (and the Slurm "
        "run's node side) with any python3 >= 3.9, nothing installed.",
    )
    parser.add_argument("-o", "--output", required=True, help="the .pyz file to write")
    parser.set_defaults(command=_bundle)


COMMANDS = ("slurm", "node-check", "bundle")  # the subparsers' order in --help
USAGE_LINES = f"""{PROG} -i INVENTORY [ansible-playbook option ...]
       {PROG} {{{",".join(COMMANDS)}}} [option ...]
       {PROG} --help | --version"""
VALIDATE = """\
Prove that a multi-node GPU cluster is ready for torch.distributed training. A run writes
reports/<run-id>/ (report.html, junit.xml, verdict.json) and exits with its class (below).

  -i INVENTORY [ansible-playbook option ...]
              validate the inventory's hosts over SSH (playbooks/validate.yml): every
              option goes to ansible-playbook unchanged (ansible-playbook --help)"""
# One example per command, the validate run first (README has more).
EXAMPLES = (
    f"{PROG} -i inventory/dgx -e nccl_backend=nccl",
    f"{PROG} slurm -N 4 --config site.yml -p gpu",
    f"{PROG} node-check --config /etc/nccl-preflight.yaml --drain",
    f"{PROG} bundle -o /opt/nccl-preflight/nccl-preflight.pyz",
)


def version() -> str:
    return f"{PROG} {__version__}"


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog=PROG,
        usage=USAGE_LINES,
        description=VALIDATE,
        epilog="\n".join(["examples:", *(f"  {e}" for e in EXAMPLES), "", *table_lines()]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action="version", version=version())
    commands = top.add_subparsers(
        dest="name", required=True, metavar="COMMAND", title="commands", prog=PROG
    )
    for add in (add_slurm_parser, add_node_check, add_bundle):
        add(commands)
    for sub in commands.choices.values():
        sub.add_argument("--version", action="version", version=version())
    return top


def subcommands(top: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The top parser's commands, by name."""
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_name(argv: Sequence[str]) -> str:
    """The command of a command line: its first word that is not an option ("" when none;
    the top level's options take no value)."""
    return next((word for word in argv if not word.startswith("-")), "")


def usage_refusal(top: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[str, str]:
    """(the command whose usage to show, "" for the top level; why) when the command line is a
    usage error: no command, an unknown one, an unknown option; else ("", "")."""
    known = subcommands(top)
    name = command_name(argv)
    at = argv.index(name) if name else len(argv)
    unknown = unknown_option(top, argv[:at])
    if unknown:
        return "", f"{unknown} ({PROG} --help lists the options)"
    if not name:
        if any(word in ("-h", "--help", "--version") for word in argv):
            return "", ""
        return "", (
            f"give a command ({', '.join(COMMANDS)}) or -i INVENTORY for a run; "
            f"{PROG} --help lists them"
        )
    if name not in known:
        return "", (
            f"unknown command {name!r}{did_you_mean(name, known)} "
            f"({PROG} --help lists the commands)"
        )
    unknown = unknown_option(known[name], argv[at + 1 :])
    if unknown:
        return name, f"{unknown} ({PROG} {name} --help lists its options)"
    return "", ""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = parser()
    name, why = usage_refusal(top, argv)
    if why:
        shown = subcommands(top)[name] if name else top
        shown.print_usage(sys.stderr)
        print(f"{shown.prog}: error: {why}", file=sys.stderr)
        return USAGE.code
    try:
        args = top.parse_args(argv)
    except SystemExit as exc:
        # the slurm command's refusals of a value are the project's bad_input (12), argparse's
        # own included (slurm -N two), as a bad hostfile or variable is on the Ansible path
        if exc.code == 2 and command_name(argv) == "slurm":
            raise SystemExit(BY_NAME["bad_input"].code) from None
        raise
    command: Command = args.command
    return command(args)
