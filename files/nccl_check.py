#!/usr/bin/env python3
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Verify every torch.distributed collective on every rank, then time them like nccl-tests.

Run it under torchrun (one process per device):

    torchrun --nproc_per_node=2 nccl_check.py --out-dir /tmp/r                  # laptop, CPU, gloo
    torchrun --nnodes=2 --node_rank=R --master_addr=A --master_port=P \\
             --nproc_per_node=8 nccl_check.py --out-dir /tmp/r                   # GPU nodes, nccl

or without torchrun, one command per rank:

    python nccl_check.py --init-method tcp://HOST:PORT --rank R --world-size N

The script reads top to bottom:

 1. options                  build_parser()
 2. device and backend       choose_device(), choose_backend()
 3. the per-rank record      RankRecord: rank-<global rank>.json, rewritten atomically after
                             every test, so a crash or hang leaves everything finished so far
 4. never hang               Watchdog (a deadline per phase), the signal watcher (SIGTERM from
                             torchrun when another rank died) -- both write the record and exit
 5. check-in                 every rank writes ready/<rank> = its host into the store before the
                             process group is made, so the ranks that came can name the missing
 6. inputs and expected values, as closed-form formulas (pure functions, unit-tested)
 7. one check per collective: check_all_reduce ... check_barrier
 8. the collectives          Collective: one record each (its checks, busbw factor, timed call,
                             nccl-tests columns, backend notes), looked up by name in COLLECTIVES
 9. bandwidth sweep          nccl-tests' algbw/busbw and table columns
 9b. pairwise rounds         --pairwise: nodes paired round-robin, rail by rail, a second pass
10. main()

Exactness of the inputs
-----------------------
Every input element is a small integer, so every expected value is an integer too and is compared
exactly (AVG excepted: backends compute it as a scaled sum, so it is compared to within one unit in
the last place). The integers are kept small enough that the *largest partial sum* any backend can
form in the checked dtype is exactly representable: for a world of n ranks the largest element a
rank contributes is at most limit(dtype) // n, where limit is 2**8 for bfloat16, 2**11 for float16,
2**24 for float32, 127 for int8, 255 for uint8 (see exact_pattern()). PRODUCT, MIN and MAX share one
"owner" input (1, 2, 3 and 5, see expected_owner()) on which every two reductions differ, so a
backend that applies the wrong one fails; their results are at most 10 for any world size.

The record (docs/design.md, "Rank result") also holds "dtype" and "pid"; its tests start with
"checkin" and "init"; each of "missing_ranks" is {"rank", "node_rank", "host"}, node_rank from the
ranks per node (--ranks-per-node, which the launch passes from its plan; else torchrun's layout,
$LOCAL_WORLD_SIZE on every node) and host when a rank of that node arrived (else null). A rank
killed outright leaves status "running" with the test it died in as current_test.

Exit status: 0 every test passed or was skipped; 1 a test failed or could not run (error, missing
rank); 2 bad command line; 124 the watchdog stopped a phase that ran past --timeout; 128+N killed by
signal N (torchrun sends SIGTERM to the other ranks when one dies).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
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

SCHEMA = 1
GRACE_S = 5.0  # a phase may overrun --timeout by this much before the watchdog ends the rank
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_TIMEOUT = 0, 1, 2, 124

# --dtype name -> (torch dtype, nccl-tests' name for the "type" column)
DTYPES: dict[str, tuple[torch.dtype, str]] = {
    "float32": (torch.float32, "float"),
    "float64": (torch.float64, "double"),
    "float16": (torch.float16, "half"),
    "bfloat16": (torch.bfloat16, "bfloat16"),
    "int32": (torch.int32, "int32"),
    "int64": (torch.int64, "int64"),
    "int8": (torch.int8, "int8"),
    "uint8": (torch.uint8, "uint8"),
}
DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "bf16": "bfloat16"}

BACKEND_FOR_DEVICE = {"cuda": "nccl", "npu": "hccl", "xpu": "xccl", "cpu": "gloo"}

# Texts with which backends refuse an operation they do not implement (older gloo: AVG,
# reduce_scatter, all_to_all; gloo's AVG on integers). Only these turn an exception into "skipped".
UNSUPPORTED_PATTERNS = (
    re.compile(r"does not support"),
    re.compile(r"Cannot use ReduceOp\.\w+ with"),
    re.compile(r"not (?:yet )?(?:supported|implemented)"),
    re.compile(r"result type \w+ can't be cast to the desired output type"),
)

CHECK_ELEMENTS = 1027  # elements per rank (per chunk) in correctness tests; odd on purpose
SMALL_WORLD = 16  # up to this many ranks, gather and scatter are checked from every root
BARRIER_LATE_S = 0.05  # how late the last rank enters each round of the barrier check


# --------------------------------------------------------------------------------------------
# 1. Options
# --------------------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """Bytes from '8', '64K', '32M', '1G' (binary units, like nccl-tests' -b/-e)."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMGkmg]?)[iI]?[bB]?\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 1024, 64K, 32M or 1G")
    return (
        int(match.group(1))
        * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2).upper()]
    )


def parse_threshold(text: str) -> tuple[str, float]:
    """'all_reduce=5.0' -> ('all_reduce', 5.0) for --min-busbw-for."""
    name, sep, value = text.partition("=")
    name = name.strip().removeprefix("bandwidth_")
    if not sep or name not in BANDWIDTH_COLLECTIVES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not COLLECTIVE=GBPS with COLLECTIVE one of "
            + ", ".join(BANDWIDTH_COLLECTIVES)
        )
    return name, positive_float(value)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value


def dtype_name(text: str) -> str:
    name = DTYPE_ALIASES.get(text, text)
    if name not in DTYPES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not one of {', '.join(DTYPES)} (aliases: {', '.join(DTYPE_ALIASES)})"
        )
    return name


def test_names(text: str) -> list[str]:
    """'all_reduce_sum,bandwidth' -> the tests, groups expanded, in the given order."""
    names: list[str] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        if item in TEST_GROUPS:
            names.extend(TEST_GROUPS[item])
        elif item in ALL_TESTS:
            names.append(item)
        else:
            raise argparse.ArgumentTypeError(
                f"unknown test {item!r}; --list-tests shows the names "
                f"(groups: {', '.join(TEST_GROUPS)})"
            )
    return names


def rank_counts(text: str) -> list[int]:
    """'2,4,1' -> [2, 4, 1]: the ranks of each node, in node-rank order (--ranks-per-node)."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of rank counts such as 2,4,1"
        )
    return [int(part) for part in parts]


def pause_spec(text: str) -> tuple[str, int | None]:
    """'send_recv@1' -> ('send_recv', 1); 'send_recv' -> ('send_recv', None) = every rank."""
    name, _, rank = text.partition("@")
    if name not in ALL_TESTS and name not in ("checkin", "init"):
        raise argparse.ArgumentTypeError(f"--pause-before: unknown test {name!r}")
    return name, non_negative_int(rank) if rank else None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nccl_check.py",
        description=(
            "Verify every torch.distributed collective on every rank with exact, closed-form "
            "expected values, then measure bus bandwidth the way nccl-tests does. Run one process "
            "per device under torchrun, or per rank with --init-method/--rank/--world-size."
        ),
        epilog=(
            "Tests: "
            + ", ".join(ALL_TESTS)
            + ". Exit status: 0 all passed (or skipped), 1 a test failed or errored, 2 bad "
            "arguments, 124 the watchdog ended a phase that overran --timeout, 128+N signal N."
        ),
    )
    add_process_group_options(parser.add_argument_group("process group"))
    add_test_options(parser.add_argument_group("what to check"))
    add_sweep_options(parser.add_argument_group("bandwidth sweep (nccl-tests' -b -e -f -n -w)"))
    add_output_options(parser.add_argument_group("output"))
    add_pairwise_options(parser)  # section 9b
    return parser


def add_process_group_options(where: argparse._ArgumentGroup) -> None:
    where.add_argument(
        "--backend",
        default="auto",
        choices=("auto", "nccl", "gloo", "hccl", "xccl", "mpi", "ucc"),
        help="communication backend; auto = nccl on CUDA, hccl on Ascend NPU, xccl on Intel "
        "XPU, gloo on CPU (default: auto)",
    )
    where.add_argument(
        "--device",
        default="auto",
        choices=("auto", "cpu", "cuda", "npu", "xpu"),
        help="device type for the tensors; each rank uses device LOCAL_RANK of that type; auto = "
        "the accelerator torch finds, else cpu (default: auto)",
    )
    where.add_argument(
        "--init-method",
        default="env://",
        metavar="URL",
        help="env:// (torchrun sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), "
        "tcp://HOST:PORT (rank 0 listens there) or file:///PATH on a shared file system "
        "(default: env://)",
    )
    where.add_argument(
        "--rank",
        type=non_negative_int,
        help="global rank; default: $RANK (needed without torchrun)",
    )
    where.add_argument(
        "--world-size",
        type=non_negative_int,
        help="number of ranks; default: $WORLD_SIZE (needed without torchrun)",
    )
    where.add_argument(
        "--local-rank",
        type=non_negative_int,
        help="rank on this node = device index; default: $LOCAL_RANK, else 0",
    )
    where.add_argument(
        "--ranks-per-node",
        type=rank_counts,
        metavar="N0,N1,...",
        help="ranks of each node in node-rank order, as the launch plans them (plan.json), so a "
        "rank that never came is placed on its node when hosts run different numbers of ranks "
        "(default: $LOCAL_WORLD_SIZE on every node, torchrun's layout)",
    )
    where.add_argument(
        "--timeout",
        type=positive_float,
        default=120.0,
        metavar="S",
        help="seconds that check-in, process-group init and each test (each size of a "
        f"bandwidth sweep) may take; the process-group timeout is S + {GRACE_S:g}, and a "
        "watchdog records the running test and exits 124 when a phase overruns (default: 120)",
    )


def add_test_options(what: argparse._ArgumentGroup) -> None:
    what.add_argument(
        "--tests",
        type=test_names,
        action="extend",
        metavar="LIST",
        help="comma-separated tests or groups (all, correctness, bandwidth) to run, in the "
        "script's order; repeatable (default: all)",
    )
    what.add_argument("--list-tests", action="store_true", help="print the test names and exit")
    what.add_argument(
        "--dtype",
        type=dtype_name,
        default="float32",
        help=f"element type: {', '.join(DTYPES)} (default: float32)",
    )


def add_sweep_options(perf: argparse._ArgumentGroup) -> None:
    perf.add_argument(
        "--min-bytes",
        type=parse_size,
        default=parse_size("1K"),
        metavar="SIZE",
        help="smallest message, e.g. 8, 64K, 32M (default: 1K)",
    )
    perf.add_argument(
        "--max-bytes",
        type=parse_size,
        metavar="SIZE",
        help="largest message (default: 1M on cpu, 1G on an accelerator)",
    )
    perf.add_argument(
        "--factor", type=int, default=2, help="multiply the size by this between steps (default: 2)"
    )
    perf.add_argument(
        "--iters", type=non_negative_int, default=20, help="timed iterations per size (default: 20)"
    )
    perf.add_argument(
        "--warmup",
        type=non_negative_int,
        default=5,
        help="untimed iterations per size before timing (default: 5)",
    )
    perf.add_argument(
        "--min-busbw",
        type=positive_float,
        metavar="GBPS",
        help="fail a bandwidth test whose busbw at the largest size is below GBPS (GB/s, 1e9)",
    )
    perf.add_argument(
        "--min-busbw-for",
        type=parse_threshold,
        action="append",
        default=[],
        metavar="COLL=GBPS",
        help="like --min-busbw for one collective (e.g. all_reduce=5.0); repeatable; wins over "
        "--min-busbw for that collective",
    )


def add_output_options(out: argparse._ArgumentGroup) -> None:
    out.add_argument(
        "--out-dir",
        metavar="DIR",
        help="write DIR/rank-<global rank>.json, rewritten after every test (default: no file)",
    )
    out.add_argument("--verbose", action="store_true", help="print a line per test on every rank")
    out.add_argument(
        "--pause-before",
        type=pause_spec,
        metavar="TEST[@RANK]",
        help="for testing and debugging: before TEST (or checkin/init), write the record and "
        "sleep until the watchdog fires, on RANK only or on every rank",
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_tests:
        print("\n".join(ALL_TESTS))
        raise SystemExit(EXIT_OK)
    if args.factor < 2:
        parser.error(f"--factor must be 2 or more, got {args.factor}")
    if args.iters < 1:
        parser.error("--iters must be 1 or more")
    if args.min_bytes < 1:
        parser.error("--min-bytes must be 1 or more")
    if args.max_bytes is not None and args.max_bytes < args.min_bytes:
        parser.error(
            f"--max-bytes ({args.max_bytes}) is smaller than --min-bytes ({args.min_bytes})"
        )
    if args.init_method != "env://" and not args.init_method.startswith(("tcp://", "file://")):
        parser.error(
            "--init-method must be env://, tcp://HOST:PORT or file:///PATH, "
            f"got {args.init_method!r}"
        )
    if args.init_method.startswith("tcp://") and not re.fullmatch(
        r"tcp://(\[[0-9a-fA-F:]+\]|[^:/\[\]]+):\d{1,5}", args.init_method
    ):
        parser.error(f"--init-method {args.init_method!r} is not tcp://HOST:PORT")
    if args.init_method != "env://" and (args.rank is None or args.world_size is None):
        parser.error(f"--init-method {args.init_method} needs --rank and --world-size")
    if args.rank is None:
        args.rank = env_int("RANK")
    if args.world_size is None:
        args.world_size = env_int("WORLD_SIZE")
    if args.rank is None or args.world_size is None:
        parser.error(
            "no rank/world size: run under torchrun, or pass --init-method tcp://HOST:PORT "
            "--rank R --world-size N"
        )
    if args.world_size < 1 or args.rank >= args.world_size:
        parser.error(f"--rank {args.rank} is not below --world-size {args.world_size}")
    if args.local_rank is None:
        args.local_rank = env_int("LOCAL_RANK") or 0
    if args.ranks_per_node is None:
        args.ranks_per_node = uniform_layout(args.world_size, env_int("LOCAL_WORLD_SIZE") or 1)
    elif sum(args.ranks_per_node) != args.world_size:
        parser.error(
            f"--ranks-per-node {','.join(map(str, args.ranks_per_node))} adds up to "
            f"{sum(args.ranks_per_node)} ranks, not --world-size {args.world_size}"
        )
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


def import_vendor_plugins() -> None:
    """Ascend NPUs register their device type only once torch_npu is imported."""
    with contextlib.suppress(ImportError):
        import torch_npu  # noqa: F401  # pyright: ignore[reportMissingImports]


def accelerator_type() -> str | None:
    """The accelerator torch sees ('cuda', 'npu', 'xpu'), or None."""
    if hasattr(torch, "accelerator"):  # torch >= 2.6
        acc = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
        return acc.type if acc is not None and acc.type in ("cuda", "npu", "xpu") else None
    for kind in ("cuda", "npu", "xpu"):
        module = getattr(torch, kind, None)
        if module is not None and module.is_available():
            return kind
    return None


def choose_device(requested: str, backend: str, local_rank: int) -> torch.device:
    """Device LOCAL_RANK of the requested (or found) type; cpu for CPU-only backends."""
    kind = requested
    if kind == "auto":
        found = accelerator_type()
        kind = "cpu" if found is None or backend in ("gloo", "mpi") else found
    if kind == "cpu":
        return torch.device("cpu")
    module = getattr(torch, kind, None)
    count = module.device_count() if module is not None and module.is_available() else 0
    if local_rank >= count:
        raise RuntimeError(
            f"LOCAL_RANK {local_rank} needs {kind}:{local_rank} but this process sees {count} "
            f"{kind} device(s); check --nproc_per_node against the device count and "
            "CUDA_VISIBLE_DEVICES / ASCEND_RT_VISIBLE_DEVICES / ZE_AFFINITY_MASK"
        )
    device = torch.device(kind, local_rank)
    if hasattr(torch, "accelerator"):
        torch.accelerator.set_device_index(local_rank)
    else:
        module.set_device(device)
    return device


def choose_backend(requested: str, device_requested: str) -> str:
    if requested != "auto":
        return requested
    kind = device_requested if device_requested != "auto" else (accelerator_type() or "cpu")
    return BACKEND_FOR_DEVICE[kind]


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work: timing must not stop before the collective ends."""
    if device.type == "cpu":
        return
    if hasattr(torch, "accelerator"):
        torch.accelerator.synchronize(device)
    else:
        getattr(torch, device.type).synchronize(device)


