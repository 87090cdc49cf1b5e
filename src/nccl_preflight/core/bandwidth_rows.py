# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A test's bandwidth rows as the report holds them: one tuple a row, in nccl-tests' columns.

A rank's result (rank-<R>.json, docs/design.md) holds a row per message size and collective: 77
with the default check, 630,000 at 8,192 ranks. As the dicts json.loads makes they were two thirds
of the report step's memory (issue 37); src/nccl_preflight/core/run_data.py keeps them compact
(``compact``) as it reads each rank. Whoever reads a row as a dict still gets one
(BandwidthRows is a sequence of dicts, made on access); the report's own readers of every rank
(judged_run.bandwidth_table, plots.busbw_series, bandwidth_expectation.collective_rows)
read the columns (``size_values``, ``BandwidthRows.columns``).
Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

# What files/nccl_check.py writes in every row (``bandwidth`` of a test), in this order.
COLUMNS = (
    "size_bytes",
    "count",
    "type",
    "redop",
    "root",
    "time_us",
    "algbw_gbps",
    "busbw_gbps",
    "rank_time_us",
    "rank_busbw_gbps",
    "wrong",
)
INDEX = {key: i for i, key in enumerate(COLUMNS)}
_SIZE, _BUSBW = INDEX["size_bytes"], INDEX["busbw_gbps"]
_values = itemgetter(*COLUMNS)
_WORD_COLUMNS = (INDEX["type"], INDEX["redop"])  # the same word in every row of a test
_WORDS: dict[str, str] = {}  # every rank writes the same few words (float, sum): held once


# What the report reads of a passed test's rows (its busbw by size: the tables, the plots, the
# expectations); a failed test's hint reads every column (hints.is_wrong_data, bandwidth_hint).
READ = ("size_bytes", "busbw_gbps", "rank_busbw_gbps")
_READ_AT = tuple(INDEX[key] for key in READ)


class BandwidthRows(Sequence):
    """A test's rows as columns (a tuple of values per COLUMNS key, a value per row; None for a
    column not held: ``names`` are the held ones); read as a sequence, each row is a new dict
    of the held columns."""

    __slots__ = ("columns", "names")

    def __init__(
        self, columns: tuple[tuple[Any, ...] | None, ...], names: tuple[str, ...] = COLUMNS
    ):
        self.columns = columns
        self.names = names

    def __len__(self) -> int:
        return len(self.columns[_SIZE] or ())

    def rows(self) -> Iterator[tuple[Any, ...]]:
        """Each row's values, in the order of ``names``."""
        held = [self.columns[INDEX[name]] or () for name in self.names]
        return zip(*held, strict=True)

    def __getitem__(self, index: Any) -> Any:
        rows = list(self.rows())[index]
        if isinstance(index, slice):
            return [dict(zip(self.names, row, strict=True)) for row in rows]
        return dict(zip(self.names, rows, strict=True))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (dict(zip(self.names, row, strict=True)) for row in self.rows())

    def __repr__(self) -> str:
        return f"BandwidthRows({len(self)} rows)"


def compact(rows: Any, lean: bool = False) -> Any:
    """``rows`` (a test's ``bandwidth`` as read) as BandwidthRows when every row is a dict of
    exactly COLUMNS, as files/nccl_check.py writes them; anything else as it is. Whole columns
    at a time (8,192 ranks x 7 tests), a word the same in every row held once. ``lean`` (a
    passed test's rows): only the columns the report reads of it (READ); the rank's
    rank-<R>.json keeps every one, and junit/rank-<R>.xml names it."""
    if not isinstance(rows, list) or not rows:
        return rows
    try:
        if set(map(type, rows)) != {dict} or set(map(len, rows)) != {len(COLUMNS)}:
            return rows
        columns = list(zip(*map(_values, rows), strict=True))
    except (KeyError, TypeError):  # a key missing, a row not a dict
        return rows
    if lean:  # the same one pass over the rows (as cheap as three columns' own), three kept
        held: list[Any] = [None] * len(COLUMNS)
        for at in _READ_AT:
            held[at] = columns[at]
        return BandwidthRows(tuple(held), READ)
    for at in _WORD_COLUMNS:
        column = columns[at]
        first = column[0]
        if isinstance(first, str) and column.count(first) == len(column):
            columns[at] = (_WORDS.setdefault(first, first),) * len(column)
    return BandwidthRows(tuple(columns))


def size_values(rows: Any, prefer: str | None = None) -> list[tuple[Any, Any]]:
    """(size_bytes, busbw_gbps) of every row with both; with ``prefer`` (rank_busbw_gbps) that
    column's value where the row has the key, as ``row.get(prefer, row["busbw_gbps"])``."""
    if isinstance(rows, BandwidthRows):
        size, busbw = rows.columns[INDEX["size_bytes"]], rows.columns[INDEX["busbw_gbps"]]
        wanted = rows.columns[INDEX[prefer]] if prefer else busbw
        if None not in size and None not in busbw:
            return list(zip(size, wanted, strict=True))
        return [
            (s, v)
            for s, b, v in zip(size, busbw, wanted, strict=True)
            if s is not None and b is not None
        ]
    found = []
    for row in rows or []:
        if not isinstance(row, dict):
            continue
        busbw, size = row.get("busbw_gbps"), row.get("size_bytes")
        if busbw is None or size is None:
            continue
        found.append((size, row.get(prefer, busbw) if prefer else busbw))
    return found


