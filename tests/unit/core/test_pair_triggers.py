# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What makes nccl_pairwise=auto run the pairwise rounds (src/nccl_preflight/core/pair_triggers.py):
the expectation the controller judges with after the run
(src/nccl_preflight/core/bandwidth_expectation.py), from
the fabric when nccl_expected_busbw does not name the collective, x nccl_busbw_warn; rendered
through roles/launch/defaults into the arguments files/nccl_check.py parses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import filter_loader
from ansible.template import Templar, trust_as_template

from nccl_preflight.core import bandwidth_expectation as nccl_expect
from nccl_preflight.core.pair_triggers import (
    nccl_pair_trigger_args,
    nccl_pair_trigger_note,
    nccl_pair_triggers,
)
from nccl_preflight.core.preflight import fabric_checks as fc
from nccl_preflight.node.collective_tables import BANDWIDTH_COLLECTIVES
from nccl_preflight.node.fabric_facts import read_rdma
from tests.check.support import load_script

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"
nc = load_script()


def rdma(tree: str, extra_env: dict[str, str] | None = None) -> dict[str, Any] | None:
    """plan.json's ``rdma`` of a host whose sysfs is the transcribed tree."""
    found, reason = read_rdma(str(FIXTURES / "sysfs" / tree / "sys"))
    facts = {"fabric": {"rdma": found, "rdma_reason": reason, "nccl_config": {"effective": {}}}}
    return fc.nccl_rdma_plan(facts, extra_env)


def host(name: str, speed: int | None, rdma_row: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"host": name, "link_speed_mbps": speed, "rdma": rdma_row}


def by_collective(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["collective"]: r for r in rows}


def test_link_speed_rows_trigger_every_timed_collective_at_warn_times_the_fabric() -> None:
    hosts = [host("node0", 10000), host("node1", 25000)]
    rows = nccl_pair_triggers(hosts, {}, 0.8, 0.9)
    assert [r["collective"] for r in rows] == list(BANDWIDTH_COLLECTIVES)
    # the slowest host: 10 Gb/s / 8 x 0.9 = 1.125 GB/s expected, x 0.8 = 0.9 GB/s
    assert {(r["trigger_gbps"], r["expected_gbps"]) for r in rows} == {(0.9, 1.125)}
    assert {r["source"] for r in rows} == {"node0's fabric link 10000 Mb/s x 0.9"}
    # The same figure the controller judges the run with afterwards (no NCCL log here).
    expected, source = nccl_expect.fabric_expectation({"hosts": hosts}, 0.9)
    assert (rows[0]["expected_gbps"], rows[0]["source"]) == (expected, source)
    assert nccl_pair_trigger_args(rows)[0] == "--pair-trigger=all_reduce=0.9"


def test_rdma_rows_use_the_ports_nccl_ib_hca_selects_and_say_so() -> None:
    spark = rdma("spark")  # two active 200 Gb/s RoCE ports
    one = rdma("spark", {"NCCL_IB_HCA": "=rocep1s0f1"})
    both = nccl_pair_triggers([host("spark-1", 10000, spark)], {}, 0.8, 0.9)
    # 2 x 200 Gb/s / 8 x 0.9 = 45 GB/s, x 0.8 = 36; the 10 Gb/s management-speed link is unused
    assert by_collective(both)["all_reduce"]["trigger_gbps"] == 36.0
    assert (
        "2 x 200 Gb/s rocep1s0f1, roceP2p1s0f1 (every active RDMA port; no NCCL log"
        in (both[0]["source"])
    )
    selected = nccl_pair_triggers([host("spark-1", None, one)], {}, 0.8, 0.9)
    assert by_collective(selected)["all_reduce"]["trigger_gbps"] == 18.0
    assert (
        "1 x 200 Gb/s rocep1s0f1 (the active RDMA ports NCCL_IB_HCA==rocep1s0f1"
        in (selected[0]["source"])
    )
    # A cluster of an NDR node (400 Gb/s) and the spark node: the slower sets the figure.
    mixed = nccl_pair_triggers(
        [host("ndr", None, rdma("ib-ndr")), host("spark-1", None, one)], {}, 0.8, 0.9
    )
    assert mixed[0]["trigger_gbps"] == 18.0 and mixed[0]["source"].startswith("spark-1's ")
    plan = {"hosts": [host("ndr", None, rdma("ib-ndr")), host("spark-1", None, one)]}
    assert nccl_expect.fabric_expectation(plan, 0.9) == (22.5, mixed[0]["source"])


