# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What ended a run while its ranks ran, when something named it: the culprit node(s) and
rank(s), in words, with the fix.

Pure, over a RunData (every host's launch.json, as both front-ends write it). Once the cause is
known, every other rank's failure is its consequence: a rank of another node that lost its peer
("Connection reset by peer"), waited on it in a collective, or was ended by the watch. The
verdict folds them under the culprit's own finding (fold_under_cause: its class, rank_lost, and
the headline naming the culprit node alone), and the hints give the culprit's ranks the cause's
fix and every other rank a pointer to it (core/hints.py). In order:

- a stall whose evidence named its cause (launch.json's ``stop``: kind stall, ``cause_named``;
  core/run_watch.py culprits_of): a node's fabric link down, a rank's process stopped (state T
  or t; ``stopped_ranks``), a node gone silent that its peers cannot reach either;
- a rank killed by a signal that its own node's torchrun saw (``rank_exits``' root cause, in a
  run the watch, a timeout or a stop did not end: those kill ranks themselves);
- a node whose results never came back (``lost``: written on the control machine, slurm/
  launch.py), with what Slurm said of it when it ended the job.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .findings import Finding
    from .run_data import HostData, RunData

STALL_PREFIX = "stalled: "  # core/run_watch.py: every stall's stop reason starts so


@dataclass(frozen=True)
class RunCause:
    kind: str  # "stall", "killed", "lost"
    culprits: dict[str, list[int]]  # host -> its ranks at fault ([]: the node as a whole)
    what: str  # the cause in words, as the watch or torchrun said it
    fix: str  # what to do about it

    def is_culprit(self, host: str, rank: int | None) -> bool:
        ranks = self.culprits.get(host)
        return ranks is not None and (not ranks or rank in ranks)


def _launch(host: HostData) -> dict[str, Any]:
    return host.launch or {}


def _link_fix(host: str, ifname: str) -> str:
    name = ifname or "<the fabric interface>"
    return (
        f"on {host}: find why {name} went down and bring it up (cable, switch port, driver): "
        f"ip -s link show {name}; ethtool {name}; dmesg -T | grep -i {name}; run again once the "
        "link stays up"
    )


def _cut_off_fix(host: str) -> str:
    return (
        f"{host} dropped off the network (its task and its fabric address stopped answering): "
        f"check the node (sinfo -n {host} -o '%n %T %E'; ping its addresses from here; its "
        "console or BMC), then run again once it answers"
    )


def _stopped_fix(host: str, pids: list[Any]) -> str:
    pid = pids[0] if pids else "<pid>"
    return (
        f"on {host}: find what stopped pid {pid} (a stop signal, or a debugger or strace "
        f"holding it: grep TracerPid /proc/{pid}/status; ps -o pid,stat,args -p {pid}); resume "
        f"it (kill -CONT {pid}) or end what holds it, then run again"
    )


def _stopped_pids(host: HostData, ranks: list[int]) -> list[Any]:
    """The pids of ``ranks`` from their last result (rank-<R>.json's pid)."""
    return [(host.ranks.get(r) or {}).get("pid") for r in ranks if (host.ranks.get(r) or {})]


def _stall(run: RunData) -> RunCause | None:
    """A stall whose evidence named its cause (any host's stop keeps it: adopted word for word)."""
    by_host = {h.host: h for h in run.hosts}
    for host in run.hosts:
        launch = _launch(host)
        stop = launch.get("stop") or {}
        culprits = stop.get("culprits") or {}
        if stop.get("kind") != "stall" or not stop.get("cause_named") or not culprits:
            continue
        stopped = set(stop.get("stopped_ranks") or [])
        named: dict[str, list[int]] = {}
        fixes = []
        for name in culprits:
            data = by_host.get(str(name))
            if data is None:
                continue
            mine = sorted(stopped.intersection(data.expected_ranks()))
            named[data.host] = mine
            if mine:
                fixes.append(_stopped_fix(data.host, _stopped_pids(data, mine)))
            elif _launch(data).get("silent") or _launch(data).get("lost"):
                fixes.append(_cut_off_fix(data.host))
            else:
                fixes.append(_link_fix(data.host, data.ifname or ""))
        if named:
            what = str(launch.get("stopped_by") or stop.get("message") or "")
            return RunCause("stall", named, what.removeprefix(STALL_PREFIX), "; ".join(fixes))
    return None


def _killed_fix(host: str, exit_: dict[str, Any]) -> str:
    pid = exit_.get("pid")
    if exit_.get("oom"):
        return (
            f"the kernel's OOM killer ended rank {exit_.get('rank')} on {host}: give its ranks "
            "more memory (fewer ranks per node, smaller --max-bytes, nothing else big on the "
            "node), then run again"
        )
    return (
        f"find what sent {exit_.get('signal')} to rank {exit_.get('rank')} (pid {pid}) on "
        f"{host}: the OOM killer (dmesg -T | grep -E 'Killed process {pid} '), a health check, "
        "a cluster agent or a person; stop it, then run again"
    )


def _killed(run: RunData) -> RunCause | None:
    """A rank killed by a signal that its own torchrun saw, in a run nothing else ended."""
    for host in run.hosts:
        launch = _launch(host)
        if launch.get("timed_out") or launch.get("stopped_by"):
            continue
        for exit_ in launch.get("rank_exits") or []:
            if exit_.get("root_cause") and exit_.get("signal") and exit_.get("rank") is not None:
                rank = int(exit_["rank"])
                what = f"rank {rank} on {host.host} {exit_.get('text') or 'was killed'}"
                return RunCause("killed", {host.host: [rank]}, what, _killed_fix(host.host, exit_))
    return None


def _lost(run: RunData) -> RunCause | None:
    """The nodes whose results never came back (their launch.json written for them)."""
    lost = [h for h in run.hosts if _launch(h).get("lost")]
    if not lost:
        return None
    what = "; ".join(str(_launch(h)["lost"]) for h in lost)
    fix = "; ".join(_cut_off_fix(h.host) for h in lost)
    return RunCause("lost", {h.host: [] for h in lost}, what, fix)


def run_cause(run: RunData) -> RunCause | None:
    """The named cause of a run that ended while its ranks ran, else None (module docstring)."""
    return _stall(run) or _killed(run) or _lost(run)


def fold_under_cause(cause: RunCause | None, found: list[Finding]) -> list[Finding]:
    """verdict.json's findings with every lost rank's finding (class rank_lost, not yet a
    consequence) that is not the cause's own made a consequence of the cause: the first such
    finding of each culprit node (its culprit rank's, when one is named) is the cause, the
    others point at their own node's cause, else at the first. A wrong result or a slow link
    of a rank stays a finding of its own."""
    if cause is None:
        return found
    heads: dict[str, Finding] = {}
    for f in found:
        if f.rank is None or f.cls != "rank_lost" or f.consequence:
            continue
        if cause.is_culprit(f.host, f.rank) and f.host not in heads:
            heads[f.host] = f
    if not heads:
        return found
    first = next(iter(heads.values()))
    head_ids = {f.id for f in heads.values()}
    folded = []
    for f in found:
        lost_rank = f.rank is not None and f.cls == "rank_lost"
        if f.id in head_ids or not lost_rank or f.consequence:
            folded.append(f)
            continue
        head = heads.get(f.host, first)
        folded.append(replace(f, consequence=True, cause=head.pointer()))
    return folded