class _BySize:
    """One test's values over ranks: the ranks whose sizes are the first rank's, a column of
    values each (transposed at the end: one tuple per size), and the others value by value."""

    __slots__ = ("columns", "others", "ranks", "sizes")

    def __init__(self) -> None:
        self.sizes: tuple[Any, ...] | None = None
        self.ranks: list[int] = []
        self.columns: list[tuple[Any, ...]] = []
        self.others: dict[int, list[tuple[int, Any]]] = {}

    def add(self, rank: int, rows: Any, prefer: str | None) -> None:
        if rows.__class__ is BandwidthRows:
            columns = rows.columns
            size, busbw = columns[_SIZE], columns[_BUSBW]
            if None not in size and None not in busbw:
                if self.sizes is None:
                    self.sizes = size
                if size == self.sizes:
                    self.ranks.append(rank)
                    self.columns.append(columns[INDEX[prefer]] if prefer else busbw)
                    return
        for size_bytes, value in size_values(rows, prefer):
            self.others.setdefault(int(size_bytes), []).append((rank, value))

    def result(self) -> dict[int, tuple[list[int], list[Any]]]:
        """{size: (ranks, values)}; the sizes of the first rank's share one list of ranks
        when no rank had other sizes (every reader only reads them)."""
        found: dict[int, tuple[list[int], list[Any]]] = {}
        if self.sizes is not None:
            ranks = self.ranks if not self.others else None
            for size, values in zip(self.sizes, zip(*self.columns, strict=True), strict=True):
                found[int(size)] = (ranks or list(self.ranks), list(values))
        for size, pairs in self.others.items():
            ranks, values = found.setdefault(size, ([], []))
            ranks += [rank for rank, _ in pairs]
            values += [value for _, value in pairs]
        return found


ByName = dict[str, dict[int, tuple[list[int], list[Any]]]]


def _add(table: dict[str, _BySize], name: str, rank: int, rows: Any, prefer: str | None) -> None:
    acc = table.get(name)
    if acc is None:
        acc = table[name] = _BySize()
    acc.add(rank, rows, prefer)


def _results(table: dict[str, _BySize]) -> ByName:
    found = {name: acc.result() for name, acc in table.items()}
    return {name: sizes for name, sizes in found.items() if sizes}


def by_size(ranked: Any, prefer: str | None = None, details: bool = False) -> ByName:
    """{test name: {size_bytes: (ranks, values)}} of every row with a size and a busbw_gbps,
    over ``ranked`` ((rank, rank result) pairs, in the order given); the values busbw_gbps or,
    with ``prefer``, as size_values; ``details``: a test without rows of its own may have them
    in its details (a failed sweep). One pass, a rank's test at a time (8,192 ranks)."""
    table: dict[str, _BySize] = {}
    for rank, doc in ranked:
        for test in doc.get("tests") or []:
            rows = test.get("bandwidth")
            if rows.__class__ is not BandwidthRows:  # held rows are never empty (compact)
                if details and not rows:
                    rows = (test.get("details") or {}).get("bandwidth")
                if not rows:
                    continue
            _add(table, str(test.get("name")), rank, rows, prefer)
    return _results(table)


@dataclass(frozen=True)
class RunBandwidth:
    """Every rank's bandwidth rows of a run, read in one pass (judged_run.judge_run): what the
    report's readers of every rank read (issue 37: a pass each was 8,192 ranks x 24 tests)."""

    busbw: ByName  # by_size(ranked): bandwidth_expectation.collective_rows
    rank_busbw: ByName  # by_size(ranked, RANK_BUSBW): judged_run.bandwidth_table
    measured: ByName  # by_size(ranked, details=True): plots.busbw_series
    thresholds: dict[str, float]  # plots.thresholds: {collective: the required busbw}


RANK_BUSBW = "rank_busbw_gbps"


def run_bandwidth(ranked: Any) -> RunBandwidth:
    """RunBandwidth of ``ranked`` ((rank, rank result) pairs, in the order given): by_size's
    three readings and the thresholds the ranks recorded, in one pass. ``measured`` is
    ``busbw``'s rows read again unless a test has rows in its details only (a failed sweep):
    then the third reading is made on its own (8,192 ranks x 7 tests: one add fewer a test)."""
    ranked = list(ranked)  # read twice where a test has rows in its details only
    busbw: dict[str, _BySize] = {}
    rank_busbw: dict[str, _BySize] = {}
    details_only = False  # a test with rows in its details only (measured: by_size's pass)
    required: dict[str, float] = {}
    for rank, doc in ranked:
        for test in doc.get("tests") or []:
            rows = test.get("bandwidth")
            details = test.get("details")
            if details.__class__ is dict and details:
                value = details.get("threshold_gbps")
                if value is not None:
                    required[str(test.get("name")).removeprefix("bandwidth_")] = float(value)
            else:
                details = None  # 24 tests a rank, most without details: nothing more to read
            if rows.__class__ is BandwidthRows or rows:
                name = str(test.get("name"))
                _add(busbw, name, rank, rows, None)
                _add(rank_busbw, name, rank, rows, RANK_BUSBW)
            elif details is not None and details.get("bandwidth"):
                details_only = True
    # Every row a test's own: measured is busbw's reading (its readers only read it).
    read = _results(busbw)
    measured = _measured(ranked) if details_only else read
    return RunBandwidth(read, _results(rank_busbw), measured, required)


def _measured(ranked: list[tuple[int, Any]]) -> ByName:
    """run_bandwidth's ``measured`` where a test has rows in its details only: every test's
    own rows, else its details' (a failed sweep)."""
    table: dict[str, _BySize] = {}
    for rank, doc in ranked:
        for test in doc.get("tests") or []:
            rows = test.get("bandwidth")
            if rows.__class__ is not BandwidthRows and not rows:
                details = test.get("details")
                rows = details.get("bandwidth") if details.__class__ is dict else None
                if not rows:
                    continue
            _add(table, str(test.get("name")), rank, rows, None)
    return _results(table)
