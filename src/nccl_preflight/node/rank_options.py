# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The rank script's command line, once for both sides: its options, what each accepts, and the
checks between them that need no rank (docs/design.md, "Options of the rank script").

One file, two names, as node/collective_tables.py: the rank script imports it as
``nccl_check_options``, the sibling files/nccl_check_options.py, a symbolic link to this file,
which the launch's zipapp ships like every sibling; the control machine imports it as
``nccl_preflight.node.rank_options`` and parses ``nccl_check_args`` (and the slurm command's
arguments after ``--``) with the very parser the ranks use, before anything runs
(core/rank_args.py). Standard library only, no import of the project: what the options accept by
name (the tests, the collectives, the dtypes: the tables of collective_tables.py, and the
pairwise rounds' default from pair_schedule.py) comes in as ``Names``, which each side builds
from the tables under its own name for them.
"""

from __future__ import annotations

import argparse
import functools
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

Invalid = argparse.ArgumentTypeError
TCP_URL = re.compile(r"tcp://(?:\[([0-9a-fA-F:]+)\]|([^:/\[\]]+)):(\d{1,5})")  # IPv6 in [ ]


class Names(NamedTuple):
    """What the options accept by name, from the tables (each side's name for them)."""

    tests: Sequence[str]  # ALL_TESTS
    groups: Mapping[str, Sequence[str]]  # TEST_GROUPS
    bandwidth: Sequence[str]  # BANDWIDTH_COLLECTIVES
    dtypes: Sequence[str]  # DTYPE_NAMES
    dtype_aliases: Mapping[str, str]  # DTYPE_ALIASES
    pair_rounds: int  # pair_schedule's DEFAULT_PAIR_ROUNDS


def parse_size(text: str) -> int:
    """Bytes from '8', '64K', '32M', '1G' (binary units, like nccl-tests' -b/-e)."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMGkmg]?)[iI]?[bB]?\s*", text)
    if not match:
        raise Invalid(f"{text!r} is not a size such as 1024, 64K, 32M or 1G")
    return int(match.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[match.group(2).upper()]


def bounded(text: str, kind: type[int] | type[float], low: float, high: float = math.inf) -> Any:
    """`text` as `kind`, from `low` (above 0 for floats) to `high`, or Invalid saying so."""
    try:
        value = kind(text)
    except ValueError:
        raise Invalid(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if kind is float and not 0 < value < math.inf:
        raise Invalid(f"{text!r} must be a positive number")
    if value > high:
        raise Invalid(f"must be above 0 and at most {high:g}, got {text!r}")
    if value < low:
        raise Invalid(f"{text!r} must be {low} or more")
    return value


positive_float = functools.partial(bounded, kind=float, low=0)
ratio = functools.partial(bounded, kind=float, low=0, high=1)
non_negative_int = functools.partial(bounded, kind=int, low=0)
positive_int = functools.partial(bounded, kind=int, low=1)


def init_url(text: str) -> str:
    if text.startswith("tcp://") and not TCP_URL.fullmatch(text):
        raise Invalid(f"{text!r} is not tcp://HOST:PORT")
    if text != "env://" and not text.startswith(("tcp://", "file://")):
        raise Invalid(f"must be env://, tcp://HOST:PORT or file:///PATH, got {text!r}")
    return text


def rank_counts(text: str) -> list[int]:
    """'2,4,1' -> [2, 4, 1]: the ranks of each node, in node-rank order (--ranks-per-node)."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() and int(part) > 0 for part in parts):
        raise Invalid(f"{text!r} is not a comma-separated list of rank counts such as 2,4,1")
    return [int(part) for part in parts]


class ByName:
    """The options whose values are names from the tables (--tests, --dtype, thresholds,
    --pause-before): argparse types bound to ``names``."""

    def __init__(self, names: Names) -> None:
        self.names = names

    def threshold(self, text: str) -> tuple[str, float]:
        """'all_reduce=5.0' -> ('all_reduce', 5.0) for --min-busbw-for and --pair-trigger."""
        name, sep, value = text.partition("=")
        name = name.strip().removeprefix("bandwidth_")
        if not sep or name not in self.names.bandwidth:
            known = ", ".join(self.names.bandwidth)
            raise Invalid(f"{text!r} is not COLLECTIVE=GBPS with COLLECTIVE one of {known}")
        return name, positive_float(value)

    def dtype(self, text: str) -> str:
        name = self.names.dtype_aliases.get(text, text)
        if name not in self.names.dtypes:
            raise Invalid(
                f"{text!r} is not one of {', '.join(self.names.dtypes)} "
                f"(aliases: {', '.join(self.names.dtype_aliases)})"
            )
        return name

    def tests(self, text: str) -> list[str]:
        """'all_reduce_sum,bandwidth' -> the tests, groups expanded, in the given order."""
        found: list[str] = []
        groups = self.names.groups
        for item in filter(None, (part.strip() for part in text.split(","))):
            if item not in groups and item not in self.names.tests:
                known = ", ".join(groups)
                raise Invalid(
                    f"unknown test {item!r}; --list-tests shows the names (groups: {known})"
                )
            found.extend(groups.get(item, [item]))
        return found

    def pause(self, text: str) -> tuple[str, int | None]:
        """'send_recv@1' -> ('send_recv', 1); 'send_recv' -> ('send_recv', None) = every rank."""
        name, _, rank = text.partition("@")
        known = (*self.names.tests, "checkin", "init")
        if name not in known and not name.startswith("pairwise pass "):
            raise Invalid(f"--pause-before: unknown test {name!r}")
        return name, non_negative_int(rank) if rank else None


def option_groups(names: Names) -> dict[str, dict[str, tuple[str, dict[str, Any]]]]:
    """--help's groups, in order: option -> (help, add_argument's settings)."""
    by_name = ByName(names)
    size = {"metavar": "SIZE", "type": parse_size}
    count = {"type": non_negative_int}
    threshold = {"type": by_name.threshold, "action": "append", "default": [],
                 "metavar": "COLL=GBPS"}  # fmt: skip
    # fmt: off
    return {
        "process group": {
            "--backend": (
                "auto = nccl on CUDA, hccl on NPU, xccl on XPU, gloo on CPU (default: auto)",
                {"default": "auto",
                 "choices": ("auto", "nccl", "gloo", "hccl", "xccl", "mpi", "ucc")}),
            "--device": (
                "tensors on device LOCAL_RANK of this type; auto = the accelerator, else cpu",
                {"default": "auto", "choices": ("auto", "cpu", "cuda", "npu", "xpu")}),
            "--init-method": (
                "env:// (torchrun), tcp://HOST:PORT or file:///PATH (default: env://)",
                {"default": "env://", "metavar": "URL", "type": init_url}),
            "--rank": ("global rank (default: $RANK)", count),
            "--world-size": ("number of ranks (default: $WORLD_SIZE)", count),
            "--local-rank": ("device index on this node (default: $LOCAL_RANK, else 0)", count),
            "--ranks-per-node": (
                "ranks of each node, in node-rank order (default: $LOCAL_WORLD_SIZE each)",
                {"type": rank_counts, "metavar": "N0,N1,..."}),
            "--timeout": (
                "seconds for check-in, init and each test or size; then exit 124 (default: 120)",
                {"type": positive_float, "default": 120.0, "metavar": "S"}),
        },
        "what to check": {
            "--tests": (
                "tests or groups (all, correctness, bandwidth), comma-separated (default: all)",
                {"type": by_name.tests, "action": "extend", "metavar": "LIST"}),
            "--list-tests": ("print the test names and exit", {"action": "store_true"}),
            "--dtype": (f"element type: {', '.join(names.dtypes)} (default: float32)",
                        {"type": by_name.dtype, "default": "float32"}),
        },
        "bandwidth sweep (nccl-tests' -b -e -f -n -w)": {
            "--min-bytes": ("smallest message, e.g. 8, 64K, 32M (default: 1K)",
                            {**size, "default": 1024}),
            "--max-bytes": ("largest message (default: 1M on cpu, else 1G)", size),
            "--factor": ("size step factor (default: 2)", {"type": int, "default": 2}),
            "--iters": ("timed iterations per size (default: 20)", {**count, "default": 20}),
            "--warmup": ("untimed iterations per size (default: 5)", {**count, "default": 5}),
            "--min-busbw": ("fail below GBPS busbw at the largest size",
                            {"type": positive_float, "metavar": "GBPS"}),
            "--min-busbw-for": ("--min-busbw for one collective; repeatable", threshold),
        },
        "output": {
            "--out-dir": ("write DIR/rank-<rank>.json after every test", {"metavar": "DIR"}),
            "--verbose": ("print a line per test on every rank", {"action": "store_true"}),
            "--pause-before": (
                "testing: sleep before TEST (or 'pairwise pass P round N') until the watchdog "
                "fires",
                {"type": by_name.pause, "metavar": "TEST[@RANK]"}),
        },
        "pairwise rounds (which node, which rail)": {
            "--pairwise": (
                "time node pairs, rail by rail: always, never, auto = when bandwidth fell short",
                {"choices": ("auto", "always", "never"), "default": "auto"}),
            "--pair-bytes": ("bytes each way per exchange (default: 1M on cpu, else 64M)", size),
            "--pair-iters": ("timed exchanges per pair (default: 5)",
                             {"type": positive_int, "default": 5}),
            "--pair-trigger": ("auto also runs when COLL's busbw is below GBPS; repeatable",
                               threshold),
            "--pair-trigger-min-bytes": ("smallest size --pair-trigger looks at (default: 32M)",
                                         {**size, "default": 32 << 20}),
            "--pair-min-ratio": ("slow below R x the median pair (default: 0.8)",
                                 {"type": ratio, "default": 0.8, "metavar": "R"}),
            "--pair-rounds": (
                "first-pass rounds at most: every round when the tournament has no more, else N "
                "rounds spread over it, N distinct partners a node; 0: every round "
                f"(default: {names.pair_rounds})",
                {**count, "default": names.pair_rounds, "metavar": "N"}),
        },
    }
    # fmt: on


def build_parser(
    names: Names, epilog: str = "", parser_class: type[argparse.ArgumentParser] | None = None
) -> argparse.ArgumentParser:
    """The parser (``parser_class``: an ArgumentParser of one's own, e.g. one whose errors
    raise instead of exiting, as the control machine's)."""
    parser = (parser_class or argparse.ArgumentParser)(
        prog="nccl_check.py",
        description=(
            "Verify every torch.distributed collective on every rank with exact, closed-form "
            "expected values, then measure bus bandwidth the way nccl-tests does. Run one process "
            "per device under torchrun, or per rank with --init-method/--rank/--world-size."
        ),
        epilog=epilog,
    )
    for title, options in option_groups(names).items():
        group = parser.add_argument_group(title)
        for flag, (help_text, settings) in options.items():
            group.add_argument(flag, help=help_text, **settings)
    return parser


def option_problems(args: argparse.Namespace) -> list[str]:
    """What is wrong between the options, before any rank knows its rank or world size."""
    low, high = args.min_bytes, args.max_bytes
    return [
        message
        for bad, message in (
            (args.factor < 2, f"--factor must be 2 or more, got {args.factor}"),
            (args.iters < 1, "--iters must be 1 or more"),
            (low < 1, "--min-bytes must be 1 or more"),
            (
                high is not None and high < low,
                f"--max-bytes ({high}) is smaller than --min-bytes ({low})",
            ),
            (
                args.init_method != "env://" and None in (args.rank, args.world_size),
                f"--init-method {args.init_method} needs --rank and --world-size",
            ),
        )
        if bad
    ]
