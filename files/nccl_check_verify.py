# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The correctness verifiers of files/nccl_check.py: closed-form inputs and expected values, the
comparison that names the source rank of a wrong element, and one verify_* per collective.

A leaf module of the rank script (torch and the standard library only; it never imports
nccl_check, which runs as __main__). Exactness and the source rule: docs/design.md, "Inside the
rank script".
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

CHECK_ELEMENTS = 1027  # elements per rank (per chunk) in correctness tests; odd on purpose
SMALL_WORLD = 16  # up to this many ranks, gather and scatter are checked from every root
BARRIER_LATE_S = 0.05  # how late the last rank enters each round of the barrier verifier


# --------------------------------------------------------------------------------------------
# 1. Inputs and expected values: closed forms a reader can check by hand
# --------------------------------------------------------------------------------------------
# Reductions: x_r[i] = base[i] + step * tag(r), tag(r) = r mod P, so SUM = n * base + step *
# sum_of_tags(n). Data movement: p_r[i] = base[(i + r) mod len(base)] + step * tag(r) names its
# source rank. PRODUCT, MIN, MAX: owner_input(). P and the base: exact_pattern() (docs/design.md,
# "Exactness of the inputs").

Floats = Sequence[float]


def exact_integer_limit(dtype: torch.dtype) -> int:
    """Largest L such that every integer 0..L is exactly representable in dtype."""
    if dtype.is_floating_point:
        return round(2 / torch.finfo(dtype).eps)  # 2 ** (mantissa bits + 1)
    return int(torch.iinfo(dtype).max)


def exact_pattern(world_size: int, dtype: torch.dtype) -> tuple[int, int] | None:
    """(A, P): base[i] = 1 + i mod A, tag(r) = r mod P, n times the largest input A + P - 1 within
    exact_integer_limit(dtype); None when even all-ones would overflow (use a wider --dtype)."""
    budget = exact_integer_limit(dtype) // world_size
    if budget < 1:
        return None
    base_period = min(8, budget)
    return base_period, max(1, min(world_size, budget - base_period + 1))


def base_pattern(count: int, base_period: int) -> list[int]:
    return [1 + i % base_period for i in range(count)]


def sum_of_tags(world_size: int, period: int) -> int:
    """tag(0) + ... + tag(n-1): q full cycles of 0..P-1, then 0..rem-1."""
    full, rem = divmod(world_size, period)
    return full * period * (period - 1) // 2 + rem * (rem - 1) // 2


def reduction_input(base: Floats, step: int, rank: int, period: int) -> list[float]:
    return [b + step * (rank % period) for b in base]


def expected_sum(base: Floats, step: int, n: int, period: int) -> list[float]:
    return [n * b + step * sum_of_tags(n, period) for b in base]


def expected_reduce_scatter(base: Floats, step: int, n: int, period: int, rank: int) -> list[float]:
    """Chunk `rank` (of n equal chunks) of the SUM."""
    chunk = len(base) // n
    return expected_sum(base, step, n, period)[rank * chunk : (rank + 1) * chunk]


def all_to_all_chunk(base: Floats, step: int, src: int, dst: int, period: int) -> list[float]:
    """What src sends to dst: the payload of src rotated once more by dst."""
    width = len(base)
    return [base[(i + src + dst) % width] + step * (src % period) for i in range(width)]


def payload(base: Floats, step: int, rank: int, period: int) -> list[float]:
    """What rank r sends: every rank's result of a broadcast from r, r's chunk of a scatter."""
    return all_to_all_chunk(base, step, rank, 0, period)


expected_scatter = payload


def expected_all_gather(base: Floats, step: int, n: int, period: int) -> list[float]:
    """Chunk j is rank j's payload (also gather's result on the root)."""
    return [v for j in range(n) for v in payload(base, step, j, period)]


def expected_all_to_all(base: Floats, step: int, n: int, period: int, rank: int) -> list[float]:
    return [v for s in range(n) for v in all_to_all_chunk(base, step, s, rank, period)]


def expected_send_recv(base: Floats, step: int, n: int, period: int, rank: int) -> list[float]:
    """Ring: rank r receives the payload of rank r-1."""
    return payload(base, step, (rank - 1) % n, period)


