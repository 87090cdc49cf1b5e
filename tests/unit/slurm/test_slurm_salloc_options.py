# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The slurm command's allocation options (src/nccl_preflight/slurm/salloc_options.py,
run_args.py): salloc's names and meanings, SALLOC_* under the command line, every value checked
before salloc, refusals inside an allocation and without Slurm's commands, all exit 12 naming
what is wrong, before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core.config import defaults
from nccl_preflight.slurm import cli
from nccl_preflight.slurm.salloc_options import (
    DEFAULT_WAIT_S,
    OptionError,
    SallocRequest,
    gpus_problem,
    salloc_request,
    time_seconds,
)
from tests.builders.slurm import CPU, command, refused


def parsed(*argv: str) -> Any:
    return cli.parser().parse_args(["slurm", "--config", "c.yml", *argv])


def request(*argv: str, env: dict[str, str] | None = None, **config: Any) -> SallocRequest:
    return salloc_request(parsed(*argv), env or {}, {**defaults(), **(config or CPU)})


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 1800),  # minutes
        ("30:15", 1815),  # minutes:seconds
        ("2:30:15", 9015),  # hours:minutes:seconds
        ("1-2", 93600),  # days-hours
        ("1-2:30", 95400),  # days-hours:minutes
        ("1-2:30:15", 95415),  # days-hours:minutes:seconds
        ("UNLIMITED", None),
        ("infinite", None),
        ("0", None),  # salloc(1): a time limit of zero imposes none
    ],
)
def test_every_slurm_time_format_is_read(text: str, seconds: float | None) -> None:
    assert time_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "1:2:3:4", "1-", "-5", "2h", "1-2-3", "1:", "soon", "1.5"])
def test_a_time_slurm_would_refuse_is_refused(text: str) -> None:
    with pytest.raises(OptionError, match="is not a Slurm time"):
        time_seconds(text)


def test_gpus_per_node_takes_slurms_forms() -> None:
    for good in ("8", "a100:8", "volta:3,kepler:1", "0"):
        assert gpus_problem(good) == "", good
    for bad in ("a100", "-1", "8x", "a100:0", "", "a 100:8"):
        assert gpus_problem(bad), bad


def test_the_defaults_are_an_exclusive_allocation_that_waits_600_s() -> None:
    asked = request("-N", "3")
    assert asked.argv() == ["salloc", "-N", "3", "--no-shell", "--job-name=nccl-preflight",
                            "--exclusive"]  # fmt: skip
    assert asked.wait_s == DEFAULT_WAIT_S == 600
    assert request("-N", "3", "--wait-allocation", "0").wait_s == 0


def test_every_option_reaches_salloc_under_its_own_name() -> None:
    asked = request(
        *("-N", "2", "-p", "gpu", "-A", "proj", "-q", "high", "--reservation", "maint"),
        *("-C", "a100&ib", "-t", "0:20:00", "-w", "gpu[01-02]", "-x", "gpu03"),
        *("--gpus-per-node", "a100:8", "--exclusive=user"),
    )
    assert asked.options == [
        "--partition=gpu",
        "--account=proj",
        "--qos=high",
        "--reservation=maint",
        "--constraint=a100&ib",
        "--time=0:20:00",
        "--nodelist=gpu[01-02]",
        "--exclude=gpu03",
        "--exclusive=user",
        "--gpus-per-node=a100:8",
    ]
    assert request("-N", "2", "-s").options == ["--oversubscribe"]


def test_salloc_variables_apply_and_the_command_line_wins() -> None:
    env = {
        "SALLOC_PARTITION": "batch",
        "SALLOC_ACCOUNT": "acct",
        "SALLOC_QOS": "low",
        "SALLOC_RESERVATION": "resv",
        "SALLOC_CONSTRAINT": "ib",
        "SALLOC_TIMELIMIT": "1-0",
        "SALLOC_GPUS_PER_NODE": "4",
        "SALLOC_EXCLUSIVE": "user",
    }
    asked = request("-N", "2", env=env)
    assert asked.options == [
        "--partition=batch",
        "--account=acct",
        "--qos=low",
        "--reservation=resv",
        "--constraint=ib",
        "--time=1-0",
        "--exclusive=user",
        "--gpus-per-node=4",
    ]
    assert asked.sources["--partition"] == "SALLOC_PARTITION"
    over = request("-N", "2", "-p", "gpu", "-t", "10", "--gpus-per-node", "8", "-s", env=env)
    assert "--partition=gpu" in over.options and "--partition=batch" not in over.options
    assert "--time=10" in over.options and "--gpus-per-node=8" in over.options
    assert "--oversubscribe" in over.options and "--exclusive=user" not in over.options
    assert over.sources["--partition"] == "--partition"
    # SALLOC_EXCLUSIVE set empty is the flag; oversubscribe is salloc's opposite
    assert "--exclusive" in request("-N", "2", env={"SALLOC_EXCLUSIVE": ""}).options
    shared = request("-N", "2", env={"SALLOC_EXCLUSIVE": "oversubscribe"})
    assert "--oversubscribe" in shared.options


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SALLOC_TIMELIMIT", "tomorrow"),
        ("SALLOC_GPUS_PER_NODE", "many"),
        ("SALLOC_EXCLUSIVE", "always"),
        ("SALLOC_PARTITION", "a b"),
    ],
)
def test_a_bad_salloc_variable_is_named(variable: str, value: str) -> None:
    with pytest.raises(OptionError, match=f"^{variable} "):
        request("-N", "2", env={variable: value})


