# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The rank layout (src/nccl_preflight/core/layout.py), alone and as the roles use it.

The filter's own rules first (slots, else devices, else the default; offsets in node-rank order),
then real ansible-playbook on local-connection hosts: roles/nccl_env and roles/launch's plan.yml
must give every host the same node rank, ranks per node and first rank, also for a host that
could not be reached and whose slots= differ from the default (they once disagreed: nccl_env
counted such a host with the default, plan.json with its slots).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_preflight.core.layout import LayoutError, nccl_rank_layout
from tests.builders.env_role import read_env, report_env, spark
from tests.playbook_run import run_play_with_facts


def summary(layout: dict) -> list[tuple]:
    return [
        (r["host"], r["node_rank"], r["nproc_per_node"], r["source"], r["rank_offset"], r["ranks"])
        for r in layout["hosts"]
    ]


def test_slots_that_differ_give_each_node_its_own_ranks() -> None:
    layout = nccl_rank_layout(["a", "b", "c"], slots={"a": 1, "b": 3, "c": 2})
    assert summary(layout) == [
        ("a", 0, 1, "slots", 0, [0]),
        ("b", 1, 3, "slots", 1, [1, 2, 3]),
        ("c", 2, 2, "slots", 4, [4, 5]),
    ]
    assert (layout["world_size"], layout["nnodes"]) == (6, 3)
    assert layout["by_host"]["c"] is layout["hosts"][2]


def test_slots_win_over_devices_and_devices_over_the_default() -> None:
    layout = nccl_rank_layout(
        ["a", "b", "c"], slots=[2, None, 0], devices=[8, 4, 0], default=[1, 1, 3]
    )
    assert summary(layout) == [
        ("a", 0, 2, "slots", 0, [0, 1]),
        ("b", 1, 4, "devices", 2, [2, 3, 4, 5]),
        ("c", 2, 3, "default", 6, [6, 7, 8]),
    ]
    assert layout["world_size"] == 9


def test_an_unreachable_host_counts_its_slots_else_the_default() -> None:
    """Unreachable hosts have no device count (no backend choice): slots, else the default."""
    layout = nccl_rank_layout(
        ["m", "gone-with-slots", "gone", "last"],
        slots={"gone-with-slots": 4},
        devices={"m": 2, "last": 2},  # the unreachable hosts are absent
        default=1,
    )
    assert [(r["nproc_per_node"], r["source"]) for r in layout["hosts"]] == [
        (2, "devices"),
        (4, "slots"),
        (1, "default"),
        (2, "devices"),
    ]
    assert [r["rank_offset"] for r in layout["hosts"]] == [0, 2, 6, 7]
    assert layout["world_size"] == 9


def test_the_default_alone() -> None:
    layout = nccl_rank_layout(["a", "b"], default=4)
    assert summary(layout) == [
        ("a", 0, 4, "default", 0, [0, 1, 2, 3]),
        ("b", 1, 4, "default", 4, [4, 5, 6, 7]),
    ]
    assert nccl_rank_layout(["solo"])["world_size"] == 1


def test_strings_from_templates_are_counts() -> None:
    layout = nccl_rank_layout(["a", "b"], slots=["2", ""], devices=["0", "3"], default="1")
    assert [r["nproc_per_node"] for r in layout["hosts"]] == [2, 3]


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"hosts": ["a", "a"]}, "a host is named twice"),
        ({"hosts": ["a", "b"], "slots": [1]}, "slots has 1 entries for 2 hosts"),
        ({"hosts": ["a"], "slots": ["two"]}, "slots of a is 'two', not a whole number"),
        ({"hosts": ["a"], "devices": [-1]}, "devices of a is -1, not 1 or more"),
        ({"hosts": ["a"], "default": None}, "a has no slots, no device count and no default"),
    ],
)
def test_bad_counts_name_the_host_and_the_argument(kwargs: dict, named: str) -> None:
    with pytest.raises(LayoutError, match=named):
        nccl_rank_layout(**kwargs)