def versions() -> dict[str, str | None]:
    nccl = None
    if torch.cuda.is_available() and hasattr(torch.cuda, "nccl"):
        with contextlib.suppress(Exception):  # builds without NCCL raise various errors here
            nccl = ".".join(str(p) for p in torch.cuda.nccl.version())
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": nccl,
        "driver": nvidia_driver_version(),
    }


def nvidia_driver_version(path: str = "/proc/driver/nvidia/version") -> str | None:
    """'NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  ...' -> '535.104.05'."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return None
    match = re.search(r"Kernel Module\s+(\S+)", text)
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
# 3. The per-rank record: rank-<global rank>.json
# --------------------------------------------------------------------------------------------


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


class RankRecord:
    """The contract in docs/design.md ("Rank result"); written atomically after every change."""

    def __init__(self, out_dir: str | None, data: dict[str, Any], verbose: bool = False):
        self.path = os.path.join(out_dir, f"rank-{data['global_rank']}.json") if out_dir else None
        self.data = data
        self.verbose = verbose
        self.lock = threading.RLock()
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)

    @property
    def where(self) -> str:
        return f"rank {self.data['global_rank']} on {self.data['host']}"

    def start(self, test: str, index: int | None = None) -> None:
        """`test` runs now; `index`: its 1-based place in --tests (progress contract)."""
        with self.lock:
            self.data["current_test"] = test
            self.data["current_size"] = None
            if index is not None:
                self.data["test_index"] = index
            self.write()

    def at_size(self, size: int) -> None:
        """The sweep times message size `size` (bytes) of the current test now."""
        with self.lock:
            self.data["current_size"] = size
            self.write()

    def add(self, test: dict[str, Any]) -> None:
        """Record a finished test, say so when asked (errors always), and rewrite the file."""
        with self.lock:
            self.data["tests"].append(test)
            self.data["current_test"] = None
            self.data["current_size"] = None
            self.write()
        line = f"[{self.where}] {test['name']}: {test['status']}"
        if test["message"]:
            line += f" - {test['message']}"
        if test["status"] in ("failed", "error"):
            print(line, file=sys.stderr, flush=True)
        elif self.verbose:
            print(line, flush=True)

    def finish(self, status: str | None = None) -> str:
        with self.lock:
            statuses = {t["status"] for t in self.data["tests"]}
            if status is None:
                status = (
                    "error"
                    if "error" in statuses
                    else "failed"
                    if "failed" in statuses
                    else "passed"
                )
            self.data["status"] = status
            self.data["finished_at"] = now()
            self.write()
            return status

    def write(self) -> None:
        if self.path is None:
            return
        with self.lock:
            directory = os.path.dirname(self.path)
            fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(self.path)}.", dir=directory)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(self.data, handle, indent=1, default=str)
                    handle.write("\n")
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise


def test_entry(
    name: str,
    status: str,
    message: str = "",
    details: dict[str, Any] | None = None,
    duration_s: float = 0.0,
    bandwidth: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "status": status,
        "duration_s": round(duration_s, 6),
        "message": message,
        "details": details or {},
        "bandwidth": bandwidth or [],
    }


# --------------------------------------------------------------------------------------------
# 4. Never hang: a watchdog per phase, and a watcher for torchrun's SIGTERM
# --------------------------------------------------------------------------------------------


class Watchdog:
    """Ends the rank when a phase overruns its deadline, after writing which phase it was.

    The main thread may be stuck inside a collective (C++, GIL released) that never returns;
    this thread still runs, records the error and leaves with os._exit so torchrun sees a
    failed worker and tears the job down.
    """

    def __init__(self, record: RankRecord, describe_peers: Callable[[], dict[str, Any]]):
        self.record = record
        self.describe_peers = describe_peers
        self.cond = threading.Condition()
        self.phase: str | None = None
        self.deadline = math.inf
        self.seconds = 0.0
        threading.Thread(target=self._run, name="nccl-check-watchdog", daemon=True).start()

    def arm(self, phase: str, seconds: float) -> None:
        with self.cond:
            self.phase, self.seconds, self.deadline = phase, seconds, time.monotonic() + seconds
            self.cond.notify()

    def disarm(self) -> None:
        with self.cond:
            self.phase, self.deadline = None, math.inf
            self.cond.notify()

    def _run(self) -> None:
        with self.cond:
            while time.monotonic() < self.deadline or self.phase is None:
                self.cond.wait(
                    timeout=None
                    if self.deadline == math.inf
                    else max(0.0, self.deadline - time.monotonic())
                )
            phase, seconds = self.phase, self.seconds
        message = (
            f"{phase} did not finish within {seconds:g} s on {self.record.where}: a peer rank is "
            "stuck, gone or unreachable, or the network between them drops traffic"
        )
        abort(self.record, phase, message, EXIT_TIMEOUT, self.describe_peers)


_aborting = threading.Lock()


def abort(
    record: RankRecord,
    phase: str | None,
    message: str,
    exit_code: int,
    describe_peers: Callable[[], dict[str, Any]] | None = None,
) -> None:
    """Record `phase` as an error, finish the record with status error, and leave now."""
    if not _aborting.acquire(blocking=False):
        time.sleep(3600)  # another thread is already ending the process
    if record.data["status"] != "running":  # every test already recorded: keep the verdict
        print(f"[{record.where}] {phase or 'exit'}: {message}", file=sys.stderr, flush=True)
        os._exit(exit_code)
    details: dict[str, Any] = {}
    if describe_peers is not None:
        details.update(call_with_deadline(describe_peers, 3.0) or {})
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


def call_with_deadline(func: Callable[[], Any], seconds: float) -> Any:
    """func() in a helper thread; None when it does not return in time (a dead store server)."""
    box: list[Any] = []

    def call() -> None:
        with contextlib.suppress(Exception):  # diagnostics only: a dead store must not matter
            box.append(func())

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(seconds)
    return box[0] if box else None


def watch_signals(record: RankRecord) -> None:
    """Record SIGTERM/SIGINT even while the main thread is blocked inside a collective.

    Python runs signal handlers only when the main thread returns to the interpreter; a
    wakeup fd is written by the C-level handler at once, and a thread reads it.
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    for sig in (signal.SIGTERM, signal.SIGINT):
        # The reader thread acts; the Python-level handler must only exist (and do nothing,
        # as it may run in the middle of the main thread writing the record).
        signal.signal(sig, lambda signum, frame: None)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)

    def reader() -> None:
        while True:
            data = os.read(read_fd, 1)
            if data and data[0] in (signal.SIGTERM, signal.SIGINT):
                on_signal(record, data[0])

    threading.Thread(target=reader, name="nccl-check-signals", daemon=True).start()


def on_signal(record: RankRecord, signum: int) -> None:
    name = signal.Signals(signum).name
    abort(
        record,
        None,
        f"{record.where} was stopped by {name} (torchrun stops every rank when one rank fails: "
        "look for the rank with a different error)",
        128 + signum,
    )


# --------------------------------------------------------------------------------------------
# 5. Check-in through the store, before the process group exists
# --------------------------------------------------------------------------------------------


def make_store(init_method: str, rank: int, world_size: int, timeout: float) -> dist.Store:
    """The store the process group will use, made here so check-in can use it first."""
    delta = datetime.timedelta(seconds=timeout)
    if init_method.startswith("file://"):
        return dist.FileStore(init_method.removeprefix("file://"), world_size)
    if init_method == "env://":
        host, port = os.environ.get("MASTER_ADDR", ""), env_int("MASTER_PORT")
        if not host or port is None:
            raise RuntimeError("env:// needs MASTER_ADDR and MASTER_PORT (torchrun sets them)")
        # Under torchrun the agent on node 0 already serves the store: every rank is a client.
        is_master = rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
    else:
        match = re.fullmatch(r"tcp://\[?([^\[\]]+?)\]?:(\d+)", init_method)
        assert match is not None  # parse_args checked the form
        host, port, is_master = match.group(1), int(match.group(2)), rank == 0
    # wait_for_workers=False: rank 0 must not block here, so it can check in and report.
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
    """The node of a global rank: nodes hold consecutive ranks, layout[k] of them on node k."""
    offset = 0
    for node, size in enumerate(layout):
        offset += size
        if rank < offset:
            return node
    raise ValueError(f"rank {rank} is outside the layout {list(layout)}")


