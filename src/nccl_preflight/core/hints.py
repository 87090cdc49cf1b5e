# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The fix for every rank failure, derived on the control machine from the collected rank JSON.

files/nccl_check.py records what went wrong on one rank; only the control machine sees every rank,
so only it can say which rank is the suspect of wrong data (the one that alone saw it, or the one
the expected sums name), which ranks were still inside a test when a run hung, and which link
speed a slow collective was judged against. Pure functions over nccl_junit.RunData.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .run_cause import RunCause, run_cause
from .run_data import RunData

# "the contribution of rank 1 is missing", "... of rank 0 or 2 was added twice"
_RANKS_NAMED = re.compile(r"\brank ((?:\d+)(?: or \d+)*)")
# The watchdog names the size in its phase: "bandwidth_all_reduce at 65536 B".
_AT_SIZE = re.compile(r"\bat (\d+) B\b")
# The pre-flight interface check: "...; speed 25000 Mb/s".
_SPEED = re.compile(r"\bspeed (\d+) Mb/s")
# NCCL's refusal of two ranks on one GPU (NVIDIA/nccl src/init.cc, initTransportsRank: WARN
# "Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx", the GPU's busId as
# NCCL's int64 of its PCI address), in its NCCL_DEBUG log and in torch's "Last error:".
_DUPLICATE_GPU = re.compile(
    r"Duplicate GPU detected : rank (\d+) and rank (\d+) both on CUDA device ([0-9a-fA-F]+)"
)

_BAD = ("failed", "error")  # the statuses a hint is for
MISSING = "result"  # the key of the hint for a rank that left no result (the JUnit testcase name)


@dataclass
class RankView:
    """What the hints need of one rank."""

    rank: int
    host: str
    doc: dict[str, Any] | None  # the rank JSON, None when none was collected
    nccl_log: str = ""  # its nccl-rank-<R>.log (NCCL_DEBUG_FILE), "" when none came back
    bad: list[dict[str, Any]] = field(default_factory=list)  # _bad_tests(doc), read once


class RankViews(dict):
    """rank_views' answer: every rank's view by rank, and ``memo``: what a hint asks of all the
    ranks, worked out once for all the hints of a run (``_once``: per hint it was quadratic in
    the ranks, 8,192 ranks that hung ask 8,192 hang hints)."""

    def __init__(self) -> None:
        super().__init__()
        self.memo: dict[str, Any] = {}


_T = TypeVar("_T")


def _once(views: dict[int, RankView], key: str, make: Callable[[], _T]) -> _T:
    """``make()`` once per RankViews (every time for another dict)."""
    memo = getattr(views, "memo", None)
    if memo is None:
        return make()
    if key not in memo:
        memo[key] = make()
    return memo[key]


def rank_views(run: RunData) -> dict[int, RankView]:
    """Every expected or reporting rank of the run, with its host."""
    views = RankViews()
    for host in run.hosts:
        for rank in host.expected_ranks():
            log = (getattr(host, "nccl_logs", None) or {}).get(rank) or ""
            doc = host.ranks.get(rank)
            views[rank] = RankView(rank, host.host, doc, log, _bad_tests(doc))
    return views


def _tests(doc: dict[str, Any] | None) -> list[dict[str, Any]]:
    return [t for t in (doc or {}).get("tests") or [] if isinstance(t, dict)]


def _bad_tests(doc: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The failed or errored tests of a rank's result: what a hint is for (8,192 ranks x 24
    tests, read without a list of the passed ones)."""
    return [
        t for t in (doc or {}).get("tests") or [] if isinstance(t, dict) and t.get("status") in _BAD
    ]


def _reports(doc: dict[str, Any] | None) -> bool:
    """The rank's result has a test (a non-empty one)."""
    return any(isinstance(t, dict) and t for t in (doc or {}).get("tests") or [])


def is_wrong_data(test: dict[str, Any]) -> bool:
    """A failed test whose details show wrong elements (a correctness test or a sweep's #wrong)."""
    if test.get("status") != "failed":
        return False
    details = test.get("details") or {}
    if details.get("wrong") or details.get("first_wrong_index") is not None:
        return True
    rows = list(test.get("bandwidth") or []) + list(details.get("bandwidth") or [])
    return any(row.get("wrong") for row in rows if isinstance(row, dict))


