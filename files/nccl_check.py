#!/usr/bin/env python3
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Verify every torch.distributed collective on every rank, then time them like nccl-tests.

    torchrun --nproc_per_node=2 nccl_check.py --out-dir /tmp/r                  # laptop, CPU, gloo
    torchrun --nnodes=2 --node_rank=R --master_addr=A --master_port=P \\
             --nproc_per_node=8 nccl_check.py --out-dir /tmp/r                   # GPU nodes, nccl
    python nccl_check.py --init-method tcp://HOST:PORT --rank R --world-size N

Sections 1 to 10 read top to bottom; whole concerns are modules beside this file, each a leaf
that never imports it: the correctness verifiers (nccl_check_verify.py), timing
(nccl_check_sweep.py), the pairwise rounds (nccl_check_pairwise.py) and the tables the control
machine reads too: the tests, the collectives timed, the support table (nccl_check_tables.py, a
link to src/nccl_preflight/node/collective_tables.py). The record and the exit status:
docs/design.md, "Rank result"; the files, exact inputs, Collective records and never hanging:
"Inside the rank script".
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import datetime
import functools
import itertools
import json
import os
import platform
import re
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

# torch wheels built without NumPy warn about it on import; nothing here uses NumPy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch
import torch.distributed as dist

# The script's own modules, beside it (its directory is sys.path[0]); none imports this one.
from nccl_check_options import TCP_URL, Names, option_problems
from nccl_check_options import build_parser as options_parser
from nccl_check_pair_schedule import DEFAULT_PAIR_ROUNDS
from nccl_check_pairwise import Pairwise
from nccl_check_sweep import Sweep, judge_sweep, sig4, sweep_sizes, timed
from nccl_check_tables import (
    ALL_TESTS,
    BANDWIDTH_COLLECTIVES,
    COLLECTIVE_OPS,
    DTYPE_ALIASES,
    DTYPE_NAMES,
    TEST_GROUPS,
    Support,
    support_of,
    tests_of,
)
from nccl_check_verify import (
    Context,
    Details,
    Fail,
    Skip,
    all_gather_single,
    exact_pattern,
    reduce_scatter_single,
    ring_exchange,
    sum_of_tags,
    verify_all_gather,
    verify_all_reduce,
    verify_all_to_all,
    verify_barrier,
    verify_broadcast,
    verify_gather,
    verify_reduce,
    verify_reduce_scatter,
    verify_scatter,
    verify_send_recv,
)

SCHEMA = 1
GRACE_S = 5.0  # a phase may overrun --timeout by this much before the watchdog ends the rank
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_TIMEOUT = 0, 1, 2, 124

# --dtype name -> (torch dtype, nccl-tests' name for the "type" column)
_COLUMN = {"float32": "float", "float64": "double", "float16": "half"}  # the others: their name
DTYPES: dict[str, tuple[torch.dtype, str]] = {
    name: (getattr(torch, name), _COLUMN.get(name, name)) for name in DTYPE_NAMES
}
BACKEND_FOR_DEVICE = {"cuda": "nccl", "npu": "hccl", "xpu": "xccl", "cpu": "gloo"}

# Texts with which backends refuse an operation they do not implement (older gloo: AVG,
# reduce_scatter, all_to_all; gloo's AVG on integers). Only these turn an exception into "skipped".
UNSUPPORTED = re.compile(
    r"does not support|Cannot use ReduceOp\.\w+ with|not (?:yet )?(?:supported|implemented)"
    r"|result type \w+ can't be cast to the desired output type"
)


# --------------------------------------------------------------------------------------------
# 1. Options (the long story of each: docs/design.md, "Options of the rank script")
# --------------------------------------------------------------------------------------------

# The options themselves, what each accepts and the checks between them: nccl_check_options.py,
# which the control machine parses nccl_check_args with too (src/nccl_preflight/core/rank_args.py).
NAMES = Names(
    tests=ALL_TESTS,
    groups=TEST_GROUPS,
    bandwidth=BANDWIDTH_COLLECTIVES,
    dtypes=DTYPE_NAMES,
    dtype_aliases=DTYPE_ALIASES,
    pair_rounds=DEFAULT_PAIR_ROUNDS,
)