def describe_missing(
    store: dist.Store, missing: list[int], world_size: int, layout: int | Sequence[int]
) -> list[dict[str, Any]]:
    """{"rank", "node_rank", "host"} per missing rank: the node from the layout (ranks per node,
    --ranks-per-node; an int = that many on every node) and the host from a rank of that node
    that did arrive."""
    if isinstance(layout, int):
        layout = uniform_layout(world_size, layout)
    hosts: dict[int, str] = {}
    for r in range(world_size):
        if r not in missing and store.check([f"ready/{r}"]):
            info = json.loads(store.get(f"ready/{r}"))
            hosts.setdefault(int(info["node_rank"]), info["host"])
    return [
        {"rank": r, "node_rank": node_of(r, layout), "host": hosts.get(node_of(r, layout))}
        for r in missing
    ]


# --------------------------------------------------------------------------------------------
# 6. Inputs and expected values: closed forms a reader can check by hand
# --------------------------------------------------------------------------------------------
#
# Reductions (all_reduce SUM/AVG, reduce, reduce_scatter) use an affine input:
#     x_r[i] = base[i] + step * tag(r),      tag(r) = r mod P
# so   SUM(x)[i] = n * base[i] + step * (0 + 1 + ... over tags)     (sum_of_tags below)
#      AVG(x)[i] = SUM(x)[i] / n
# Data movement (broadcast, all_gather, gather, scatter, all_to_all, send/recv) moves a payload
#     p_r[i] = base[(i + r) mod len(base)] + step * tag(r)
# that names its source rank, so a value in the wrong place tells where it came from.
# P = n for small worlds; exact_pattern() lowers it (and the base) for narrow dtypes.


def exact_integer_limit(dtype: torch.dtype) -> int:
    """Largest L such that every integer 0..L is exactly representable in dtype."""
    if dtype.is_floating_point:
        return round(2 / torch.finfo(dtype).eps)  # 2 ** (mantissa bits + 1)
    return int(torch.iinfo(dtype).max)


def exact_pattern(world_size: int, dtype: torch.dtype) -> tuple[int, int] | None:
    """(A, P): base[i] = 1 + i mod A, tag(r) = r mod P, with every sum of n inputs exact.

    The largest input is A + P - 1; n of them must stay within exact_integer_limit(dtype).
    None when even all-ones inputs would overflow (n > limit): use a wider --dtype.
    """
    budget = exact_integer_limit(dtype) // world_size
    if budget < 1:
        return None
    base_period = min(8, budget)
    return base_period, max(1, min(world_size, budget - base_period + 1))


def base_pattern(count: int, base_period: int) -> list[int]:
    return [1 + i % base_period for i in range(count)]


def rank_tag(rank: int, period: int) -> int:
    return rank % period


def sum_of_tags(world_size: int, period: int) -> int:
    """tag(0) + ... + tag(n-1) with tag(r) = r mod P: q full cycles of 0..P-1, then 0..rem-1."""
    full, rem = divmod(world_size, period)
    return full * period * (period - 1) // 2 + rem * (rem - 1) // 2


def reduction_input(base: Sequence[float], step: int, rank: int, period: int) -> list[float]:
    """x_r = base + step * tag(r)."""
    return [b + step * rank_tag(rank, period) for b in base]


def expected_sum(base: Sequence[float], step: int, world_size: int, period: int) -> list[float]:
    """SUM over ranks of x_r = n * base + step * sum_of_tags(n)."""
    return [world_size * b + step * sum_of_tags(world_size, period) for b in base]


def expected_avg(base: Sequence[float], step: int, world_size: int, period: int) -> list[float]:
    return [s / world_size for s in expected_sum(base, step, world_size, period)]


def expected_reduce_scatter(
    base: Sequence[float], step: int, world_size: int, period: int, rank: int
) -> list[float]:
    """Chunk `rank` (of n equal chunks) of SUM over ranks of x_r."""
    chunk = len(base) // world_size
    return expected_sum(base, step, world_size, period)[rank * chunk : (rank + 1) * chunk]


def payload(base: Sequence[float], step: int, rank: int, period: int) -> list[float]:
    """p_r[i] = base[(i + r) mod len(base)] + step * tag(r): what rank r sends."""
    width = len(base)
    return [base[(i + rank) % width] + step * rank_tag(rank, period) for i in range(width)]


def all_to_all_chunk(
    base: Sequence[float], step: int, src: int, dst: int, period: int
) -> list[float]:
    """What src sends to dst: the payload of src rotated once more by dst."""
    width = len(base)
    tag = step * rank_tag(src, period)
    return [base[(i + src + dst) % width] + tag for i in range(width)]


def owner(index: int, world_size: int) -> int:
    """Element i belongs to rank i mod n in the PRODUCT/MIN/MAX input (its second owner is i+1)."""
    return index % world_size


def owner_high(index: int) -> int:
    """What the second owner holds: 3 on even elements, 5 on odd ones."""
    return 3 if index % 2 == 0 else 5


def owner_value(index: int, rank: int, world_size: int) -> int:
    """x_r[i] = 2 on rank i mod n, owner_high(i) on rank (i+1) mod n, 1 on every other rank."""
    if rank == owner(index, world_size):
        return 2
    return owner_high(index) if rank == owner(index + 1, world_size) else 1


def owner_input(count: int, rank: int, world_size: int) -> list[int]:
    return [owner_value(i, rank, world_size) for i in range(count)]


def expected_owner(op: str, count: int, world_size: int) -> list[int]:
    """PRODUCT = 2 * h, MAX = h, MIN = 2 with 2 ranks, else 1 (h = owner_high(i); one rank: 2).

    SUM would be h + n and AVG (h + n) / n: PRODUCT meets SUM only at n = 3 (h = 3) or n = 5
    (h = 5), never on both kinds of element, so every pair of reductions differs somewhere.
    Every value is at most 10: exact in every dtype.
    """
    if world_size == 1:
        return [2] * count
    results = {
        "product": lambda h: 2 * h,
        "max": lambda h: h,
        "min": lambda h: 2 if world_size == 2 else 1,
    }
    return [results[op](owner_high(i)) for i in range(count)]


def expected_broadcast(base: Sequence[float], step: int, root: int, period: int) -> list[float]:
    """Every rank ends with the root's payload."""
    return payload(base, step, root, period)


def expected_all_gather(
    base: Sequence[float], step: int, world_size: int, period: int
) -> list[float]:
    """Chunk j of the result is rank j's payload (also gather's result on the root)."""
    return [v for j in range(world_size) for v in payload(base, step, j, period)]


def expected_scatter(base: Sequence[float], step: int, rank: int, period: int) -> list[float]:
    """The root's chunk for `rank` is payload(rank), so rank r receives payload(r)."""
    return payload(base, step, rank, period)


def expected_all_to_all(
    base: Sequence[float], step: int, world_size: int, period: int, rank: int
) -> list[float]:
    """Chunk s of the result on `rank` is what s sent to it."""
    return [v for s in range(world_size) for v in all_to_all_chunk(base, step, s, rank, period)]


def expected_send_recv(
    base: Sequence[float], step: int, world_size: int, period: int, rank: int
) -> list[float]:
    """Ring: rank r receives the payload of rank r-1."""
    return payload(base, step, (rank - 1) % world_size, period)


# --------------------------------------------------------------------------------------------
# Comparing, and naming the source rank of a wrong element
# --------------------------------------------------------------------------------------------


def first_mismatch(
    got: torch.Tensor, expected: torch.Tensor, ulps: int = 0
) -> tuple[int, int] | None:
    """(first wrong index, number wrong), or None when equal (within `ulps` for floats)."""
    got64, exp64 = got.detach().cpu().double().flatten(), expected.double().flatten()
    if ulps and got.dtype.is_floating_point:
        wrong = (got64 - exp64).abs() > ulps * torch.finfo(got.dtype).eps * exp64.abs()
    else:
        wrong = got64 != exp64
    wrong |= torch.isnan(got64)
    count = int(wrong.sum())
    if count == 0:
        return None
    return int(wrong.nonzero()[0]), count


def number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def mismatch(
    got: torch.Tensor,
    expected: Sequence[float],
    source: Callable[[int, float], str],
    ulps: int = 0,
) -> dict[str, Any] | None:
    """Details of a wrong result: first index, expected vs got, and the suspect source rank."""
    want = torch.tensor(expected, dtype=torch.float64)
    found = first_mismatch(got, want, ulps)
    if found is None:
        return None
    index, wrong = found
    got_value = number(float(got.flatten()[index]))
    want_value = number(float(want[index]))
    return {
        "first_wrong_index": index,
        "expected": want_value,
        "got": got_value,
        "wrong": wrong,
        "elements": got.numel(),
        "source": source(index, float(got_value)),
    }


def mismatch_message(details: dict[str, Any]) -> str:
    return (
        f"{details['wrong']} of {details['elements']} elements wrong; first at index "
        f"{details['first_wrong_index']}: expected {details['expected']}, got {details['got']} "
        f"({details['source']})"
    )


def sum_source(
    base: Sequence[float], step: int, world_size: int, period: int, expected: Sequence[float]
) -> Callable[[int, float], str]:
    """A wrong sum is explained when it is off by exactly one rank's contribution."""

    def explain(index: int, got: float) -> str:
        delta = got - expected[index]
        missing = [
            r for r in range(world_size) if reduction_input(base, step, r, period)[index] == -delta
        ]
        doubled = [
            r for r in range(world_size) if reduction_input(base, step, r, period)[index] == delta
        ]
        if missing:
            return f"the contribution of rank {' or '.join(map(str, missing))} is missing"
        if doubled:
            return f"the contribution of rank {' or '.join(map(str, doubled))} was added twice"
        return f"off by {number(delta)}: not one rank's contribution; data corrupted in transit"

    return explain


def movement_source(
    payload_of: Callable[[int], list[float]], world_size: int, width: int, source: int | None
) -> Callable[[int, float], str]:
    """Element i comes from rank `source`, or from rank i // width when the result is made of
    one chunk per rank; say so, and whose data the wrong value is, if it is another rank's."""

    def explain(index: int, got: float) -> str:
        src = index // width if source is None else source
        pos = index % width
        others = [r for r in range(world_size) if r != src and payload_of(r)[pos] == got]
        text = f"this element comes from rank {src}"
        if others:
            text += f"; the value is rank {' or '.join(map(str, others))}'s"
        return text

    return explain


def owner_source(world_size: int, op: str = "product") -> Callable[[int, float], str]:
    """Name the reduction a wrong PRODUCT/MIN/MAX value is, if it is one, else its owners."""

    def explain(index: int, got: float) -> str:
        values = [owner_value(index, r, world_size) for r in range(world_size)]
        results = {"sum": sum(values), "product": math.prod(values), "min": min(values)}
        results.update(max=max(values), avg=sum(values) / world_size)
        applied = [name.upper() for name, value in results.items() if value == got and name != op]
        if applied:
            return (
                f"{number(got)} is the {' or '.join(applied)} of the inputs, not the {op.upper()}"
            )
        first, second = owner(index, world_size), owner(index + 1, world_size)
        return (
            f"ranks {first} and {second} hold 2 and {owner_high(index)} here, every other rank 1; "
            "a contribution is wrong or missing"
        )

    return explain


# --------------------------------------------------------------------------------------------
# 7. One check per collective: closed-form expected values
# --------------------------------------------------------------------------------------------


# A check's own inputs (base, step: see section 6; None = the defaults exact for the dtype and
# world), and what a passed check records as its details.
Base = Sequence[float] | None
Step = int | None
Details = dict[str, Any]


class Skip(Exception):
    """The test does not apply here (the reason is the message)."""


class Fail(Exception):
    """The collective ran and the answer is wrong."""

    def __init__(self, message: str, details: dict[str, Any]):
        super().__init__(message)
        self.details = details