def is_below_threshold(test: dict[str, Any]) -> bool:
    details = test.get("details") or {}
    return (
        test.get("status") == "failed"
        and details.get("threshold_gbps") is not None
        and not is_wrong_data(test)
    )


def _who(ranks: list[int], views: dict[int, RankView]) -> str:
    parts = [f"rank {r} on {views[r].host}" if r in views else f"rank {r}" for r in sorted(ranks)]
    return ", ".join(parts)


def _hosts(ranks: list[int], views: dict[int, RankView]) -> list[str]:
    return sorted({views[r].host for r in ranks if r in views})


def _wrong_tests(views: dict[int, RankView]) -> dict[Any, list[tuple[int, dict[str, Any]]]]:
    """{test name: [(rank, test)]} of every test that got wrong data, in the views' order."""
    found: dict[Any, list[tuple[int, dict[str, Any]]]] = {}
    for view in views.values():
        for test in view.bad:
            if test.get("status") == "failed" and is_wrong_data(test):
                found.setdefault(test.get("name"), []).append((view.rank, test))
    return found


def wrong_data_hint(test_name: str, views: dict[int, RankView]) -> str:
    """Name the suspect rank(s) and host(s) of wrong data in one test, and what to run next."""
    saw: list[int] = []
    named: set[int] = set()
    for rank, test in _once(views, "wrong", lambda: _wrong_tests(views)).get(test_name, []):
        saw.append(rank)
        source = str((test.get("details") or {}).get("source") or "")
        for group in _RANKS_NAMED.findall(source):
            named.update(int(r) for r in group.split(" or "))
    reporting = _once(
        views, "reporting", lambda: [v.rank for v in views.values() if _reports(v.doc)]
    )
    # Where the data went wrong is told best by who received it wrong; the value's arithmetic
    # (off by one rank's contribution) only decides when every rank got the same wrong result.
    if saw and len(saw) < len(reporting):
        suspects = sorted(saw)
        why = (
            f"only {_who(suspects, views)} received wrong data ({len(saw)} of {len(reporting)} "
            "ranks); the others got the right result from the same collective"
        )
    elif named:
        suspects = sorted(named)
        why = f"the wrong values are off by exactly the contribution of {_who(suspects, views)}"
    else:
        suspects = sorted(saw)
        why = "every rank received the same wrong result, so no single receiver is to blame"
    hosts = _hosts(suspects, views) or ["every host"]
    return (
        f"Suspect: {_who(suspects, views) or 'unknown'} ({why}). Next: rerun only this test with "
        f"its failing ranks' output: nccl_check_args ['--tests', '{test_name}', '--verbose'] "
        f"(or torchrun ... files/nccl_check.py --tests {test_name} --verbose); then on "
        f"{', '.join(hosts)} look for hardware errors: nvidia-smi -q -d ECC,ROW_REMAPPER, "
        "dmesg | grep -i -e xid -e 'pcie bus error', and the NIC's error counters "
        "(ethtool -S <ifname> | grep -i err)."
    )


def _size_of(test: dict[str, Any]) -> int | None:
    for text in (test.get("name"), test.get("message")):
        match = _AT_SIZE.search(str(text or ""))
        if match:
            return int(match.group(1))
    return None


