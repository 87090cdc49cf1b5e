# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""roles/validate_inputs and roles/nccl_env run by real ansible-playbook on local-connection hosts.

Two inventory hosts (both this machine, connection local) get the facts of two DGX Sparks cabled
on differently named ports; the role must render each its own nccl.env, on the control machine
only: into a fact for the launch and into reports/<run-id>/<host>/nccl.env, never on a node.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from nccl_preflight.core.config import defaults
from nccl_preflight.node.fabric_choice import nccl_fabric_choice
from nccl_preflight.slurm.observe import Observed
from nccl_preflight.slurm.run import SlurmRun
from tests.builders.env_role import read_env, report_env, run_playbook, spark_facts

# A value with shell metacharacters and every kind of quote: one literal word, sourced or read.
HOSTILE_HCA = 'rocep1s0f0 $(x) a\'b "c" `d`'
# One run of the role that several tests read (each ansible-playbook costs seconds of CPU).
SHARED_EXTRA = {"nccl_extra_env": {"NCCL_IB_HCA": HOSTILE_HCA, "NCCL_DEBUG": "WARN"}}


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The role run once with SHARED_EXTRA: -> its tmp_path (reports/ and the run root)."""
    tmp_path = tmp_path_factory.mktemp("env-role")
    result = run_playbook(tmp_path, SHARED_EXTRA)
    assert result.returncode == 0, result.stdout + result.stderr
    return tmp_path


def test_hosts_with_different_interface_names_get_their_own(shared_run: Path) -> None:
    tmp_path = shared_run
    one = read_env(report_env(tmp_path, "spark-1"))
    two = read_env(report_env(tmp_path, "spark-2"))
    assert one["NCCL_SOCKET_IFNAME"] == one["GLOO_SOCKET_IFNAME"] == "enp1s0f0np0"
    assert two["NCCL_SOCKET_IFNAME"] == two["GLOO_SOCKET_IFNAME"] == "enp1s0f1np1"
    # MASTER_ADDR is the master's fabric address, not its management address.
    assert one["MASTER_ADDR"] == two["MASTER_ADDR"] == "192.168.100.10"
    assert (one["NODE_RANK"], two["NODE_RANK"], one["NNODES"]) == ("0", "1", "2")
    # slots=1 for spark-1; spark-2 has no slots, so its one GPU decides.
    assert (one["NPROC_PER_NODE"], two["NPROC_PER_NODE"]) == ("1", "1")
    # A value with shell metacharacters stays one literal word when read.
    assert two["NCCL_IB_HCA"] == HOSTILE_HCA
    # Nothing on the "nodes": the launch's start call makes the run directory and writes nccl.env.
    assert not list(tmp_path.glob("nccl-preflight-*"))
    env_path = report_env(tmp_path, "spark-1")
    assert env_path.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in (tmp_path / "reports" / "t1").iterdir()) == ["spark-1", "spark-2"]
    text = env_path.read_text()
    assert text.startswith("# ") and text.endswith("'\n"), text
    # The comment tells how to source it where the launch writes it: the node's run directory.
    assert f"set -a; . {tmp_path}/nccl-preflight-t1-spark-1/nccl.env; set +a" in text


def test_the_launch_gets_each_host_its_own_text_and_the_modes(tmp_path: Path) -> None:
    """The launch's start call writes nccl_env_file_content with the modes the role keeps as
    host facts (a later play of the same run sees them; the role's defaults it would not)."""
    later_play = tmp_path / "later-play.yml"
    later_play.write_text(
        "- name: A later play reads what the launch passes on\n"
        "  hosts: nccl_nodes\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - name: Write the facts the launch reads to a file per host\n"
        "      ansible.builtin.copy:\n"
        f'        dest: "{tmp_path}/seen-{{{{ inventory_hostname }}}}.json"\n'
        "        content: >-\n"
        "          {{ {'content': nccl_env_file_content, 'dir_mode': nccl_env_run_dir_mode,\n"
        "              'file_mode': nccl_env_file_mode} | to_json }}\n"
        "        mode: '0600'\n"
    )
    result = run_playbook(tmp_path, {"nccl_env_file_mode": "0640"}, args=(str(later_play),))
    assert result.returncode == 0, result.stdout + result.stderr
    texts = set()
    for host in ("spark-1", "spark-2"):
        seen = json.loads((tmp_path / f"seen-{host}.json").read_text())
        assert seen["content"] == report_env(tmp_path, host).read_text()
        assert (seen["dir_mode"], seen["file_mode"]) == ("0700", "0640")
        texts.add(seen["content"])
    assert len(texts) == 2
    assert report_env(tmp_path, "spark-2").stat().st_mode & 0o777 == 0o640


def test_sourcing_nccl_env_in_a_shell_gives_the_same_values(shared_run: Path) -> None:
    env_file = report_env(shared_run, "spark-2")
    shown = subprocess.run(
        [
            "bash",
            "-c",
            'set -a; . "$1"; printf "%s|%s" "$NCCL_IB_HCA" "$MASTER_PORT"',
            "-",
            env_file,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown == f"{HOSTILE_HCA}|29500"


# Variables the schema refuses (core/variables.py): every problem of one run is named at once, one
# line each, so one run gives them all.
SCHEMA_REFUSALS = {
    "nccl_socket_ifname": ("eth0;reboot", "nccl_socket_ifname 'eth0;reboot'"),
    "nccl_master_port": (70000, "nccl_master_port is 70000, outside 1024-65535"),
    "nccl_fabric_cidr": ("192.168.100.0/33", "nccl_fabric_cidr '192.168.100.0/33'"),
    "nccl_backend": ("infiniband", "nccl_backend"),
    # a role's own knob: no role checks its argument spec at its start (a task per host)
    "launch_watch_interval": ("often", "launch_watch_interval is 'often'"),
}


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({name: value for name, (value, _) in SCHEMA_REFUSALS.items()}, None),
        # parsed by the rank script's own parser on the control machine (core/rank_args.py)
        ({"nccl_check_args": ["--max-bites", "1M"]}, "nccl_check_args unrecognized arguments"),
        ({"nccl_check_args": ["--iters", "many"]}, "nccl_check_args argument --iters: 'many'"),
        ({"nccl_check_args": ["--out-dir", "/tmp/x"]}, "nccl_check_args --out-dir is not"),
    ],
)
def test_bad_inputs_fail_before_any_host_is_touched(
    tmp_path: Path, extra: dict, named: str | None
) -> None:
    result = run_playbook(tmp_path, extra)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    for said in [named] if named else [said for _, said in SCHEMA_REFUSALS.values()]:
        assert said in output, (said, output[-3000:])
    # Nothing was rendered: no run directory exists, no report was written.
    assert not list(tmp_path.glob("nccl-preflight-*"))
    assert not (tmp_path / "reports").exists()


def test_a_launch_script_of_ones_own_parses_its_own_arguments(tmp_path: Path) -> None:
    """launch_script naming a script that does not import the rank script's options: its
    nccl_check_args are its own business, not refused by the rank script's parser."""
    script = tmp_path / "own_check.py"
    script.write_text("import sys\nprint(sys.argv)\n")
    extra = {"launch_script": str(script), "nccl_check_args": ["--my-own-option", "1"]}
    result = run_playbook(tmp_path, extra)
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_mode_writes_nothing_on_the_nodes(tmp_path: Path) -> None:
    """--check is a dry run whose report is still written on the control machine (marked check
    mode by the report role): each host's nccl.env lands there, nothing in the nodes' run root."""
    result = run_playbook(tmp_path, {}, args=("--check",))
    assert result.returncode == 0, result.stdout + result.stderr
    assert read_env(report_env(tmp_path, "spark-2"))["NCCL_SOCKET_IFNAME"] == "enp1s0f1np1"
    assert not list(tmp_path.glob("nccl-preflight-*"))


@pytest.mark.parametrize(
    "extra",
    [SHARED_EXTRA, {"nccl_debug": "TRACE", "nccl_debug_subsys": "ALL"}, {"nccl_debug": ""}],
    ids=["extra_env", "trace", "no_debug"],
)
def test_the_slurm_front_end_gives_the_ranks_the_same_environment(
    tmp_path_factory: pytest.TempPathFactory, shared_run: Path, extra: dict
):
    """For the same variables and the same facts, the Slurm launch's ranks get what nccl.env
    sets (slurm/run.py SlurmRun.environment, core/stage.py node_environment), but
    NCCL_DEBUG_FILE, which the node points into its own run directory."""
    if extra is SHARED_EXTRA:
        tmp_path = shared_run
    else:
        tmp_path = tmp_path_factory.mktemp("env-role-slurm")
        result = run_playbook(tmp_path, extra)
        assert result.returncode == 0, result.stdout + result.stderr
    config = {**defaults(), **extra, "nccl_fabric_cidr": "192.168.100.0/24"}
    run = SlurmRun.__new__(SlurmRun)
    run.config, run.nodes = config, ["spark-1", "spark-2"]
    run.node_config = {node: config for node in run.nodes}
    facts = spark_facts()
    choices = {n: nccl_fabric_choice(f, "", config["nccl_fabric_cidr"]) for n, f in facts.items()}
    run.env_by_node = {}
    assert run.environment(Observed(facts=facts, choices=choices)) == {}
    for host in run.nodes:
        written = read_env(report_env(tmp_path, host))
        run_dir = tmp_path / f"nccl-preflight-t1-{host}"
        assert written.pop("NCCL_DEBUG_FILE", None) == f"{run_dir}/results/nccl.%p.log"
        assert written == run.env_by_node[host]["env"]