def owner_input(count: int, rank: int, world_size: int) -> list[int]:
    """PRODUCT/MIN/MAX: element i is 2 on rank i mod n (its owner), h(i) = 3 on even and 5 on odd
    elements on rank i+1 mod n, 1 on every other rank."""

    def value(i: int) -> int:
        if rank == i % world_size:
            return 2
        return (3 if i % 2 == 0 else 5) if rank == (i + 1) % world_size else 1

    return [value(i) for i in range(count)]


def expected_owner(op: str, count: int, world_size: int) -> list[int]:
    """PRODUCT = 2h, MAX = h, MIN = 2 with 2 ranks, else 1 (one rank: 2). SUM would be h + n, AVG
    (h + n) / n: PRODUCT meets SUM only at n = h, never for both h: every two reductions differ."""
    if world_size == 1:
        return [2] * count
    high = [3 if i % 2 == 0 else 5 for i in range(count)]
    if op == "min":
        return [2 if world_size == 2 else 1] * count
    return [2 * h for h in high] if op == "product" else high


# --------------------------------------------------------------------------------------------
# 2. Comparing, and naming the source rank of a wrong element
# --------------------------------------------------------------------------------------------

Source = Callable[[int, float], str]  # (index, value found) -> where the value came from
ByRank = Callable[[int], Floats]  # rank -> its own input (or payload)
REDUCTIONS = dict(sum=sum, product=math.prod, min=min, max=max, avg=lambda v: sum(v) / len(v))


def number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def mismatch(got: torch.Tensor, expected: Floats, source: Source, ulps: int = 0) -> Details | None:
    """First wrong index (within `ulps` for floats), expected vs got, and the suspect source rank;
    None when equal."""
    want = torch.tensor(expected, dtype=torch.float64)
    got64 = got.detach().cpu().double().flatten()
    if ulps and got.dtype.is_floating_point:
        wrong = (got64 - want).abs() > ulps * torch.finfo(got.dtype).eps * want.abs()
    else:
        wrong = got64 != want
    wrong |= torch.isnan(got64)
    if not wrong.any():
        return None
    i = int(wrong.nonzero()[0])
    found = number(float(got64[i]))
    return {
        "first_wrong_index": i,
        "expected": number(float(want[i])),
        "got": found,
        "wrong": int(wrong.sum()),
        "elements": got.numel(),
        "source": source(i, float(found)),
    }


def mismatch_message(details: Details) -> str:
    return (
        f"{details['wrong']} of {details['elements']} elements wrong; first at index "
        f"{details['first_wrong_index']}: expected {details['expected']}, got {details['got']} "
        f"({details['source']})"
    )


def ranks_holding(values: Floats, value: float, but: int = -1) -> str:
    return " or ".join(str(r) for r, v in enumerate(values) if v == value and r != but)


def source_rule(
    op: str, inputs: ByRank, n: int, want: Floats = (), width: int = 0, src: int = -1
) -> Source:
    """One rule for every verifier: which rank's own input (inputs(rank), by the closed forms of
    part 1) gives the value found. "copy": element i comes from rank `src` (-1: i // width),
    is the value another's? "sum": is it off by one rank's input? "avg": the SUM it divides.
    PRODUCT/MIN/MAX: which other reduction of the inputs gives it?"""

    def explain(index: int, got: float) -> str:
        values = [inputs(r)[index % width if width else index] for r in range(n)]
        if op == "copy":
            home = index // width if src < 0 else src
            others = ranks_holding(values, got, but=home)
            tail = f"; the value is rank {others}'s" if others else ""
            return f"this element comes from rank {home}{tail}"
        if op == "avg":
            return f"AVG = SUM / n = {number(sum(values))} / {n}; compare all_reduce_sum"
        if op == "sum":
            delta = got - want[index]
            for value, what in ((-delta, "is missing"), (delta, "was added twice")):
                if ranks := ranks_holding(values, value):
                    return f"the contribution of rank {ranks} {what}"
            return f"off by {number(delta)}: not one rank's contribution; data corrupted in transit"
        applied = [k.upper() for k, f in REDUCTIONS.items() if k != op and f(values) == got]
        if applied:
            return (
                f"{number(got)} is the {' or '.join(applied)} of the inputs, not the {op.upper()}"
            )
        return (
            f"ranks {index % n} and {(index + 1) % n} hold 2 and {3 if index % 2 == 0 else 5} "
            "here, every other rank 1; a contribution is wrong or missing"
        )

    return explain


