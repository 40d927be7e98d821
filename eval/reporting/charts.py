"""The charts of report.html: matplotlib figures returned as inline SVG text.

Every chart reads the report's own numbers (report.json) and nothing else. Text stays text in the SVG
(``svg.fonttype = 'none'``): it is escaped by matplotlib's SVG writer, searchable, and drawn by the
browser, whose fonts cover Chinese system names that matplotlib's bundled DejaVu Sans does not. The SVG
carries no script, no DOCTYPE, no metadata and no namespace but SVG's own, so the page stays
self-contained. matplotlib is imported here only, and this module only when a report is rendered.
"""

from __future__ import annotations

import html
import io
import itertools
import math
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

from .model import SystemResult, as_rows
from .point_labels import Point, label_points, text_width
from .wrapping import LABEL_CHARS as LABEL_CHARS
from .wrapping import columns as _columns  # noqa: F401 (charts._columns: what a test measures names with)
from .wrapping import wrap_name

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


class Chart(NamedTuple):
    """One figure: its SVG text, a note on how to read it (log axes, what was left out) and the figure drawn
    (what :func:`.legibility.text_problems` checks)."""

    svg: str
    note: str
    figure: Figure | None = None


#: Rows as a chart takes them: the model's, or report.json's.
Rows = Sequence[SystemResult | Mapping[str, Any]]

#: Okabe-Ito, readable with colour-blindness; tab20 takes over past eight systems.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", ":", "-.")
#: Fonts with Han glyphs, used for measuring labels when one is installed; the browser draws the text anyway.
CJK_FALLBACKS = (
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Source Han Sans SC",
    "WenQuanYi Micro Hei",
    "WenQuanYi Zen Hei",
    "Droid Sans Fallback",
    "AR PL UMing CN",
)
#: Line height of a label, as a share of its font size (matplotlib's default ``linespacing`` and a margin).
LINE = 1.25


def colours(count: int) -> list[str]:
    """One colour per system, the same system keeping its colour in every chart."""
    if count <= len(PALETTE):
        return list(PALETTE[:count])
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    cmap = colormaps["tab20"]
    return [to_hex(cmap(i % 20)) for i in range(count)]


def _lines(labels: list[str]) -> int:
    """The most lines of any of ``labels``."""
    return max((label.count("\n") + 1 for label in labels), default=1)


def _families() -> list[str]:
    from matplotlib import font_manager

    installed = {font.name for font in font_manager.fontManager.ttflist}
    return ["DejaVu Sans", *(name for name in CJK_FALLBACKS if name in installed), "sans-serif"]


@contextmanager
def _style(key: str) -> Iterator[None]:
    import matplotlib

    # The settings written out in the call, so type checkers see their names.
    with (
        matplotlib.rc_context(
            {
                "svg.fonttype": "none",
                # A fixed salt per chart: ids are reproducible and differ between the SVGs inlined in one page.
                "svg.hashsalt": f"rag-eval-{key}",
                # A system name with two '$' is a name, not mathtext.
                "text.parse_math": False,
                "font.family": "sans-serif",
                "font.sans-serif": _families(),
                "font.size": 9,
                "axes.titlesize": 10,
                "axes.labelsize": 9,
                "legend.fontsize": 8,
                "xtick.labelsize": 8,
                "ytick.labelsize": 8,
                "axes.spines.top": False,
                "axes.spines.right": False,
                "axes.grid": True,
                "grid.color": "#e3e3e3",
                "grid.linewidth": 0.6,
                "axes.axisbelow": True,
                "legend.frameon": False,
            }
        ),
        warnings.catch_warnings(),
    ):
        # Han glyphs missing from the measuring font: the SVG keeps the text and the browser draws it.
        warnings.filterwarnings("ignore", message=r"Glyph .* missing from font", category=UserWarning)
        yield