def test_gpus_per_node_follows_what_the_run_needs() -> None:
    base = {"nccl_backend": "nccl", "nccl_nproc_per_node": 4}
    assert "--gpus-per-node=4" in request("-N", "2", **base).options
    # item 2's nccl_gpus_per_node, when set, is the count to ask for
    assert "--gpus-per-node=8" in request("-N", "2", **base, nccl_gpus_per_node=8).options
    auto = {"nccl_backend": "auto", "nccl_nproc_per_node": 2}
    assert "--gpus-per-node=2" in request("-N", "2", **auto, nccl_require_gpu=True).options
    cpu_allowed = request("-N", "2", **auto, nccl_require_gpu=False).options
    assert not [o for o in cpu_allowed if o.startswith("--gpus")]
    assert not [o for o in request("-N", "2").options if o.startswith("--gpus")]  # gloo
    for variable in ("SALLOC_GPUS", "SALLOC_GRES"):
        asked = request("-N", "2", env={variable: "gpu:8"}, **base)
        assert not [o for o in asked.options if o.startswith("--gpus")], variable
    assert not [o for o in request("-N", "2", "--gpus-per-node", "0", **base).options if "gpu" in o]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["-w", "gpu[01-03]"], "--nodelist names 3 nodes, more than -N 2"),
        (["-w", "gpu01", "-x", "gpu[01-02]"], "--nodelist and --exclude both name gpu01"),
        (["-w", "gpu[01"], "--nodelist 'gpu[01' is not a Slurm hostlist"),
        (["-x", "/nonexistent/nodes"], "--exclude '/nonexistent/nodes' (a file"),
        (["-C", ""], "--constraint is empty"),
        (["-A=-x"], "--account '-x' is not a Slurm name"),
    ],
)
def test_a_bad_value_is_refused_naming_the_option(argv: list[str], named: str) -> None:
    with pytest.raises(OptionError) as exc:
        request("-N", "2", *argv)
    assert named in str(exc.value)


def test_a_nodelist_file_is_read_as_salloc_reads_it(tmp_path: Path) -> None:
    listed = tmp_path / "nodes"
    listed.write_text("gpu01\ngpu02\n")
    assert f"--nodelist={listed}" in request("-N", "2", "-w", str(listed)).options
    listed.write_text("gpu[01-03]\n")
    with pytest.raises(OptionError, match="names 3 nodes"):
        request("-N", "2", "-w", str(listed))


# --- the command: exit 12 and one line naming what is wrong, before anything runs ------------


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["-N", "0"], "argument -N/--nodes: '0' is not a positive integer"),
        (["-N", "two"], "argument -N/--nodes: 'two' is not a positive integer"),
        (["-N", "2", "--time", "1:2:3:4"], "--time '1:2:3:4' is not a Slurm time"),
        (["-N", "2", "--wait-allocation", "soon"], "argument --wait-allocation: 'soon'"),
        (["-N", "2", "--exclusive=all"], "argument --exclusive: 'all'"),
        (["-N", "2", "--", "--max-bites", "1M"], "the arguments after --: unrecognized"),
        (["-N", "2", "--", "--iters", "x"], "argument --iters: 'x' is not an integer"),
    ],
)
def test_the_command_refuses_a_bad_value_with_exit_12(
    tmp_path: Path, argv: list[str], named: str
) -> None:
    assert named in refused(command(tmp_path, *argv))
    assert not (tmp_path / "r").exists()


def test_the_configs_check_args_are_parsed_by_the_rank_scripts_parser(tmp_path: Path) -> None:
    line = refused(command(tmp_path, "-N", "2", nccl_check_args=["--tests", "all_reduce_summ"]))
    assert f"{tmp_path / 'nccl.yml'}: nccl_check_args: argument --tests" in line
    assert "unknown test 'all_reduce_summ'" in line
    line = refused(command(tmp_path, "-N", "2", nccl_check_args=["--out-dir", "/tmp/x"]))
    assert "--out-dir is not accepted here" in line


def test_a_bad_salloc_variable_is_refused_by_the_command(tmp_path: Path) -> None:
    line = refused(command(tmp_path, "-N", "2", env={"SALLOC_TIMELIMIT": "2h"}))
    assert line.startswith("nccl-preflight slurm: SALLOC_TIMELIMIT '2h' is not a Slurm time")


def test_inside_an_allocation_salloc_options_are_refused_with_the_reason(tmp_path: Path) -> None:
    inside = {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "n[1-2]"}
    line = refused(command(tmp_path, "-N", "2", "-p", "gpu", "--time", "5", "-s", env=inside))
    assert "--partition, --time, --oversubscribe cannot apply inside job 77" in line
    assert "SLURM_JOB_ID is set" in line
    line = refused(command(tmp_path, "-N", "2", "--wait-allocation", "5", env=inside))
    assert "--wait-allocation cannot apply inside job 77" in line


def test_without_slurms_commands_on_path_one_line_says_which(tmp_path: Path) -> None:
    line = refused(command(tmp_path, "-N", "2", env={"PATH": str(tmp_path)}))
    assert "salloc, squeue, scancel, scontrol, srun: not found on PATH" in line
    inside = {"PATH": str(tmp_path), "SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "n[1-2]"}
    line = refused(command(tmp_path, "-N", "2", env=inside))
    assert "scontrol, srun: not found on PATH" in line and "salloc" not in line