# --------------------------------------------------------------------------------------------
# 3. One verifier per collective: closed-form expected values
# --------------------------------------------------------------------------------------------

Base = Sequence[float] | None  # a verifier's own inputs (part 1); None: the defaults
Step = int | None
Details = dict[str, Any]  # what a passed verifier records


class Skip(Exception):
    """The test does not apply here (the reason is the message)."""


class Fail(Exception):
    """The collective ran and the answer is wrong."""

    def __init__(self, message: str, details: Details):
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
        cls, rank: int, world_size: int, device: torch.device, dtype: torch.dtype, store: Any = None
    ) -> Context:
        base_period, period = exact_pattern(world_size, dtype) or (1, 1)
        count = max(CHECK_ELEMENTS, world_size)
        return cls(rank, world_size, device, dtype, count, base_period, period, store)

    def tensor(self, values: Floats) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.float64).to(self.dtype).to(self.device)

    def empty(self, count: int) -> torch.Tensor:
        """Zeros: never a valid result, as every input element is 1 or more."""
        return torch.zeros(count, dtype=self.dtype, device=self.device)

    def inputs(self, base: Base, step: Step, count: int = 0) -> tuple[list[float], int]:
        """The test's own (base, step), or the defaults that are exact for this dtype and world."""
        if exact_pattern(self.world_size, self.dtype) is None and base is None:
            raise Skip(
                f"{self.world_size} ranks exceed the exact integer range of {self.dtype} "
                f"({exact_integer_limit(self.dtype)}): run this test with --dtype float32"
            )
        if base is None:
            base = base_pattern(count or self.count, self.base_period)
        return list(base), 1 if step is None else step

    def payloads(self, base: Floats, step: int) -> Callable[[int], list[float]]:
        return lambda rank: payload(base, step, rank, self.period)

    def contributions(self, base: Floats, step: int) -> Callable[[int], list[float]]:
        return lambda rank: reduction_input(base, step, rank, self.period)

    def all_gather_json(self, mine: Any) -> list[Any]:
        """Every rank's `mine` (JSON: tuples come back as lists), in rank order. The bytes travel
        in uint8 tensors on the device, a length exchange first: all_gather_object would pickle
        through NumPy, which a node need not have (torch and the standard library only)."""
        sent = torch.frombuffer(bytearray(json.dumps(mine).encode()), dtype=torch.uint8)
        length = torch.tensor([sent.numel()], dtype=torch.int64, device=self.device)
        lengths = [torch.zeros_like(length) for _ in range(self.world_size)]
        dist.all_gather(lengths, length)
        sizes = [int(n.item()) for n in lengths]
        padded = torch.zeros(max(sizes), dtype=torch.uint8, device=self.device)
        padded[: sent.numel()] = sent.to(self.device)
        parts = [torch.empty_like(padded) for _ in range(self.world_size)]
        dist.all_gather(parts, padded)
        return [json.loads(bytes(p[:n].cpu().tolist())) for p, n in zip(parts, sizes, strict=True)]

    def gather_roots(self) -> range | tuple[int, int]:
        """gather/scatter cost n messages per root: every root in small worlds, else the ends."""
        n = self.world_size
        return range(n) if n <= SMALL_WORLD else (0, n - 1)


def verify(
    got: torch.Tensor, want: Floats, source: Source, case: str = "", ulps: int = 0
) -> Details:
    """Raise Fail on a mismatch; return the details of a correct result."""
    details = mismatch(got, want, source, ulps)
    if details is not None:
        if case:
            details["case"] = case
        raise Fail((f"{case}: " if case else "") + mismatch_message(details), details)
    head = [number(float(v)) for v in got.detach().cpu().flatten()[:8]]
    return {"elements": got.numel(), "got_head": head}