def build_parser() -> argparse.ArgumentParser:
    return options_parser(
        NAMES,
        epilog=(
            f"Tests: {', '.join(ALL_TESTS)}. Exit status: 0 all passed (or skipped), 1 a test "
            "failed or errored, 2 bad arguments, 124 the watchdog ended a phase that overran "
            "--timeout, 128+N signal N."
        ),
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_tests:
        print("\n".join(ALL_TESTS))
        raise SystemExit(EXIT_OK)
    for message in option_problems(args):
        parser.error(message)
    args.rank = env_int("RANK") if args.rank is None else args.rank
    args.world_size = env_int("WORLD_SIZE") if args.world_size is None else args.world_size
    if args.rank is None or args.world_size is None:
        parser.error(
            "no rank/world size: run under torchrun, or pass --init-method tcp://HOST:PORT "
            "--rank R --world-size N"
        )
    if args.world_size < 1 or args.rank >= args.world_size:
        parser.error(f"--rank {args.rank} is not below --world-size {args.world_size}")
    if args.local_rank is None:
        args.local_rank = env_int("LOCAL_RANK") or 0
    layout = args.ranks_per_node or uniform_layout(
        args.world_size, env_int("LOCAL_WORLD_SIZE") or 1
    )
    if sum(layout) != args.world_size:
        parser.error(
            f"--ranks-per-node {','.join(map(str, layout))} adds up to {sum(layout)} ranks, not "
            f"--world-size {args.world_size}"
        )
    args.ranks_per_node = layout
    args.tests = list(dict.fromkeys(args.tests)) if args.tests else list(ALL_TESTS)
    args.thresholds = dict.fromkeys(BANDWIDTH_COLLECTIVES, args.min_busbw)
    args.thresholds.update(dict(args.min_busbw_for))
    return args


def env_int(name: str) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.strip().isdigit() else None


# --------------------------------------------------------------------------------------------
# 2. Device and backend
# --------------------------------------------------------------------------------------------


def accelerator_type() -> str | None:
    """The accelerator torch sees ('cuda', 'npu', 'xpu'), or None."""
    if hasattr(torch, "accelerator"):  # torch >= 2.6
        acc = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
        return acc.type if acc is not None and acc.type in ("cuda", "npu", "xpu") else None
    modules = {kind: getattr(torch, kind, None) for kind in ("cuda", "npu", "xpu")}
    return next((k for k, m in modules.items() if m is not None and m.is_available()), None)


def versions() -> dict[str, str | None]:
    nccl = None
    if torch.cuda.is_available() and hasattr(torch.cuda, "nccl"):
        with contextlib.suppress(Exception):  # builds without NCCL raise various errors here
            nccl = ".".join(str(p) for p in torch.cuda.nccl.version())
    found = {"python": platform.python_version(), "torch": torch.__version__}
    return found | {"cuda": torch.version.cuda, "nccl": nccl, "driver": nvidia_driver_version()}


def nvidia_driver_version(path: str = "/proc/driver/nvidia/version") -> str | None:
    """'NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  ...' -> '535.104.05'; the
    open module's 'NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  ...' -> '580.159.04'."""
    try:
        with open(path, encoding="utf-8") as handle:
            match = re.search(r"Kernel Module\b.*?\s(\d+(?:\.\d+)+)\b", handle.read())
    except OSError:
        return None
    return match.group(1) if match else None


ENV_PREFIXES = ("NCCL_", "GLOO_", "MASTER_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "TORCHELASTIC_")
ENV_PREFIXES += ("HCCL_", "CCL_")
ENV_NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK")
ENV_NAMES += ("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "ZE_AFFINITY_MASK")


def seen_environment(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    return {
        k: v for k, v in sorted(environ.items()) if k.startswith(ENV_PREFIXES) or k in ENV_NAMES
    }


# --------------------------------------------------------------------------------------------
# 3. The per-rank record: rank-<global rank>.json (docs/design.md, "Rank result")
# --------------------------------------------------------------------------------------------


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


class RankRecord:
    """The record, rewritten atomically after every change."""

    def __init__(self, out_dir: str | None, data: dict[str, Any], verbose: bool = False):
        self.path = os.path.join(out_dir, f"rank-{data['global_rank']}.json") if out_dir else None
        self.data, self.verbose, self.lock = data, verbose, threading.RLock()
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)

    @property
    def where(self) -> str:
        return f"rank {self.data['global_rank']} on {self.data['host']}"

    def start(self, test: str, index: int | None = None) -> None:
        """`test` runs now; `index`: its 1-based place in --tests (progress contract)."""
        index = self.data.get("test_index") if index is None else index
        self.update(current_test=test, current_size=None, test_index=index)

    def add(self, test: dict[str, Any]) -> None:
        """Record a finished test, say so when asked (errors always), and rewrite the file."""
        with self.lock:
            self.data["tests"].append(test)
            self.update(current_test=None, current_size=None)
        bad = test["status"] in ("failed", "error")
        if bad or self.verbose:
            line = f"[{self.where}] {test['name']}: {test['status']}"
            line += f" - {test['message']}" if test["message"] else ""
            print(line, file=sys.stderr if bad else sys.stdout, flush=True)

    def finish(self, status: str | None = None) -> str:
        with self.lock:
            statuses = {t["status"] for t in self.data["tests"]}
            status = status or next((s for s in ("error", "failed") if s in statuses), "passed")
            self.update(status=status, finished_at=now())
            return status

    def update(self, **fields: Any) -> None:
        with self.lock:
            self.data.update(fields)
            self.write()

    def write(self) -> None:
        if self.path is None:
            return
        with self.lock:  # a new file (O_EXCL) of our own, then renamed over the record
            where = os.path.dirname(self.path)
            fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(self.path)}.", dir=where)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(json.dumps(self.data, indent=1, default=str) + "\n")
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise


def test_entry(
    name: str,
    status: str,
    message: str = "",
    details: Details | None = None,
    duration_s: float = 0.0,
    bandwidth: list[Details] | None = None,
) -> Details:
    entry = {"name": name, "status": status, "duration_s": round(duration_s, 6), "message": message}
    return entry | {"details": details or {}, "bandwidth": bandwidth or []}


# --------------------------------------------------------------------------------------------
# 4. Never hang: the watchdog's end (Run.arm), and a watcher for SIGTERM (design.md, "Never hang")
# --------------------------------------------------------------------------------------------


_aborting = threading.Lock()


def abort(
    record: RankRecord,
    phase: str | None,
    message: str,
    exit_code: int,
    peers: Callable[[], dict[str, Any]] | None = None,
) -> None:
    """Record `phase` as an error, finish the record with status error, and leave now."""
    if not _aborting.acquire(blocking=False):
        time.sleep(3600)  # another thread is already ending the process
    if record.data["status"] != "running":  # every test already recorded: keep the verdict
        print(f"[{record.where}] {phase or 'exit'}: {message}", file=sys.stderr, flush=True)
        os._exit(exit_code)
    details: dict[str, Any] = {}
    with contextlib.suppress(Exception):  # diagnostics only: a dead store must not hang us (3 s)
        details = (
            concurrent.futures.ThreadPoolExecutor(1).submit(peers).result(3.0) if peers else {}
        )
    with record.lock:
        phase = phase or record.data.get("current_test") or "nccl_check"
        record.data["current_test"] = phase
        if details.get("missing_ranks"):
            record.data["missing_ranks"] = details["missing_ranks"]
        record.data["tests"].append(test_entry(phase, "error", message, details))
        with contextlib.suppress(OSError):
            record.finish("error")
    print(f"[{record.where}] {phase}: error - {message}", file=sys.stderr, flush=True)
    os._exit(exit_code)


def watch_signals(record: RankRecord) -> None:
    """Record SIGTERM/SIGINT even while the main thread is blocked inside a collective."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    for sig in (signal.SIGTERM, signal.SIGINT):  # the reader thread acts; the handler only exists
        signal.signal(sig, lambda signum, frame: None)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)

    def reader() -> None:
        while not (data := os.read(read_fd, 1)) or data[0] not in (signal.SIGTERM, signal.SIGINT):
            pass
        message = (
            f"{record.where} was stopped by {signal.Signals(data[0]).name} (torchrun stops every "
            "rank when one rank fails: look for the rank with a different error)"
        )
        abort(record, None, message, 128 + data[0])

    threading.Thread(target=reader, name="nccl-check-signals", daemon=True).start()


# --------------------------------------------------------------------------------------------
# 5. Check-in through the store, before the process group exists
# --------------------------------------------------------------------------------------------


def make_store(init_method: str, rank: int, world_size: int, timeout: float) -> dist.Store:
    """The store the process group will use, made here so check-in can use it first."""
    if init_method.startswith("file://"):
        return dist.FileStore(init_method.removeprefix("file://"), world_size)
    if init_method == "env://":
        host, port = os.environ.get("MASTER_ADDR", ""), env_int("MASTER_PORT")
        if not host or port is None:
            raise RuntimeError("env:// needs MASTER_ADDR and MASTER_PORT (torchrun sets them)")
        # Under torchrun the agent on node 0 already serves the store: every rank is a client.
        is_master = rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
    else:
        match = TCP_URL.fullmatch(init_method)
        assert match is not None  # parse_args checked the form
        host, port, is_master = match.group(1) or match.group(2), int(match.group(3)), rank == 0
    # wait_for_workers=False: rank 0 must not block here, so it can check in and report.
    delta = datetime.timedelta(seconds=timeout)
    return dist.TCPStore(
        host, port, world_size, is_master, delta, wait_for_workers=False, multi_tenant=True
    )


def checkin_value(host: str, node_rank: int, local_rank: int) -> str:
    return json.dumps({"host": host, "node_rank": node_rank, "local_rank": local_rank})


def check_in(
    store: dist.Store, rank: int, world_size: int, value: str, timeout: float
) -> list[int]:
    """Write ready/<rank>, wait until every rank did or `timeout` passed; return the missing."""
    store.set(f"ready/{rank}", value)
    store.add("ready_count", 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if store.add("ready_count", 0) >= world_size:
            return []
        time.sleep(0.05)
    return [r for r in range(world_size) if not store.check([f"ready/{r}"])]


def uniform_layout(world_size: int, local_world_size: int) -> list[int]:
    """torchrun's layout by hand: every node runs local_world_size ranks (the last one the rest)."""
    full, rest = divmod(world_size, local_world_size)
    return [local_world_size] * full + ([rest] if rest else [])


def node_of(rank: int, layout: Sequence[int]) -> int:
    """The node of a global rank: node k holds the next layout[k] ranks."""
    return sum(end <= rank for end in itertools.accumulate(layout))


def describe_missing(
    store: dist.Store, missing: list[int], world_size: int, layout: int | Sequence[int]
) -> list[dict[str, Any]]:
    """{"rank", "node_rank", "host"} per missing rank: the node from the layout (an int: that
    many ranks on every node), the host from a rank of that node that arrived."""
    layout = uniform_layout(world_size, layout) if isinstance(layout, int) else layout
    came = [r for r in range(world_size) if r not in missing and store.check([f"ready/{r}"])]
    infos = [json.loads(store.get(f"ready/{r}")) for r in reversed(came)]  # the first one wins
    hosts = {int(info["node_rank"]): info["host"] for info in infos}
    nodes = {r: node_of(r, layout) for r in missing}
    return [{"rank": r, "node_rank": nodes[r], "host": hosts.get(nodes[r])} for r in missing]


# --------------------------------------------------------------------------------------------
# 6. Running one test: its outcome as a record entry (the verifiers: nccl_check_verify.py)
# --------------------------------------------------------------------------------------------


def unsupported(exc: BaseException) -> bool:
    """True when the backend refused the operation as not implemented (its own message)."""
    return isinstance(exc, RuntimeError | NotImplementedError | TypeError) and bool(
        UNSUPPORTED.search(str(exc))
    )


def run_test(name: str, body: Callable[[], Details], support: Support | None = None) -> Details:
    """Run one test body; turn its outcome into a record entry. A backend's refusal
    (unsupported()) is a skip only where the support table said "maybe" (docs/design.md, "The
    support table"); anywhere else the test fails saying so."""
    started = time.monotonic()

    def entry(status: str, message: str, details: Any = None, rows: Any = None) -> Details:
        return test_entry(name, status, message, details, time.monotonic() - started, rows)

    try:
        details = body()
    except Skip as exc:
        return entry("skipped", str(exc))
    except Fail as exc:
        return entry("failed", str(exc), exc.details, exc.details.pop("bandwidth", []))
    except Exception as exc:
        message = first_line(exc)
        if unsupported(exc) and support is not None and support.state == "maybe":
            return entry("skipped", f"backend does not support it: {message} ({support.reason})")
        if unsupported(exc):
            predicted = support.reason if support is not None else "no support table entry"
            text = f"the backend refused it, which the support table did not predict ({predicted})"
            details = {"refusal": message, "support": support._asdict() if support else None}
            return entry("failed", f"{text}: {message}", details)
        details = {"exception": type(exc).__name__, "traceback": traceback.format_exc(limit=6)}
        return entry("error", f"{type(exc).__name__}: {message}", details)
    return entry("passed", "", details, details.pop("bandwidth", []))


def first_line(exc: BaseException) -> str:
    """The exception's first line, and NCCL's own reason where torch appended it to an NCCL
    error ("...invalid usage (run with NCCL_DEBUG=WARN for details)...\nLast error:\n<why>")."""
    lines = [line.strip() for line in str(exc).strip().splitlines()]
    if not lines or not lines[0]:
        return type(exc).__name__
    why = next((b for a, b in itertools.pairwise(lines) if a == "Last error:" and b), "")
    return lines[0] + (f"; NCCL's last error: {why}" if why else "")


# --------------------------------------------------------------------------------------------
# 7. The collectives: one record each, looked up by name
# --------------------------------------------------------------------------------------------


class Buffers:
    """The sweep's tensors for one message of `count` elements on one rank: rank r holds v(r) =
    1 + tag(r), so a SUM is `total` = n + sum_of_tags(n) everywhere and a gathered or exchanged
    chunk j holds v(j) (by_source())."""

    def __init__(self, ctx: Context, count: int):
        self.ctx, self.rank, self.n = ctx, ctx.rank, ctx.world_size
        self.total = self.n + sum_of_tags(self.n, ctx.period)
        self.part = count // self.n
        mine = self.v(self.rank)
        self.send, self.out = self.full(count, mine), self.full(count, 0)
        self.chunk_in, self.chunk_out = self.full(self.part, mine), self.full(self.part, 0)

    def full(self, length: int, value: float) -> torch.Tensor:
        return torch.full((length,), value, dtype=self.ctx.dtype, device=self.ctx.device)

    def v(self, rank: int) -> int:
        return 1 + rank % self.ctx.period

    def by_source(self) -> torch.Tensor:
        return torch.cat([self.full(self.part, self.v(j)) for j in range(self.n)])


class BandwidthNote(NamedTuple):
    """What a backend's own algorithm bounds busbw to, from min_ranks to max_ranks (None: any),
    printed under its tables (docs/design.md, "Bandwidth notes")."""

    min_ranks: int
    max_ranks: int | None
    text: str


@dataclass(frozen=True)
class Collective:
    """Everything about one collective, as nccl-tests keeps one testColl per collective (the
    fields: docs/design.md, "Collective records")."""

    name: str
    verify: Callable[..., Details]
    busbw: Callable[[int], float] = lambda n: 1.0
    run: Callable[[Buffers], object] | None = None
    result: Callable[[Buffers], tuple[torch.Tensor, Any] | None] = lambda b: None
    redop: str = "none"
    root: int = -1
    split: bool = False
    notes: dict[str, BandwidthNote] = field(default_factory=dict)

    def tests(self) -> tuple[str, ...]:
        return tests_of(self.name)

    def verifier(self, test: str) -> Callable[[Context], Details]:
        op = test.removeprefix(f"{self.name}_")
        return (lambda ctx: self.verify(ctx, op)) if COLLECTIVE_OPS[self.name] else self.verify


GLOO_BROADCAST = (
    "gloo's broadcast is a binomial tree, not a pipeline (gloo/broadcast.cc): with more than 2 "
    "ranks the root sends the whole buffer once per round, log2(n) rounds, and every rank of a "
    "host that has it sends it on in the same round, so a link can carry it several times: busbw "
    "0.50 of the link rate on 2 hosts x 2 ranks (1.0 on 2 hosts x 1 rank)"
)
GLOO_ALL_GATHER = (
    "gloo's ring all_gather posts each send before its receive; with 2 ranks one connection "
    "carries both directions and they take turns: busbw 0.62-0.66 of the link rate (from 3 ranks "
    "on, each connection carries one direction: 0.81-0.95 on 2 hosts x 2 ranks)"
)
GLOO_REDUCE_SCATTER = (
    "gloo runs reduce_scatter as an all_reduce of the whole input plus a copy "
    "(ProcessGroupGloo::reduce_scatter_tensor_coalesced; the list API runs one all_reduce per "
    "chunk): busbw is at most half the link rate (measured 0.44-0.48)"
)
COLLECTIVES: dict[str, Collective] = {
    c.name: c
    for c in (
        Collective(
            "all_reduce",
            verify_all_reduce,
            busbw=lambda n: 2 * (n - 1) / n,
            run=lambda b: dist.all_reduce(b.send),
            result=lambda b: (b.send, b.total),
            redop="sum",
        ),
        Collective(
            "broadcast",
            verify_broadcast,
            run=lambda b: dist.broadcast(b.send, src=0),
            result=lambda b: (b.send, b.v(0)),
            root=0,
            notes={"gloo": BandwidthNote(3, None, GLOO_BROADCAST)},
        ),
        Collective(
            "reduce",
            verify_reduce,
            run=lambda b: dist.reduce(b.send, dst=0),
            result=lambda b: (b.send, b.total) if b.rank == 0 else None,
            redop="sum",
            root=0,
        ),
        Collective(
            "all_gather",
            verify_all_gather,
            busbw=lambda n: (n - 1) / n,
            run=lambda b: all_gather_single(b.out, b.chunk_in),
            result=lambda b: (b.out, b.by_source()),
            split=True,
            notes={"gloo": BandwidthNote(2, 2, GLOO_ALL_GATHER)},
        ),
        Collective("gather", verify_gather),
        Collective("scatter", verify_scatter),
        Collective(
            "reduce_scatter",
            verify_reduce_scatter,
            busbw=lambda n: (n - 1) / n,
            run=lambda b: reduce_scatter_single(b.chunk_out, b.send),
            result=lambda b: (b.chunk_out, b.total),
            redop="sum",
            split=True,
            notes={"gloo": BandwidthNote(2, None, GLOO_REDUCE_SCATTER)},
        ),
        Collective(
            "all_to_all",
            verify_all_to_all,
            busbw=lambda n: (n - 1) / n,
            run=lambda b: dist.all_to_all_single(b.out, b.send),
            result=lambda b: (b.out, b.by_source()),
            split=True,
        ),
        Collective(
            "send_recv",
            verify_send_recv,
            run=lambda b: ring_exchange(b.send, b.out, b.rank, b.n),
            result=lambda b: (b.out, b.v((b.rank - 1) % b.n)),
        ),
        Collective("barrier", verify_barrier),
    )
}
# The verifier of every correctness test, in the tables' order (COLLECTIVE_OPS: the records' own).
VERIFIERS = {t: c.verifier(t) for c in COLLECTIVES.values() for t in c.tests()}


# --------------------------------------------------------------------------------------------
# 8. Bandwidth sweep, nccl-tests style (sizes, timing, verdict: nccl_check_sweep.py)
# --------------------------------------------------------------------------------------------


def busbw(collective: str, algbw: float, world_size: int) -> float:
    return algbw * COLLECTIVES[collective].busbw(world_size)


def bandwidth_note(backend: str, collective: str, world_size: int) -> str | None:
    note = COLLECTIVES[collective].notes.get(backend)
    if note is None or not note.min_ranks <= world_size <= (note.max_ranks or world_size):
        return None
    return note.text


def message_shape(collective: str, size_bytes: int, elem: int, world_size: int) -> tuple[int, int]:
    """(count, bytes) nccl-tests style: size is the larger buffer, a multiple of n for the
    collectives that split it (all_gather output, reduce_scatter input, all_to_all)."""
    count = max(1, size_bytes // elem)
    if COLLECTIVES[collective].split:
        count = max(world_size, count - count % world_size)
    return count, count * elem


def measure(sweep: Sweep, collective: str) -> Details:
    """Time every size; the time is the average over ranks, like nccl-tests' default (-a 1)."""
    ctx, n, coll = sweep.ctx, sweep.ctx.world_size, COLLECTIVES[collective]
    if n < 2:
        raise Skip("bandwidth needs at least 2 ranks")
    if exact_pattern(n, ctx.dtype) is None:
        raise Skip(f"{n} ranks exceed the exact integer range of {ctx.dtype}: use --dtype float32")
    assert coll.run is not None, f"{collective} is not timed"
    elem, rows = torch.empty(0, dtype=ctx.dtype).element_size(), []
    for size in sweep.sizes:
        sweep.arm(f"bandwidth_{collective} at {size} B", size)
        count, nbytes = message_shape(collective, size, elem, n)
        b = Buffers(ctx, count)
        call = functools.partial(coll.run, b)
        own = timed(call, ctx.device, sweep.warmup, sweep.iters, dist.barrier)  # this rank's time
        mean = torch.tensor([own], dtype=torch.float32, device=ctx.device)
        dist.all_reduce(mean)
        seconds = float(mean.cpu()) / n
        b.send.fill_(b.v(b.rank))  # #wrong: a fresh run against the expected value
        call()
        found = coll.result(b)
        wrong = 0 if found is None else int((found[0] != found[1]).sum())
        algbw = nbytes / seconds / 1e9
        rows.append(
            {
                "size_bytes": nbytes,
                "count": count,
                "type": sweep.type_name,
                "redop": coll.redop,
                "root": coll.root,
                "time_us": round(seconds * 1e6, 2),
                "algbw_gbps": sig4(algbw),
                "busbw_gbps": sig4(busbw(collective, algbw, n)),
                "rank_time_us": round(own * 1e6, 2),
                "rank_busbw_gbps": sig4(busbw(collective, nbytes / own / 1e9, n)),
                "wrong": wrong,
            }
        )
    return judge_sweep(collective, rows, sweep.thresholds[collective])


def bandwidth_table(
    collective: str, rows: list[Details], world_size: int, backend: str = ""
) -> str:
    """nccl-tests' layout: size count type redop root time algbw busbw #wrong (+ a backend note)."""
    lines = [
        f"# {collective}, {world_size} ranks",
        f"#{'size':>11} {'count':>12} {'type':>8} {'redop':>6} {'root':>5} "
        f"{'time':>10} {'algbw':>7} {'busbw':>7} {'#wrong':>6}",
        f"#{'(B)':>11} {'(elements)':>12} {'':>8} {'':>6} {'':>5} "
        f"{'(us)':>10} {'(GB/s)':>7} {'(GB/s)':>7}",
    ]
    for r in rows:
        lines.append(
            f"{r['size_bytes']:>12} {r['count']:>12} {r['type']:>8} {r['redop']:>6} {r['root']:>5} "
            f"{r['time_us']:>10.2f} {r['algbw_gbps']:>7.2f} {r['busbw_gbps']:>7.2f} {r['wrong']:>6}"
        )
    avg = sum(r["busbw_gbps"] for r in rows) / len(rows) if rows else 0.0
    lines.append(f"# Avg bus bandwidth    : {avg:g}")
    if note := bandwidth_note(backend, collective, world_size):
        lines.append(f"# Note: {note}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# 9. Pairwise rounds: which node, which rail (--pairwise; docs/design.md, "Pairwise rounds").
# The rounds themselves: nccl_check_pairwise.py.
# --------------------------------------------------------------------------------------------


def run_pairwise(run: Run, ctx: Context, stopped_by: str | None) -> None:
    """The pairwise phase (called once from run_tests()), when asked for or triggered."""
    if run.args.pairwise == "never" or stopped_by is not None or ctx.world_size < 2:
        return
    run.arm("pairwise")
    phase = Pairwise(run, ctx)
    if why := phase.trigger():
        # The rounds exchange with send/recv (batch_isend_irecv): where the table has none on
        # these tensors (gloo on GPU tensors aborted the process on an H100: "writev ...: Bad
        # address"), a predicted skip, never called, as run_tests() records one.
        exchange = support_of(
            run.record.data["backend"], ctx.device.type, "send_recv", run.args.dtype
        )
        if exchange.state == "no":
            reason = f"the pairwise rounds exchange with send/recv: {exchange.reason}"
            run.record.add(test_entry("pairwise", "skipped", reason, {"support": "no"}))
            return
        run.record.start("pairwise")
        entry = run_test("pairwise", lambda: phase.body(why))
        if entry["status"] != "error":
            with run.record.lock:  # the finished test holds the rows now
                run.record.data.pop("pairwise", None)
        # An error (a peer that died makes gloo raise where NCCL would hang) keeps the rounds
        # saved so far and the round under way in the record's "pairwise", as a watchdog does.
        run.record.add(entry)


# --------------------------------------------------------------------------------------------
# 10. Main
# --------------------------------------------------------------------------------------------


def new_record(args: argparse.Namespace, host: str) -> RankRecord:
    """The record before check-in (its fields: docs/design.md, "Rank result")."""
    known = [n for n in (env_int("GROUP_RANK"), env_int("NODE_RANK")) if n is not None]  # torchrun
    node_rank = known[0] if known else node_of(args.rank, args.ranks_per_node)
    data: dict[str, Any] = {"schema": SCHEMA, "host": host, "global_rank": args.rank}
    data |= {"local_rank": args.local_rank, "node_rank": node_rank, "world_size": args.world_size}
    data |= {"local_world_size": env_int("LOCAL_WORLD_SIZE") or 1, "device": None, "backend": None}
    data |= {"dtype": args.dtype, "pid": os.getpid(), "versions": versions()}
    data |= {"env": seen_environment(os.environ), "status": "running", "current_test": "init"}
    data |= {"current_size": None, "test_index": 0, "test_count": len(args.tests)}
    data |= {"missing_ranks": [], "started_at": now(), "finished_at": None, "tests": []}
    return RankRecord(args.out_dir, data, args.verbose)


@dataclass
class Run:
    """One rank's run: options, record, the store (from check-in; none for mpi), rank 0's tables
    and the watchdog's timer."""

    args: argparse.Namespace
    record: RankRecord
    store: dist.Store | None = None
    tables: list[str] = field(default_factory=list)
    timer: threading.Timer | None = None

    def peers(self) -> dict[str, Any]:
        """For the watchdog: the missing ranks and the test each other rank last started."""
        store, ranks, layout = self.store, range(self.args.world_size), self.args.ranks_per_node
        if store is None:
            return {}
        absent = [r for r in ranks if not store.check([f"ready/{r}"])]
        running = [r for r in ranks if store.check([f"progress/{r}"])]
        return {
            "missing_ranks": describe_missing(store, absent, len(ranks), layout),
            "peers_running": {str(r): store.get(f"progress/{r}").decode() for r in running},
        }

    def arm(self, phase: str, seconds: float | None = None) -> None:
        """The watchdog: record `phase` as an error and end the rank when it overruns `seconds`
        (default --timeout); a stuck collective never returns (docs/design.md, "Never hang")."""
        self.disarm()
        seconds = seconds or self.args.timeout
        message = (
            f"{phase} did not finish within {seconds:g} s on {self.record.where}: a peer rank is "
            "stuck, gone or unreachable, or the network between them drops traffic"
        )
        reason = (self.record, phase, message, EXIT_TIMEOUT, self.peers)
        self.timer = threading.Timer(seconds, abort, reason)
        self.timer.daemon = True
        self.timer.start()

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()

    def enter(self, phase: str, seconds: float | None = None, index: int | None = None) -> None:
        """Record and arm `phase`; --pause-before: sleep in it until the watchdog fires."""
        self.record.start(phase, index)
        if self.store is not None and index is not None:
            self.store.set(f"progress/{self.args.rank}", phase)
        self.arm(phase, seconds)
        self.pause(phase)

    def pause(self, phase: str) -> None:
        pause = self.args.pause_before
        if pause and pause[0] == phase and pause[1] in (None, self.args.rank):
            where, pid = self.record.where, os.getpid()
            print(f"[{where}] paused before {phase} (--pause-before), pid {pid}", flush=True)
            while True:
                time.sleep(1)


def main(argv: Sequence[str] | None = None) -> int:
    """Device, check-in, process group, the tests, the summary; the exit status."""
    args = parse_args(argv)
    record = new_record(args, socket.gethostname())
    record.write()
    watch_signals(record)
    try:
        run = Run(args, record)
        device = open_device(args, record)
        if device is None or not join_group(run, device):
            return EXIT_FAILED
        stopped_by = run_tests(run, device)
        status = record.finish()
        run.arm("summary", args.timeout + GRACE_S)
        summary(run)
        run.disarm()
        if stopped_by is None:
            dist.destroy_process_group()
        return EXIT_OK if status == "passed" else EXIT_FAILED
    except Exception as exc:  # a bug or an unforeseen failure: still leave the record behind
        traceback.print_exc()
        abort(record, None, f"nccl_check stopped: {type(exc).__name__}: {first_line(exc)}", 1)
        raise  # not reached: abort() leaves the process


def open_device(args: argparse.Namespace, record: RankRecord) -> torch.device | None:
    """The backend and device LOCAL_RANK of the requested (or found) type, in the record; cpu for
    CPU-only backends; None (recorded as init) when the device is absent."""
    with contextlib.suppress(ImportError):  # Ascend NPUs register their device type in torch_npu
        import torch_npu  # noqa: F401  # pyright: ignore[reportMissingImports]
    found = accelerator_type()
    wanted = found or "cpu" if args.device == "auto" else args.device
    backend = BACKEND_FOR_DEVICE[wanted] if args.backend == "auto" else args.backend
    kind = "cpu" if args.device == "auto" and backend in ("gloo", "mpi") else wanted
    module, local = getattr(torch, kind, None), args.local_rank
    count = module.device_count() if kind != "cpu" and module and module.is_available() else 0
    if kind != "cpu" and local >= count:
        message = (
            f"LOCAL_RANK {local} needs {kind}:{local} but this process sees {count} {kind} "
            "device(s); check --nproc_per_node against the device count and "
            "CUDA_VISIBLE_DEVICES / ASCEND_RT_VISIBLE_DEVICES / ZE_AFFINITY_MASK"
        )
        record.add(test_entry("init", "error", message))
        record.finish()
        return None
    device = torch.device("cpu") if kind == "cpu" else torch.device(kind, local)
    if kind != "cpu" and hasattr(torch, "accelerator"):
        torch.accelerator.set_device_index(local)
    elif kind != "cpu":
        module.set_device(device)
    record.update(device=str(device), backend=backend)
    if backend == "nccl":
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    return device


def check_in_phase(run: Run) -> tuple[dict[str, Any], dist.Store | None]:
    """Make the store and check in: the `checkin` entry, and the store for init (None: none)."""
    args, data = run.args, run.record.data
    if data["backend"] == "mpi":
        return test_entry("checkin", "skipped", "the mpi backend has no store to check in to"), None
    started, n = time.monotonic(), args.world_size
    try:
        raw = make_store(args.init_method, args.rank, n, args.timeout)
        run.store = store = dist.PrefixStore("nccl_check", raw)
        value = checkin_value(data["host"], data["node_rank"], args.local_rank)
        absent = check_in(store, args.rank, n, value, args.timeout)
        missing = describe_missing(store, absent, n, args.ranks_per_node) if absent else []
    except (RuntimeError, ValueError) as exc:  # store unreachable (DistStoreError: RuntimeError)
        message = f"cannot reach the store for {args.init_method}: {first_line(exc)}"
        return test_entry("checkin", "error", message), None
    duration = time.monotonic() - started
    if not absent:
        return test_entry("checkin", "passed", "", {"world_size": n}, duration), raw
    run.record.update(missing_ranks=missing)
    names = ", ".join(
        f"{m['rank']} (node {m['node_rank']}" + (f", {m['host']})" if m["host"] else ")")
        for m in missing
    )
    message = (
        f"rank(s) {names} did not check in within {args.timeout:g} s; {n - len(absent)} of {n} "
        "arrived: start the missing ranks, or check that their hosts can reach the master "
        "address and port"
    )
    return test_entry("checkin", "error", message, {"missing_ranks": missing}, duration), None


def join_group(run: Run, device: torch.device) -> bool:
    """Check in, then make the process group on the same store; False (recorded) on failure.
    Their deadlines: docs/design.md, "Options of the rank script" (--timeout)."""
    args, record, backend = run.args, run.record, run.record.data["backend"]
    run.enter("checkin", args.timeout + GRACE_S)
    entry, store = check_in_phase(run)
    record.add(entry)
    if entry["status"] == "error":
        record.finish()
        if args.rank == 0 and record.data["missing_ranks"]:  # it may serve the store: let the
            time.sleep(min(GRACE_S / 2, args.timeout))  # others read it before it leaves
        return False
    run.enter("init")
    timeout = datetime.timedelta(seconds=args.timeout + GRACE_S)
    cuda = device if device.type == "cuda" else None  # binds NCCL to the rank's GPU

    def init() -> dict[str, Any]:
        n, rank = args.world_size, args.rank
        dist.init_process_group(
            backend, timeout=timeout, world_size=n, rank=rank, store=store, device_id=cuda
        )
        return {"backend": backend, "device": str(device), "timeout_s": timeout.total_seconds()}

    entry = run_test("init", init)
    run.disarm()
    record.add(entry)
    if entry["status"] != "passed":
        record.finish()
    return entry["status"] == "passed"


def run_tests(run: Run, device: torch.device) -> str | None:
    """The tests, in order; the test after which the rest were not run (None: all ran). After
    an error the process group cannot be trusted: the rest are not run."""
    args, record, backend = run.args, run.record, run.record.data["backend"]
    dtype, type_name = DTYPES[args.dtype]
    ctx = Context.make(args.rank, args.world_size, device, dtype, run.store)
    max_bytes = args.max_bytes or (1 << 20 if device.type == "cpu" else 1 << 30)
    sizes = sweep_sizes(args.min_bytes, max(max_bytes, args.min_bytes), args.factor)
    arm = lambda phase, size: (record.update(current_size=size), run.arm(phase))  # noqa: E731
    sweep = Sweep(ctx, sizes, args.iters, args.warmup, type_name, args.thresholds, arm)
    stopped_by: str | None = None
    for index, name in enumerate(args.tests, 1):
        support = support_of(backend, device.type, name, args.dtype)
        if stopped_by is not None or support.state == "no":  # "no": predicted, never called
            message = f"not run: stopped after {stopped_by} could not run"
            skip = test_entry(name, "skipped", support.reason, {"support": "no"})
            record.add(test_entry(name, "error", message) if stopped_by else skip)
            continue
        run.enter(name, index=index)
        collective = name.removeprefix("bandwidth_")
        if name.startswith("bandwidth_"):
            entry = run_test(name, lambda c=collective: measure(sweep, c), support)
        else:
            entry = run_test(name, lambda n=name: VERIFIERS[n](ctx), support)
        if entry["bandwidth"]:
            table = bandwidth_table(collective, entry["bandwidth"], args.world_size, backend)
            run.tables.append(table)
        run.disarm()
        record.add(entry)
        stopped_by = name if entry["status"] == "error" else None
    run_pairwise(run, ctx, stopped_by)
    run.disarm()
    return stopped_by


def summary(run: Run) -> None:
    """Rank 0's report of a run by hand (docs/design.md, "Run by hand")."""
    args, data, store, tests = run.args, run.record.data, run.store, run.record.data["tests"]
    wrong = [t for t in tests if t["status"] in ("failed", "error")]
    problems = [f"{t['name']}: {t['status']} - {t['message']}" for t in wrong]
    verdict = {"host": data["host"], "status": data["status"], "problems": problems}
    if store is not None:
        store.set(f"result/{args.rank}", json.dumps(verdict))
    if args.rank != 0:
        return
    verdicts, deadline = {0: verdict}, time.monotonic() + args.timeout
    for r in range(1, args.world_size) if store is not None else ():
        while not store.check([f"result/{r}"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        if store.check([f"result/{r}"]):
            verdicts[r] = json.loads(store.get(f"result/{r}"))
    bad = {r: v for r, v in verdicts.items() if v["status"] != "passed"}
    silent = [str(r) for r in range(args.world_size) if r not in verdicts and store is not None]
    late = f"  no result from rank(s) {', '.join(silent)} within {args.timeout:g} s"
    count = collections.Counter(t["status"] for t in tests)
    print(
        f"nccl_check: {args.world_size} ranks, backend {data['backend']}, device "
        f"{data['device']}, dtype {args.dtype}, torch {torch.__version__}",
        *run.tables,
        *(f"  skipped {t['name']}: {t['message']}" for t in tests if t["status"] == "skipped"),
        *(f"  rank {r} on {v['host']}: {p}" for r, v in bad.items() for p in v["problems"]),
        *([late] if silent else []),
        f"nccl_check: {'FAILED' if bad or silent else 'PASSED'} - {len(verdicts) - len(bad)} of "
        f"{args.world_size} ranks passed; rank 0: {count['passed']} passed, {count['failed']} "
        f"failed, {count['error']} error, {count['skipped']} skipped",
        sep="\n",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
