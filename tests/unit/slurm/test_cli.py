# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""bin/nccl-preflight as a conventional command: --help lists every command with an example and
the exit codes, --version prints the one version, no arguments or an unknown command or option
exits 2 (USAGE) with the nearest known word and starts nothing, and every ansible-playbook option
still passes through unchanged (src/nccl_preflight/slurm/cli.py, core/command_line.py,
core/exit_classes.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import nccl_preflight
from nccl_preflight.core import exit_classes
from nccl_preflight.core.command_line import did_you_mean, unknown_option
from nccl_preflight.slurm import cli, node_options

ROOT = Path(__file__).resolve().parents[3]
BIN = ROOT / "bin" / "nccl-preflight"
USAGE = exit_classes.USAGE.code
BAD_INPUT = exit_classes.BY_NAME["bad_input"].code


def nccl_preflight_cmd(*args: str, bin_path: Path = BIN) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(bin_path), *args],
        cwd=ROOT,
        env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


# --- --help and --version --------------------------------------------------------------------


def test_help_lists_every_command_with_an_example_and_every_exit_code() -> None:
    done = nccl_preflight_cmd("--help")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "-i INVENTORY [ansible-playbook option ...]" in text  # the validate run
    examples = text.split("examples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert examples[0].split()[:3] == ["nccl-preflight", "-i", "inventory/dgx"]
    commands = cli.subcommands(cli.parser())
    assert sorted(commands) == sorted(cli.COMMANDS) == ["bundle", "node-check", "slurm"]
    for name in cli.COMMANDS:
        assert re.search(rf"^    {name}\s", text, re.M), f"{name} is not listed"
        (example,) = [e for e in examples if e.split()[1] == name]
        # the example is a command line its own parser takes
        assert cli.usage_refusal(cli.parser(), example.split()[1:]) == ("", "")
        cli.parser().parse_args(example.split()[1:])
    for title, rows in exit_classes.SECTIONS:
        assert f"  {title}\n" in text
        for row in rows:
            assert re.search(rf"^\s+{row.code}\s+{row.name}\s", text, re.M), row.name


def test_version_has_one_home_read_by_pyproject_and_every_command() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"]
    assert pyproject["project"]["dynamic"] == ["version", "dependencies"]
    setuptools_config = pytest.importorskip("setuptools.config.pyprojecttoml")
    built = setuptools_config.read_configuration(ROOT / "pyproject.toml")["project"]
    assert built["version"] == nccl_preflight.__version__
    # the control machine's requirements have one home too: requirements.txt, torch not among them
    wanted = [
        line.split("#")[0].strip()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.split("#")[0].strip()
    ]
    assert built["dependencies"] == wanted and not [r for r in wanted if "torch" in r]
    assert built["scripts"] == {"nccl-preflight": "nccl_preflight.command:console_script"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", nccl_preflight.__version__)
    expected = f"nccl-preflight {nccl_preflight.__version__}\n"
    for argv in (["--version"], ["slurm", "--version"], ["node-check", "--version"]):
        done = nccl_preflight_cmd(*argv)
        assert (done.returncode, done.stdout) == (0, expected), (argv, done.stderr)


# --- usage errors: exit 2, the nearest word, nothing started ---------------------------------


@pytest.fixture
def fake_tree(tmp_path: Path) -> Path:
    """A checkout whose ansible-playbook (.venv/bin/ansible-playbook, which bin/nccl-preflight
    runs first) records its arguments in started.txt instead of running anything."""
    (tmp_path / "bin").mkdir()
    shutil.copy2(BIN, tmp_path / "bin" / "nccl-preflight")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    fake = tmp_path / ".venv" / "bin" / "ansible-playbook"
    fake.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(tmp_path / 'started.txt')!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
    )
    fake.chmod(0o755)
    return tmp_path


def started(tree: Path) -> list[str] | None:
    record = tree / "started.txt"
    return json.loads(record.read_text()) if record.exists() else None


def test_no_arguments_prints_usage_and_exits_2_without_a_run(fake_tree: Path) -> None:
    done = nccl_preflight_cmd(bin_path=fake_tree / "bin" / "nccl-preflight")
    assert done.returncode == USAGE == 2, done.stdout + done.stderr
    assert done.stderr.startswith("usage: nccl-preflight -i INVENTORY")
    assert "give a command (slurm, node-check, bundle) or -i INVENTORY" in done.stderr
    assert started(fake_tree) is None


def test_the_options_of_a_run_reach_ansible_playbook_unchanged(fake_tree: Path) -> None:
    argv = ["-i", "inv", "-e", "x=y", "--tags", "preflight", "--check", "-l", "node1", "-vv"]
    done = nccl_preflight_cmd(*argv, bin_path=fake_tree / "bin" / "nccl-preflight")
    assert done.returncode == 0, done.stderr  # the fake judged nothing
    recorded = started(fake_tree)
    assert recorded is not None, "the run was not started"
    assert recorded[0] == str(fake_tree / "playbooks" / "validate.yml")
    assert recorded[1 : 1 + len(argv)] == argv
    assert recorded[1 + len(argv)] == "-e" and "report_verdict_copy" in recorded[2 + len(argv)]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["nodecheck", "--config", "x"], "unknown command 'nodecheck'; did you mean node-check?"),
        (["slurn", "-N", "2"], "unknown command 'slurn'; did you mean slurm?"),
        (["inventory/dgx"], "unknown command 'inventory/dgx' (nccl-preflight --help"),
        (["node-check", "--confg", "x.yml"], "unknown option --confg; did you mean --config?"),
        (["node-check", "--config", "x", "--dran"], "unknown option --dran; did you mean --drain?"),
        (["bundle", "--outptu", "x.pyz"], "unknown option --outptu; did you mean --output?"),
        (["slurm", "--nodse", "2", "--config=c"], "unknown option --nodse; did you mean --nodes?"),
        (["slurm", "-N", "2", "--config", "c", "-Z"], "unknown option -Z"),
    ],
)
def test_an_unknown_command_or_option_exits_2_naming_the_nearest(
    fake_tree: Path, argv: list[str], said: str
) -> None:
    done = nccl_preflight_cmd(*argv, bin_path=fake_tree / "bin" / "nccl-preflight")
    assert done.returncode == USAGE, done.stdout + done.stderr
    assert said in done.stderr.splitlines()[-1], done.stderr
    assert done.stderr.startswith("usage: ") and "Traceback" not in done.stderr
    assert started(fake_tree) is None