def _ended_in(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    """The test a rank was inside when it stopped: its running test or its last error."""
    if doc is None:
        return None
    unfinished = doc.get("status") == "running" or not doc.get("finished_at")
    errors = [t for t in _tests(doc) if t.get("status") == "error"]
    if unfinished:
        current = str(doc.get("current_test") or "run")
        named = [t for t in errors if str(t.get("name")).startswith(current)]
        return named[-1] if named else {"name": current, "message": ""}
    return errors[-1] if errors else None


def _how_ranks_ended(
    views: dict[int, RankView],
) -> tuple[list[int], list[int], list[int], list[int]]:
    """(running: no final result; errored; silent: no result at all; missing: never checked in)
    over every rank."""
    running = sorted(
        r
        for r, v in views.items()
        if v.doc is not None and (v.doc.get("status") == "running" or not v.doc.get("finished_at"))
    )
    still = set(running)
    errored = sorted(
        r for r, v in views.items() if v.doc is not None and _ended_in(v.doc) and r not in still
    )
    silent = sorted(r for r, v in views.items() if v.doc is None)
    missing = sorted(
        {
            int(item["rank"])
            for v in views.values()
            for item in (v.doc or {}).get("missing_ranks") or []
            if isinstance(item, dict) and "rank" in item
        }
    )
    return running, errored, silent, missing


def hang_hint(rank: int, views: dict[int, RankView], timeout_s: Any) -> str:
    """A rank that hung, crashed or errored: the test, the size, and the ranks still running."""
    view = views.get(rank)
    where = f"rank {rank} on {view.host}" if view else f"rank {rank}"
    stuck = _ended_in(view.doc if view else None)
    running, errored, silent, missing = _once(views, "ended", lambda: _how_ranks_ended(views))
    parts = []
    if stuck is not None:
        size = _size_of(stuck)
        name = _AT_SIZE.sub("", str(stuck.get("name"))).strip()
        parts.append(
            f"{where} stopped in {name}" + (f" at {size} B" if size is not None else "") + "."
        )
    else:
        parts.append(f"{where} left no result at all.")
    if running:
        parts.append(
            f"No final result (killed, or still running when the run ended): "
            f"{_who(running, views)}."
        )
    if errored:
        parts.append(f"Ended with an error: {_who(errored, views)}.")
    if silent:
        parts.append(f"No result at all: {_who(silent, views)}.")
    if missing:
        parts.append(f"Never checked in: {_who(missing, views)}.")
    timeout = f" (nccl_run_timeout {timeout_s} s)" if timeout_s is not None else ""
    first = (silent or running or missing or [rank])[0]
    first_host = views[first].host if first in views else "its host"
    parts.append(
        f"Fix: read rank-{first}.log and torchrun.log of {first_host} for the first error; a "
        "rank that died (OOM killer: dmesg | grep -i kill) or a link that drops traffic between "
        "the hosts named here (ping and nc -zv between their fabric addresses) are the usual "
        f"causes; only when the size is just slow, raise the timeout{timeout}."
    )
    return " ".join(parts)


def pci_address(nccl_bus_id: str) -> str:
    """NCCL's busId in hex ('60') -> the PCI address ('0000:00:06.0'), as NCCL's int64ToBusId
    (src/misc/utils.cc) writes it."""
    value = int(nccl_bus_id, 16)
    return (
        f"{value >> 20:04x}:{(value & 0xFF000) >> 12:02x}:{(value & 0xFF0) >> 4:02x}."
        f"{value & 0xF:x}"
    )


def duplicate_gpu_hint(test: dict[str, Any], view: RankView) -> str | None:
    """The cause and fix when NCCL refused two ranks on one GPU, from what the rank recorded
    (its error, torch's "Last error:" in the traceback) or its NCCL log; None otherwise."""
    details = test.get("details") or {}
    said = "\n".join([str(test.get("message") or ""), str(details.get("traceback") or "")])
    match = _DUPLICATE_GPU.search(said) or _DUPLICATE_GPU.search(view.nccl_log)
    if match is None:
        return None
    ranks = sorted({int(match.group(1)), int(match.group(2))})
    pci = pci_address(match.group(3))
    return (
        f"Two ranks share one GPU: ranks {' and '.join(map(str, ranks))} on {view.host} both "
        f"run on the GPU at PCI {pci} (NCCL: {match.group(0)}), and NCCL allows one rank per "
        f"GPU. Fix: start no more ranks on {view.host} than it has GPUs (nvidia-smi -L on "
        f"{view.host}): slots=N in the hostfile, or nccl_nproc_per_node, at most the GPU "
        "count; and check that CUDA_VISIBLE_DEVICES (nccl_extra_env or the node's environment) "
        "shows every GPU once."
    )


def link_speeds_mbps(run: RunData) -> dict[str, int]:
    """The fabric link speed each host's pre-flight interface check reported, when it did."""
    speeds: dict[str, int] = {}
    for host in run.hosts:
        for item in (host.preflight or {}).get("results") or []:
            if item.get("check") == "interface":
                match = _SPEED.search(str(item.get("message") or ""))
                if match:
                    speeds[host.host] = int(match.group(1))
    return speeds


def bandwidth_hint(test: dict[str, Any], host: str, speeds: dict[str, int]) -> str:
    """The threshold, the figure, and the link speed it was judged against."""
    details = test.get("details") or {}
    rows = [r for r in test.get("bandwidth") or details.get("bandwidth") or [] if r]
    last = rows[-1] if rows else {}
    figure = last.get("busbw_gbps")
    size = last.get("size_bytes")
    threshold = details.get("threshold_gbps")
    if speeds:
        slowest = min(speeds, key=lambda h: speeds[h])
        gbps = speeds[slowest] / 8000
        link = (
            f"the slowest fabric link is {slowest}'s at {speeds[slowest]} Mb/s = {gbps:g} GB/s, "
            "the most a ring's busbw can reach"
        )
        if threshold is not None and threshold > gbps:
            link += "; the threshold is above it, so no link here can pass it: lower --min-busbw"
    else:
        link = (
            "no link speed was reported by the pre-flight for any host (a virtual interface, "
            "or the driver gives none): compare with ethtool <ifname> / ibstat"
        )
    return (
        f"busbw {figure} GB/s at {size} B on {host} is below the required {threshold} GB/s; "
        f"judged against: {link}. Fix: check which interface carries the traffic "
        "(NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_DEBUG=INFO shows NET/IB or NET/Socket) and that "
        "every host negotiated its full link speed."
    )


def cause_hint(cause: RunCause, view: RankView) -> str:
    """The fix of a rank lost while the ranks ran, once the run's cause is known
    (core/run_cause.py): the cause's own fix for its culprit's ranks, for every other rank the
    cause it is a consequence of."""
    if cause.is_culprit(view.host, view.rank):
        return f"{cause.fix}."
    return f"a consequence of {cause.what}; fix that first: {cause.fix}."


def rank_hints(run: RunData, *, stopped: bool) -> dict[int, dict[str, str]]:
    """{global rank: {test name (or MISSING): the fix}} for every failed, errored or lost rank.
    ``stopped``: a stage stopped the run before any rank started (core/run_stop.py run_stop: the
    environment stage, or a launch skipped for the pre-flight or a lost host): its ranks never
    ran, so a lost rank's fix (its log, the timeout) is not theirs. When something named what
    ended the run while its ranks ran (core/run_cause.py), a lost rank's fix is that cause's
    (cause_hint)."""
    views = rank_views(run)
    cause = None if stopped else run_cause(run)
    speeds = link_speeds_mbps(run)
    timeout_s = run.plan.get("run_timeout_s")
    lost = any(
        v.doc is None or v.doc.get("status") == "running" or not v.doc.get("finished_at")
        for v in views.values()
    )
    if stopped or any(not h.reachable for h in run.hosts):
        lost = False  # ranks that never started: the pre-flight or the unreachable host says why
    hints: dict[int, dict[str, str]] = {}
    wrong_cache: dict[str, str] = {}
    for rank, view in views.items():
        mine: dict[str, str] = {}
        for test in view.bad:  # what follows is for a failure or an error
            name = str(test.get("name"))
            if is_wrong_data(test):
                if name not in wrong_cache:
                    wrong_cache[name] = wrong_data_hint(name, views)
                mine[name] = wrong_cache[name]
            elif is_below_threshold(test):
                mine[name] = bandwidth_hint(test, view.host, speeds)
            elif test.get("status") == "error":
                mine[name] = duplicate_gpu_hint(test, view) or (
                    cause_hint(cause, view) if cause else hang_hint(rank, views, timeout_s)
                )
        unfinished = view.doc is None or view.doc.get("status") == "running"
        if lost and (unfinished or not view.doc.get("finished_at")):
            hint = cause_hint(cause, view) if cause else hang_hint(rank, views, timeout_s)
            mine[MISSING] = hint
            current = (view.doc or {}).get("current_test")
            if current:
                mine.setdefault(str(current), hint)
        if mine:
            hints[rank] = mine
    return hints
