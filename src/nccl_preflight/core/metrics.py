# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Metrics for monitoring: a file in node_exporter's textfile-collector format (Prometheus' text
exposition format, version 0.0.4), the one writer of node-check (``--textfile DIR``), the
slurm command (``--textfile DIR``) and the Ansible report (``nccl_report_textfile_dir``).

    DIR/nccl_preflight.prom       node-check: this node's checks (NODE_FILE)
    DIR/nccl_preflight_run.prom   a run of the slurm command or of the validate playbook (RUN_FILE)

Each file is replaced atomically (node/files.py write_atomically: a temporary file beside it,
``.<name>.<pid>.tmp``, which node_exporter ignores as it reads only ``*.prom``, then renamed over
it), so a scrape reads the old file or the whole new one. Names follow Prometheus' conventions:
the ``nccl_preflight_`` prefix, base units (seconds, bytes per second: NCCL's GB/s times 1e9),
``_timestamp_seconds`` for a time; every family a gauge with ``# HELP`` and ``# TYPE``; label
values escaped (backslash, double quote, line feed); no sample timestamps (node_exporter refuses
them in a textfile).

What a value means:
- ``nccl_preflight_check{check,node}``: 1 passed, 0 failed (or errored). A skipped check (not
  applicable: no GPU asked for, no RDMA device...) is not in it but in
  ``nccl_preflight_check_skipped{check,node} 1``, so that ``min(nccl_preflight_check)`` is a
  health signal; a check node-check could not judge (what it read was killed at --timeout) is in
  neither, and the run's ``nccl_preflight_node_check_verdict{verdict="unfinished"}`` is 1.
- ``..._last_success_timestamp_seconds``: when a node-check (healthy) or a run (class passed, not
  a --check run) last succeeded, unix seconds. A run that did not succeed keeps the value of the
  file it replaces, so a failing node shows a success time that grows old; no sample before the
  first success.
- the verdict (node-check's and the run's): one sample per possible value, 1 for this run's and 0
  for the others (Prometheus' "enum" shape), so an alert can read ``== 1`` on the bad ones.

Standard library only: node-check runs this inside the node bundle with a bare python3.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nccl_preflight.core.exit_classes import NODE_CHECK, code_table
from nccl_preflight.node.files import write_atomically

if TYPE_CHECKING:
    from nccl_preflight.core.findings import JudgedRun

NODE_FILE = "nccl_preflight.prom"
RUN_FILE = "nccl_preflight_run.prom"
PREFIX = "nccl_preflight_"
METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")  # the data model's (Prometheus docs)
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
GB = 1e9  # the rank script's busbw is nccl-tests' GB/s: 1e9 bytes per second
FILE_MODE = 0o644  # node_exporter often runs as its own user: it must be able to read the file
PASSED_CHECK = "passed"
FAILED_CHECKS = ("failed", "error")  # slurm/node_check.py FAILING
NODE_VERDICTS = tuple(c.name for c in NODE_CHECK if c.name != "refused")  # a refusal writes none
NODE_SUCCESS = "nccl_preflight_node_check_last_success_timestamp_seconds"
RUN_SUCCESS = "nccl_preflight_run_last_success_timestamp_seconds"

Labels = Mapping[str, str]


class MetricsError(ValueError):
    """A family or sample the text format cannot hold (a bug of the caller, not of the input)."""


@dataclass(frozen=True)
class Family:
    """One metric family: its name, help text and samples (labels, value), all gauges."""

    name: str
    help: str
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)

    def add(self, value: float, **labels: Any) -> None:
        self.samples.append(({k: str(v) for k, v in labels.items()}, float(value)))


def escape_label(value: str) -> str:
    """A label value as the text format writes it: ``\\`` ``"`` and line feed escaped."""
    return value.replace("\\", r"\\").replace('"', r"\"").replace("\n", r"\n")


def escape_help(text: str) -> str:
    """A HELP docstring: ``\\`` and line feed escaped."""
    return text.replace("\\", r"\\").replace("\n", r"\n")


def number(value: float) -> str:
    """A sample value: an integer without a fraction, else Python's shortest repr; NaN, +Inf,
    -Inf as the format spells them."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def _sample_line(name: str, labels: Labels, value: float) -> str:
    for label in labels:
        if not LABEL_NAME.fullmatch(label) or label.startswith("__"):
            raise MetricsError(f"{name}: {label!r} is not a label name")
    inner = ",".join(f'{k}="{escape_label(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}} {number(value)}" if inner else f"{name} {number(value)}"


def render(families: Iterable[Family]) -> str:
    """The text of ``families`` (those without a sample left out): per family ``# HELP``,
    ``# TYPE <name> gauge`` then its samples, one group each; MetricsError for a bad name, a
    family named twice or a label set repeated in a family."""
    lines: list[str] = []
    seen: set[str] = set()
    for family in families:
        if not family.samples:
            continue
        if not METRIC_NAME.fullmatch(family.name) or not family.name.startswith(PREFIX):
            raise MetricsError(f"{family.name!r} is not a metric name of this project")
        if family.name in seen:
            raise MetricsError(f"{family.name}: two families of that name")
        seen.add(family.name)
        lines += [f"# HELP {family.name} {escape_help(family.help)}"]
        lines += [f"# TYPE {family.name} gauge"]
        sets: set[tuple[tuple[str, str], ...]] = set()
        for labels, value in family.samples:
            key = tuple(sorted(labels.items()))
            if key in sets:
                raise MetricsError(f"{family.name}: the label set {dict(key)} twice")
            sets.add(key)
            lines.append(_sample_line(family.name, labels, value))
    return "".join(line + "\n" for line in lines)


def write_textfile(directory: str | Path, name: str, families: Iterable[Family]) -> Path:
    """Replace ``directory``/``name`` with ``families`` atomically (mode 0644); -> its path."""
    path = Path(directory) / name
    write_atomically(path, render(families), FILE_MODE)
    return path


def previous_value(path: str | Path, name: str) -> float | None:
    """The value of the sample of ``name`` in the file at ``path`` (its first one), or None: no
    file, no such sample, or not a number. Only reads back what render() wrote."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
            try:
                value = float(line.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                return None
            return value if math.isfinite(value) else None
    return None


def last_success(path: str | Path, name: str, succeeded: bool, now: float) -> float | None:
    """``now`` when this run succeeded, else the previous file's value (None: none yet)."""
    return now if succeeded else previous_value(path, name)


def node_check_families(
    node: str,
    results: Sequence[Mapping[str, Any]],
    verdict: str,
    seconds: float,
    success: float | None,
    not_judged: Sequence[str] = (),
) -> list[Family]:
    """node-check's metrics (module docstring): each check of ``results`` (the judged check
    results, {check, status, ...}), the verdict word (healthy, failed, unfinished), how long it
    took and its last success (``success``: last_success's answer)."""
    check = Family("nccl_preflight_check", "1 when the check passed on the node, 0 when it failed")
    skipped = Family(
        "nccl_preflight_check_skipped", "1 for a check that did not apply to the node (skipped)"
    )
    for result in results:
        name, status = str(result.get("check")), str(result.get("status"))
        if name in not_judged:
            continue
        if status == PASSED_CHECK or status in FAILED_CHECKS:
            check.add(1 if status == PASSED_CHECK else 0, check=name, node=node)
        else:
            skipped.add(1, check=name, node=node)
    state = Family(
        "nccl_preflight_node_check_verdict",
        "1 for the verdict of the node's last node-check (healthy, failed, unfinished), else 0",
    )
    for word in NODE_VERDICTS:
        state.add(1 if word == verdict else 0, node=node, verdict=word)
    duration = Family(
        "nccl_preflight_node_check_duration_seconds", "How long the last node-check took"
    )
    duration.add(seconds, node=node)
    last = Family(NODE_SUCCESS, "When a node-check last found the node healthy (unix time)")
    if success is not None:
        last.add(success, node=node)
    return [check, skipped, state, duration, last]


def write_node_check(
    directory: str | Path,
    node: str,
    results: Sequence[Mapping[str, Any]],
    verdict: str,
    seconds: float,
    now: float,
    not_judged: Sequence[str] = (),
) -> Path:
    """Replace ``directory``/NODE_FILE with node-check's metrics; -> its path."""
    path = Path(directory) / NODE_FILE
    success = last_success(path, NODE_SUCCESS, verdict == "healthy", now)
    families = node_check_families(node, results, verdict, seconds, success, not_judged)
    return write_textfile(directory, NODE_FILE, families)


def _bandwidth(judged: JudgedRun) -> Family:
    family = Family(
        "nccl_preflight_busbw_bytes_per_second",
        "Median bus bandwidth over the ranks of each collective at its largest size measured",
    )
    for row in judged.bandwidth:
        collective = str(row["collective"]).removeprefix("bandwidth_")
        family.add(
            float(row["busbw_median_gbps"]) * GB,
            collective=collective,
            size_bytes=int(row["size_bytes"]),
        )
    return family


def _pairs(judged: JudgedRun) -> Family:
    family = Family(
        "nccl_preflight_pair_busbw_bytes_per_second",
        "Bus bandwidth between two nodes (node_a, node_b) on one rail, per pairwise pass "
        "(1: every pair, 2: a suspect re-measured, intra: within a node)",
    )
    for pair in (judged.pairwise or {}).get("pairs") or []:
        if pair.get("busbw_gbps") is None:
            continue
        family.add(
            float(pair["busbw_gbps"]) * GB,
            node_a=pair["a"],
            node_b=pair["b"],
            rail=pair["rail"],
            **{"pass": pair["pass"]},
        )
    return family


def run_families(judged: JudgedRun, seconds: float | None, success: float | None) -> list[Family]:
    """A run's metrics (module docstring): its class, busbw per collective and per node pair
    where measured, how long it took (``seconds``; None: unknown) and its last success."""
    verdict = Family(
        "nccl_preflight_verdict",
        "1 for the class of the last run (verdict.json's class, the exit code's name), else 0",
    )
    for name in code_table():
        verdict.add(1 if name == judged.exit_class.name else 0, **{"class": name})
    duration = Family("nccl_preflight_run_duration_seconds", "How long the last run took")
    if seconds is not None:
        duration.add(seconds)
    last = Family(RUN_SUCCESS, "When a run last passed (unix time)")
    if success is not None:
        last.add(success)
    return [verdict, _bandwidth(judged), _pairs(judged), duration, last]


def write_run(
    directory: str | Path, judged: JudgedRun, now: float, started: float | None = None
) -> Path:
    """Replace ``directory``/RUN_FILE with the metrics of ``judged``; ``started``: when the run
    started (unix time; None or 0: unknown, no duration); -> its path."""
    path = Path(directory) / RUN_FILE
    succeeded = judged.exit_class.name == "passed" and not judged.check_mode
    success = last_success(path, RUN_SUCCESS, succeeded, now)
    seconds = max(0.0, now - started) if started else None
    return write_textfile(directory, RUN_FILE, run_families(judged, seconds, success))


def textfile_dir_problem(directory: str) -> str:
    """Why ``directory`` cannot take a metrics file, or "": node_exporter's textfile directory
    must be a directory this user can write in. Every front-end asks before anything runs:
    node-check's and the slurm command's --textfile, nccl_report_textfile_dir (core/inputs.py)."""
    if not os.path.isdir(directory):
        return "not a directory (node_exporter's textfile directory)"
    if not os.access(directory, os.W_OK | os.X_OK):
        return "this user cannot write in it"
    return ""


def textfile_option_problem(directory: str) -> str:
    """Why ``--textfile DIR`` (node-check's and the slurm command's) cannot take the metrics,
    or "" (also when the option is not given)."""
    problem = textfile_dir_problem(directory) if directory else ""
    return f"--textfile {directory}: {problem}" if problem else ""
