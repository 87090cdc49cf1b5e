# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The figures of report.html, drawn on the control machine as inline SVG.

busbw against message size per collective (log2 size axis, nccl-tests' sizes; the median over
ranks with the band from the slowest to the fastest rank; the link speed and the required
threshold as lines where they are known), and the node x node pairwise matrix as a heatmap.
The series are computed by pure functions. A busbw figure is SVG written here with the standard
library (every text escaped): matplotlib's import and seven figures were 0.8-1.2 CPU s of every
report build. Only the heatmap imports matplotlib's figure and SVG canvas (never pyplot: no
figure manager, no GUI backend to choose), cropped to its content (bbox_inches="tight").
"""

from __future__ import annotations

import html
import io
import math
import re
import statistics
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from .bandwidth_rows import ByName, by_size

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


_VALUE = itemgetter(1)  # of a (rank, busbw) pair
_SVG_PROLOGUE = re.compile(r"^.*?(?=<svg\b)", re.S)


def busbw_series(
    run: RunData, read: ByName | None = None
) -> dict[str, dict[int, list[tuple[int, float]]]]:
    """{collective: {size_bytes: [(rank, busbw GB/s)]}} over every rank that measured it;
    ``read``: the rows when read already (RunBandwidth.measured: each host's ranks as read)."""
    if read is None:
        ranked = ((rank, doc) for host in run.hosts for rank, doc in sorted(host.ranks.items()))
        read = by_size(ranked, details=True)
    series: dict[str, dict[int, list[tuple[int, float]]]] = {}
    for name, sizes in read.items():
        per_size = series.setdefault(name.removeprefix("bandwidth_"), {})
        for size, (ranks, values) in sizes.items():
            per_size.setdefault(size, []).extend(zip(ranks, map(float, values), strict=True))
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


# busbw figures: SVG written directly (no matplotlib: its import and 7 figures were 0.8-1.2 CPU s
# of every report build, on both front-ends). Geometry of the 6.4 x 3.4 in figure it replaces.
WIDTH, HEIGHT = 640, 330
LEFT, RIGHT, TOP, BOTTOM = 70, 628, 34, 255  # the plot area
BLUE, GREEN, RED = "#1f77b4", "#2ca02c", "#d62728"


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """0 and round steps (1, 2, 2.5 or 5 x 10^k) up to at least ``top``."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


def _text(x: float, y: float, text: str, size: int = 11, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" font-family="sans-serif"{extra}>'
        f"{html.escape(text)}</text>"
    )


def _hline(y: float, colour: str, dash: str) -> str:
    return (
        f'<line x1="{LEFT}" y1="{y:.1f}" x2="{RIGHT}" y2="{y:.1f}" stroke="{colour}" '
        f'stroke-width="1.5" stroke-dasharray="{dash}"/>'
    )


def busbw_svg(
    collective: str,
    per_size: dict[int, list[tuple[int, float]]],
    link_gbps: float | None = None,
    threshold_gbps: float | None = None,
) -> str:
    """One collective: busbw (GB/s) against size on a log2 axis (the median over ranks, the band
    from the slowest to the fastest rank), with the link and the required busbw as lines."""
    sizes = sorted(per_size)
    values = [list(map(_VALUE, per_size[s])) for s in sizes]  # 8,192 ranks x 77 sizes
    median = [statistics.median(v) for v in values]
    lines = [(link_gbps, GREEN, "6 3", f"link {link_gbps:g} GB/s")] if link_gbps else []
    if threshold_gbps is not None:
        lines.append((threshold_gbps, RED, "2 3", f"required {threshold_gbps:g}"))
    ticks = nice_ticks(max([max(v) for v in values] + [y for y, *_ in lines] + [0.0]) * 1.05)
    logs = [math.log2(s) for s in sizes]
    low, span = logs[0], (logs[-1] - logs[0]) or 1.0

    def x(size_log: float) -> float:
        if len(logs) == 1:
            return (LEFT + RIGHT) / 2
        return LEFT + 10 + (size_log - low) / span * (RIGHT - LEFT - 20)

    def y(value: float) -> float:
        return BOTTOM - value / ticks[-1] * (BOTTOM - TOP)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        _text((LEFT + RIGHT) / 2, TOP - 12, collective, 13, text_anchor="middle"),
    ]
    for tick in ticks:
        out.append(
            f'<line x1="{LEFT}" y1="{y(tick):.1f}" x2="{RIGHT}" y2="{y(tick):.1f}" '
            'stroke="#000" stroke-opacity="0.12"/>'
        )
        out.append(_text(LEFT - 6, y(tick) + 4, f"{tick:g}", 10, text_anchor="end"))
    for log, size in zip(logs, sizes, strict=True):
        out.append(
            f'<line x1="{x(log):.1f}" y1="{TOP}" x2="{x(log):.1f}" y2="{BOTTOM}" '
            'stroke="#000" stroke-opacity="0.12"/>'
        )
        label_at = f"translate({x(log) + 3:.1f},{BOTTOM + 8}) rotate(-45)"
        out.append(_text(0, 0, human_size(size), 9, text_anchor="end", transform=label_at))
    band = [(x(g), y(max(v))) for g, v in zip(logs, values, strict=True)]
    band += [(x(g), y(min(v))) for g, v in reversed(list(zip(logs, values, strict=True)))]
    points = " ".join(f"{px:.1f},{py:.1f}" for px, py in band)
    out.append(f'<polygon points="{points}" fill="{BLUE}" fill-opacity="0.25"/>')
    path = " ".join(f"{x(g):.1f},{y(m):.1f}" for g, m in zip(logs, median, strict=True))
    out.append(f'<polyline points="{path}" fill="none" stroke="{BLUE}" stroke-width="1.5"/>')
    out += [f'<circle cx="{x(g):.1f}" cy="{y(m):.1f}" r="3" fill="{BLUE}"/>'
            for g, m in zip(logs, median, strict=True)]  # fmt: skip
    out += [_hline(y(value), colour, dash) for value, colour, dash, _ in lines]
    out.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{RIGHT - LEFT}" height="{BOTTOM - TOP}" '
        'fill="none" stroke="#000"/>'
    )
    out.append(_text((LEFT + RIGHT) / 2, BOTTOM + 62, "message size (bytes)", 11,
                     text_anchor="middle"))  # fmt: skip
    out.append(_text(16, (TOP + BOTTOM) / 2, "busbw (GB/s)", 11, text_anchor="middle",
                     transform=f"rotate(-90,16,{(TOP + BOTTOM) / 2})"))  # fmt: skip
    legend = [("band", BLUE, "slowest to fastest rank"), ("line", BLUE, "median over ranks")]
    legend += [("dash", colour, label, dash) for _, colour, dash, label in lines]  # type: ignore[misc]
    out.append(f'<rect x="{LEFT + 4}" y="{TOP + 4}" width="150" height="{15 * len(legend) + 6}" '
               'fill="white" fill-opacity="0.8" stroke="#ccc"/>')  # fmt: skip
    for i, (kind, colour, label, *dash) in enumerate(legend):
        ly = TOP + 14 + 15 * i
        if kind == "band":
            out.append(f'<rect x="{LEFT + 8}" y="{ly - 5}" width="20" height="9" '
                       f'fill="{colour}" fill-opacity="0.25"/>')  # fmt: skip
        else:
            pattern = f' stroke-dasharray="{dash[0]}"' if dash else ""
            out.append(f'<line x1="{LEFT + 8}" y1="{ly}" x2="{LEFT + 28}" y2="{ly}" '
                       f'stroke="{colour}" stroke-width="1.5"{pattern}/>')  # fmt: skip
        out.append(_text(LEFT + 34, ly + 4, label, 9))
    out.append("</svg>")
    return "\n".join(out)


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