@dataclass
class Context:
    rank: int
    world_size: int
    device: torch.device
    dtype: torch.dtype
    count: int = CHECK_ELEMENTS
    base_period: int = 8
    period: int = 1
    store: Any = None  # the check-in store (a dist.Store); None for mpi

    @classmethod
    def make(
        cls,
        rank: int,
        world_size: int,
        device: torch.device,
        dtype: torch.dtype,
        store: Any = None,
    ) -> Context:
        pattern = exact_pattern(world_size, dtype)
        base_period, period = pattern if pattern else (1, 1)
        count = max(CHECK_ELEMENTS, world_size)
        return cls(rank, world_size, device, dtype, count, base_period, period, store)

    def tensor(self, values: Sequence[float]) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.float64).to(self.dtype).to(self.device)

    def empty(self, count: int) -> torch.Tensor:
        """Zeros: never a valid result, as every input element is 1 or more."""
        return torch.zeros(count, dtype=self.dtype, device=self.device)

    def payloads(self, base: Sequence[float], step: int) -> Callable[[int], list[float]]:
        """rank -> payload(rank) for these inputs."""
        return lambda rank: payload(base, step, rank, self.period)

    def inputs(self, base: Sequence[float] | None, step: int | None) -> tuple[list[float], int]:
        """The test's own (base, step), or the defaults that are exact for this dtype and world."""
        if exact_pattern(self.world_size, self.dtype) is None and base is None:
            raise Skip(
                f"{self.world_size} ranks exceed the exact integer range of {self.dtype} "
                f"({exact_integer_limit(self.dtype)}): run this test with --dtype float32"
            )
        if base is None:
            base = base_pattern(self.count, self.base_period)
        return list(base), 1 if step is None else step

    def gather_roots(self) -> range | tuple[int, int]:
        """gather/scatter cost n messages per root: every root in small worlds, else the ends."""
        n = self.world_size
        return range(n) if n <= SMALL_WORLD else (0, n - 1)


def head(tensor: torch.Tensor, n: int = 8) -> list[int | float]:
    return [number(float(v)) for v in tensor.detach().cpu().flatten()[:n]]


def verify(
    got: torch.Tensor,
    expected: Sequence[float],
    source: Callable[[int, float], str],
    case: str = "",
    ulps: int = 0,
) -> dict[str, Any]:
    """Raise Fail on a mismatch; return the details of a correct result."""
    details = mismatch(got, expected, source, ulps)
    if details is not None:
        if case:
            details["case"] = case
        raise Fail((f"{case}: " if case else "") + mismatch_message(details), details)
    return {"elements": got.numel(), "got_head": head(got)}


# torch 2.13 renamed all_gather_into_tensor/reduce_scatter_tensor; older torch has the old names.
# On gloo no reduce_scatter API is a real reduce-scatter: the tensor API is one all_reduce of the
# whole input, the list API (dist.reduce_scatter) one all_reduce per chunk (torch PR 149869; both
# seen as gloo:all_reduce in torch.profiler, tests/check/test_bandwidth_notes.py). Measured on 2
# lab hosts, links at 1 Gbit/s, 64 MiB: tensor API 0.59-0.61 s, list API 0.58-0.60 s, all_reduce
# 0.56 s (2 x 1 rank); 0.91-0.93 s, 0.87-1.19 s and 0.84 s (2 x 2 ranks), where a real
# reduce-scatter would take about half of all_reduce. The list API gains nothing, so every backend
# gets the tensor API, the one NCCL runs as a real reduce-scatter.
all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
reduce_scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

REDUCE_OPS = {
    "sum": dist.ReduceOp.SUM,
    "product": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
    "avg": dist.ReduceOp.AVG,
}


def check_all_reduce(ctx: Context, op: str, base: Base = None, step: Step = None) -> Details:
    """all_reduce: SUM/AVG of the affine input; PRODUCT/MIN/MAX of the owner input."""
    n, r = ctx.world_size, ctx.rank
    if op in ("product", "min", "max"):
        count = len(base) if base is not None else ctx.count
        tensor = ctx.tensor(owner_input(count, r, n))
        dist.all_reduce(tensor, op=REDUCE_OPS[op])
        return verify(tensor, expected_owner(op, count, n), owner_source(n, op))
    base, step = ctx.inputs(base, step)
    tensor = ctx.tensor(reduction_input(base, step, r, ctx.period))
    dist.all_reduce(tensor, op=REDUCE_OPS[op])
    total = expected_sum(base, step, n, ctx.period)
    if op == "sum":
        return verify(tensor, total, sum_source(base, step, n, ctx.period, total))
    want = expected_avg(base, step, n, ctx.period)
    if not ctx.dtype.is_floating_point:
        want = [float(math.trunc(v)) for v in want]  # integer AVG truncates, as NCCL's does

    def avg_source(index: int, got: float) -> str:
        return f"AVG = SUM / n = {number(total[index])} / {n}; compare all_reduce_sum"

    return verify(tensor, want, avg_source, ulps=1)


def check_broadcast(ctx: Context, base: Base = None, step: Step = None) -> Details:
    """broadcast from every root: every rank ends with payload(root)."""
    base, step = ctx.inputs(base, step)
    n, r, width = ctx.world_size, ctx.rank, len(base)
    sent_by = ctx.payloads(base, step)
    details: dict[str, Any] = {"roots": n}
    for root in range(n):
        tensor = ctx.tensor(sent_by(r)) if r == root else ctx.empty(width)
        dist.broadcast(tensor, src=root)
        want = expected_broadcast(base, step, root, ctx.period)
        source = movement_source(sent_by, n, width, source=root)
        details.update(verify(tensor, want, source, f"root {root}"))
    return details


def check_reduce(ctx: Context, base: Base = None, step: Step = None) -> Details:
    """reduce (SUM) to every root: the root holds n * base + step * sum_of_tags(n)."""
    base, step = ctx.inputs(base, step)
    n, r = ctx.world_size, ctx.rank
    want = expected_sum(base, step, n, ctx.period)
    details: dict[str, Any] = {"roots": n}
    for root in range(n):
        tensor = ctx.tensor(reduction_input(base, step, r, ctx.period))
        dist.reduce(tensor, dst=root, op=dist.ReduceOp.SUM)
        if r == root:  # elsewhere the buffer's content is unspecified
            source = sum_source(base, step, n, ctx.period, want)
            details.update(verify(tensor, want, source, f"root {root}"))
    return details


def check_all_gather(ctx: Context, base: Base = None, step: Step = None) -> Details:
    """all_gather: chunk j of the result is payload(j)."""
    base, step = ctx.inputs(base, step)
    n, width = ctx.world_size, len(base)
    sent_by = ctx.payloads(base, step)
    out = ctx.empty(n * width)
    all_gather_single(out, ctx.tensor(sent_by(ctx.rank)))
    want = expected_all_gather(base, step, n, ctx.period)
    return verify(out, want, movement_source(sent_by, n, width, source=None))


def check_gather(ctx: Context, base: Base = None, step: Step = None) -> Details:
    """gather to every root (see Context.gather_roots): on the root, chunk j is payload(j)."""
    base, step = ctx.inputs(base, step)
    n, r, width = ctx.world_size, ctx.rank, len(base)
    sent_by = ctx.payloads(base, step)
    want = expected_all_gather(base, step, n, ctx.period)
    roots = ctx.gather_roots()
    details: dict[str, Any] = {"roots": len(roots)}
    for root in roots:
        chunks = [ctx.empty(width) for _ in range(n)] if r == root else None
        dist.gather(ctx.tensor(sent_by(r)), chunks, dst=root)
        if chunks is not None:
            source = movement_source(sent_by, n, width, source=None)
            details.update(verify(torch.cat(chunks), want, source, f"root {root}"))
    return details


def check_scatter(ctx: Context, base: Base = None, step: Step = None) -> Details:
    """scatter from every root (see Context.gather_roots): rank d receives payload(d)."""
    base, step = ctx.inputs(base, step)
    n, r, width = ctx.world_size, ctx.rank, len(base)
    sent_to = ctx.payloads(base, step)
    want = expected_scatter(base, step, r, ctx.period)
    roots = ctx.gather_roots()
    details: dict[str, Any] = {"roots": len(roots)}
    for root in roots:
        chunks = [ctx.tensor(sent_to(d)) for d in range(n)] if r == root else None
        out = ctx.empty(width)
        dist.scatter(out, chunks, src=root)
        # a wrong value that is another rank's payload was meant for that rank
        details.update(verify(out, want, movement_source(sent_to, n, width, root), f"root {root}"))
    return details


def check_reduce_scatter(ctx: Context, base: Base = None, step: Step = None) -> Details:
    """reduce_scatter (SUM): rank r gets chunk r of n * base + step * sum_of_tags(n)."""
    n, r = ctx.world_size, ctx.rank
    if base is None:
        base, step = ctx.inputs(None, step)
        base = base_pattern(n * ctx.count, ctx.base_period)
    step = 1 if step is None else step
    if len(base) % n:
        raise ValueError(f"reduce_scatter input of {len(base)} elements is not {n} equal chunks")
    width = len(base) // n
    out = ctx.empty(width)
    reduce_scatter_single(out, ctx.tensor(reduction_input(base, step, r, ctx.period)))
    want = expected_reduce_scatter(base, step, n, ctx.period, r)
    my_chunk = base[r * width : (r + 1) * width]
    return verify(out, want, sum_source(my_chunk, step, n, ctx.period, want))


def check_all_to_all(ctx: Context, base: Base = None, step: Step = None) -> Details:
    """all_to_all: chunk s of the result on rank d is all_to_all_chunk(s, d)."""
    base, step = ctx.inputs(base, step)
    n, r, width = ctx.world_size, ctx.rank, len(base)
    sent = [v for d in range(n) for v in all_to_all_chunk(base, step, r, d, ctx.period)]
    out = ctx.empty(n * width)
    dist.all_to_all_single(out, ctx.tensor(sent))
    want = expected_all_to_all(base, step, n, ctx.period, r)
    sent_to_me = lambda s: all_to_all_chunk(base, step, s, r, ctx.period)  # noqa: E731
    return verify(out, want, movement_source(sent_to_me, n, width, source=None))


def ring_exchange(send: torch.Tensor, recv: torch.Tensor, rank: int, world_size: int) -> None:
    """Send to rank+1 and receive from rank-1 at once (blocking send/recv in a ring deadlock).

    The receive is posted first. Gloo (the TCP transport) only sends a payload once the peer has
    announced its matching receive, and that announcement travels in the same per-peer queue as the
    payloads: posted after a send whose peer is already waiting, it sits behind the whole payload,
    so the two directions of a link take turns (half the link rate with 2 ranks, measured in
    BENCHMARKS.md). Receive first lets both announcements go out before any payload. NCCL groups
    the two operations (ncclGroupStart/End), where the order makes no difference.
    """
    ops = [
        dist.P2POp(dist.irecv, recv, (rank - 1) % world_size),
        dist.P2POp(dist.isend, send, (rank + 1) % world_size),
    ]
    for work in dist.batch_isend_irecv(ops):
        work.wait()


def check_send_recv(ctx: Context, base: Base = None, step: Step = None) -> Details:
    """send/recv ring: rank r receives payload(r-1), so every neighbour link carries data."""
    n, r = ctx.world_size, ctx.rank
    if n < 2:
        raise Skip("send/recv needs at least 2 ranks")
    base, step = ctx.inputs(base, step)
    sent_by = ctx.payloads(base, step)
    left = (r - 1) % n
    out = ctx.empty(len(base))
    ring_exchange(ctx.tensor(sent_by(r)), out, r, n)
    want = expected_send_recv(base, step, n, ctx.period, r)
    details = verify(out, want, movement_source(sent_by, n, len(base), source=left))
    return {**details, "from": left, "to": (r + 1) % n}


