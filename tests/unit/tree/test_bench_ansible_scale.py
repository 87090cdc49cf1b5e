# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""bench/ansible_scale.py measured one size at a time (`--sizes 16`, then `--sizes 32`): the
stored rows of the other sizes are kept, the slope is fitted over all of them, and BENCHMARKS.md's
section shows every size with when it was measured."""

from __future__ import annotations

from typing import Any

from bench.ansible_scale import merge, summarize
from bench.scale_report import ansible_line, ansible_section


def side(cpu: float) -> dict[str, Any]:
    return {
        "rc": 0,
        "wall_s": cpu * 2,
        "cpu_s": cpu,
        "cgroup_cpu_s": cpu + 1,
        "maxrss_main_mib": 100.0,
        "private_main_mib": 80.0,
        "worker_private_mib": 20.0,
        "workers": 10,
        "split": {"main process": cpu / 2, "workers: node calls": cpu / 2},
    }


def row(hosts: int, cpu: float) -> dict[str, Any]:
    return {
        "hosts": hosts,
        "repeat": 0,
        "variant": "project",
        "validate": side(cpu),
        "mirror": side(cpu / 4),
        "class": "passed",
        "load": [1.0, 2.0, 3.0],
        "tasks": [{"task": "facts : Gather", "action": "nccl_facts", "role": "facts",
                   "workers": hosts, "cpu_s": cpu / 3, "ssh_s": 0.1}],
    }  # fmt: skip


def stored(rows: list[dict[str, Any]], date: str) -> dict[str, Any]:
    res = summarize(rows, tuple(r["hosts"] for r in rows))
    return {**res, "date": date, "duration_s": 300.0, "load_before": [2.0], "load_after": [4.0]}


def test_a_second_size_keeps_the_first_sizes_rows_and_fits_the_slope_over_both() -> None:
    first = stored([row(16, 20.0)], "day 1")
    assert first["slopes"]["validate"] is None and first["met"] is None  # one size: no slope
    second = summarize([row(32, 36.0)], (32,))
    merged = merge(first, second)
    assert merged["sizes"] == [16, 32]
    assert merged["slopes"]["validate"] == 1.0  # (36 - 20) / (32 - 16)
    assert merged["met"] is True
    assert merged["earlier"] == [
        {"sizes": [16], "date": "day 1", "duration_s": 300.0, "load_before": [2.0],
         "load_after": [4.0]}
    ]  # fmt: skip
    # Measuring 16 again replaces its row, not adds to it.
    again = merge({**merged, "date": "day 2"}, summarize([row(16, 24.0)], (16,)))
    assert again["sizes"] == [16, 32]
    assert again["slopes"]["validate"] == 0.75
    assert [e["sizes"] for e in again["earlier"]] == [[32]]


def test_nothing_stored_or_a_stored_error_leaves_the_result_as_it_is() -> None:
    new = summarize([row(16, 20.0)], (16,))
    assert merge(None, new) is new
    assert merge({"name": "ansible_scale", "error": "boom", "met": None}, new) is new


def test_the_section_shows_every_size_the_slope_and_when_each_was_measured() -> None:
    merged = merge(stored([row(16, 20.0)], "day 1"), summarize([row(32, 40.0)], (32,)))
    text = "\n".join(ansible_section(merged, ["header"]))
    assert "| 16 | passed | 40.0 |" in text and "| 32 | passed | 80.0 |" in text
    assert "| 1.25 |" in text  # 20 CPU s / 16 hosts
    assert "validate.yml **1.25**" in text  # (40 - 20) / 16
    assert "- 16 hosts: measured day 1, took 300 s; machine load 2.00 before, 4.00 after" in text
    assert "16: 20.0, 32: 40.0; slope 1.25 s per host" in ansible_line(merged)


def test_a_run_that_did_not_pass_is_not_judged_against_the_goal() -> None:
    lost = {**row(32, 36.0), "class": "rank_lost"}
    merged = merge(stored([row(16, 20.0)], "day 1"), summarize([lost], (32,)))
    assert merged["slopes"]["validate"] == 1.0 and merged["met"] is None
    assert "not judged: runs that did not pass (32: rank_lost)" in ansible_line(merged)
