# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The figures of report.html, drawn with matplotlib on the control machine as inline SVG.

busbw against message size per collective (log2 size axis, nccl-tests' sizes; the median over
ranks with the band from the slowest to the fastest rank; the link speed and the required
threshold as lines where they are known), and the node x node pairwise matrix as a heatmap.
The series are computed by pure functions; only the *_svg functions import matplotlib's figure
and SVG canvas (never pyplot: no figure manager, no GUI backend to choose, a third less to import
on the report's path). A busbw figure is laid out with fixed margins and drawn once; the heatmap,
whose size follows the host count, is cropped to its content (bbox_inches="tight" draws twice).
"""

from __future__ import annotations

import io
import re
import statistics
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .run_data import RunData


def matplotlib_import_error() -> ImportError | None:
    """None when matplotlib imports, else why not (report.html then says so instead of drawing).

    matplotlib is imported here, on the first figure, not with this module: a report with
    nothing to draw (a run stopped before its ranks, a check with no bandwidth test) never pays
    its import (0.3-0.6 CPU s)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        return exc
    return None


_SVG_PROLOGUE = re.compile(r"^.*?(?=<svg\b)", re.S)


def busbw_series(run: RunData) -> dict[str, dict[int, list[tuple[int, float]]]]:
    """{collective: {size_bytes: [(rank, busbw GB/s)]}} over every rank that measured it."""
    series: dict[str, dict[int, list[tuple[int, float]]]] = {}
    for host in run.hosts:
        for rank, doc in sorted(host.ranks.items()):
            for test in doc.get("tests") or []:
                rows = test.get("bandwidth") or (test.get("details") or {}).get("bandwidth") or []
                for row in rows:
                    if not isinstance(row, dict) or row.get("busbw_gbps") is None:
                        continue
                    name = str(test.get("name")).removeprefix("bandwidth_")
                    per_size = series.setdefault(name, {})
                    per_size.setdefault(int(row["size_bytes"]), []).append(
                        (rank, float(row["busbw_gbps"]))
                    )
    return series


def thresholds(run: RunData) -> dict[str, float]:
    """{collective: required busbw GB/s} as the ranks recorded it (--min-busbw, --min-busbw-for)."""
    found: dict[str, float] = {}
    for host in run.hosts:
        for doc in host.ranks.values():
            for test in doc.get("tests") or []:
                value = (test.get("details") or {}).get("threshold_gbps")
                if value is not None:
                    found[str(test.get("name")).removeprefix("bandwidth_")] = float(value)
    return found


def human_size(size: float) -> str:
    for unit in ("B", "K", "M", "G"):
        if size < 1024 or unit == "G":
            return f"{size:g}{unit if unit != 'B' else ''}"
        size /= 1024
    return str(size)


def _plain(text: str) -> str:
    """A label matplotlib draws as written (no $...$ mathematics)."""
    return text.replace("$", r"\$")


def _figure(width: float, height: float) -> Any:
    """A matplotlib Figure on an SVG canvas (no pyplot)."""
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasSVG(fig)
    return fig


def _to_svg(fig: Any, salt: str, tight: bool = False) -> str:
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        fig.savefig(buffer, format="svg", bbox_inches="tight" if tight else None)
    # Inline in HTML: no XML declaration or DOCTYPE before <svg>.
    return _SVG_PROLOGUE.sub("", buffer.getvalue(), count=1)


def busbw_svg(
    collective: str,
    per_size: dict[int, list[tuple[int, float]]],
    link_gbps: float | None = None,
    threshold_gbps: float | None = None,
) -> str:
    """One collective: busbw (GB/s) against size on a log2 axis, with expected lines."""
    sizes = sorted(per_size)
    values = [[v for _, v in per_size[s]] for s in sizes]
    median = [statistics.median(v) for v in values]
    fig = _figure(6.4, 3.4)
    # Room for the y tick labels and label, the title, the 45-degree size labels and the x label.
    fig.subplots_adjust(left=0.11, right=0.98, top=0.9, bottom=0.25)
    ax = fig.add_subplot()
    ax.fill_between(
        sizes,
        [min(v) for v in values],
        [max(v) for v in values],
        alpha=0.25,
        color="#1f77b4",
        label="slowest to fastest rank",
    )
    ax.plot(sizes, median, marker="o", color="#1f77b4", label="median over ranks")
    if link_gbps:
        ax.axhline(link_gbps, color="#2ca02c", linestyle="--", label=f"link {link_gbps:g} GB/s")
    if threshold_gbps is not None:
        ax.axhline(
            threshold_gbps, color="#d62728", linestyle=":", label=f"required {threshold_gbps:g}"
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([human_size(s) for s in sizes], rotation=45, fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(_plain(collective))
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return _to_svg(fig, f"busbw-{collective}")


def heatmap_svg(hosts: list[str], matrix: list[list[float | None]], unit: str) -> str:
    """The node x node matrix (row = from, column = to); empty cells were not measured."""
    import numpy

    data = numpy.array([[numpy.nan if v is None else float(v) for v in row] for row in matrix])
    size = max(3.0, 0.6 * len(hosts) + 2)
    fig = _figure(size + 1.5, size)
    ax = fig.add_subplot()
    image = ax.imshow(data, cmap="viridis")
    labels = [_plain(h) for h in hosts]
    ax.set_xticks(range(len(hosts)), labels=labels, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(hosts)), labels=labels, fontsize=8)
    if len(hosts) <= 16:
        for i, row in enumerate(matrix):
            for j, value in enumerate(row):
                if value is not None:
                    ax.text(j, i, f"{value:.3g}", ha="center", va="center", color="w", fontsize=7)
    fig.colorbar(image, ax=ax, label=_plain(unit))
    ax.set_xlabel("to")
    ax.set_ylabel("from")
    return _to_svg(fig, "pairwise", tight=True)
