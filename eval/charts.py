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
import math
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


class Chart(NamedTuple):
    """One figure: its SVG text and a note on how to read it (log axes, what was left out)."""

    svg: str
    note: str


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
LABEL_CHARS = 40


def colours(count: int) -> list[str]:
    """One colour per system, the same system keeping its colour in every chart."""
    if count <= len(PALETTE):
        return list(PALETTE[:count])
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    cmap = colormaps["tab20"]
    return [to_hex(cmap(i % 20)) for i in range(count)]


def short(label: str) -> str:
    """A label that fits beside an axis: long system specs are cut with an ellipsis."""
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


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


def _ticks(low: float, high: float, steps: tuple[float, ...]) -> list[float]:
    powers = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    return [step * 10**power for power in powers for step in steps if low <= step * 10**power <= high]


def metric_bars(
    rows: list[dict[str, Any]], labels: dict[str, str], metric: str, judged: int, arrows: dict[str, str]
) -> Chart:
    """One horizontal bar per system: the mean of ``metric`` with its 95% bootstrap interval."""
    import numpy as np

    title = f"{metric} per system with 95% bootstrap intervals"
    key = "bars-" + re.sub(r"[^A-Za-z0-9_-]+", "-", metric)
    with _style(key):
        fig = _figure(5.6, 0.34 * len(rows) + 0.9)
        ax = fig.add_subplot()
        values = np.array([row["metrics"][metric] for row in rows], dtype=float)
        bounds = np.array(
            [row.get("ci95", {}).get(metric) or [value, value] for row, value in zip(rows, values, strict=True)],
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
                f"{value:.3f}{arrows.get(row['name'], '')}",
                va="center",
                ha="left",
                fontsize=8,
                fontweight="bold" if value == best and len(set(values)) > 1 else "normal",
            )
        ax.set_yticks(positions, [short(labels[row["name"]]) for row in rows])
        ax.invert_yaxis()
        ax.set_xlim(0, top * 1.16)
        ax.set_xticks([tick / 10 * top for tick in range(0, 11, 2)])
        ax.set_xlabel(f"{metric}, mean over {judged} judged queries")
        ax.grid(axis="y", visible=False)
        return Chart(_svg(fig, key, title), "Bars: mean; whiskers: 95% bootstrap interval; bold: best.")