# torch 2.13 renamed all_gather_into_tensor/reduce_scatter_tensor; older torch has the old names.
# Every backend gets the tensor API (docs/design.md, "Bandwidth notes").
all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
reduce_scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
REDUCE_OPS = {op: getattr(dist.ReduceOp, op.upper()) for op in REDUCTIONS}


def verify_all_reduce(ctx: Context, op: str, base: Base = None, step: Step = None) -> Details:
    """all_reduce: SUM/AVG of the affine input; PRODUCT/MIN/MAX of the owner input."""
    n = ctx.world_size
    if op in ("product", "min", "max"):
        count = len(base) if base is not None else ctx.count
        inputs = functools.partial(owner_input, count, world_size=n)
        want = expected_owner(op, count, n)
    else:
        base, step = ctx.inputs(base, step)
        inputs, want = ctx.contributions(base, step), expected_sum(base, step, n, ctx.period)
        if op == "avg":  # AVG = SUM / n; an integer AVG truncates, as NCCL's does
            trunc = not ctx.dtype.is_floating_point
            want = [float(math.trunc(s / n)) if trunc else s / n for s in want]
    tensor = ctx.tensor(inputs(ctx.rank))
    dist.all_reduce(tensor, op=REDUCE_OPS[op])
    return verify(tensor, want, source_rule(op, inputs, n, want), ulps=int(op == "avg"))


def verify_broadcast(ctx: Context, base: Base = None, step: Step = None) -> Details:
    """broadcast from every root: every rank ends with payload(root)."""
    base, step = ctx.inputs(base, step)
    sent_by, n, r = ctx.payloads(base, step), ctx.world_size, ctx.rank
    details: Details = {"roots": n}
    for root in range(n):
        tensor = ctx.tensor(sent_by(r)) if r == root else ctx.empty(len(base))
        dist.broadcast(tensor, src=root)
        source = source_rule("copy", sent_by, n, src=root)
        details.update(verify(tensor, sent_by(root), source, f"root {root}"))
    return details


def verify_reduce(ctx: Context, base: Base = None, step: Step = None) -> Details:
    """reduce (SUM) to every root: the root holds n * base + step * sum_of_tags(n)."""
    base, step = ctx.inputs(base, step)
    inputs, n = ctx.contributions(base, step), ctx.world_size
    want = expected_sum(base, step, n, ctx.period)
    details: Details = {"roots": n}
    for root in range(n):
        tensor = ctx.tensor(inputs(ctx.rank))
        dist.reduce(tensor, dst=root, op=dist.ReduceOp.SUM)
        if ctx.rank == root:  # elsewhere the buffer's content is unspecified
            source = source_rule("sum", inputs, n, want)
            details.update(verify(tensor, want, source, f"root {root}"))
    return details


def verify_all_gather(ctx: Context, base: Base = None, step: Step = None) -> Details:
    """all_gather: chunk j of the result is payload(j)."""
    base, step = ctx.inputs(base, step)
    sent_by, n, width = ctx.payloads(base, step), ctx.world_size, len(base)
    out = ctx.empty(n * width)
    all_gather_single(out, ctx.tensor(sent_by(ctx.rank)))
    want = expected_all_gather(base, step, n, ctx.period)
    return verify(out, want, source_rule("copy", sent_by, n, width=width))


def verify_gather(ctx: Context, base: Base = None, step: Step = None) -> Details:
    """gather to every root (see Context.gather_roots): on the root, chunk j is payload(j)."""
    base, step = ctx.inputs(base, step)
    sent_by, n, r, width = ctx.payloads(base, step), ctx.world_size, ctx.rank, len(base)
    want = expected_all_gather(base, step, n, ctx.period)
    source = source_rule("copy", sent_by, n, width=width)
    roots = ctx.gather_roots()
    details: Details = {"roots": len(roots)}
    for root in roots:
        chunks = [ctx.empty(width) for _ in range(n)] if r == root else None
        dist.gather(ctx.tensor(sent_by(r)), chunks, dst=root)
        if chunks is not None:
            details.update(verify(torch.cat(chunks), want, source, f"root {root}"))
    return details