# ----------------------------------------------------------------------- nccl_env and plan.json
PLAYBOOK = """
- name: Fake the facts of the nodes that answer; the others stay out, as unreachable hosts do
  hosts: nccl_nodes
  gather_facts: false
  tasks:
    - name: Set ansible_facts.nccl from the test's JSON and group the answering hosts
      ansible.builtin.set_fact:
        ansible_facts:
          nccl: "{{ (lookup('ansible.builtin.file', facts_file) | from_json)[inventory_hostname] }}"
      when: inventory_hostname not in unreachable
    - name: Put the nodes that answered into the group the later plays run on
      ansible.builtin.group_by:
        key: "{{ 'nccl_unreachable' if inventory_hostname in unreachable else 'nccl_reachable' }}"
      changed_when: false

- name: Validate on every node
  hosts: nccl_nodes
  gather_facts: false
  roles:
    - role: nccl_defaults
    - role: validate_inputs

- name: Work out the environment and write plan.json on the nodes that answered
  hosts: nccl_reachable
  gather_facts: false
  roles:
    - role: nccl_defaults
    - role: nccl_env
  tasks:
    - name: Write plan.json as the launch does
      ansible.builtin.include_role:
        name: launch
        tasks_from: plan.yml
    - name: Keep what the launch would pass torchrun and nccl_check.py
      ansible.builtin.copy:
        dest: "{{ nccl_report_root }}/launch-{{ inventory_hostname }}.json"
        content: >-
          {{ {'node_rank': nccl_env_node_rank, 'nproc_per_node': nccl_env_nproc_per_node,
              'rank_offset': nccl_env_rank_offset, 'world_size': nccl_env_world_size,
              'ranks_per_node': (nccl_env_layout.hosts | map(attribute='nproc_per_node')
                                 | map('string') | join(','))
                                if nccl_env_layout is defined else 'no layout'} | to_json }}
        mode: "0600"
      delegate_to: localhost
"""


def gpus(n: int) -> list[dict]:
    return [{"index": i, "name": "NVIDIA H100 80GB HBM3"} for i in range(n)]


def run_layout_playbook(tmp_path: Path, hostfile: str, gpu_counts: dict, unreachable: list):
    facts = {}
    for i, (host, count) in enumerate(gpu_counts.items()):
        facts[host] = spark(f"fab{i}", f"192.168.100.{10 + i}", f"10.20.0.{5 + i}")
        facts[host]["gpus"] = gpus(count)
    extra_vars = {"unreachable": unreachable}
    return run_play_with_facts(
        tmp_path, PLAYBOOK, "layout", hostfile, facts, extra_vars, timeout=180
    )


def test_nccl_env_and_the_plan_agree_with_an_unreachable_host_of_its_own_slots(
    tmp_path: Path,
) -> None:
    """n1 slots=1; n2 unreachable with slots=4; n3 counts its 2 GPUs; n4 has slots=3.

    Before the one layout, nccl_env counted n2 with the default (1): world size 7, n3 from rank
    2, while plan.json said n2 runs 4 ranks and n3 starts at rank 5."""
    hostfile = "n1 slots=1\nn2 slots=4\nn3\nn4 slots=3\n"
    result = run_layout_playbook(tmp_path, hostfile, {"n1": 8, "n3": 2, "n4": 8}, ["n2"])
    assert result.returncode == 0, result.stdout + result.stderr
    plan = json.loads((tmp_path / "reports" / "t1" / "plan.json").read_text())
    keys = ("host", "node_rank", "nproc_per_node", "rank_offset")
    rows = [tuple(h[k] for k in keys) for h in plan["hosts"]]
    assert rows == [("n1", 0, 1, 0), ("n2", 1, 4, 1), ("n3", 2, 2, 5), ("n4", 3, 3, 7)]
    assert [h["reachable"] for h in plan["hosts"]] == [True, False, True, True]
    assert plan["world_size"] == sum(h["nproc_per_node"] for h in plan["hosts"]) == 10
    for host in ("n1", "n3", "n4"):
        [row] = [h for h in plan["hosts"] if h["host"] == host]
        env = read_env(report_env(tmp_path, host))
        assert (int(env["NODE_RANK"]), int(env["NPROC_PER_NODE"])) == (
            row["node_rank"],
            row["nproc_per_node"],
        )
        launch = json.loads((tmp_path / "reports" / f"launch-{host}.json").read_text())
        assert (
            int(launch["node_rank"]),
            int(launch["nproc_per_node"]),
            int(launch["rank_offset"]),
            int(launch["world_size"]),
        ) == (row["node_rank"], row["nproc_per_node"], row["rank_offset"], plan["world_size"])
        # nccl_check.py's --ranks-per-node places a missing rank on the node plan.json names.
        assert launch["ranks_per_node"] == "1,4,2,3"
