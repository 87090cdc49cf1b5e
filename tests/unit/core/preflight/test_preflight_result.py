# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/preflight/result.py: what every pre-flight judge shares."""

from __future__ import annotations

from nccl_preflight.core.preflight.result import (
    append_results,
    host_table,
    no_observation,
    rank_order,
    reference_value,
    too_few_devices,
)


def test_rank_order_puts_the_observed_hosts_of_the_order_first() -> None:
    observations = {"c": {}, "a": {}, "b": {}}
    assert rank_order(observations, {"order": ["b", "gone", "a"]}) == ["b", "a", "c"]
    assert rank_order(observations, {}) == ["c", "a", "b"]


def test_a_host_without_observation_fails_every_check_by_name() -> None:
    results = no_observation(("mtu", "clock"), "n2")
    assert [r["check"] for r in results] == ["mtu", "clock"]
    assert {r["status"] for r in results} == {"failed"}
    assert results[0]["message"] == "n2: no observation (the host failed earlier)"


def test_appended_results_keep_a_host_that_dropped_out_as_none() -> None:
    asked = []

    def more(host: str) -> list[dict]:
        asked.append(host)
        return [{"check": "x", "host": host}]

    out = append_results({"n1": [{"check": "a"}], "n2": None, "n3": []}, more)
    assert out == {
        "n1": [{"check": "a"}, {"check": "x", "host": "n1"}],
        "n2": None,
        "n3": [{"check": "x", "host": "n3"}],
    }
    assert asked == ["n1", "n3"]


def test_fewer_devices_than_ranks_fails_with_the_listing_command() -> None:
    devices = ("GPUs", "GPU", "nvidia-smi -L")
    assert too_few_devices("gpu", "n1", 8, 8, devices) is None
    few = too_few_devices("gpu", "n1", 7, 8, devices)
    assert few is not None and few["status"] == "failed" and few["check"] == "gpu"
    assert few["message"] == "n1 has 7 GPUs, 8 ranks planned"
    assert few["hint"] == (
        "nvidia-smi -L  (on n1); set nccl_slots / nccl_nproc_per_node for n1 to 7 or fix the "
        "missing GPU"
    )


def test_the_majority_wins_and_a_tie_goes_to_the_preferred_then_the_first_host() -> None:
    values = {"a": 1500, "b": 9000, "c": 9000}
    assert reference_value(values, ["a", "b", "c"]) == 9000
    tie = {"a": 1500, "b": 9000}
    assert reference_value(tie, ["a", "b"]) == 1500
    assert reference_value(tie, ["b", "a"]) == 9000
    assert reference_value(tie, ["a", "b"], prefer=9000) == 9000


def test_the_host_table_follows_the_rank_order_and_aligns() -> None:
    table = host_table({"node10": "x", "n2": None}, ["n2", "node10", "absent"])
    assert table == "  n2      unknown\n  node10  x"