@pytest.mark.parametrize("unknown", [None, 0, -1])
def test_a_host_of_unknown_speed_gives_no_fabric_trigger(unknown: int | None) -> None:
    hosts = [host("node0", 10000), host("node1", unknown)]
    assert nccl_pair_triggers(hosts, {}, 0.8, 0.9) == []
    assert nccl_pair_triggers([], {}, 0.8, 0.9) == []
    note = nccl_pair_trigger_note([], hosts)
    assert note.startswith("auto runs the pairwise rounds only when a bandwidth test fails"), note
    assert note.endswith("the fabric gives no figure (link speed unknown on node1)"), note
    # The explicit expectations still trigger.
    rows = nccl_pair_triggers(hosts, {"all_reduce": 10}, 0.8, 0.9)
    assert rows == [
        {
            "collective": "all_reduce",
            "trigger_gbps": 8.0,
            "expected_gbps": 10.0,
            "source": "nccl_expected_busbw",
        }
    ]
    note = nccl_pair_trigger_note(rows, hosts)
    assert note == (
        "auto runs the pairwise rounds when a busbw falls below: all_reduce 8 GB/s "
        "(nccl_expected_busbw); none from the fabric: link speed unknown on node1"
    )


def test_an_explicit_nccl_expected_busbw_wins_over_the_fabric() -> None:
    rows = nccl_pair_triggers([host("node0", 10000)], {"all_reduce": 1000}, "0.8", "0.9")
    table = by_collective(rows)
    # each collective once, the explicit one first
    assert list(table) == list(BANDWIDTH_COLLECTIVES)
    assert table["all_reduce"]["trigger_gbps"] == 800.0
    assert table["all_reduce"]["source"] == "nccl_expected_busbw"
    assert table["broadcast"]["trigger_gbps"] == 0.9
    note = nccl_pair_trigger_note(rows, [host("node0", 10000)])
    assert note.startswith("auto runs the pairwise rounds when a busbw falls below: ")
    assert "all_reduce 800 GB/s (nccl_expected_busbw)" in note
    assert "all_gather 0.9, reduce_scatter 0.9" in note and "fabric link 10000 Mb/s" in note


def render_pairwise_args(variables: dict[str, Any]) -> list[str]:
    """The pairwise rounds' options of the rank script as roles/launch/tasks/run.yml renders
    them (core/stage.py rank_args, through roles/launch/vars' launch_stage_knobs), by Ansible
    with the project's filters; nccl_check_args empty, so they are the argv's last options."""
    filter_loader.add_directory(str(ROOT / "plugins" / "filter"))
    role_vars = yaml.safe_load((ROOT / "roles/launch/vars/main.yml").read_text())
    known = {
        k: {n: trust_as_template(t) for n, t in v.items()} if isinstance(v, dict) else v
        for k, v in role_vars.items()
    }
    known = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in known.items()}
    base = {
        "nccl_run_timeout": 300,
        "nccl_check_args": [],
        "nccl_pairwise": "auto",
        "nccl_pair_min_ratio": 0.8,
        "nccl_pair_rounds": 16,
        "nccl_busbw_min_bytes": 16384,
        "nccl_expected_busbw": {},
        "nccl_busbw_warn": 0.8,
        "nccl_busbw_efficiency": 0.9,
        "nccl_env_layout": {"hosts": [{"nproc_per_node": 1}]},
    }
    templar = Templar(loader=DataLoader(), variables={**known, **base, **variables})
    expression = (
        "{{ launch_stage_knobs | nccl_stage_rank_args(nccl_env_layout, 'gloo', 'out',"
        " launch_pair_triggers) }}"
    )
    args = templar.template(trust_as_template(expression))
    return args[args.index("--pairwise") :]


def test_the_launch_passes_the_triggers_and_a_users_own_pair_trigger_wins() -> None:
    hosts = [host("node0", 10000), host("node1", 10000), host("node2", 10000)]
    args = render_pairwise_args({"launch_plan_hosts": hosts})
    head = ["--pairwise", "auto", "--pair-min-ratio", "0.8", "--pair-rounds", "16"]
    head += ["--pair-trigger-min-bytes", "16384"]
    assert args[:8] == head
    assert args[8:] == [f"--pair-trigger={c}=0.9" for c in BANDWIDTH_COLLECTIVES]
    # The rank script parses them; nccl_check_args come after and win (the last one counts).
    parsed = nc.parse_args(
        ["--rank", "0", "--world-size", "1", *args, "--pair-trigger=all_reduce=0.5"]
    )
    assert dict(parsed.pair_trigger)["all_reduce"] == 0.5
    assert dict(parsed.pair_trigger)["broadcast"] == 0.9
    assert parsed.pair_trigger_min_bytes == 16384
    # Before plan.yml kept the rows (or with an unknown speed): only the explicit ones.
    assert render_pairwise_args({"nccl_expected_busbw": {"send_recv": 2}})[8:] == [
        "--pair-trigger=send_recv=1.6"
    ]


def test_the_launch_passes_the_first_pass_bound_to_the_ranks() -> None:
    """nccl_pair_rounds reaches the rank script (issue 27 item 6); nccl_check_args still win."""
    args = render_pairwise_args({"nccl_pair_rounds": 4})
    assert nc.parse_args(["--rank", "0", "--world-size", "1", *args]).pair_rounds == 4
    last = [*args, "--pair-rounds", "0"]
    assert nc.parse_args(["--rank", "0", "--world-size", "1", *last]).pair_rounds == 0