def verify_scatter(ctx: Context, base: Base = None, step: Step = None) -> Details:
    """scatter from every root (see Context.gather_roots): rank d receives payload(d); a wrong
    value that is another rank's payload was meant for that rank."""
    base, step = ctx.inputs(base, step)
    sent_to, n, r = ctx.payloads(base, step), ctx.world_size, ctx.rank
    want = expected_scatter(base, step, r, ctx.period)
    roots = ctx.gather_roots()
    details: Details = {"roots": len(roots)}
    for root in roots:
        chunks = [ctx.tensor(sent_to(d)) for d in range(n)] if r == root else None
        out = ctx.empty(len(base))
        dist.scatter(out, chunks, src=root)
        source = source_rule("copy", sent_to, n, src=root)
        details.update(verify(out, want, source, f"root {root}"))
    return details


def verify_reduce_scatter(ctx: Context, base: Base = None, step: Step = None) -> Details:
    """reduce_scatter (SUM): rank r gets chunk r of n * base + step * sum_of_tags(n)."""
    n, r = ctx.world_size, ctx.rank
    base, step = ctx.inputs(base, step, n * ctx.count)
    if len(base) % n:
        raise ValueError(f"reduce_scatter input of {len(base)} elements is not {n} equal chunks")
    width = len(base) // n
    out = ctx.empty(width)
    reduce_scatter_single(out, ctx.tensor(reduction_input(base, step, r, ctx.period)))
    want = expected_reduce_scatter(base, step, n, ctx.period, r)
    mine = ctx.contributions(base[r * width : (r + 1) * width], step)
    return verify(out, want, source_rule("sum", mine, n, want))


def verify_all_to_all(ctx: Context, base: Base = None, step: Step = None) -> Details:
    """all_to_all: chunk s of the result on rank d is all_to_all_chunk(s, d)."""
    base, step = ctx.inputs(base, step)
    n, r, width = ctx.world_size, ctx.rank, len(base)
    sent = [v for d in range(n) for v in all_to_all_chunk(base, step, r, d, ctx.period)]
    out = ctx.empty(n * width)
    dist.all_to_all_single(out, ctx.tensor(sent))
    want = expected_all_to_all(base, step, n, ctx.period, r)
    sent_to_me = lambda s: all_to_all_chunk(base, step, s, r, ctx.period)  # noqa: E731
    return verify(out, want, source_rule("copy", sent_to_me, n, width=width))


def ring_exchange(send: torch.Tensor, recv: torch.Tensor, rank: int, world_size: int) -> None:
    """Send to rank+1 and receive from rank-1 at once, the receive posted first (docs/design.md,
    "Bandwidth notes": gloo holds a late announcement behind the whole payload)."""
    left, right = (rank - 1) % world_size, (rank + 1) % world_size
    ops = [dist.P2POp(dist.irecv, recv, left), dist.P2POp(dist.isend, send, right)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()


def verify_send_recv(ctx: Context, base: Base = None, step: Step = None) -> Details:
    """send/recv ring: rank r receives payload(r-1), so every neighbour link carries data."""
    n, r = ctx.world_size, ctx.rank
    if n < 2:
        raise Skip("send/recv needs at least 2 ranks")
    base, step = ctx.inputs(base, step)
    sent_by, left = ctx.payloads(base, step), (r - 1) % n
    out = ctx.empty(len(base))
    ring_exchange(ctx.tensor(sent_by(r)), out, r, n)
    want = expected_send_recv(base, step, n, ctx.period, r)
    details = verify(out, want, source_rule("copy", sent_by, n, src=left))
    return {**details, "from": left, "to": (r + 1) % n}


def verify_barrier(ctx: Context) -> Details:
    """Nobody leaves before the last rank arrived, counted in the store (no clocks compared): in
    round k (one per Context.gather_roots) the late rank waits until the n - 1 others counted
    their arrival in barrier/<k>, waits BARRIER_LATE_S more, counts itself and enters; a rank
    that reads a count below n once it left left early."""
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
        if (arrived := store.add(key, 0)) < n:
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