def test_a_slurm_value_is_the_runs_bad_input_not_a_usage_error(tmp_path: Path) -> None:
    done = nccl_preflight_cmd("slurm", "-N", "two", "--config", str(tmp_path / "c.yml"))
    assert done.returncode == BAD_INPUT == 12, done.stderr
    assert "argument -N/--nodes: 'two' is not a positive integer" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["-i", "inventory/local", "--tgas", "preflight"], "--tgas; did you mean --tags?"),
        (["--vresion"], "--vresion; did you mean --version?"),
    ],
)
def test_an_unknown_ansible_playbook_option_exits_2_before_ansible_runs(
    argv: list[str], said: str
) -> None:
    done = nccl_preflight_cmd(*argv)
    assert done.returncode == USAGE, done.stdout + done.stderr
    assert f"unknown option {said}" in done.stderr
    assert "PLAY" not in done.stdout and "usage: ansible-playbook" not in done.stderr


# --- the scanner, on ansible-playbook's own parser and on ours -------------------------------


@pytest.fixture(scope="module")
def ansible_parser() -> argparse.ArgumentParser:
    playbook_cli = pytest.importorskip("ansible.cli.playbook")
    parsed = playbook_cli.PlaybookCLI(["ansible-playbook", "site.yml"])
    parsed.init_parser()
    return parsed.parser


