# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Judging a run while it goes on, on the control machine (docs/design.md, "Watching a run").

Pure functions over what the nodes' watch calls return (src/nccl_preflight/node/run_progress.py)
and what every host's watch wrote to reports/<run-id>/<host>/progress.json: when a rank advances,
when the run stalls (nccl_stall_timeout, longer when the sizes before predict more), which
failure on another node ends this node's run, what a stall's evidence says, and the progress
lines a person watches. Standard library only; roles/launch's action plugin loads this file.
"""

from __future__ import annotations

import signal
from collections.abc import Collection, Mapping
from typing import Any

from ..node.run_progress import STOPPED_STATES

# A size may take this many times what the sizes before it predict before the run is stalled.
STALL_MARGIN = 3.0
# stop.kind of a run ended while its torchrun waited in its exit barrier (exit_barrier_wait).
EXIT_BARRIER = "exit_barrier"

# ------------------------------------------------------------------------------------------------
# The hosts a watch knows
# ------------------------------------------------------------------------------------------------


def watch_hosts(
    layout: dict[str, Any],
    env_by_node: Mapping[str, Mapping[str, Any]],
    facts: Mapping[str, Mapping[str, Any] | None],
    present: Collection[str] | None = None,
) -> list[dict[str, Any]]:
    """Every node of the run in node-rank order (those of ``present`` only, when given), with
    what a stall's diagnosis needs: its ranks, fabric interface and address (``env_by_node``:
    ifname, address, master_port), that interface's state at the pre-flight (``facts``: the
    node's facts) and the next node of the ring to probe at MASTER_PORT (refused still means
    reachable). Both front-ends' watches: roles/launch and slurm/launch.py."""
    ring = [row["host"] for row in layout["hosts"] if present is None or row["host"] in present]
    rows = []
    for i, node in enumerate(ring):
        env, nxt = env_by_node[node], ring[(i + 1) % len(ring)]
        interfaces = (facts.get(node) or {}).get("interfaces") or {}
        probes = []
        if len(ring) > 1:
            target = env_by_node[nxt]
            probes = [{"host": nxt, "address": target["address"], "port": int(env["master_port"])}]
        rows.append(
            {
                "host": node,
                "ranks": layout["by_host"][node]["ranks"],
                "ifname": env["ifname"] or None,
                "address": env["address"] or None,
                "preflight_state": (interfaces.get(env["ifname"]) or {}).get("state"),
                "probes": probes,
            }
        )
    return rows


def nccl_watch_hosts(
    layout: dict[str, Any], hostvars: Mapping[str, Mapping[str, Any]], present: Collection[str]
) -> list[dict[str, Any]]:
    """watch_hosts of roles/launch: each host's nccl_env_* facts and ansible_facts.nccl from
    Ansible's hostvars, the hosts of the play (``present``) only."""
    env_by_node: dict[str, dict[str, Any]] = {}
    facts: dict[str, Any] = {}
    for row in layout["hosts"]:
        host = row["host"]
        if host not in present:
            continue
        mine = hostvars[host]
        env_by_node[host] = {
            "ifname": mine.get("nccl_env_ifname"),
            "address": mine.get("nccl_env_address"),
            "master_port": mine.get("nccl_env_master_port", 0),
        }
        facts[host] = (mine.get("ansible_facts") or {}).get("nccl")
    return watch_hosts(layout, env_by_node, facts, present)


# ------------------------------------------------------------------------------------------------
# Words
# ------------------------------------------------------------------------------------------------


