# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""nccl_check_args parsed on the control machine by the rank script's own parser
(src/nccl_preflight/core/rank_args.py), before anything runs: the same verdict as the ranks'."""

from __future__ import annotations

import pytest

from nccl_preflight.core.rank_args import (
    FRONT_END_OPTIONS,
    nccl_rank_args_problems,
    rank_args_problem,
    rank_parser,
)
from tests.check.support import load_script

GOOD = [
    ["--max-bytes", "16K", "--iters", "2", "--warmup", "1"],
    ["--tests", "correctness", "--pause-before", "barrier@0"],
    ["--tests", "all_reduce_sum,bandwidth_all_reduce", "--pair-bytes", "1M", "--pair-iters", "3"],
    ["--dtype", "bf16", "--min-busbw-for", "all_reduce=5", "--pairwise", "always"],
    ["--pair-trigger=all_gather=1.5", "--verbose", "--device", "cpu"],
    [],
]


@pytest.mark.parametrize("args", GOOD)
def test_what_the_ranks_accept_is_accepted(args: list[str]) -> None:
    assert rank_args_problem(args) == ""
    assert nccl_rank_args_problems(args) == []


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--max-bites", "1M"], "unrecognized arguments: --max-bites"),
        (["--iters", "many"], "argument --iters: 'many' is not an integer"),
        (["--tests", "all_reduce_summ"], "argument --tests: unknown test 'all_reduce_summ'"),
        (["--dtype", "float8"], "argument --dtype: 'float8' is not one of"),
        (["--min-busbw-for", "allgather=1"], "argument --min-busbw-for: 'allgather=1'"),
        (["--pairwise", "sometimes"], "argument --pairwise: invalid choice: 'sometimes'"),
        (["--factor", "1"], "--factor must be 2 or more, got 1"),
        (["--min-bytes", "2M", "--max-bytes", "1M"], "is smaller than --min-bytes"),
        (["--t", "3"], "ambiguous option: --t could match"),
        (["16K"], "unrecognized arguments: 16K"),
    ],
)
def test_a_wrong_option_is_named(args: list[str], named: str) -> None:
    assert named in rank_args_problem(args)
    (problem,) = nccl_rank_args_problems(args)
    assert problem.startswith("nccl_check_args ") and named in problem


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--out-dir", "/tmp/x"], "--out-dir"),
        (["--out=/tmp/x"], "--out-dir"),  # argparse's abbreviation of a long option
        (["--timeout", "30"], "--timeout"),
        (["--backend", "gloo"], "--backend"),
        (["--backend", "auto"], "--backend"),  # the default, still after the front-end's own
        (["--ranks-per-node", "2,2"], "--ranks-per-node"),
        (["--init-method", "tcp://h:1", "--rank", "0", "--world-size", "2"], "--init-method"),
        (["--list-tests"], "--list-tests"),
    ],
)
def test_an_option_the_front_ends_set_is_refused_with_what_to_do(
    args: list[str], option: str
) -> None:
    problem = rank_args_problem(args)
    assert problem.startswith(f"{option} is not accepted here: "), problem


@pytest.mark.parametrize("args", [["-h"], ["--help"], ["--he"]])
def test_help_is_refused_without_printing_it(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert rank_args_problem(args).startswith("-h/--help is not accepted here")
    assert capsys.readouterr() == ("", "")


def test_the_parser_is_the_rank_scripts_own() -> None:
    """Every option of the rank script, with the same defaults: one list of options, not two."""
    script = load_script().build_parser()
    ours = rank_parser()
    assert sorted(script._option_string_actions) == sorted(ours._option_string_actions)
    for action in script._actions:
        assert ours.get_default(action.dest) == action.default, action.dest
    assert set(FRONT_END_OPTIONS) <= {action.dest for action in ours._actions}


def test_a_launch_script_of_ones_own_is_left_to_parse_its_own_arguments() -> None:
    own = "import sys\nprint(sys.argv)\n"
    assert nccl_rank_args_problems(["--my-option"], own) == []
    wrapper = "import nccl_check_options\nimport runpy\n"
    assert nccl_rank_args_problems(["--my-option"], wrapper) != []
    assert nccl_rank_args_problems("--iters 2") == []  # not a list: nccl_input_problems says so