def _svg(fig: Figure, key: str, title: str) -> str:
    """The figure as SVG text for inlining: no prolog, no xlink namespace, every id prefixed with ``key``."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]  # no XML declaration or DOCTYPE (which names a DTD URL) inside HTML
    # HTML parses inline SVG with its own namespaces: SVG 2's plain href needs no xlink declaration.
    text = text.replace(' xmlns:xlink="http://www.w3.org/1999/xlink"', "").replace("xlink:href=", "href=")
    # matplotlib numbers its groups per figure (figure_1, axes_1, ...): ids must be unique in the page. Only
    # tags are rewritten; text between them is escaped and holds no '<'.
    text = re.sub(
        r"<[^>]+>",
        lambda tag: (
            re.sub(r'\bid="', f'id="{key}-', tag.group(0))
            .replace('href="#', f'href="#{key}-')
            .replace("url(#", f"url(#{key}-")
        ),
        text,
    )
    return text.replace("<svg ", f'<svg role="img" aria-label="{html.escape(title, quote=True)}" ', 1).strip()


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _number(value: float) -> str:
    return f"{value:g}"


def _log_ticks(ax: Axes, axis: str, low: float, high: float) -> None:
    """A log axis labelled with plain numbers (1, 2, 5, 10, ...) instead of mathtext powers."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    low, high = low / 1.6, high * 1.6
    decades = math.log10(high / low)
    steps = (1,) if decades > 4 else (1, 3) if decades > 2 else (1, 2, 5) if decades > 1.2 else (1, 2, 3, 5)
    ticks = _ticks(low, high, steps)
    if len(ticks) < 3:  # less than a decade: finer steps, so the axis still has a scale to read
        ticks = _ticks(low, high, (1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9))
    scale = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    (ax.set_xlim if axis == "x" else ax.set_ylim)(low, high)
    scale.set_major_locator(FixedLocator(ticks))
    scale.set_major_formatter(FuncFormatter(lambda value, _position: _number(float(f"{value:.3g}"))))
    scale.set_minor_formatter(NullFormatter())


def _thin_ticks(fig: Figure, axis: Any) -> None:
    """Keep every k-th major tick of ``axis``, k the smallest for which no two tick labels overlap as drawn."""
    from matplotlib.ticker import FixedLocator

    ticks = list(axis.get_majorticklocs())
    for step in range(1, max(len(ticks), 2)):
        axis.set_major_locator(FixedLocator(ticks[::step]))
        fig.draw_without_rendering()
        boxes = sorted(
            (label.get_window_extent() for label in axis.get_ticklabels() if label.get_text()), key=lambda b: b.x0
        )
        if all(a.x1 + 2 < b.x0 for a, b in itertools.pairwise(boxes)):
            return


def _row_height(names: list[str], least: float) -> float:
    """Height (inches) of one row of a chart with ``names`` beside its rows: ``least``, or more for names on
    several lines."""
    return max(least, LINE * 8 / 72 * _lines(names) + 0.08)


def _ticks(low: float, high: float, steps: tuple[float, ...]) -> list[float]:
    powers = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    return [step * 10**power for power in powers for step in steps if low <= step * 10**power <= high]