def check_barrier(ctx: Context) -> Details:
    """Nobody leaves before the last rank arrived, counted in the store (no clocks compared).

    A round per late rank (every rank in small worlds, else the first and the last): the late
    rank waits until the n - 1 others have counted their arrival in barrier/<round>, waits
    BARRIER_LATE_S more, counts itself and enters. Every rank reads the count once it left;
    below n it left before the last rank arrived.
    """
    n, r, store = ctx.world_size, ctx.rank, ctx.store
    if store is None:
        dist.barrier()
        raise Skip("no store to count arrivals in (the mpi backend): only ran dist.barrier()")
    late_ranks = list(ctx.gather_roots())
    early: list[dict[str, int]] = []
    for round_no, late in enumerate(late_ranks):
        key = f"barrier/{round_no}"
        if r == late:
            while store.add(key, 0) < n - 1:
                time.sleep(0.005)
            time.sleep(BARRIER_LATE_S)
        store.add(key, 1)
        dist.barrier()
        arrived = store.add(key, 0)
        if arrived < n:
            early.append({"round": round_no, "late_rank": late, "arrived": arrived})
    details = {"rounds": len(late_ranks), "late_by_s": BARRIER_LATE_S}
    if early:
        first = early[0]
        raise Fail(
            f"rank {r} left the barrier when {first['arrived']} of {n} ranks had arrived "
            f"(round {first['round']}: rank {first['late_rank']} arrived last, "
            f"{BARRIER_LATE_S:g} s after the others); {len(early)} of {len(late_ranks)} rounds",
            {**details, "early": early},
        )
    return details


def unsupported(exc: BaseException) -> bool:
    """True when the backend refused the operation as not implemented (its own message)."""
    return isinstance(exc, RuntimeError | NotImplementedError | TypeError) and any(
        p.search(str(exc)) for p in UNSUPPORTED_PATTERNS
    )


def run_test(
    name: str, body: Callable[[], dict[str, Any]], support: Support | None = None
) -> dict[str, Any]:
    """Run one test body; turn its outcome into a record entry.

    A backend's refusal (unsupported()) is a skip only where the support table said "maybe";
    anywhere else the table did not predict it, and the test fails saying so.
    """
    started = time.monotonic()
    try:
        details = body()
    except Skip as exc:
        return test_entry(name, "skipped", str(exc), duration_s=time.monotonic() - started)
    except Fail as exc:
        bandwidth = exc.details.pop("bandwidth", [])
        return test_entry(
            name, "failed", str(exc), exc.details, time.monotonic() - started, bandwidth
        )
    except Exception as exc:
        message = first_line(exc)
        if unsupported(exc):
            if support is not None and support.state == "maybe":
                text = f"backend does not support it: {message} ({support.reason})"
                return test_entry(name, "skipped", text, duration_s=time.monotonic() - started)
            predicted = support.reason if support is not None else "no support table entry"
            text = f"the backend refused it, which the support table did not predict ({predicted})"
            return test_entry(
                name,
                "failed",
                f"{text}: {message}",
                {"refusal": message, "support": support._asdict() if support else None},
                time.monotonic() - started,
            )
        details = {"exception": type(exc).__name__, "traceback": traceback.format_exc(limit=6)}
        return test_entry(
            name, "error", f"{type(exc).__name__}: {message}", details, time.monotonic() - started
        )
    bandwidth = details.pop("bandwidth", [])
    return test_entry(name, "passed", "", details, time.monotonic() - started, bandwidth)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# --------------------------------------------------------------------------------------------
# 8. The collectives: one record each, looked up by name
# --------------------------------------------------------------------------------------------


class Buffers:
    """The sweep's preallocated tensors for one message of `count` elements, on one rank.

    Rank r holds the constant v(r) = 1 + tag(r), so a SUM is `total` = n + sum_of_tags(n)
    everywhere, and gathered or exchanged chunk j holds v(j) (by_source()).
    """

    def __init__(self, ctx: Context, count: int):
        self.ctx, self.rank, self.n = ctx, ctx.rank, ctx.world_size
        self.total = self.n + sum_of_tags(self.n, ctx.period)
        self.part = count // self.n
        self.send, self.out = self.full(count, self.v(self.rank)), self.full(count, 0)
        self.chunk_in = self.full(self.part, self.v(self.rank))
        self.chunk_out = self.full(self.part, 0)

    def full(self, length: int, value: float) -> torch.Tensor:
        return torch.full((length,), value, dtype=self.ctx.dtype, device=self.ctx.device)

    def v(self, rank: int) -> int:
        return 1 + rank_tag(rank, self.ctx.period)

    def by_source(self) -> torch.Tensor:
        """Chunk j holds v(j); made only when checking."""
        return torch.cat([self.full(self.part, self.v(j)) for j in range(self.n)])


class BandwidthNote(NamedTuple):
    """A bound of a backend's own algorithm on busbw, from min_ranks to max_ranks (None: any).

    Printed under a table of that backend and rank count, so a low busbw is not blamed on the
    link. The algorithms are read from the torch 2.13 and gloo sources; the numbers are busbw /
    link rate, measured with links limited to 1 Gbit/s (BENCHMARKS.md, fidelity), on 2 hosts x 1
    and x 2 ranks.
    """

    min_ranks: int
    max_ranks: int | None
    text: str


@dataclass(frozen=True)
class Collective:
    """Everything about one collective, as nccl-tests keeps one testColl per collective.

    name     its correctness tests are `name`, or name_<op> for each of `ops`; its bandwidth
             test is bandwidth_<name> when it has `run`
    check    correctness with closed-form expected values (section 6): check(ctx), or
             check(ctx, op) for each of `ops`
    ops      the reductions checked, one test each (all_reduce: sum, product, min, max, avg)
    busbw    busbw = algbw * busbw(n), nccl-tests' doc/PERFORMANCE.md
    run      one timed call on the sweep's Buffers (None: not timed)
    result   after a fresh run: (the result tensor, the value or tensor it must equal), None
             where the content is unspecified (reduce, off the root); a different element
             counts in the "#wrong" column
    redop, root   nccl-tests' columns ("none" and -1 where they do not apply)
    split    the message is n chunks: its count is a multiple of n
    notes    backend -> what that backend's own algorithm bounds busbw to (BandwidthNote)

    Adding a collective is adding a record to COLLECTIVES (its place there is its tests' place
    in --list-tests); a timed one also takes its place in BANDWIDTH_COLLECTIVES, the sweep's
    order (a unit test checks that the two agree).
    """

    name: str
    check: Callable[..., dict[str, Any]]
    ops: tuple[str, ...] = ()
    busbw: Callable[[int], float] = lambda n: 1.0
    run: Callable[[Buffers], object] | None = None
    result: Callable[[Buffers], tuple[torch.Tensor, Any] | None] = lambda b: None
    redop: str = "none"
    root: int = -1
    split: bool = False
    notes: dict[str, BandwidthNote] = field(default_factory=dict)

    def tests(self) -> list[str]:
        return [f"{self.name}_{op}" for op in self.ops] or [self.name]

    def checker(self, test: str) -> Callable[[Context], dict[str, Any]]:
        op = test.removeprefix(f"{self.name}_")
        return (lambda ctx: self.check(ctx, op)) if self.ops else self.check


COLLECTIVES: dict[str, Collective] = {
    c.name: c
    for c in (
        Collective(
            "all_reduce",
            check_all_reduce,
            ops=("sum", "product", "min", "max", "avg"),
            busbw=lambda n: 2 * (n - 1) / n,
            run=lambda b: dist.all_reduce(b.send),
            result=lambda b: (b.send, b.total),
            redop="sum",
        ),
        Collective(
            "broadcast",
            check_broadcast,
            run=lambda b: dist.broadcast(b.send, src=0),
            result=lambda b: (b.send, b.v(0)),
            root=0,
            notes={
                "gloo": BandwidthNote(
                    3,
                    None,
                    "gloo's broadcast is a binomial tree, not a pipeline (gloo/broadcast.cc): with "
                    "more than 2 ranks the root sends the whole buffer once per round, log2(n) "
                    "rounds, and every rank of a host that has it sends it on in the same round, "
                    "so a link can carry it several times: busbw 0.50 of the link rate on 2 hosts "
                    "x 2 ranks (1.0 on 2 hosts x 1 rank)",
                )
            },
        ),
        Collective(
            "reduce",
            check_reduce,
            run=lambda b: dist.reduce(b.send, dst=0),
            result=lambda b: (b.send, b.total) if b.rank == 0 else None,
            redop="sum",
            root=0,
        ),
        Collective(
            "all_gather",
            check_all_gather,
            busbw=lambda n: (n - 1) / n,
            run=lambda b: all_gather_single(b.out, b.chunk_in),
            result=lambda b: (b.out, b.by_source()),
            split=True,
            notes={
                "gloo": BandwidthNote(
                    2,
                    2,
                    "gloo's ring all_gather posts each send before its receive; with 2 ranks one "
                    "connection carries both directions and they take turns: busbw 0.62-0.66 of "
                    "the link rate (from 3 ranks on, each connection carries one direction: "
                    "0.81-0.95 on 2 hosts x 2 ranks)",
                )
            },
        ),
        Collective("gather", check_gather),
        Collective("scatter", check_scatter),
        Collective(
            "reduce_scatter",
            check_reduce_scatter,
            busbw=lambda n: (n - 1) / n,
            run=lambda b: reduce_scatter_single(b.chunk_out, b.send),
            result=lambda b: (b.chunk_out, b.total),
            redop="sum",
            split=True,
            notes={
                "gloo": BandwidthNote(
                    2,
                    None,
                    "gloo runs reduce_scatter as an all_reduce of the whole input plus a copy "
                    "(ProcessGroupGloo::reduce_scatter_tensor_coalesced; the list API runs one "
                    "all_reduce per chunk): busbw is at most half the link rate (measured "
                    "0.44-0.48)",
                )
            },
        ),
        Collective(
            "all_to_all",
            check_all_to_all,
            busbw=lambda n: (n - 1) / n,
            run=lambda b: dist.all_to_all_single(b.out, b.send),
            result=lambda b: (b.out, b.by_source()),
            split=True,
        ),
        Collective(
            "send_recv",
            check_send_recv,
            run=lambda b: ring_exchange(b.send, b.out, b.rank, b.n),
            result=lambda b: (b.out, b.v((b.rank - 1) % b.n)),
        ),
        Collective("barrier", check_barrier),
    )
}
# The sweep's order, nccl-tests' binaries' (all_reduce_perf first): every collective with `run`.
BANDWIDTH_COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "send_recv",
)
CHECKS = {t: c.checker(t) for c in COLLECTIVES.values() for t in c.tests()}
CORRECTNESS_TESTS = tuple(CHECKS)
BANDWIDTH_TESTS = tuple(f"bandwidth_{c}" for c in BANDWIDTH_COLLECTIVES)
ALL_TESTS = CORRECTNESS_TESTS + BANDWIDTH_TESTS
TEST_GROUPS = {"all": ALL_TESTS, "correctness": CORRECTNESS_TESTS, "bandwidth": BANDWIDTH_TESTS}

# Which collective each backend runs on which device: torch.distributed's "Backends" table
# (docs/source/distributed.md, https://docs.pytorch.org/docs/stable/distributed.html#backends;
# send and recv are send_recv here). "yes": a refusal fails the test (the table did not predict
# it); "no": skipped without calling (gloo's send on a CUDA tensor hands the device pointer to
# its TCP transport); "maybe": run, a refusal skips (the docs' "?": MPI on GPUs depends on the
# MPI library). A backend or device missing here (hccl, ucc) predicts nothing: every refusal
# fails. "gpu" is any accelerator (cuda, xpu, npu). SUPPORT and SUPPORT_RULES are plain
# literals: the controller reads them from this file with ast.literal_eval, without torch
# (plugins/filter/nccl_support.py), to show predicted skips before any rank runs.
SUPPORT_SOURCE = "torch.distributed docs, Backends table"
SUPPORT: dict[str, dict[str, dict[str, str]]] = {  # "*": every collective not named
    "gloo": {"cpu": {"*": "yes"}, "gpu": {"*": "yes", "send_recv": "no", "barrier": "no"}},
    "mpi": {
        "cpu": {"*": "yes", "reduce_scatter": "no"},
        "gpu": {"*": "maybe", "reduce_scatter": "no"},
    },
    "nccl": {"cpu": {"*": "no"}, "gpu": {"*": "yes"}},
    "xccl": {"cpu": {"*": "no"}, "gpu": {"*": "yes"}},
}
# Narrower refusals than a whole collective, each recorded on a real backend (the source says
# where; tests/fixtures/torch/refusals.json holds the messages, tests/check/test_support_table.py
# records them again).
SUPPORT_RULES: list[dict[str, Any]] = [
    {
        "backend": "gloo",
        "device": "cpu",
        "tests": ["all_reduce_avg"],
        "dtypes": ["int32", "int64", "int8", "uint8"],
        "reason": "gloo has no AVG on integer tensors (it divides the sum in the tensor's dtype)",
        "source": "recorded on torch 2.13.0+cpu: RuntimeError: result type Float can't be cast "
        "to the desired output type Int",
    },
]


