# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Read the collected files of one run (reports/<run-id>/) into a RunData.

Pure reading, no judging: plan.json, preflight/<host>.json and per host rank-<R>.json,
rank-<R>.log, torchrun.log, launch.json and the NCCL logs. The layout and the rank result JSON
are the contracts in docs/design.md; src/nccl_preflight/core/junit.py builds the JUnit from a
RunData and src/nccl_preflight/core/summary.py the summary.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .bandwidth_rows import compact
from .forked import split_map

_RANK_FILE = re.compile(r"^rank-(\d+)\.(json|log)$")
NCCL_LOG = re.compile(r"^nccl-(?:rank-(?P<rank>\d+)|pid-(?P<pid>\d+))\.log$")
# From this many host directories on, a forked child reads the last CHILD_SHARE of them while
# this process reads the rest (core/forked.py): parsing 8,192 rank files was half the report step.
# The child's share is the smaller: its results come back pickled, which the parent then loads.
FORK_FROM_HOSTS = 64
CHILD_SHARE = 0.45


def read_nccl_logs(host_dir: Path, files: list[str] | None = None) -> dict[Any, str]:
    """{rank: text} of nccl-rank-<R>.log, {"pid-<P>": text} of nccl-pid-<P>.log; ``files``:
    the names of the directory's files when the caller listed them already."""
    logs: dict[Any, str] = {}
    if files is None and not host_dir.is_dir():
        return logs
    names = sorted(p.name for p in host_dir.iterdir() if p.is_file()) if files is None else files
    for name in names:
        match = NCCL_LOG.match(name)
        if match:
            key = int(match.group("rank")) if match.group("rank") else f"pid-{match.group('pid')}"
            logs[key] = (host_dir / name).read_text(encoding="utf-8", errors="replace")
    return logs


class RankLogs(Mapping[int, str]):
    """A host's rank-<R>.log files by rank, each read when it is first asked for: the report
    reads the log of a rank that failed, crashed or never reported (its tail), and only names
    the others' (issue 37: 8,192 logs read for nothing were 0.4 s of the report step)."""

    __slots__ = ("_paths", "_texts")

    def __init__(self, paths: dict[int, str]):
        self._paths = paths
        self._texts: dict[int, str] = {}

    def __getitem__(self, rank: int) -> str:
        text = self._texts.get(rank)
        if text is None:
            path = self._paths[rank]
            try:
                with open(path, encoding="utf-8", errors="replace") as file:
                    text = file.read()
            except OSError as exc:
                text = f"(cannot read {path}: {exc})"
            self._texts[rank] = text
        return text

    def __contains__(self, rank: object) -> bool:
        return rank in self._paths

    def __iter__(self) -> Iterator[int]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


@dataclass
class HostData:
    """Everything collected from (or planned for) one host."""

    host: str
    node_rank: int | None = None
    nproc_per_node: int | None = None
    rank_offset: int | None = None
    address: str | None = None
    ifname: str | None = None
    reachable: bool = True
    preflight: dict[str, Any] | None = None
    ranks: dict[int, dict[str, Any]] = field(default_factory=dict)
    rank_logs: Mapping[int, str] = field(default_factory=dict)  # RankLogs as read_run reads
    unreadable: dict[int, str] = field(default_factory=dict)
    torchrun_log: str | None = None
    launch: dict[str, Any] | None = None
    nccl_logs: dict[Any, str] = field(default_factory=dict)  # nccl-rank-<R>.log by rank

    def expected_ranks(self) -> list[int]:
        """Global ranks planned on this host, plus any that reported from it anyway."""
        planned: set[int] = set()
        if self.rank_offset is not None and self.nproc_per_node:
            planned = set(range(self.rank_offset, self.rank_offset + self.nproc_per_node))
        return sorted(planned | set(self.ranks) | set(self.rank_logs) | set(self.unreadable))


@dataclass
class RunData:
    run_id: str
    plan: dict[str, Any]
    hosts: list[HostData]
    report_dir: Path | None = None  # where read_run read it (<host>/pairwise/: nccl_pairwise)


@dataclass(frozen=True)
class UnreachableLook:
    """What a front-end's user runs to see why a host dropped out before launch."""

    commands: tuple[str, ...]  # each with {host}
    shows: str  # the causes they tell apart
    output: str  # where the front-end already said something


# plan.json's ``front_end``: "slurm" for the slurm command, absent for the Ansible path.
UNREACHABLE_LOOKS = {
    "slurm": UnreachableLook(
        ("sinfo -n {host} -o '%n %T %E'", "srun -w {host} -N 1 <nccl_python> -c 'import torch'"),
        "node down or drained, no Python with torch",
        "the command's output",
    ),
    "ansible": UnreachableLook(
        ("ansible {host} -m ansible.builtin.ping -i <inventory>",),
        "SSH address, key, user, a Python on the node",
        "the play output",
    ),
}


def _unreachable_look(run: RunData, host: str) -> tuple[list[str], UnreachableLook]:
    look = UNREACHABLE_LOOKS[run.plan.get("front_end") or "ansible"]
    return [command.format(host=host) for command in look.commands], look


def unreachable_fix(run: RunData, host: str) -> str:
    """How to see why ``host`` dropped out before launch, in its front-end's words."""
    commands, look = _unreachable_look(run, host)
    verb = "shows" if len(commands) == 1 else "show"
    return f"{' and '.join(commands)} {verb} why ({look.shows}); see {look.output}"