@pytest.mark.parametrize(
    "argv",
    [
        ["-i", "inv", "-e", "x=y", "--tags", "preflight", "--check"],
        ["-i", "inv", "-e", "@vars.yml", "-vvv", "-l", "node1", "--skip-tags=launch", "-CD"],
        ["--inventory=inv", "--extra-vars", '{"nccl_check_args": ["--tgas"]}', "-f", "10"],
        ["-i", "inv", "--tag", "preflight", "-kK", "--become", "-u", "root", "-T", "30"],
        ["-iinv", "--limit", "node[1:2]", "--list-hosts", "--forks", "-1"],
    ],
)
def test_every_ansible_playbook_option_is_known(
    ansible_parser: argparse.ArgumentParser, argv: list[str]
) -> None:
    assert unknown_option(ansible_parser, argv) == ""
    ansible_parser.parse_known_args(["site.yml", *argv])  # argparse takes it too


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["-i", "inv", "--tgas", "preflight"], "unknown option --tgas; did you mean --tags?"),
        (["-i", "inv", "--chekc"], "unknown option --chekc; did you mean --check?"),
        (["-i", "inv", "--extra-varz=x=1"], "unknown option --extra-varz; did you mean"),
        (["-i", "inv", "-Q"], "unknown option -Q"),
        (["-i", "inv", "-vQ"], "unknown option -vQ"),
    ],
)
def test_an_unknown_ansible_playbook_option_is_named(
    ansible_parser: argparse.ArgumentParser, argv: list[str], said: str
) -> None:
    assert unknown_option(ansible_parser, argv).startswith(said)
    with pytest.raises(SystemExit):  # argparse refuses it too
        ansible_parser.parse_args(["site.yml", *argv])


def test_values_that_look_like_options_are_read_as_argparse_reads_them() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", "--nodes", type=int)
    parser.add_argument("--exclusive", nargs="?", const="yes")
    parser.add_argument("rest", nargs="*")
    for argv in (
        ["-n", "-3"],
        ["--exclusive", "--nodes", "2"],
        ["-n2", "--", "--anything", "-x"],
        ["--nodes=-1", "a", "b"],
        ["--exc", "user", "-n", "1"],  # an abbreviation argparse takes
    ):
        assert unknown_option(parser, argv) == "", argv
        parser.parse_args(argv)
    assert unknown_option(parser, ["--exclusive", "--node", "2", "--nodez", "1"]).startswith(
        "unknown option --nodez; did you mean --nodes?"
    )
    assert did_you_mean("xyzzy", ["slurm", "bundle"]) == ""


# --- one table of exit codes: the code, --help and README ------------------------------------


def test_node_check_exits_with_the_tables_codes() -> None:
    rows = exit_classes.NODE_CHECK
    by_name = {c.name: c.code for c in rows}
    assert by_name == {"healthy": 0, "failed": 1, "refused": 2, "unfinished": 3}
    statuses = (node_options.HEALTHY, node_options.FAILED, node_options.REFUSED)
    assert statuses == (by_name["healthy"], by_name["failed"], by_name["refused"])
    assert (node_options.UNFINISHED, "unfinished") in [(c.code, c.name) for c in rows]
    # a refused node-check option is the same 2 as any usage error
    assert exit_classes.USAGE.code == by_name["refused"]


def markdown_rows(text: str, heading: str) -> list[tuple[int, str]]:
    """(code, class) of every row of the first table under ``heading``."""
    section = text.split(heading + "\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", section, re.M)
    return [(int(code), name) for code, name in rows]


def test_readme_shows_the_one_table_in_its_order() -> None:
    readme = (ROOT / "README.md").read_text()
    table = [(c.code, c.name) for _title, rows in exit_classes.SECTIONS for c in rows]
    assert markdown_rows(readme, "## Exit codes") == table
    slurm_doc = (ROOT / "docs" / "slurm.md").read_text()
    node_rows = [(c.code, c.name) for c in exit_classes.NODE_CHECK]
    assert markdown_rows(slurm_doc, "## Output and exit status") == node_rows