class Support(NamedTuple):
    """What the table says about one test on one backend and device, and why."""

    state: str  # "yes", "no", "maybe" or "unknown" (the table has no such backend or device)
    reason: str


def collective_of(test: str) -> str | None:
    """all_reduce_sum -> all_reduce, bandwidth_reduce -> reduce; None for checkin/init."""
    name = test.removeprefix("bandwidth_")
    for coll in COLLECTIVES.values():
        if name == coll.name or name in coll.tests():
            return coll.name
    return None


def device_class(device_type: str) -> str:
    return "cpu" if device_type == "cpu" else "gpu"


def support_of(backend: str, device_type: str, test: str, dtype: str) -> Support:
    """The table's prediction for `test` (a test name of --list-tests) with these settings."""
    kind = device_class(device_type)
    where = "CPU" if kind == "cpu" else f"{device_type.upper()} (GPU column)"
    for rule in SUPPORT_RULES:
        if (
            (rule["backend"], rule["device"]) == (backend, kind)
            and dtype in rule["dtypes"]
            and test.removeprefix("bandwidth_") in rule["tests"]
        ):
            return Support("no", f"{rule['reason']}; {rule['source']}")
    coll = collective_of(test)
    row = SUPPORT.get(backend, {}).get(kind, {})
    state = row.get(coll or "", row.get("*", "unknown")) if coll else "unknown"
    if state == "no":
        return Support("no", f"{backend} has no {coll} on {where} tensors ({SUPPORT_SOURCE})")
    if state == "maybe":
        return Support(
            "maybe", f"{backend}'s {coll} on {where} tensors is '?' in the {SUPPORT_SOURCE}"
        )
    if state == "unknown":
        return Support("unknown", f"the support table has no {backend} on {where} tensors")
    return Support("yes", f"{backend} runs {coll} on {where} tensors ({SUPPORT_SOURCE})")


# --------------------------------------------------------------------------------------------
# 9. Bandwidth sweep, nccl-tests style
# --------------------------------------------------------------------------------------------


def sweep_sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes


def busbw(collective: str, algbw: float, world_size: int) -> float:
    return algbw * COLLECTIVES[collective].busbw(world_size)


def bandwidth_note(backend: str, collective: str, world_size: int) -> str | None:
    note = COLLECTIVES[collective].notes.get(backend)
    if note is None or world_size < note.min_ranks:
        return None
    if note.max_ranks is not None and world_size > note.max_ranks:
        return None
    return note.text


