# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/env_file.py: nccl.env's text, byte for byte as roles/nccl_env wrote it
with its Jinja template (nccl.env.j2, rendered by ansible-core 2.19's template lookup for these
very inputs before the text moved into the core), and the environment the Slurm front-end gives.
"""

from __future__ import annotations

import subprocess

from nccl_preflight.core.env_file import nccl_env_file_text, rank_environment

RUN_DIR = "/tmp/nccl-preflight-r1-h"
# What the template rendered (HCCL_IF_IP set by nccl_extra_env, so not by the project; the extra
# variables sorted by name regardless of case, as Jinja's dictsort; the reason on one line).
TEMPLATE_TEXT = (
    "# Ansible managed\n"
    "# NCCL/Gloo environment of h (node rank 1) for run r1.\n"
    "# The launch writes it on h as /tmp/nccl-preflight-r1-h/nccl.env (kept after the run with\n"
    "# -e launch_keep_run_dir=true); to rerun by hand there:"
    " set -a; . /tmp/nccl-preflight-r1-h/nccl.env; set +a\n"
    "# Backend hccl (the master's choice; nccl_backend auto). This host: hccl, 2 NPUs of 8\n"
    "NCCL_SOCKET_IFNAME=fab0\n"
    "GLOO_SOCKET_IFNAME=fab0\n"
    "MASTER_ADDR=10.0.0.1\n"
    "MASTER_PORT=29500\n"
    "NNODES=2\n"
    "NODE_RANK=1\n"
    "NPROC_PER_NODE=2\n"
    "HCCL_SOCKET_IFNAME=fab0\n"
    "NCCL_DEBUG=INFO\n"
    "NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH\n"
    "NCCL_DEBUG_FILE=/tmp/nccl-preflight-r1-h/results/nccl.%p.log\n"
    "hccl_if_ip=1\n"
    "HCCL_IF_IP=10.9.9.9\n"
    "NCCL_IB_HCA='a $(x)'\n"
    "Zed=True\n"
)
NODE = {
    "ifname": "fab0",
    "address": "10.0.0.2",
    "master_addr": "10.0.0.1",
    "master_port": 29500,
    "nnodes": 2,
    "node_rank": 1,
    "nproc_per_node": 2,
    "backend": "hccl",
}
EXTRA = {"NCCL_IB_HCA": "a $(x)", "hccl_if_ip": 1, "HCCL_IF_IP": "10.9.9.9", "Zed": True}


def render(**overrides: object) -> str:
    """The text of NODE's environment (core/stage.py node_environment's record)."""
    logs: dict = {"debug": "INFO", "debug_subsys": "INIT,NET,GRAPH", "extra_env": EXTRA}
    logs.update({k: v for k, v in overrides.items() if k in logs})
    settings: dict = {
        "host": "h",
        "run_id": "r1",
        "backend_choice": {"backend": "hccl", "reason": "2 NPUs\nof 8"},
        "nccl_backend": "auto",
    }
    settings.update({k: v for k, v in overrides.items() if k not in logs})
    env = rank_environment(NODE, **logs, run_dir=RUN_DIR)
    node = {**NODE, "file": f"{RUN_DIR}/nccl.env", "env": env}
    return nccl_env_file_text(node, **settings)


def test_the_text_is_the_templates_byte_for_byte() -> None:
    assert render() == TEMPLATE_TEXT


def test_what_nccl_extra_env_sets_wins_and_a_quiet_level_drops_the_subsystems() -> None:
    text = render(extra_env={"NCCL_DEBUG": "WARN", "NCCL_DEBUG_FILE": "/x"}, backend_choice={})
    lines = text.splitlines()
    assert lines[4].endswith("This host: ?, ")
    names = [line.split("=", 1)[0] for line in lines[5:]]
    assert names.count("NCCL_DEBUG") == names.count("NCCL_DEBUG_FILE") == 1
    assert "NCCL_DEBUG_SUBSYS" not in names
    assert lines[-2:] == ["NCCL_DEBUG=WARN", "NCCL_DEBUG_FILE=/x"]


LOGS = {"debug": "INFO", "debug_subsys": "INIT,NET,GRAPH", "extra_env": EXTRA}


def test_sourcing_the_text_gives_the_environment_the_ranks_get() -> None:
    """The file (sourced by a shell) and rank_environment (the Slurm launch's ranks) agree;
    without a run directory only NCCL_DEBUG_FILE is left out (the node sets its own)."""
    env = rank_environment(NODE, **LOGS, run_dir="/tmp/nccl-preflight-r1-h")
    shown = subprocess.run(
        ["env", "-i", "bash", "-c", "set -a; . /dev/stdin; set +a; env -0"],
        input=render(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    sourced = dict(item.split("=", 1) for item in shown.split("\0") if item)
    assert {name: sourced[name] for name in env} == env
    without_dir = rank_environment(NODE, **LOGS, run_dir=None)
    assert without_dir == {k: v for k, v in env.items() if k != "NCCL_DEBUG_FILE"}