def recall_curves(rows: list[dict[str, Any]], labels: dict[str, str]) -> Chart:
    """Recall at every cut-off of the report's recall curve, one line per system, legend outside the axes."""
    title = "Recall at k per system"
    ks = sorted({int(key.split("@")[1]) for row in rows for key in row.get("recall_curve", {})})
    key = "recall"
    with _style(key):
        fig = _figure(6.6, max(3.2, 0.19 * len(rows) + 0.8))
        ax = fig.add_subplot()
        for number, (row, colour) in enumerate(zip(rows, colours(len(rows)), strict=False)):
            curve = sorted((int(key.split("@")[1]), value) for key, value in row.get("recall_curve", {}).items())
            ax.plot(
                [k for k, _ in curve],
                [value for _, value in curve],
                color=colour,
                marker=MARKERS[number % len(MARKERS)],
                markersize=4,
                linewidth=1.5,
                linestyle=LINESTYLES[number // len(PALETTE) % len(LINESTYLES)],
                label=short(labels[row["name"]]),
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
        return Chart(_svg(fig, key, title), "Mean recall over the judged queries at each cut-off k.")


def search_latency(rows: list[dict[str, Any]], labels: dict[str, str]) -> Chart | None:
    """Every query's search time per system on a log axis, with the median and p95 marked; None without samples."""
    timed = [row for row in rows if (row.get("latency_samples_ms") or {}).get("search")]
    if not timed:
        return None
    title = "Search latency per query"
    samples = [list(row["latency_samples_ms"]["search"]) for row in timed]
    positive = [value for values in samples for value in values if value > 0]
    floor = min(positive) if positive else 0.001
    clipped = sum(1 for values in samples for value in values if value < floor)
    key = "latency"
    with _style(key):
        fig = _figure(6.6, 0.42 * len(timed) + 1.1)
        ax = fig.add_subplot()
        palette = colours(len(rows))
        colour_of = {row["name"]: palette[i] for i, row in enumerate(rows)}
        labelled: set[str] = set()
        for position, (row, values) in enumerate(zip(timed, samples, strict=False)):
            # A deterministic spread (golden-ratio sequence) instead of random jitter: reports are reproducible.
            offsets = [((i * 0.6180339887) % 1.0 - 0.5) * 0.5 for i in range(len(values))]
            ax.scatter(
                [max(value, floor) for value in values],
                [position + o for o in offsets],
                s=5,
                color=colour_of[row["name"]],
                alpha=0.35,
                linewidths=0,
            )
            stats = row.get("latency_ms", {}).get("search", {})
            for statistic, colour in (("median", "#000000"), ("p95", "#C00000")):
                if stats.get(statistic) is not None:
                    ax.plot(
                        [max(stats[statistic], floor)] * 2,
                        [position - 0.34, position + 0.34],
                        linewidth=2.2,
                        color=colour,
                        label=None if statistic in labelled else statistic,
                    )
                    labelled.add(statistic)
        highest = max(max(values) for values in samples)
        _log_ticks(ax, "x", floor, max(highest, floor))
        ax.set_yticks(range(len(timed)), [short(labels[row["name"]]) for row in timed])
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
        return Chart(_svg(fig, key, title), note)


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indexes of the points no other point beats on both axes (lower x, higher y), by increasing x."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front: list[int] = []
    for i in order:
        if not front or points[i][1] > points[front[-1]][1]:
            front.append(i)
    return front


def quality_latency(rows: list[dict[str, Any]], labels: dict[str, str], metric: str) -> Chart | None:
    """Which strategy: ``metric`` against search p95 per system, marker area by index size, the Pareto front drawn,
    and each p95's 95% interval (``latency_ci95_ms``, where the row has one) as a horizontal bar."""
    timed = [row for row in rows if (row.get("latency_ms") or {}).get("search", {}).get("p95") is not None]
    if not timed:
        return None
    title = f"{metric} against search p95 latency"
    palette = colours(len(rows))
    colour_of = {row["name"]: palette[i] for i, row in enumerate(rows)}
    xs = [max(float(row["latency_ms"]["search"]["p95"]), 1e-4) for row in timed]
    spans = [((row.get("latency_ci95_ms") or {}).get("search") or {}).get("p95") for row in timed]
    ends = [max(float(end), 1e-4) for span in spans if span for end in span]
    ys = [float(row["metrics"][metric]) for row in timed]
    sizes = [(row.get("build") or {}).get("index_bytes") for row in timed]
    largest = max((size for size in sizes if size), default=0)
    front = pareto_front(list(zip(xs, ys, strict=False)))
    key = "which"
    with _style(key):
        fig = _figure(7.6, max(4.2, 0.2 * len(rows) + 1.2))
        ax = fig.add_subplot()
        _log_ticks(ax, "x", min([*xs, *ends]), max([*xs, *ends]))
        front_x = [xs[i] for i in front] + [ax.get_xlim()[1]]
        front_y = [ys[i] for i in front] + [ys[front[-1]]]
        ax.step(
            front_x,
            front_y,
            where="post",
            color="#555555",
            linewidth=1.2,
            linestyle="--",
            zorder=1,
            label="Pareto front",
        )
        areas = [30 + 570 * size / largest if size and largest else 60 for size in sizes]
        for i, row in enumerate(timed):
            area = areas[i]
            span = spans[i]
            if span:
                low, high = (max(float(end), 1e-4) for end in span)
                _line, caps, bars = ax.errorbar(
                    [xs[i]],
                    [ys[i]],
                    xerr=[[max(xs[i] - low, 0.0)], [max(high - xs[i], 0.0)]],
                    fmt="none",
                    ecolor=colour_of[row["name"]],
                    elinewidth=1.6,
                    capsize=4,
                    zorder=2,
                )
                bars[0].set_gid(f"p95-interval-{i}")  # ids in the SVG, each once: what a test finds
                for number, cap in enumerate(caps):
                    cap.set_gid(f"p95-interval-{i}-end-{number}")
            ax.scatter(
                [xs[i]],
                [ys[i]],
                s=area,
                color=colour_of[row["name"]],
                alpha=0.9 if i in front else 0.45,
                edgecolors="#222222" if i in front else "none",
                linewidths=1.0,
                zorder=4 if i in front else 3,
            )
        for row in rows:
            if row not in timed:
                ax.axhline(
                    row["metrics"][metric],
                    color=colour_of[row["name"]],
                    linestyle=":",
                    linewidth=1.4,
                    label=f"{short(labels[row['name']])} (no latency)",
                )
        low = min([*ys, *(row["metrics"][metric] for row in rows)])
        high = max([*ys, *(row["metrics"][metric] for row in rows)])
        pad = max(0.04, (high - low) * 0.12)
        ax.set_ylim(max(0.0, low - pad), min(1.05, high + pad))
        if largest:
            for size in _size_keys(largest):
                ax.scatter([], [], s=30 + 570 * size / largest, color="#bbbbbb", label=f"index {_bytes(size)}")
        ax.set_xlabel("search latency p95 (ms, log scale)")
        ax.set_ylabel(f"{metric} (higher is better)")
        fig.legend(loc="outside right upper", labelspacing=2.2, borderpad=1.0, handletextpad=1.2)
        _place_labels(
            fig, ax, xs, ys, [short(labels[row["name"]]) for row in timed], areas
        )  # last: the layout is final
        on_front = ", ".join(labels[timed[i]["name"]] for i in front)
        note = (
            f"Up and to the left is better. On the Pareto front (no system is both faster and better): {on_front}."
            + (" Marker area: index size." if largest else "")
            + (
                " Horizontal bars: each p95's 95% interval over the questions; where two overlap, see the latency "
                "section for whether the two can be told apart."
                if any(spans)
                else ""
            )
        )
        return Chart(_svg(fig, key, title), note)


def _size_keys(largest: int) -> list[float]:
    """Round index sizes for the marker-area key: about the largest, and about a quarter of it."""
    return sorted({float(f"{largest:.1g}"), float(f"{largest / 4:.1g}")})


def _bytes(size: float) -> str:
    return f"{size / 1e6:g} MB" if size >= 1e6 else f"{size / 1e3:g} kB"


Box = tuple[float, float, float, float]


def _label_box(
    point: tuple[float, float], offset: tuple[float, float, str], size: tuple[float, float], pixels: float
) -> Box:
    """Screen box (x0, y0, x1, y1) of a label of ``size`` points placed at ``offset`` points from ``point``."""
    (x, y), (dx, dy, ha), (width, height) = point, offset, size
    left = dx - (width if ha == "right" else width / 2 if ha == "center" else 0)
    x0, y0 = x + left * pixels, y + (dy - height / 2) * pixels
    return x0, y0, x0 + width * pixels, y0 + height * pixels


def _covers(box: Box, point: tuple[float, float], radius: float) -> bool:
    return box[0] - radius < point[0] < box[2] + radius and box[1] - radius < point[1] < box[3] + radius


def _place_labels(
    fig: Figure, ax: Axes, xs: list[float], ys: list[float], texts: list[str], areas: list[float]
) -> None:
    """Label each point beside its marker, on the first side where the label covers no other label or marker."""
    fig.draw_without_rendering()  # the final layout, so distances on screen are the drawn ones
    pixels = fig.dpi / 72
    screen = [(float(a), float(b)) for a, b in (ax.transData.transform((x, y)) for x, y in zip(xs, ys, strict=False))]
    radii = [math.sqrt(area) / 2 * pixels for area in areas]  # scatter sizes are areas in points squared
    frame = ax.get_window_extent()
    placed: list[Box] = []
    for i in sorted(range(len(xs)), key=lambda i: -ys[i]):
        size, gap = (len(texts[i]) * 5.0 + 2, 10.0), radii[i] / pixels + 3
        # Left first: the Pareto step leaves a point to the right and reaches it from below.
        candidates = [(-gap, 0.0, "right"), (0.0, gap + 4, "center"), (gap, 0.0, "left"), (0.0, -gap - 4, "center")]
        candidates += [(gap, -step * 11.0, "left") for step in range(1, 6)]
        chosen = candidates[0]
        for candidate in candidates:
            box = _label_box(screen[i], candidate, size, pixels)
            inside = frame.x0 <= box[0] and box[2] <= frame.x1 and frame.y0 <= box[1] and box[3] <= frame.y1
            clear = all(box[2] < o[0] or o[2] < box[0] or box[3] < o[1] or o[3] < box[1] for o in placed)
            if inside and clear and not any(_covers(box, screen[j], radii[j]) for j in range(len(xs)) if j != i):
                chosen = candidate
                break
        placed.append(_label_box(screen[i], chosen, size, pixels))
        dx, dy, ha = chosen
        note = ax.annotate(
            texts[i],
            (xs[i], ys[i]),
            xytext=(dx, dy),
            textcoords="offset points",
            fontsize=8,
            va="center",
            ha=ha,
            bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.85},
            arrowprops={"arrowstyle": "-", "color": "#999999", "linewidth": 0.6} if abs(dy) > gap else None,
        )
        note.set_in_layout(False)  # placed for this layout: it must not move the axes it was measured on


def kind_heatmap(rows: list[dict[str, Any]], labels: dict[str, str], metric: str) -> Chart | None:
    """``metric`` per system and query kind as a heatmap with the values written in; None for fewer than two kinds."""
    import numpy as np

    kinds = sorted({kind for row in rows for kind in row.get("by_kind", {})})
    if len(kinds) < 2:
        return None
    title = f"{metric} per system and query kind"
    counts = {
        kind: next(row["by_kind"][kind]["queries"] for row in rows if kind in row.get("by_kind", {})) for kind in kinds
    }
    grid = np.array(
        [[row.get("by_kind", {}).get(kind, {}).get(metric, np.nan) for kind in kinds] for row in rows], dtype=float
    )
    key = "kinds"
    with _style(key):
        fig = _figure(1.6 + 0.78 * len(kinds), 0.36 * len(rows) + 1.3)
        ax = fig.add_subplot()
        image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        best = np.nanmax(np.where(np.isnan(grid), -1.0, grid), axis=0)
        # As in the tables: a column whose values are all equal has no best.
        varied = [len({value for value in grid[:, c] if not np.isnan(value)}) > 1 for c in range(len(kinds))]
        for r in range(len(rows)):
            for c in range(len(kinds)):
                value = grid[r, c]
                text = "-" if np.isnan(value) else f"{value:.2f}"
                ax.text(
                    c,
                    r,
                    text,
                    ha="center",
                    va="center",
                    fontsize=7.5,
                    color="#000000" if np.isnan(value) or value > 0.55 else "#ffffff",
                    fontweight="bold" if varied[c] and value == best[c] else "normal",
                )
        ax.set_xticks(
            range(len(kinds)),
            [f"{short(kind)}\nn={counts[kind]}" for kind in kinds],
            rotation=30 if len(kinds) > 8 else 0,
            ha="right" if len(kinds) > 8 else "center",
        )
        ax.set_yticks(range(len(rows)), [short(labels[row["name"]]) for row in rows])
        ax.grid(False)
        ax.tick_params(length=0)
        for side in ("top", "right", "bottom", "left"):
            ax.spines[side].set_visible(False)
        fig.colorbar(image, ax=ax, label=metric, shrink=0.9, pad=0.02)
        return Chart(
            _svg(fig, key, title),
            f"Mean {metric} over the judged queries of each kind (n below the kind); bold: best in its column.",
        )