def metric_bars(rows: Rows, labels: dict[str, str], metric: str, judged: int, arrows: dict[str, str]) -> Chart:
    """One horizontal bar per system: the mean of ``metric`` with its 95% bootstrap interval."""
    import numpy as np

    rows = as_rows(rows)
    title = f"{metric} per system with 95% bootstrap intervals"
    key = "bars-" + re.sub(r"[^A-Za-z0-9_-]+", "-", metric)
    names = [wrap_name(labels[row.name]) for row in rows]
    with _style(key):
        fig = _figure(5.6, _row_height(names, 0.34) * len(rows) + 0.9)
        ax = fig.add_subplot()
        values = np.array([row.metrics[metric] for row in rows], dtype=float)
        bounds = np.array(
            [(row.ci95 or {}).get(metric) or [value, value] for row, value in zip(rows, values, strict=True)],
            dtype=float,
        )
        positions = np.arange(len(rows))
        errors = np.vstack([np.clip(values - bounds[:, 0], 0, None), np.clip(bounds[:, 1] - values, 0, None)])
        ax.barh(
            positions,
            values,
            height=0.62,
            color=colours(len(rows)),
            alpha=0.85,
            xerr=errors,
            error_kw={"ecolor": "#333333", "elinewidth": 1.1, "capsize": 3},
        )
        best = values.max() if len(values) else 0.0
        top = float(max(1.0, bounds.max() if len(bounds) else 1.0))
        for position, row, value, high in zip(positions, rows, values, bounds[:, 1], strict=False):
            # The value sits right of the interval's upper end, never on the interval line.
            ax.text(
                max(value, high) + 0.012 * top,
                float(position),
                f"{value:.3f}{arrows.get(row.name, '')}",
                va="center",
                ha="left",
                fontsize=8,
                fontweight="bold" if value == best and len(set(values)) > 1 else "normal",
            )
        ax.set_yticks(positions, names)
        ax.invert_yaxis()
        ax.set_xlim(0, top * 1.16)
        ax.set_xticks([tick / 10 * top for tick in range(0, 11, 2)])
        ax.set_xlabel(f"{metric}, mean over {judged} judged queries")
        ax.grid(axis="y", visible=False)
        return Chart(_svg(fig, key, title), "Bars: mean; whiskers: 95% bootstrap interval; bold: best.", fig)