def unreachable_check(run: RunData, host: str) -> str:
    """The JUnit's sentence for the same: what to run to see why ``host`` dropped out."""
    commands, look = _unreachable_look(run, host)
    return f"Check {' and '.join(f'`{c}`' for c in commands)}, and {look.output} above."


def _read_json(path: Path | str) -> tuple[Any, str | None]:
    """(document, None) or (None, why it could not be read)."""
    try:
        # Bytes, decoded at once: a text file's decoder was a tenth of reading 8,192 rank files.
        with open(path, "rb") as file:
            return json.loads(file.read().decode("utf-8")), None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"cannot read {path}: {exc}"
    except json.JSONDecodeError as exc:
        return None, f"{path} is not valid JSON ({exc}); the rank was probably killed mid-write"


def _held(doc: dict[str, Any]) -> dict[str, Any]:
    """A rank's result as the report keeps it: its bandwidth rows compact, a passed test's only
    the columns the report reads of it (src/nccl_preflight/core/bandwidth_rows.py: 8,192 ranks'
    rows as dicts were gigabytes)."""
    tests = doc.get("tests")
    for test in tests if isinstance(tests, list) else []:
        if isinstance(test, dict) and test.get("bandwidth"):
            test["bandwidth"] = compact(test["bandwidth"], lean=test.get("status") == "passed")
    return doc


def _read_text(path: Path) -> str | None:
    if not path.is_file():
        return None
    return path.read_text(encoding="utf-8", errors="replace")


def _read_host_dir(data: HostData, sub: Path) -> list[str]:
    """Every rank-<R>.json of a host's directory into ``data``, in name order, and its
    rank-<R>.log files (RankLogs: read when asked for);
    -> the names of the directory's files (8,192 ranks: names, not Path objects)."""
    with os.scandir(sub) as entries:
        files = sorted(entry.name for entry in entries if entry.is_file())
    logs: dict[int, str] = {}
    for name in files:
        match = _RANK_FILE.match(name)
        if match is None:
            continue
        path = os.path.join(sub, name)
        if match.group(2) == "json":
            doc, why = _read_json(path)
            if isinstance(doc, dict):
                data.ranks[int(match.group(1))] = _held(doc)
            else:
                data.unreadable[int(match.group(1))] = why or f"{path} holds no JSON object"
        else:
            logs[int(match.group(1))] = path
    data.rank_logs = RankLogs(logs)
    return files


def _planned_by_environment(data: HostData, layout: Any) -> None:
    """A host's place in the rank layout from its environment-stage record (roles/nccl_env
    writes it into preflight/<host>.json when the run stops there, and no plan.json follows)."""
    if not isinstance(layout, dict) or data.rank_offset is not None:
        return
    for key in ("node_rank", "nproc_per_node", "rank_offset"):
        value = layout.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            setattr(data, key, value)


def _read_host(report_dir: Path, name: str) -> HostData:
    """What the host's directory <report_dir>/<name>/ holds (its rank results and logs,
    torchrun.log, the NCCL logs, launch.json) as a HostData of its own."""
    sub = report_dir / name
    data = HostData(host=name)
    files = _read_host_dir(data, sub)
    data.torchrun_log = _read_text(sub / "torchrun.log")
    data.nccl_logs = read_nccl_logs(sub, files)
    launch, _ = _read_json(sub / "launch.json") if "launch.json" in files else (None, None)
    data.launch = launch if isinstance(launch, dict) else None
    return data


def read_run(report_dir: Path) -> RunData:
    """Read plan.json, preflight/<host>.json and <host>/{rank-*.json,rank-*.log,...}."""
    plan: dict[str, Any] = {}
    if (report_dir / "plan.json").is_file():
        loaded, _ = _read_json(report_dir / "plan.json")
        if isinstance(loaded, dict):
            plan = loaded
    hosts: dict[str, HostData] = {}
    for entry in plan.get("hosts", []):
        data = HostData(
            host=str(entry["host"]),
            node_rank=entry.get("node_rank"),
            nproc_per_node=entry.get("nproc_per_node"),
            rank_offset=entry.get("rank_offset"),
            address=entry.get("address"),
            ifname=entry.get("ifname"),
            reachable=bool(entry.get("reachable", True)),
        )
        hosts[data.host] = data

    preflight_dir = report_dir / "preflight"
    if preflight_dir.is_dir():
        for path in sorted(preflight_dir.glob("*.json")):
            doc, _ = _read_json(path)
            if not isinstance(doc, dict):
                continue
            name = str(doc.get("host") or path.stem)
            data = hosts.setdefault(name, HostData(host=name))
            data.preflight = doc
            _planned_by_environment(data, doc.get("layout"))

    reserved = {"preflight", "junit"}
    subs = sorted(e.name for e in os.scandir(report_dir) if e.is_dir() and e.name not in reserved)
    read = split_map(
        lambda names: [_read_host(report_dir, name) for name in names],
        subs,
        child_share=CHILD_SHARE,
        least=FORK_FROM_HOSTS,
    )
    for name, got in zip(subs, read, strict=True):
        data = hosts.setdefault(name, HostData(host=name))
        data.ranks, data.unreadable, data.rank_logs = got.ranks, got.unreadable, got.rank_logs
        data.torchrun_log, data.nccl_logs, data.launch = got.torchrun_log, got.nccl_logs, got.launch
    run_id = str(plan.get("run_id") or report_dir.name)
    order = sorted(hosts.values(), key=lambda h: (h.node_rank is None, h.node_rank or 0, h.host))
    return RunData(run_id=run_id, plan=plan, hosts=order, report_dir=report_dir)