def message_shape(
    collective: str, size_bytes: int, elem_size: int, world_size: int
) -> tuple[int, int]:
    """(count, bytes) nccl-tests style: size is the larger buffer, a multiple of n for the
    collectives that split it (all_gather output, reduce_scatter input, all_to_all)."""
    count = max(1, size_bytes // elem_size)
    if COLLECTIVES[collective].split:
        count = max(world_size, count - count % world_size)
    return count, count * elem_size


@dataclass
class Sweep:
    ctx: Context
    sizes: list[int]
    iters: int
    warmup: int
    type_name: str
    threshold: float | None
    arm: Callable[[str, int], None]


def count_wrong(collective: Collective, buffers: Buffers) -> int:
    """Elements that differ from the expected value after a fresh run (nccl-tests' #wrong)."""
    buffers.send.fill_(buffers.v(buffers.rank))
    assert collective.run is not None
    collective.run(buffers)
    found = collective.result(buffers)
    return 0 if found is None else int((found[0] != found[1]).sum())


def average_over_ranks(value: float, ctx: Context) -> float:
    tensor = torch.tensor([value], dtype=torch.float32, device=ctx.device)
    dist.all_reduce(tensor)
    return float(tensor.cpu()) / ctx.world_size


def measure(sweep: Sweep, collective: str) -> dict[str, Any]:
    """Time every size; the time is the average over ranks, like nccl-tests' default (-a 1)."""
    ctx, n = sweep.ctx, sweep.ctx.world_size
    if n < 2:
        raise Skip("bandwidth needs at least 2 ranks")
    if exact_pattern(n, ctx.dtype) is None:
        raise Skip(f"{n} ranks exceed the exact integer range of {ctx.dtype}: use --dtype float32")
    elem = torch.empty(0, dtype=ctx.dtype).element_size()
    coll = COLLECTIVES[collective]
    run = coll.run
    assert run is not None, f"{collective} is not timed"
    rows: list[dict[str, Any]] = []
    for size in sweep.sizes:
        sweep.arm(f"bandwidth_{collective} at {size} B", size)
        count, nbytes = message_shape(collective, size, elem, n)
        buffers = Buffers(ctx, count)
        for _ in range(sweep.warmup):
            run(buffers)
        synchronize(ctx.device)
        dist.barrier()
        started = time.perf_counter()
        for _ in range(sweep.iters):
            run(buffers)
        synchronize(ctx.device)
        own = (time.perf_counter() - started) / sweep.iters  # this rank's own time (rank_*)
        seconds = average_over_ranks(own, ctx)
        algbw = nbytes / seconds / 1e9
        rows.append(
            {
                "size_bytes": nbytes,
                "count": count,
                "type": sweep.type_name,
                "redop": coll.redop,
                "root": coll.root,
                "time_us": round(seconds * 1e6, 2),
                "algbw_gbps": round(algbw, 4),
                "busbw_gbps": round(busbw(collective, algbw, n), 4),
                "rank_time_us": round(own * 1e6, 2),
                "rank_busbw_gbps": round(busbw(collective, nbytes / own / 1e9, n), 4),
                "wrong": count_wrong(coll, buffers),
            }
        )
    avg = sum(row["busbw_gbps"] for row in rows) / len(rows) if rows else 0.0
    details: dict[str, Any] = {"bandwidth": rows, "avg_busbw_gbps": round(avg, 4)}
    if sweep.threshold is not None:
        details["threshold_gbps"] = sweep.threshold
    bad = [row for row in rows if row["wrong"]]
    if bad:
        raise Fail(
            f"{collective}: {bad[0]['wrong']} of {bad[0]['count']} elements wrong at "
            f"{bad[0]['size_bytes']} B: data is corrupted in transit; rerun the correctness "
            "tests with --verbose to find the rank",
            details,
        )
    last = rows[-1] if rows else None
    if sweep.threshold is not None and last is not None and last["busbw_gbps"] < sweep.threshold:
        raise Fail(
            f"{collective} busbw {last['busbw_gbps']:g} GB/s at {last['size_bytes']} B is below "
            f"the required {sweep.threshold:g} GB/s: check which interface carries the traffic "
            "(NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_DEBUG=INFO) and the link speed "
            "(ethtool, ibstat) on every host",
            details,
        )
    return details


def bandwidth_table(
    collective: str, rows: list[dict[str, Any]], world_size: int, backend: str = ""
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
    note = bandwidth_note(backend, collective, world_size)
    if note:
        lines.append(f"# Note: {note}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# 9b. Pairwise rounds: which node, which rail (--pairwise)
#
# After the tests, nodes meet in a round-robin tournament (tournament()): every round pairs
# disjoint nodes, all pairs of a round exchange --pair-bytes both ways at the same time, rail by
# rail (local rank i of one node with local rank i of the other), with batch_isend_irecv in the
# world group (no communicator per pair). Each rank keeps its own figure per pair
# (run_pair_round()).
# A second pass pairs every suspect (pair_suspects(): most of its pairs on a rail slower than
# --pair-min-ratio x the reference) with the fastest node. The verdict is made on the control
# machine (module_utils/nccl_pairwise.py) from every rank's rows; pair_suspects() here only picks
# the second pass, by the same rule (tests/unit/test_pairwise.py holds the two together).
# --------------------------------------------------------------------------------------------

PAIRWISE_MODES = ("auto", "always", "never")


def positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {text!r}")
    return value


def ratio(text: str) -> float:
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1, got {text!r}")
    return value


def add_pairwise_options(parser: argparse.ArgumentParser) -> None:
    pair = parser.add_argument_group("pairwise rounds (which node, which rail)")
    pair.add_argument(
        "--pairwise",
        choices=PAIRWISE_MODES,
        default="auto",
        help="after the tests, pair the nodes in round-robin rounds and time each pair, rail by "
        "rail: always; never; auto = on 2 or more nodes when a bandwidth test failed or fell "
        "below its --pair-trigger (default: auto)",
    )
    pair.add_argument(
        "--pair-bytes",
        type=parse_size,
        metavar="SIZE",
        help="bytes each rank of a pair sends (and receives) per iteration (default: 1M on cpu, "
        "64M on an accelerator)",
    )
    pair.add_argument(
        "--pair-iters",
        type=positive_int,
        default=5,
        help="timed exchanges per pair (default: 5)",
    )
    pair.add_argument(
        "--pair-trigger",
        type=parse_threshold,
        action="append",
        default=[],
        metavar="COLL=GBPS",
        help="--pairwise auto also runs when COLL's busbw at its largest size of at least "
        "--pair-trigger-min-bytes is below GBPS (the launch passes nccl_expected_busbw x "
        "nccl_busbw_warn); repeatable",
    )
    pair.add_argument(
        "--pair-trigger-min-bytes",
        type=parse_size,
        default=parse_size("32M"),
        metavar="SIZE",
        help="smallest size --pair-trigger looks at (default: 32M)",
    )
    pair.add_argument(
        "--pair-min-ratio",
        type=ratio,
        default=0.8,
        metavar="R",
        help="a pair slower than R x the reference (the median node's median pair) is slow; "
        "picks the suspects of the second pass (default: 0.8)",
    )


def tournament(n: int) -> list[list[tuple[int, int]]]:
    """Round-robin rounds of disjoint pairs of 0..n-1 (circle method).

    Even n: n-1 rounds of n/2 pairs; odd n: n rounds of (n-1)/2 pairs, one node rests in each.
    Every pair meets exactly once.
    """
    if n < 2:
        return []
    players: list[int | None] = list(range(n)) + ([None] if n % 2 else [])
    m = len(players)
    rounds = []
    for _ in range(m - 1):
        pairs = []
        for i in range(m // 2):
            a, b = players[i], players[m - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def pair_values(
    rows: Sequence[dict[str, Any]], pass_: int | str = 1
) -> dict[tuple[int, int, int], float]:
    """(node a, node b, rail) -> busbw of the pair: the slower of its two ranks' own figures.

    Within a node (pass "intra") the rail is the lower local rank of the pair."""
    table: dict[tuple[int, int, int], float] = {}
    for row in rows:
        if row.get("pass") != pass_:
            continue
        a, b = sorted((int(row["node"]), int(row["peer_node"])))
        rail = min(int(row["rail"]), int(row.get("peer_local_rank", row["rail"])))
        key = (a, b, rail)
        table[key] = min(table.get(key, math.inf), float(row["busbw_gbps"]))
    return table


def pair_reference(table: dict[tuple[int, int, int], float]) -> float:
    """The median over nodes of each node's median pair (robust on 3 nodes, unlike the median
    pair: with one bad node of three, two of the three pairs are slow)."""
    per_node: dict[int, list[float]] = {}
    for (a, b, _), value in table.items():
        per_node.setdefault(a, []).append(value)
        per_node.setdefault(b, []).append(value)
    if not per_node:
        return 0.0
    return _median([_median(values) for values in per_node.values()])


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def pair_suspects(
    table: dict[tuple[int, int, int], float], min_ratio: float
) -> dict[int, list[int]]:
    """node -> rails on which most (more than half) of its pairs are below min_ratio x reference."""
    limit = min_ratio * pair_reference(table)
    counts: dict[tuple[int, int], list[int]] = {}  # (node, rail) -> [slow, all]
    for (a, b, rail), value in table.items():
        for node in (a, b):
            seen = counts.setdefault((node, rail), [0, 0])
            seen[0] += value < limit
            seen[1] += 1
    suspects: dict[int, list[int]] = {}
    for (node, rail), (slow, total) in sorted(counts.items()):
        if 2 * slow > total:
            suspects.setdefault(node, []).append(rail)
    return suspects


def fastest_node(table: dict[tuple[int, int, int], float], exclude: Sequence[int]) -> int | None:
    """The node with the highest median pair, among those not excluded (lowest node on a tie)."""
    per_node: dict[int, list[float]] = {}
    for (a, b, _), value in table.items():
        per_node.setdefault(a, []).append(value)
        per_node.setdefault(b, []).append(value)
    candidates = [(-_median(v), node) for node, v in per_node.items() if node not in exclude]
    return min(candidates)[1] if candidates else None


@dataclass
class PairPlan:
    """Who is where: node rank -> {local rank: global rank}, and the hosts."""

    ranks: dict[int, dict[int, int]]
    hosts: dict[int, str]

    @property
    def nodes(self) -> list[int]:
        return sorted(self.ranks)

    def peer(self, pairs: Sequence[tuple[int, int]], node: int, local: int) -> int | None:
        """The global rank this rank exchanges with in a round of node pairs, or None (rests)."""
        for a, b in pairs:
            if node in (a, b):
                return self.ranks[b if node == a else a].get(local)
        return None


def pair_plan(ctx: Context, record: RankRecord) -> PairPlan:
    mine = (record.data["node_rank"], record.data["local_rank"], record.data["host"], ctx.rank)
    everyone: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(everyone, mine)
    ranks: dict[int, dict[int, int]] = {}
    hosts: dict[int, str] = {}
    for node, local, host, rank in everyone:
        ranks.setdefault(int(node), {})[int(local)] = int(rank)
        hosts[int(node)] = str(host)
    return PairPlan(ranks, hosts)


@dataclass
class PairRound:
    pass_: int | str  # 1, 2 or "intra"
    number: int
    pairs: list[tuple[int, int]]  # node pairs (intra: local-rank pairs, node = this node)


def exchange(ctx: Context, peer: int, nbytes: int, iters: int) -> tuple[float, int, int]:
    """(seconds per exchange, bytes each way, wrong elements): to the peer and from it at once."""
    elem = torch.empty(0, dtype=ctx.dtype).element_size()
    count = max(1, nbytes // elem)
    value = 1 + rank_tag(ctx.rank, ctx.period)
    send = torch.full((count,), value, dtype=ctx.dtype, device=ctx.device)
    recv = torch.zeros(count, dtype=ctx.dtype, device=ctx.device)

    ops = [dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)]

    def once() -> None:
        # Batched: with NCCL (communicator made eagerly, device_id) it runs on the world
        # communicator; a plain isend/irecv would make a 2-rank communicator per pair.
        for request in dist.batch_isend_irecv(ops):
            request.wait()

    once()  # warm-up: the connection to this peer is made here
    synchronize(ctx.device)
    started = time.perf_counter()
    for _ in range(iters):
        once()
    synchronize(ctx.device)
    seconds = (time.perf_counter() - started) / iters
    expected = 1 + rank_tag(peer, ctx.period)
    return seconds, count * elem, int((recv != expected).sum())


def run_pair_round(
    ctx: Context, plan: PairPlan, record: RankRecord, rnd: PairRound, nbytes: int, iters: int
) -> dict[str, Any] | None:
    """One round on every rank (the resting ones only wait at the barriers); this rank's row."""
    node, local = record.data["node_rank"], record.data["local_rank"]
    partner_local: int | None = None
    if rnd.pass_ == "intra":
        partner_local = next(
            (b if local == a else a for a, b in rnd.pairs if local in (a, b)), None
        )
        peer = None if partner_local is None else plan.ranks[node].get(partner_local)
        peer_node = node
    else:
        peer = plan.peer(rnd.pairs, node, local)
        peer_node = next((b if node == a else a for a, b in rnd.pairs if node in (a, b)), None)
    dist.barrier()  # every pair of the round starts together
    row = None
    if peer is not None:
        seconds, sent, wrong = exchange(ctx, peer, nbytes, iters)
        row = {
            "pass": rnd.pass_,
            "round": rnd.number,
            "rank": ctx.rank,
            "node": node,
            "peer_node": peer_node,
            "rail": local,
            "peer_rank": peer,
            "peer_local_rank": partner_local if rnd.pass_ == "intra" else local,
            "bytes": sent,
            "time_us": round(seconds * 1e6, 2),
            "busbw_gbps": round(sent / seconds / 1e9, 4),
            "wrong": wrong,
        }
    dist.barrier()
    return row


def gather_rows(rows: list[dict[str, Any]], world_size: int) -> list[dict[str, Any]]:
    everyone: list[Any] = [None] * world_size
    dist.all_gather_object(everyone, rows)
    return [row for part in everyone for row in part]


def trigger_reasons(
    tests: Sequence[dict[str, Any]], below: dict[str, float], min_bytes: int
) -> list[str]:
    """Why --pairwise auto runs on this rank: a failed bandwidth test, or a collective's busbw
    at its largest size >= min_bytes under its --pair-trigger figure (pure)."""
    reasons = []
    for test in tests:
        collective = test["name"].removeprefix("bandwidth_")
        if not test["name"].startswith("bandwidth_"):
            continue
        if test["status"] == "failed":
            reasons.append(f"{test['name']} failed")
            continue
        big = [r for r in test.get("bandwidth") or [] if r["size_bytes"] >= min_bytes]
        if collective in below and big and big[-1]["busbw_gbps"] < below[collective]:
            reasons.append(
                f"{collective} busbw {big[-1]['busbw_gbps']:g} GB/s at {big[-1]['size_bytes']} B "
                f"is below {below[collective]:g} GB/s"
            )
    return reasons


def pairwise_trigger(args: argparse.Namespace, ctx: Context, record: RankRecord) -> str:
    """Why --pairwise auto runs ("" when it does not), agreed by every rank."""
    below = dict(args.pair_trigger)
    reasons = trigger_reasons(record.data["tests"], below, args.pair_trigger_min_bytes)
    flag = torch.tensor([1.0 if reasons else 0.0], dtype=torch.float32, device=ctx.device)
    dist.all_reduce(flag)
    if float(flag.cpu()) == 0:
        return ""
    return "; ".join(reasons) if reasons else "another rank's bandwidth test fell short"


def run_pairwise(
    args: argparse.Namespace,
    record: RankRecord,
    ctx: Context,
    arm: Callable[[str], None],
    stopped_by: str | None,
) -> list[str]:
    """The pairwise phase (called once from check()); rank 0's tables for the summary."""
    if args.pairwise == "never" or stopped_by is not None or ctx.world_size < 2:
        return []
    arm("pairwise")
    plan = pair_plan(ctx, record)
    why = "--pairwise always" if args.pairwise == "always" else pairwise_trigger(args, ctx, record)
    if not why:
        return []
    record.start("pairwise")
    tables: list[str] = []

    def body() -> dict[str, Any]:
        if len(plan.nodes) < 2:
            raise Skip("one node: there is no other node to pair it with")
        details, every = pairwise_body(args, record, ctx, plan, arm)
        details["why"] = why
        if ctx.rank == 0:
            tables.append(pairwise_table(details, every, plan))
        wrong = [r for r in details["rows"] if r["wrong"]]
        if wrong:
            raise Fail(
                f"{wrong[0]['wrong']} elements wrong from rank {wrong[0]['peer_rank']} in pass "
                f"{wrong[0]['pass']}: data is corrupted between these two ranks",
                details,
            )
        return details

    record.add(run_test("pairwise", body))
    return tables


def pairwise_body(
    args: argparse.Namespace,
    record: RankRecord,
    ctx: Context,
    plan: PairPlan,
    arm: Callable[[str], None],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every round of both passes; (this rank's details, every rank's rows)."""
    nbytes = args.pair_bytes or parse_size("1M" if ctx.device.type == "cpu" else "64M")
    nodes = plan.nodes
    rounds = [
        PairRound(1, i, [(nodes[a], nodes[b]) for a, b in pairs])
        for i, pairs in enumerate(tournament(len(nodes)))
    ]
    if len(nodes) == 2:  # two cannot tell which is bad: each node's own figure, where it can
        locals_ = max(len(r) for r in plan.ranks.values())
        rounds.append(PairRound("intra", 0, [(i, i + 1) for i in range(0, locals_ - 1, 2)]))
    rows: list[dict[str, Any]] = []

    def play(rnd: PairRound) -> None:
        arm(f"pairwise pass {rnd.pass_} round {rnd.number}")
        row = run_pair_round(ctx, plan, record, rnd, nbytes, args.pair_iters)
        if row is not None:
            rows.append(row)

    for rnd in rounds:
        play(rnd)
    table = pair_values(gather_rows(rows, ctx.world_size))
    suspects = pair_suspects(table, args.pair_min_ratio) if len(nodes) >= 3 else {}
    fastest = fastest_node(table, list(suspects))
    second = [] if fastest is None else sorted(suspects)
    for i, node in enumerate(second):
        play(PairRound(2, i, [(min(node, fastest), max(node, fastest))]))  # type: ignore[arg-type]
    every = gather_rows(rows, ctx.world_size)  # a collective: every rank calls it
    details = {
        "mode": args.pairwise,
        "min_ratio": args.pair_min_ratio,
        "pair_bytes": nbytes,
        "iters": args.pair_iters,
        "nodes": [
            {"node_rank": n, "host": plan.hosts[n], "local_ranks": len(plan.ranks[n])}
            for n in nodes
        ],
        "rounds": [[list(p) for p in r.pairs] for r in rounds if r.pass_ == 1],
        "suspects": {str(n): rails for n, rails in suspects.items()},
        "second_pass": [[n, fastest] for n in second],
        "rows": rows,
    }
    return details, every


def pairwise_table(details: dict[str, Any], every: list[dict[str, Any]], plan: PairPlan) -> str:
    """Rank 0's text: the node x node matrix of the first pass (slowest rail), the second pass."""
    table = pair_values(every)
    nodes = plan.nodes
    width = max(8, *(len(plan.hosts[n]) for n in nodes))
    lines = [
        f"# pairwise, {len(nodes)} nodes, {details['pair_bytes']} B each way per exchange, "
        f"busbw (GB/s) of the slowest rail, first pass",
        "#" + " " * width + "".join(f" {plan.hosts[n][-10:]:>10}" for n in nodes),
    ]
    for a in nodes:
        cells = []
        for b in nodes:
            values = [v for (x, y, _), v in table.items() if {x, y} == {a, b} and a != b]
            cells.append(f"{min(values):>10.3f}" if values else f"{'-':>10}")
        lines.append(f" {plan.hosts[a]:>{width}} " + " ".join(cells))
    second = pair_values(every, 2)
    for (a, b, rail), value in sorted(second.items()):
        lines.append(
            f"# second pass: {plan.hosts[a]} - {plan.hosts[b]} rail {rail}: {value:.3f} GB/s"
        )
    intra = pair_values(every, "intra")
    for (a, _, rail), value in sorted(intra.items()):
        lines.append(f"# within {plan.hosts[a]}: local ranks {rail} and its pair: {value:.3f} GB/s")
    if len(nodes) == 2:
        lines.append("# Note: two nodes cannot tell which of them is bad")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# 10. Main
# --------------------------------------------------------------------------------------------


def pause_if_asked(args: argparse.Namespace, record: RankRecord, phase: str) -> None:
    """--pause-before: sleep in `phase` (already recorded and armed) until the watchdog fires."""
    if (
        args.pause_before
        and args.pause_before[0] == phase
        and args.pause_before[1] in (None, args.rank)
    ):
        print(
            f"[{record.where}] paused before {phase} (--pause-before), pid {os.getpid()}",
            flush=True,
        )
        while True:
            time.sleep(1)


def new_record(args: argparse.Namespace, host: str) -> RankRecord:
    local_world = env_int("LOCAL_WORLD_SIZE") or 1
    node_rank = env_int("GROUP_RANK")  # torchrun's node rank
    if node_rank is None:
        node_rank = env_int("NODE_RANK")
    if node_rank is None:
        node_rank = node_of(args.rank, args.ranks_per_node)
    data = {
        "schema": SCHEMA,
        "host": host,
        "global_rank": args.rank,
        "local_rank": args.local_rank,
        "node_rank": node_rank,
        "world_size": args.world_size,
        "local_world_size": local_world,
        "device": None,
        "backend": None,
        "dtype": args.dtype,
        "pid": os.getpid(),
        "versions": versions(),
        "env": seen_environment(os.environ),
        "status": "running",
        "current_test": "init",
        "current_size": None,
        "test_index": 0,
        "test_count": len(args.tests),
        "missing_ranks": [],
        "started_at": now(),
        "finished_at": None,
        "tests": [],
    }
    return RankRecord(args.out_dir, data, args.verbose)


class Peers:
    """What the store tells about the other ranks: who checked in, what each is running."""

    def __init__(self, world_size: int, layout: list[int]):
        self.world_size, self.layout = world_size, layout
        self.store: dist.Store | None = None

    def missing(self) -> list[dict[str, Any]]:
        if self.store is None:
            return []
        absent = [r for r in range(self.world_size) if not self.store.check([f"ready/{r}"])]
        return describe_missing(self.store, absent, self.world_size, self.layout)

    def progress(self, rank: int, test: str) -> None:
        if self.store is not None:
            self.store.set(f"progress/{rank}", test)

    def describe(self) -> dict[str, Any]:
        """For the watchdog: the missing ranks and the test each other rank last started."""
        if self.store is None:
            return {}
        store = self.store
        running = {
            str(r): store.get(f"progress/{r}").decode()
            for r in range(self.world_size)
            if store.check([f"progress/{r}"])
        }
        return {"missing_ranks": self.missing(), "peers_running": running}


def checkin_phase(
    args: argparse.Namespace, record: RankRecord, peers: Peers, host: str
) -> dist.Store | None:
    """Make the store and check in; None for MPI (no store). Raises CheckinError."""
    if record.data["backend"] == "mpi":
        record.add(test_entry("checkin", "skipped", "the mpi backend has no store to check in to"))
        return None
    started = time.monotonic()
    raw = make_store(args.init_method, args.rank, args.world_size, args.timeout)
    peers.store = dist.PrefixStore("nccl_check", raw)
    value = checkin_value(host, record.data["node_rank"], args.local_rank)
    absent = check_in(peers.store, args.rank, args.world_size, value, args.timeout)
    if absent:
        described = describe_missing(peers.store, absent, args.world_size, peers.layout)
        with record.lock:
            record.data["missing_ranks"] = described
        names = ", ".join(
            str(m["rank"])
            + (
                f" (node {m['node_rank']}, {m['host']})"
                if m["host"]
                else f" (node {m['node_rank']})"
            )
            for m in described
        )
        raise CheckinError(
            f"rank(s) {names} did not check in within {args.timeout:g} s; "
            f"{args.world_size - len(absent)} of {args.world_size} arrived: start the missing "
            "ranks, or check that their hosts can reach the master address and port",
            {"missing_ranks": described, "duration_s": time.monotonic() - started},
        )
    record.add(
        test_entry(
            "checkin", "passed", "", {"world_size": args.world_size}, time.monotonic() - started
        )
    )
    return raw


class CheckinError(Exception):
    def __init__(self, message: str, details: dict[str, Any]):
        super().__init__(message)
        self.details = details


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    host = socket.gethostname()
    record = new_record(args, host)
    record.write()
    watch_signals(record)
    try:
        return run_rank(args, record, host)
    except Exception as exc:  # a bug or an unforeseen failure: still leave the record behind
        traceback.print_exc()
        abort(record, None, f"nccl_check stopped: {type(exc).__name__}: {first_line(exc)}", 1)
        raise  # not reached: abort() leaves the process


def run_rank(args: argparse.Namespace, record: RankRecord, host: str) -> int:
    """Device, check-in, process group, the tests, the summary."""
    peers = Peers(args.world_size, args.ranks_per_node)
    watchdog = Watchdog(record, peers.describe)
    device = open_device(args, record)
    if device is None or not join_group(args, record, peers, watchdog, device, host):
        return EXIT_FAILED
    tables, stopped_by = run_tests(args, record, peers, watchdog, device)

    # Every rank posts its verdict in the store; rank 0 prints them all.
    status = record.finish()
    watchdog.arm("summary", args.timeout + GRACE_S)
    verdicts = exchange_verdicts(args, record, peers, args.timeout)
    if args.rank == 0:
        print_summary(args, record, tables, verdicts)
    watchdog.disarm()
    if stopped_by is None:
        dist.destroy_process_group()
    return EXIT_OK if status == "passed" else EXIT_FAILED


def open_device(args: argparse.Namespace, record: RankRecord) -> torch.device | None:
    """The backend and this rank's device, in the record; None (recorded as init) when absent."""
    import_vendor_plugins()
    backend = choose_backend(args.backend, args.device)
    try:
        device = choose_device(args.device, backend, args.local_rank)
    except RuntimeError as exc:
        record.add(test_entry("init", "error", str(exc)))
        record.finish()
        return None
    with record.lock:
        record.data["device"], record.data["backend"] = str(device), backend
    if backend == "nccl":
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    return device


def join_group(
    args: argparse.Namespace,
    record: RankRecord,
    peers: Peers,
    watchdog: Watchdog,
    device: torch.device,
    host: str,
) -> bool:
    """Check in, then make the process group on the same store; False (recorded) on failure.

    Every rank writes ready/<rank> into the store before the process group exists, so a rank
    that never comes is named instead of a hang in init. A phase with its own deadline
    (check-in) reports at --timeout; the watchdog ends any phase at --timeout (+ GRACE_S for
    check-in), before the process group's own timeout (--timeout + GRACE_S).
    """
    record.start("checkin")
    watchdog.arm("checkin", args.timeout + GRACE_S)
    pause_if_asked(args, record, "checkin")
    try:
        raw_store = checkin_phase(args, record, peers, host)
    except CheckinError as exc:
        duration = exc.details.pop("duration_s")
        record.add(test_entry("checkin", "error", str(exc), exc.details, duration))
        record.finish()
        if args.rank == 0:  # rank 0 may serve the store: let the others read it before leaving
            time.sleep(min(GRACE_S / 2, args.timeout))
        return False
    except (RuntimeError, ValueError) as exc:  # store unreachable (DistStoreError: RuntimeError)
        message = f"cannot reach the store for {args.init_method}: {first_line(exc)}"
        record.add(test_entry("checkin", "error", message))
        record.finish()
        return False

    record.start("init")
    watchdog.arm("init", args.timeout)
    pause_if_asked(args, record, "init")
    pg_timeout = datetime.timedelta(seconds=args.timeout + GRACE_S)
    backend = record.data["backend"]
    entry = run_test(
        "init",
        lambda: init_group(backend, raw_store, args.rank, args.world_size, pg_timeout, device),
    )
    watchdog.disarm()
    record.add(entry)
    if entry["status"] != "passed":
        record.finish()
        return False
    return True


def run_tests(
    args: argparse.Namespace,
    record: RankRecord,
    peers: Peers,
    watchdog: Watchdog,
    device: torch.device,
) -> tuple[list[str], str | None]:
    """The tests, in order: (rank 0's bandwidth tables, the test after which the rest were not
    run). After an error the process group cannot be trusted: the rest are not run."""
    dtype, type_name = DTYPES[args.dtype]
    ctx = Context.make(args.rank, args.world_size, device, dtype, peers.store)
    max_bytes = args.max_bytes or parse_size("1M" if device.type == "cpu" else "1G")
    sizes = sweep_sizes(args.min_bytes, max(max_bytes, args.min_bytes), args.factor)
    stopped_by: str | None = None
    tables: list[str] = []
    for index, name in enumerate(args.tests, 1):
        if stopped_by is not None:
            record.add(
                test_entry(name, "error", f"not run: stopped after {stopped_by} could not run")
            )
            continue
        support = support_of(record.data["backend"], device.type, name, args.dtype)
        if support.state == "no":  # predicted: never called (see SUPPORT)
            record.add(test_entry(name, "skipped", support.reason, {"support": "no"}))
            continue
        record.start(name, index)
        peers.progress(args.rank, name)
        watchdog.arm(name, args.timeout)
        pause_if_asked(args, record, name)
        if name.startswith("bandwidth_"):
            collective = name.removeprefix("bandwidth_")
            sweep = Sweep(
                ctx,
                sizes,
                args.iters,
                args.warmup,
                type_name,
                args.thresholds[collective],
                lambda phase, size: (record.at_size(size), watchdog.arm(phase, args.timeout)),
            )
            entry = run_test(name, lambda c=collective, s=sweep: measure(s, c), support)
            if entry["bandwidth"]:
                backend = record.data["backend"]
                tables.append(
                    bandwidth_table(collective, entry["bandwidth"], args.world_size, backend)
                )
        else:
            entry = run_test(name, lambda n=name: CHECKS[n](ctx), support)
        watchdog.disarm()
        record.add(entry)
        if entry["status"] == "error":
            stopped_by = name
    tables += run_pairwise(
        args, record, ctx, lambda phase: watchdog.arm(phase, args.timeout), stopped_by
    )
    watchdog.disarm()
    return tables, stopped_by


def init_group(
    backend: str,
    store: dist.Store | None,
    rank: int,
    world_size: int,
    timeout: datetime.timedelta,
    device: torch.device,
) -> dict[str, Any]:
    dist.init_process_group(
        backend,
        store=store,
        rank=rank,
        world_size=world_size,
        timeout=timeout,
        device_id=device if device.type == "cuda" else None,  # binds NCCL to the rank's GPU
    )
    return {"backend": backend, "device": str(device), "timeout_s": timeout.total_seconds()}


def exchange_verdicts(
    args: argparse.Namespace, record: RankRecord, peers: Peers, timeout: float
) -> dict[int, dict[str, Any]] | None:
    """Post result/<rank>; on rank 0 collect every rank's (None without a store)."""
    store = peers.store
    if store is None:
        return None
    problems = [
        f"{t['name']}: {t['status']} - {t['message']}"
        for t in record.data["tests"]
        if t["status"] in ("failed", "error")
    ]
    verdict = {"host": record.data["host"], "status": record.data["status"], "problems": problems}
    store.set(f"result/{args.rank}", json.dumps(verdict))
    if args.rank != 0:
        return None
    verdicts: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    for r in range(args.world_size):
        while not store.check([f"result/{r}"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        if store.check([f"result/{r}"]):
            verdicts[r] = json.loads(store.get(f"result/{r}"))
    return verdicts


def print_summary(
    args: argparse.Namespace,
    record: RankRecord,
    tables: list[str],
    verdicts: dict[int, dict[str, Any]] | None,
) -> None:
    """Rank 0's compact report: the bandwidth tables, what was skipped, what went wrong where."""
    tests = record.data["tests"]
    counts = {
        s: sum(t["status"] == s for t in tests) for s in ("passed", "failed", "error", "skipped")
    }
    print(
        f"nccl_check: {args.world_size} ranks, backend {record.data['backend']}, device "
        f"{record.data['device']}, dtype {args.dtype}, torch {torch.__version__}"
    )
    for table in tables:
        print(table)
    for t in tests:
        if t["status"] == "skipped":
            print(f"  skipped {t['name']}: {t['message']}")
    verdicts = (
        verdicts if verdicts is not None else {0: {"status": record.data["status"], "problems": []}}
    )
    bad = {r: v for r, v in verdicts.items() if v["status"] != "passed"}
    for r, v in sorted(bad.items()):
        for problem in v["problems"]:
            print(f"  rank {r} on {v.get('host', record.data['host'])}: {problem}")
    silent = (
        [r for r in range(args.world_size) if r not in verdicts]
        if len(verdicts) > 1 or args.world_size == 1
        else []
    )
    if silent:
        print(f"  no result from rank(s) {', '.join(map(str, silent))} within {args.timeout:g} s")
    overall = "PASSED" if not bad and not silent else "FAILED"
    print(
        f"nccl_check: {overall} - {len(verdicts) - len(bad)} of {args.world_size} ranks passed; "
        f"rank 0: {counts['passed']} passed, {counts['failed']} failed, {counts['error']} error, "
        f"{counts['skipped']} skipped",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