def recall_curves(rows: Rows, labels: dict[str, str]) -> Chart:
    """Recall at every cut-off of the report's recall curve, one line per system, legend outside the axes."""
    rows = as_rows(rows)
    title = "Recall at k per system"
    ks = sorted({int(key.split("@")[1]) for row in rows for key in row.recall_curve or {}})
    key = "recall"
    names = [wrap_name(labels[row.name]) for row in rows]
    with _style(key):
        # The legend beside the axes: an entry's height is its lines' and the spacing between entries.
        fig = _figure(6.6, max(3.2, sum(LINE * 8 / 72 * (name.count("\n") + 1) + 0.07 for name in names) + 0.8))
        ax = fig.add_subplot()
        for number, (row, colour) in enumerate(zip(rows, colours(len(rows)), strict=False)):
            curve = sorted((int(key.split("@")[1]), value) for key, value in (row.recall_curve or {}).items())
            ax.plot(
                [k for k, _ in curve],
                [value for _, value in curve],
                color=colour,
                marker=MARKERS[number % len(MARKERS)],
                markersize=4,
                linewidth=1.5,
                linestyle=LINESTYLES[number // len(PALETTE) % len(LINESTYLES)],
                label=names[number],
            )
        if ks:
            from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

            ax.set_xscale("log")
            ax.set_xlim(ks[0] / 1.25, ks[-1] * 1.25)
            ax.xaxis.set_major_locator(FixedLocator(ks))
            ax.set_xticklabels([str(k) for k in ks])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_ylim(0, 1.02)
        ax.set_yticks([tick / 10 for tick in range(0, 11, 2)])
        ax.set_xlabel("k (cut-off, log scale)")
        ax.set_ylabel("recall@k")
        fig.legend(loc="outside right upper")
        return Chart(_svg(fig, key, title), "Mean recall over the judged queries at each cut-off k.", fig)


def search_latency(rows: Rows, labels: dict[str, str]) -> Chart | None:
    """Every query's search time per system on a log axis, with the median and p95 marked; None without samples."""
    rows = as_rows(rows)
    timed = [row for row in rows if row.costs is not None and row.costs.search_samples_ms]
    if not timed:
        return None
    title = "Search latency per query"
    samples = [list(row.costs.search_samples_ms or ()) for row in timed if row.costs is not None]
    positive = [value for values in samples for value in values if value > 0]
    floor = min(positive) if positive else 0.001
    clipped = sum(1 for values in samples for value in values if value < floor)
    key = "latency"
    names = [wrap_name(labels[row.name]) for row in timed]
    with _style(key):
        fig = _figure(6.6, _row_height(names, 0.42) * len(timed) + 1.1)
        ax = fig.add_subplot()
        palette = colours(len(rows))
        colour_of = {row.name: palette[i] for i, row in enumerate(rows)}
        labelled: set[str] = set()
        for position, (row, values) in enumerate(zip(timed, samples, strict=False)):
            # A deterministic spread (golden-ratio sequence) instead of random jitter: reports are reproducible.
            offsets = [((i * 0.6180339887) % 1.0 - 0.5) * 0.5 for i in range(len(values))]
            ax.scatter(
                [max(value, floor) for value in values],
                [position + o for o in offsets],
                s=5,
                color=colour_of[row.name],
                alpha=0.35,
                linewidths=0,
            )
            for statistic, colour in (("median", "#000000"), ("p95", "#C00000")):
                value = None if row.search is None else row.search.statistic(statistic)
                if value is not None:
                    ax.plot(
                        [max(value, floor)] * 2,
                        [position - 0.34, position + 0.34],
                        linewidth=2.2,
                        color=colour,
                        label=None if statistic in labelled else statistic,
                    )
                    labelled.add(statistic)
        highest = max(max(values) for values in samples)
        _log_ticks(ax, "x", floor, max(highest, floor))
        ax.set_yticks(range(len(timed)), names)
        ax.set_ylim(len(timed) - 0.5, -0.5)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel("search time per query (ms, log scale)")
        fig.legend(loc="outside right upper")
        note = (
            f"Each dot is one query ({len(samples[0])} per system); black: median, red: p95; log axis, "
            "no point clipped."
        )
        if clipped:
            note = note.replace("no point clipped", f"{clipped} times of 0 ms drawn at {floor:g} ms")
        _thin_ticks(fig, ax.xaxis)
        return Chart(_svg(fig, key, title), note, fig)


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indexes of the points no other point beats on both axes (lower x, higher y), by increasing x."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front: list[int] = []
    for i in order:
        if not front or points[i][1] > points[front[-1]][1]:
            front.append(i)
    return front


class _Which(NamedTuple):
    """The points of the 'which strategy?' chart: the timed rows, their p95s (x), p95 intervals and quality (y),
    marker areas, and the Pareto front's indexes."""

    timed: list[SystemResult]
    xs: list[float]
    spans: list[tuple[float, float] | None]
    ys: list[float]
    areas: list[float]
    largest: float
    front: list[int]


def _which_points(rows: list[SystemResult], metric: str) -> _Which | None:
    timed = [row for row in rows if row.search is not None and row.search.p95 is not None]
    if not timed:
        return None
    xs = [max(float(row.search.p95 or 0.0), 1e-4) for row in timed if row.search is not None]
    spans = [(row.search_ci95_ms or {}).get("p95") for row in timed]
    ys = [float(row.metrics[metric]) for row in timed]
    sizes = [row.index_bytes for row in timed]
    largest = max((size for size in sizes if size), default=0)
    areas = [30 + 570 * size / largest if size and largest else 60 for size in sizes]
    return _Which(timed, xs, spans, ys, areas, largest, pareto_front(list(zip(xs, ys, strict=False))))


def quality_latency(rows: Rows, labels: dict[str, str], metric: str) -> Chart | None:
    """Which strategy: ``metric`` against search p95 per system, marker area by index size, the Pareto front drawn,
    and each p95's 95% interval (``search_ci95_ms``, where the row has one) as a horizontal bar."""
    rows = as_rows(rows)
    which = _which_points(rows, metric)
    if which is None:
        return None
    palette = colours(len(rows))
    colour_of = {row.name: palette[i] for i, row in enumerate(rows)}
    key = "which"
    with _style(key):
        fig = _figure(7.6, max(4.2, 0.2 * len(rows) + 1.2))
        ax = fig.add_subplot()
        ends = [max(float(end), 1e-4) for span in which.spans if span for end in span]
        _log_ticks(ax, "x", min([*which.xs, *ends]), max([*which.xs, *ends]))
        steps = _draw_front(ax, which)
        _draw_points(ax, which, colour_of)
        _draw_untimed(ax, rows, which, labels, colour_of, metric)
        ax.set_xlabel("search latency p95 (ms, log scale)")
        ax.set_ylabel(f"{metric} (higher is better)")
        fig.legend(loc="outside right upper", labelspacing=2.2, borderpad=1.0, handletextpad=1.2)
        _thin_ticks(fig, ax.xaxis)
        intervals = [(span[0], which.ys[i], span[1], which.ys[i]) for i, span in enumerate(which.spans) if span]
        points = [
            Point(which.xs[i], which.ys[i], math.sqrt(which.areas[i]) / 2, colour_of[row.name], labels[row.name])
            for i, row in enumerate(which.timed)
        ]
        numbered = label_points(fig, ax, points, [*steps, *intervals])  # last: the layout is final
        note = _which_note(which, labels, metric, numbered)
        return Chart(_svg(fig, key, f"{metric} against search p95 latency"), note, fig)


def _draw_front(ax: Axes, which: _Which) -> list[tuple[float, float, float, float]]:
    """The Pareto front as a dashed step line to the axis' right end; its segments, for the labels to avoid."""
    front_x = [which.xs[i] for i in which.front] + [ax.get_xlim()[1]]
    front_y = [which.ys[i] for i in which.front] + [which.ys[which.front[-1]]]
    ax.step(
        front_x, front_y, where="post", color="#555555", linewidth=1.2, linestyle="--", zorder=1, label="Pareto front"
    )
    return [
        segment
        for k in range(len(front_x) - 1)
        for segment in (
            (front_x[k], front_y[k], front_x[k + 1], front_y[k]),
            (front_x[k + 1], front_y[k], front_x[k + 1], front_y[k + 1]),
        )
    ]


def _draw_points(ax: Axes, which: _Which, colour_of: dict[str, str]) -> None:
    """Each timed system's marker (front members outlined) and its p95 interval as a horizontal bar."""
    for i, row in enumerate(which.timed):
        x, y, span = which.xs[i], which.ys[i], which.spans[i]
        if span:
            low, high = (max(float(end), 1e-4) for end in span)
            _line, caps, bars = ax.errorbar(
                [x],
                [y],
                xerr=[[max(x - low, 0.0)], [max(high - x, 0.0)]],
                fmt="none",
                ecolor=colour_of[row.name],
                elinewidth=1.6,
                capsize=4,
                zorder=2,
            )
            bars[0].set_gid(f"p95-interval-{i}")  # ids in the SVG, each once: what a test finds
            for number, cap in enumerate(caps):
                cap.set_gid(f"p95-interval-{i}-end-{number}")
        on_front = i in which.front
        ax.scatter(
            [x],
            [y],
            s=which.areas[i],
            color=colour_of[row.name],
            alpha=0.9 if on_front else 0.45,
            edgecolors="#222222" if on_front else "none",
            linewidths=1.0,
            zorder=4 if on_front else 3,
        )


def _draw_untimed(
    ax: Axes, rows: list[SystemResult], which: _Which, labels: dict[str, str], colour_of: dict[str, str], metric: str
) -> None:
    """A dotted line at the quality of each system without latency, the y range, and the index-size key."""
    for row in rows:
        if row not in which.timed:
            ax.axhline(
                row.metrics[metric],
                color=colour_of[row.name],
                linestyle=":",
                linewidth=1.4,
                label=f"{wrap_name(labels[row.name], 30)} (no latency)",
            )
    low = min([*which.ys, *(row.metrics[metric] for row in rows)])
    high = max([*which.ys, *(row.metrics[metric] for row in rows)])
    pad = max(0.04, (high - low) * 0.12)
    ax.set_ylim(max(0.0, low - pad), min(1.05, high + pad))
    if which.largest:
        for size in _size_keys(which.largest):
            ax.scatter([], [], s=30 + 570 * size / which.largest, color="#bbbbbb", label=f"index {_bytes(size)}")


def _which_note(which: _Which, labels: dict[str, str], metric: str, numbered: bool) -> str:
    on_front = ", ".join(labels[which.timed[i].name] for i in which.front)
    return (
        f"Up and to the left is better. On the Pareto front (no system is both faster and better): {on_front}."
        + (" Marker area: index size." if which.largest else "")
        + (f" Markers are numbered by {metric}, highest first; the key under the chart names them." if numbered else "")
        + (
            " Horizontal bars: each p95's 95% interval over the questions; where two overlap, see the latency "
            "section for whether the two can be told apart."
            if any(which.spans)
            else ""
        )
    )


def _size_keys(largest: float) -> list[float]:
    """Round index sizes for the marker-area key: about the largest, and about a quarter of it."""
    return sorted({float(f"{largest:.1g}"), float(f"{largest / 4:.1g}")})


def _bytes(size: float) -> str:
    return f"{size / 1e6:g} MB" if size >= 1e6 else f"{size / 1e3:g} kB"


def kind_heatmap(rows: Rows, labels: dict[str, str], metric: str) -> Chart | None:
    """``metric`` per system and query kind as a heatmap with the values written in; None for fewer than two kinds."""
    import numpy as np

    rows = as_rows(rows)
    kinds = sorted({kind for row in rows for kind in row.by_kind or {}})
    if len(kinds) < 2:
        return None
    counts = {
        kind: next((row.by_kind or {})[kind].queries for row in rows if kind in (row.by_kind or {})) for kind in kinds
    }

    def mean(row: SystemResult, kind: str) -> float:
        found = (row.by_kind or {}).get(kind)
        return np.nan if found is None else found.means.get(metric, np.nan)

    grid = np.array([[mean(row, kind) for kind in kinds] for row in rows], dtype=float)
    key = "kinds"
    names = [wrap_name(labels[row.name]) for row in rows]
    kind_names = [f"{wrap_name(kind, 16)}\nn={counts[kind]}" for kind in kinds]
    with _style(key):
        # Room for the names beside the rows and for each kind's name under its column.
        upright = len(kinds) > 8  # many kinds: their names stand upright under narrow columns
        widest = max(text_width(name, 8) for name in kind_names)
        column = max(0.42, _lines(kind_names) * 0.17) if upright else max(0.78, widest + 0.15)
        fig = _figure(
            max(text_width(name, 8) for name in names) + 1.6 + column * len(kinds),
            _row_height(names, 0.36) * len(rows) + 1.0 + (widest if upright else _lines(kind_names) * 0.15),
        )
        ax = fig.add_subplot()
        image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        _write_cells(ax, grid)
        ax.set_xticks(
            range(len(kinds)),
            kind_names,
            rotation=90 if upright else 0,
            ha="right" if upright else "center",
            va="center" if upright else "top",
            rotation_mode="anchor" if upright else "default",  # upright names hang from their column
        )
        ax.set_yticks(range(len(rows)), names)
        ax.grid(False)
        ax.tick_params(length=0)
        for side in ("top", "right", "bottom", "left"):
            ax.spines[side].set_visible(False)
        fig.colorbar(image, ax=ax, label=metric, shrink=0.9, pad=0.02)
        note = f"Mean {metric} over the judged queries of each kind (n below the kind); bold: best in its column."
        return Chart(_svg(fig, key, f"{metric} per system and query kind"), note, fig)


def _write_cells(ax: Axes, grid: Any) -> None:
    """Each cell's value written in it ("-" where the system has no query of the kind), the best of a column in
    bold when the column's values differ."""
    import numpy as np

    best = np.nanmax(np.where(np.isnan(grid), -1.0, grid), axis=0)
    # As in the tables: a column whose values are all equal has no best.
    varied = [len({value for value in grid[:, c] if not np.isnan(value)}) > 1 for c in range(grid.shape[1])]
    for r in range(grid.shape[0]):
        for c in range(grid.shape[1]):
            value = grid[r, c]
            ax.text(
                c,
                r,
                "-" if np.isnan(value) else f"{value:.2f}",
                ha="center",
                va="center",
                fontsize=7.5,
                color="#000000" if np.isnan(value) or value > 0.55 else "#ffffff",
                fontweight="bold" if varied[c] and value == best[c] else "normal",
            )