def format_size(size: int) -> str:
    """1024 -> '1 KiB', 4194304 -> '4 MiB', 1536 -> '1.5 KiB'."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            text = f"{value:.1f}".rstrip("0").rstrip(".")
            return f"{text} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def rank_list(ranks: list[int]) -> str:
    """[4] -> 'rank 4'; [4, 5, 6, 7] -> 'ranks 4-7'; [0, 2, 5, 6] -> 'ranks 0, 2, 5-6'."""
    ordered = sorted(set(ranks))
    if len(ordered) == 1:
        return f"rank {ordered[0]}"
    parts: list[str] = []
    start = prev = ordered[0] if ordered else 0
    for rank in [*ordered[1:], None]:
        if rank is not None and rank == prev + 1:
            prev = rank
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        if rank is not None:
            start = prev = rank
    return "ranks " + ", ".join(parts)


def rank_words(ranks: list[int]) -> str:
    """[0, 2] -> 'ranks 0 and 2' (for sentences); longer runs as rank_list."""
    ordered = sorted(set(ranks))
    if len(ordered) == 2:
        return f"ranks {ordered[0]} and {ordered[1]}"
    return rank_list(ordered)


def _place(entry: dict[str, Any]) -> str:
    if entry.get("status") not in (None, "running"):
        return f"done ({entry['status']})"
    test = entry.get("test")
    if not test:
        return "between tests"
    size = entry.get("size")
    return f"at {test}" + (f" {format_size(size)}" if isinstance(size, int) else "")


def progress_line(host: str, ranks: list[int], progress: list[dict[str, Any]]) -> tuple[str, str]:
    """('node2: ranks 4-7 at bandwidth_all_reduce 64 MiB (12 of 31 tests)', group).

    group names the test (or state) of the host's ranks without the size: a non-terminal
    display prints a line only when it changes.
    """
    seen = {p["rank"]: p for p in progress}
    waiting = [r for r in ranks if r not in seen]
    places: dict[str, list[int]] = {}
    for rank in sorted(seen):
        places.setdefault(_place(seen[rank]), []).append(rank)
    parts = [f"{rank_list(rs)} {place}" for place, rs in places.items()]
    if waiting:
        parts.append(f"{rank_list(waiting)} starting")
    indexes = [p["index"] for p in progress if isinstance(p.get("index"), int) and p["index"] > 0]
    counts = [p["count"] for p in progress if isinstance(p.get("count"), int)]
    line = f"{host}: " + ", ".join(parts)
    if indexes and counts:
        line += f" ({min(indexes)} of {max(counts)} tests)"
    groups = sorted({(p.get("test") or "") if p.get("status") == "running" else "done"
                     for p in progress} | ({"starting"} if waiting else set()))  # fmt: skip
    return line, " ".join(groups)


def should_show(
    terminal: bool, line: str, group: str, last: dict[str, Any], now: float, interval: float
) -> bool:
    """A terminal gets a host's line when it changed, at most every `interval` seconds; a log
    (Jenkins) gets one line per host per test group."""
    if not last:
        return True
    if terminal:
        return line != last.get("line") and now - float(last.get("at", 0)) >= interval
    return group != last.get("group")


# ------------------------------------------------------------------------------------------------
# Advancing and stalling
# ------------------------------------------------------------------------------------------------


def _position(entry: dict[str, Any]) -> list[Any]:
    return [entry.get("status"), entry.get("test"), entry.get("index"), entry.get("size")]


def advance(
    history: dict[str, Any], progress: list[dict[str, Any]], now: float
) -> tuple[dict[str, Any], bool]:
    """Fold a look at the ranks into their history; True when a rank moved since the last look.

    history: {rank (str): {pos, since, prev}}; `since` is when the rank reached its place (now
    minus the file's age), `prev` the place before it in the same test ({size, since}) for
    stall_limit's prediction.
    """
    moved = False
    new = dict(history)
    for entry in progress:
        key = str(entry["rank"])
        pos = _position(entry)
        since = now - float(entry.get("age_s") or 0.0)
        old = history.get(key)
        if old is not None and old["pos"] == pos:
            continue
        moved = True
        prev = None
        if old is not None and old["pos"][1] == pos[1] and isinstance(old["pos"][3], int):
            prev = {"size": old["pos"][3], "since": old["since"]}
        new[key] = {"pos": pos, "since": since, "prev": prev}
    return new, moved


def predicted_s(item: dict[str, Any]) -> float:
    """Seconds the rank's current size should take, from the sizes before it in the same test.

    Time grows with the bytes moved: the sizes from prev up to (not including) this one took
    (since - prev.since) for (size - prev.size) bytes when the sweep doubles (nccl-tests' -f 2,
    the check's default), so this size should take about that per byte times its size.
    """
    prev, size = item.get("prev"), item["pos"][3]
    if not prev or not isinstance(size, int) or size <= prev["size"]:
        return 0.0
    took = max(0.0, item["since"] - prev["since"])
    return took * size / (size - prev["size"])


def stall_limit(histories: list[dict[str, Any]], base: float) -> float:
    """nccl_stall_timeout, or STALL_MARGIN times the longest predicted size when that is more."""
    longest = max(
        (predicted_s(item) for history in histories for item in history.values()
         if item["pos"][0] == "running"),
        default=0.0,
    )  # fmt: skip
    return max(base, STALL_MARGIN * longest)


def any_running(states: dict[str, dict[str, Any]]) -> bool:
    """Some rank still runs a test (not every rank finished: then the processes only exit)."""
    return any(
        entry.get("status") == "running"
        for state in states.values()
        for entry in state.get("progress") or []
    )


def all_in_tests(hosts: list[dict[str, Any]], states: dict[str, dict[str, Any]]) -> bool:
    """Every expected rank got to its tests (past check-in and init) or finished: from then on
    a rank that does not advance is a stall."""
    seen = {
        entry["rank"]: entry for state in states.values() for entry in state.get("progress") or []
    }
    for info in hosts:
        for rank in info.get("ranks") or []:
            entry = seen.get(rank)
            if entry is None:
                return False
            if entry.get("status") == "running" and not (entry.get("index") or 0) >= 1:
                return False
    return True


# ------------------------------------------------------------------------------------------------
# What ends this node's run: a failure elsewhere, or a stall
# ------------------------------------------------------------------------------------------------


# A look that sees a host's fabric interface down needs this little patience before the run is
# stalled (seconds without a rank advancing), whatever the stall timeout.
LINK_DOWN_PATIENCE_S = 10.0
# How long the watch that found a stall waits for every other host's evidence.
DIAGNOSE_WAIT_S = 8.0


def link_down(state: dict[str, Any]) -> bool:
    """Whether a host's last look saw its fabric interface down or without carrier."""
    iface = state.get("interface") or {}
    return iface.get("state") not in (None, "up", "unknown") or iface.get("carrier") is False


def stopped_entries(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The ranks of a host's last look whose process is stopped (node/run_progress.py
    rank_progress's ``stopped``: state T or t) while they still run a test."""
    return [
        entry
        for entry in state.get("progress") or []
        if entry.get("stopped") and entry.get("status") in (None, "running")
    ]


def is_silent(state: dict[str, Any]) -> bool:
    """Whether the watch heard nothing from a running host for longer than it should (the
    front-end's ``silent``: {since, for_s}; only the Slurm watch, whose nodes send a record
    every second, sets it)."""
    return bool(state.get("running", True) and state.get("silent"))


def _patience_words(states: dict[str, dict[str, Any]]) -> str:
    """Why the run gets only LINK_DOWN_PATIENCE_S: what the looks saw ("" when nothing)."""
    if any(link_down(s) for s in states.values()):
        return "once a fabric link is down"
    if any(stopped_entries(s) for s in states.values()):
        return "once a rank is stopped"
    if any(is_silent(s) for s in states.values()):
        return "once a node went silent"
    return ""


def stall_due(
    hosts: list[dict[str, Any]],
    states: dict[str, dict[str, Any]],
    stall_timeout: float,
    now: float,
) -> tuple[float, float, str] | None:
    """(seconds without a rank advancing, the limit, why that limit) when the run is stalled
    now, else None. states: every host's watch state ({last_advance, history, progress,
    interface}); stall_timeout: nccl_stall_timeout (0: never).

    The limit is nccl_stall_timeout, longer when the sizes before predict more (stall_limit),
    LINK_DOWN_PATIENCE_S once a look saw a cause: a host's fabric link down, a rank's process
    stopped (state T or t), a host gone silent (is_silent). Before every rank is in its tests
    (torch imports, rendezvous, check-in) only such a cause ends the run: a slow start or a
    missing rank is the check-in's finding. Once every rank finished, the processes only exit
    (slowly on a loaded host): no stall."""
    if stall_timeout <= 0 or not states:
        return None
    quiet_s = now - max(float(s.get("last_advance") or 0) for s in states.values())
    limit = stall_limit([s.get("history") or {} for s in states.values()], stall_timeout)
    why = (
        f"nccl_stall_timeout {stall_timeout:g} s"
        if limit <= stall_timeout
        else f"{limit:.0f} s: the sizes before predicted {limit / STALL_MARGIN:.0f} s for this one"
    )
    seen = _patience_words(states)
    down = bool(seen)
    if down and limit > LINK_DOWN_PATIENCE_S:
        limit = LINK_DOWN_PATIENCE_S
        why = f"{limit:g} s {seen}"
    if quiet_s <= limit or not any_running(states):
        return None
    if not (down or all_in_tests(hosts, states)):
        return None
    return quiet_s, limit, why


def new_watch_state(host: str, now: float) -> dict[str, Any]:
    """A host's watch state before its first look (what <host>/progress.json holds, docs/design.md
    "Watching a run"): advance, stall_due, failure_elsewhere and stall_message read it."""
    return {
        "host": host,
        "started": now,
        "updated": now,
        "last_advance": now,
        "running": True,
        "progress": [],
        "history": {},
        "interface": None,
        "diagnosis": None,
        "ending": None,
        "ended": None,
        "not_started": None,
        "silent": None,
    }


def lost_record(
    why: str,
    stopped_by: str = "",
    stop: dict[str, Any] | None = None,
    silent: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """launch.json of a host whose results never came back, written on the control machine by
    either front-end's watch (the Ansible wait: the run directory was gone; the Slurm command:
    the node went silent). ``why``: what happened to it, in the node's words where it gave any
    (its warden's); the report shows its ranks as errors with it and core/run_cause.py names
    the host when nothing else did. ``stopped_by``: the stop the watch had sent, if any."""
    return {
        "rc": None,
        "timed_out": False,
        "cut_short": True,
        "stopped_by": stopped_by or why,
        "stop": stop or None,
        "lost": why,
        "silent": silent or None,
        "rank_exits": [],
    }


def failure_elsewhere(me: str, states: dict[str, dict[str, Any]]) -> str | None:
    """Why this host's run must end now because another host's run ended badly, else None.

    A rank killed by a signal (torchrun's first observed failure) comes first, then a run
    stopped on another host (a stall found there is adopted word for word), then torchrun
    itself killed; earliest first. A rank that ended by itself (a failed check: exit 1, its
    watchdog: 124) ends nothing elsewhere: the other ranks finish or time out on their own
    (exit_barrier_wait ends a torchrun left waiting for it). A run ended in its exit barrier is
    no failure. A run being stopped (``ending``: its watch named why and makes the stop call)
    counts as ended: the other hosts stop theirs without waiting for that call. A host whose
    torchrun never started (``not_started``: its start and wait were one call, and the start
    failed) comes first of all: without it the static rendezvous cannot complete.
    """
    found: list[tuple[int, float, str]] = []
    for host, state in states.items():
        if host != me and state.get("not_started"):
            found.append((-1, float(state.get("updated") or 0.0), not_started_reason([host])))
            continue
        ended = state.get("ended") or state.get("ending")
        if host == me or not ended or (ended.get("stop") or {}).get("kind") == EXIT_BARRIER:
            continue
        at = float(state.get("updated") or 0.0)
        exits = ended.get("rank_exits") or []
        root = next((e for e in exits if e.get("root_cause")), exits[0] if exits else None)
        stopped = ended.get("stopped_by")
        if stopped and str(stopped).startswith("stalled:"):
            found.append((1, at, str(stopped)))
        elif stopped:
            found.append((2, at, f"the run on {host} was stopped: {stopped}"))
        elif root is not None and root.get("signal"):
            found.append((0, at, f"rank {root['rank']} on {host} {root['text']}"))
        elif isinstance(ended.get("rc"), int) and ended["rc"] < 0:
            found.append((2, at, f"torchrun on {host} was {describe_rc(ended['rc'])}"))
    return min(found)[2] if found else None


def _ranks_done(info: dict[str, Any], state: dict[str, Any]) -> bool:
    """Every rank of the host wrote its final result (a run that ended has no rank running)."""
    if state.get("ended"):
        return True
    seen = {entry["rank"]: entry for entry in state.get("progress") or []}
    return all(
        rank in seen and seen[rank].get("status") not in (None, "running")
        for rank in info.get("ranks") or []
    )


def _failed_words(ended: dict[str, Any]) -> str | None:
    """Why a host's run failed in words ('rank 1 exited 1 (a check failed)'), None when it
    ended well or was ended for an exit barrier itself (EXIT_BARRIER: never a cause)."""
    if (ended.get("stop") or {}).get("kind") == EXIT_BARRIER:
        return None
    exits = ended.get("rank_exits") or []
    root = next((e for e in exits if e.get("root_cause")), exits[0] if exits else None)
    if root is not None:
        return f"rank {root['rank']} {root['text']}"
    rc = ended.get("rc")
    if isinstance(rc, int) and rc != 0:
        return f"its torchrun exited {rc}"
    return None


def exit_barrier_wait(
    me: str, hosts: list[dict[str, Any]], states: dict[str, dict[str, Any]]
) -> tuple[str, dict[str, Any]] | None:
    """(why, details) when this host's torchrun only waits in torch elastic's exit barrier for
    a host whose worker group failed, else None.

    torchrun enters that barrier once its workers all succeeded and waits there (300 s, no
    option to shorten it) for every node's torchrun; a node whose workers failed returns without
    it, so the barrier never completes. Then: this host's ranks all wrote their final results and
    exited (the look's ``workers_exited``), another host's run ended with a failure, and no rank
    of a host still running is in a test (on the master node torchrun holds the store those
    ranks may still use). A healthy run never gets here: every torchrun leaves the barrier.
    """
    mine = states.get(me) or {}
    info = {h["host"]: h for h in hosts}
    if not (mine.get("workers_exited") and mine.get("progress") and me in info):
        return None
    if not _ranks_done(info[me], mine):
        return None
    failed: list[tuple[float, str, str]] = []
    for host in info:
        state = states.get(host) or {}
        if host == me:
            continue
        if not _ranks_done(info[host], state):
            return None
        words = _failed_words(state["ended"]) if state.get("ended") else None
        if words:
            failed.append((float(state.get("updated") or 0.0), host, words))
    if not failed:
        return None
    failed.sort()
    names = [host for _, host, _ in failed]
    _, first, words = failed[0]
    cause = words + (f" on {first}" if len(names) > 1 else "")
    reason = (
        f"torchrun waited in its exit barrier for {' and '.join(names)}, whose ranks failed "
        f"({cause}); ended"
    )
    return reason, {"kind": EXIT_BARRIER, "message": reason, "waited_for": names}


def not_started_reason(hosts: list[str]) -> str:
    """Why the other nodes' runs end when torchrun did not start on ``hosts``."""
    return f"torchrun did not start on {', '.join(hosts)}, so the rendezvous could not complete"


def adopted_stop(reason: str, states: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """launch.json's ``stop`` for a run ended because of ``reason`` (failure_elsewhere's). A
    stall adopted from another host keeps that host's details (its culprits, test and size): a
    cause named there stays named here (src/nccl_preflight/core/pairwise_relaunch.py reads it)."""
    if reason.startswith("stalled:"):
        for host, state in states.items():
            ended = state.get("ended") or state.get("ending") or {}
            found = ended.get("stop")
            if ended.get("stopped_by") == reason and isinstance(found, dict):
                return {**found, "message": reason, "seen_on": host}
        return {"kind": "stall", "message": reason, "seen_on": "another host"}
    return {"kind": "failure_elsewhere", "message": reason, "seen_on": "another host"}


def describe_rc(rc: int) -> str:
    try:
        name = signal.Signals(-rc).name
    except ValueError:
        name = f"signal {-rc}"
    return f"killed by {name}"


def _link_words(info: dict[str, Any], diagnosis: dict[str, Any]) -> str | None:
    """What is wrong with this host's fabric interface now that was right at the pre-flight."""
    iface = diagnosis.get("interface") or {}
    name = iface.get("ifname") or info.get("ifname") or "the fabric interface"
    was = (info.get("preflight_state") or "").upper()
    state = (iface.get("state") or "").lower()
    if state and state not in ("up", "unknown"):
        return f"{name} is {state.upper()}" + (f" (was {was} at the pre-flight)" if was else "")
    if iface.get("carrier") is False:
        return f"{name} has no carrier (its link was lost since the pre-flight)"
    return None


def _stopped_words(entry: dict[str, Any]) -> str:
    stopped = entry.get("stopped") or {}
    state = str(stopped.get("state") or "T")
    how = STOPPED_STATES.get(state, "stopped")
    return f"rank {entry['rank']} (pid {stopped.get('pid')}) is stopped (state {state}: {how})"


def _silent_words(info: dict[str, Any], silent: dict[str, Any]) -> str:
    """A host the watch heard nothing from: what that means (it is cut off, its link too)."""
    link = f" and its fabric link {info['ifname']}" if info.get("ifname") else ""
    return (
        f"silent for {float(silent.get('for_s') or 0):.0f} s: the node{link} stopped answering "
        "(no word from its task)"
    )


def _unreachable(
    hosts: list[dict[str, Any]], diagnoses: dict[str, dict[str, Any]]
) -> dict[str, list[str]]:
    """{host: [how a ring probe failed to reach it]}."""
    unreachable: dict[str, list[str]] = {}
    for info in hosts:
        for probe in diagnoses[info["host"]].get("probes") or []:
            if not probe.get("ok"):
                target = str(probe.get("host") or probe["address"])
                unreachable.setdefault(target, []).append(
                    f"unreachable from {info['host']} at {probe['address']}:{probe['port']} "
                    f"({probe['answer']})"
                )
    return unreachable


def culprits_of(hosts: list[dict[str, Any]], states: dict[str, dict[str, Any]]) -> dict[str, list]:
    """{host: [what is wrong]}: what a host's own look showed (its fabric link down, a rank's
    process stopped) or a host gone silent (with what the ring probes of it said); when none,
    the hosts a ring probe could not reach (a probe from a host with its link down says nothing
    new)."""
    diagnoses = {h["host"]: (states.get(h["host"]) or {}).get("diagnosis") or {} for h in hosts}
    unreachable = _unreachable(hosts, diagnoses)
    named: dict[str, list[str]] = {}
    for info in hosts:
        host, state = info["host"], states.get(info["host"]) or {}
        words = _link_words(info, diagnoses[host])
        found = [words] if words else []
        found += [_stopped_words(entry) for entry in stopped_entries(state)]
        if is_silent(state):
            found += [_silent_words(info, state["silent"]), *unreachable.get(host, [])]
        if found:
            named[host] = found
    return named or unreachable


def cause_named(hosts: list[dict[str, Any]], states: dict[str, dict[str, Any]]) -> bool:
    """Whether a stall's evidence names a cause no relaunch could pass: a host's fabric link
    down or without carrier, or a ring probe that got a definite error (no route to the host,
    network unreachable). A probe that only got no answer in time is not one: a link slowed to
    a few hundred kbit/s delays a SYN that long, and the pairwise relaunch names that node.
    A rank's process stopped is one, and so is a host gone silent that a peer cannot reach
    either (cut off: a relaunch on it would only hang)."""
    silent_unreachable = _unreachable(
        hosts, {h["host"]: (states.get(h["host"]) or {}).get("diagnosis") or {} for h in hosts}
    )
    for info in hosts:
        state = states.get(info["host"]) or {}
        diagnosis = state.get("diagnosis") or {}
        if _link_words(info, diagnosis) or stopped_entries(state):
            return True
        if is_silent(state) and info["host"] in silent_unreachable:
            return True
        for probe in diagnosis.get("probes") or []:
            answer = str(probe.get("answer") or "")
            if not probe.get("ok") and not probe.get("timed_out", answer.startswith("no answer")):
                return True
    return False


def stall_message(
    hosts: list[dict[str, Any]],
    states: dict[str, dict[str, Any]],
    stalled_s: float,
    limit_s: float,
    limit_why: str = "",
) -> tuple[str, dict[str, Any]]:
    """The stall finding, e.g. 'node2: fab0 is DOWN (was UP at the pre-flight) - ranks 0 and 2
    waited on rank 1 in bandwidth_all_reduce at 4 MiB', and its details for launch.json.

    hosts: [{host, ranks, ifname, preflight_state}]; states: every host's progress.json.
    """
    culprits = culprits_of(hosts, states)
    limit_why = limit_why or f"the limit was {limit_s:.0f} s"
    running: dict[int, dict[str, Any]] = {}
    for info in hosts:
        for entry in (states.get(info["host"]) or {}).get("progress") or []:
            if entry.get("status") == "running":
                running[entry["rank"]] = entry
    stopped = sorted(
        entry["rank"] for info in hosts for entry in stopped_entries(states.get(info["host"]) or {})
    )
    suspects = stopped or [r for info in hosts if info["host"] in culprits for r in info["ranks"]]
    if not suspects and running:
        # Nothing wrong with the network: the ranks behind the others are the ones waited on.
        low = min((e.get("index") or 0, e.get("size") or 0) for e in running.values())
        suspects = [
            r for r, e in running.items() if (e.get("index") or 0, e.get("size") or 0) == low
        ]
        if len(suspects) == len(running):
            suspects = []
    waiting = sorted(r for r in running if r not in suspects)
    where = _common_place([running[r] for r in (waiting or sorted(running))])
    head = "; ".join(f"{h}: {', '.join(w)}" for h, w in culprits.items())
    if waiting and suspects:
        tail = f"{rank_words(waiting)} waited on {rank_words(suspects)}{where}"
    elif running:
        tail = f"{rank_words(sorted(running))} stuck{where}"
    else:
        tail = "no rank was running"
    if not head:
        head = (
            "every fabric interface is up and the ring answers, yet no rank advanced "
            "(a rank or the collective is stuck, not the link)"
        )
    message = f"{head} — {tail}; no rank advanced for {stalled_s:.0f} s ({limit_why})"
    details = {
        "kind": "stall",
        "stalled_s": round(stalled_s, 1),
        "limit_s": round(limit_s, 1),
        "culprits": culprits,
        "cause_named": cause_named(hosts, states),
        "suspect_ranks": sorted(suspects),
        "stopped_ranks": stopped,
        "waiting_ranks": waiting,
        "test": (running[(waiting or sorted(running))[0]].get("test") if running else None),
        "size_bytes": (running[(waiting or sorted(running))[0]].get("size") if running else None),
    }
    return message, details


def _common_place(entries: list[dict[str, Any]]) -> str:
    if not entries:
        return ""
    test, size = entries[0].get("test"), entries[0].get("size")
    if not test:
        return ""
    return f" in {test}" + (f" at {format_size(size)}" if isinstance(size, int) else "")
