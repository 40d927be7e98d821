"""Labels for the points of a scatter chart that cover neither each other nor a marker and stay in the axes.

Each point gets its name beside its marker when every name finds such a place near its own marker; otherwise
each gets a number, and a key under the chart lists number -> full name (a key is legible where crowded names
are not). Points drawn at the same place share one label. Boxes are matplotlib's own text extents after a
draw, not estimates from character counts; names are never cut short.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from .wrapping import wrap_name

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Box = tuple[float, float, float, float]
Segment = tuple[float, float, float, float]

FONT_SIZE = 8.0
#: The white box behind a label, in units of its font size (matplotlib's ``pad``).
PAD = 0.15
#: Points closer than this on screen (pixels) are drawn as one: they share a label.
SAME_PLACE = 2.0
#: How far from its marker a full name may sit (points, beyond the marker's edge); further, numbers are used.
NEAR = 14.0
#: Rings of candidate places are this far apart (points); a label further than LEADER from its marker gets a line.
STEP = 5.0
LEADER = 9.0
#: Directions tried on each ring (degrees), in order of preference: beside, above, below, then the diagonals.
ANGLES = (0, 180, 90, 270, 30, 150, 330, 210, 60, 120, 300, 240, 15, 165, 345, 195, 45, 135, 315, 225)
#: What crossing a drawn line (the front, an interval bar) costs a place, in points of distance.
CROSSING = 20.0
#: What a place nearer another marker than its own costs (it then gets a line to its marker).
AMBIGUOUS = 12.0
#: Marker size of the key's entries (points).
KEY_MARKER = 7.0


class Point(NamedTuple):
    """One system's point: data coordinates, marker radius (points), colour and full name."""

    x: float
    y: float
    radius: float
    colour: str
    name: str


class Placement(NamedTuple):
    """A label: the points it names, its text, the offset (points) of its centre from their marker, and whether
    a line joins it to the marker (far from it, or nearer another one)."""

    members: list[int]
    text: str
    dx: float
    dy: float
    leader: bool


def label_points(fig: Figure, ax: Axes, points: Sequence[Point], lines: Sequence[Segment] = ()) -> bool:
    """Label every point of ``ax``: full names when each fits near its marker, else numbers with a key under the
    chart (numbered by y, highest first). ``lines`` (data coordinates x0, y0, x1, y1, horizontal or vertical)
    are avoided where possible. Call last: the layout must be final. True when the points are numbered."""
    fig.draw_without_rendering()
    groups = _groups(ax, points)
    names = ["\n".join(points[i].name for i in group) for group in groups]
    placements = _place(fig, ax, points, groups, names, lines, NEAR)
    numbered = placements is None
    if placements is None:
        order = sorted(range(len(points)), key=lambda i: (-points[i].y, points[i].x, points[i].name))
        number = {i: rank + 1 for rank, i in enumerate(order)}
        _key(fig, [points[i] for i in order])
        fig.draw_without_rendering()  # the layout with the key
        texts = [", ".join(str(number[i]) for i in sorted(group, key=number.__getitem__)) for group in groups]
        placements = _place(fig, ax, points, groups, texts, lines, math.inf)
        assert placements is not None  # without a limit on distance every label has a place, at worst the least bad
    for placement in placements:
        first = points[placement.members[0]]
        label = ax.annotate(
            placement.text,
            (first.x, first.y),
            xytext=(placement.dx, placement.dy),
            textcoords="offset points",
            fontsize=FONT_SIZE,
            fontweight="bold" if numbered else "normal",
            ha="center",
            va="center",
            bbox={"boxstyle": f"round,pad={PAD}", "facecolor": "white", "edgecolor": "none", "alpha": 0.85},
            arrowprops=(
                {"arrowstyle": "-", "color": "#888888", "linewidth": 0.6, "shrinkA": 0, "shrinkB": first.radius}
                if placement.leader
                else None
            ),
        )
        label.set_in_layout(False)  # placed for this layout: it must not move the axes it was measured on
    return numbered


def _groups(ax: Axes, points: Sequence[Point]) -> list[list[int]]:
    """Indexes of the points drawn at one place, together; the groups in order of y, highest first."""
    screen = [ax.transData.transform((p.x, p.y)) for p in points]
    groups: list[list[int]] = []
    for i in sorted(range(len(points)), key=lambda i: (-points[i].y, points[i].x)):
        for group in groups:
            if math.dist(screen[group[0]], screen[i]) <= SAME_PLACE:
                group.append(i)
                break
        else:
            groups.append([i])
    return groups


def _place(
    fig: Figure,
    ax: Axes,
    points: Sequence[Point],
    groups: list[list[int]],
    texts: list[str],
    lines: Sequence[Segment],
    reach: float,
) -> list[Placement] | None:
    """A place for each group's label, or None when one has none within ``reach`` points of its marker."""
    pixels = fig.dpi / 72
    frame = ax.get_window_extent()
    screen = [tuple(float(v) for v in ax.transData.transform((p.x, p.y))) for p in points]
    radii = [p.radius * pixels for p in points]
    segments = [_screen_segment(ax, line) for line in lines]
    placed: list[Box] = []
    out = []
    for group, text in zip(groups, texts, strict=True):
        width, height = _size(ax, text)
        centre, radius = screen[group[0]], max(radii[i] for i in group)
        others = [j for j in range(len(points)) if j not in group]
        best: tuple[float, Box, float, float, float, bool] | None = None
        fallback: tuple[float, Box, float, float, float, bool] | None = None
        ring = 0
        while True:
            distance = 2.0 + STEP * ring
            gap = radius + distance * pixels
            if distance > reach or (best is not None and distance > best[4] + CROSSING):
                break
            if gap > frame.width + frame.height:  # past every place in the axes
                break
            for order, angle in enumerate(ANGLES):
                cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
                x, y = centre[0] + cos * (gap + width / 2), centre[1] + sin * (gap + height / 2)
                box = (x - width / 2, y - height / 2, x + width / 2, y + height / 2)
                if not (frame.x0 <= box[0] and box[2] <= frame.x1 and frame.y0 <= box[1] and box[3] <= frame.y1):
                    continue
                clashes = sum(_overlap(box, other) for other in placed) + sum(
                    _circle_in_box(box, screen[j], radii[j]) for j in range(len(points))
                )
                own = _reach(box, centre, radius)
                ambiguous = any(_reach(box, screen[j], radii[j]) < own for j in others)
                score = distance + CROSSING * sum(_crosses(box, s) for s in segments) + order * 0.01
                score += AMBIGUOUS if ambiguous else 0.0
                leader = ambiguous or distance > LEADER
                entry = (score, box, (x - centre[0]) / pixels, (y - centre[1]) / pixels, distance, leader)
                if clashes == 0:
                    if best is None or score < best[0]:
                        best = entry
                elif fallback is None or clashes * 1000 + score < fallback[0]:
                    fallback = (clashes * 1000 + score, *entry[1:])
            ring += 1
        chosen = best or (fallback if math.isinf(reach) else None)
        if chosen is None:
            if not math.isinf(reach):
                return None
            chosen = (0.0, (centre[0], centre[1], centre[0], centre[1]), 0.0, 0.0, 0.0, False)
        placed.append(chosen[1])
        out.append(Placement(group, text, chosen[2], chosen[3], chosen[5]))
    return out


def _size(ax: Axes, text: str) -> tuple[float, float]:
    """Width and height (pixels) of ``text`` as a label draws it, with its box's padding: measured, not guessed."""
    probe = ax.figure.text(0, 0, text, fontsize=FONT_SIZE, fontweight="bold")
    extent = probe.get_window_extent()
    probe.remove()
    pad = PAD * FONT_SIZE * ax.figure.dpi / 72 + 1.0
    return extent.width + 2 * pad, extent.height + 2 * pad


def _screen_segment(ax: Axes, line: Segment) -> Segment:
    (x0, y0), (x1, y1) = ax.transData.transform([(line[0], line[1]), (line[2], line[3])])
    return min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] + 1 and b[0] < a[2] + 1 and a[1] < b[3] + 1 and b[1] < a[3] + 1


def _circle_in_box(box: Box, centre: tuple[float, ...], radius: float) -> bool:
    return _reach(box, centre, radius) < 1


def _reach(box: Box, centre: tuple[float, ...], radius: float) -> float:
    """Distance (pixels) from a marker's edge to the nearest point of ``box``; negative inside the marker."""
    nearest_x = min(max(centre[0], box[0]), box[2])
    nearest_y = min(max(centre[1], box[1]), box[3])
    return math.hypot(centre[0] - nearest_x, centre[1] - nearest_y) - radius


def _crosses(box: Box, segment: Segment) -> bool:
    """Whether a horizontal or vertical segment (x0, y0, x1, y1, sorted) passes through ``box``."""
    return segment[0] <= box[2] and box[0] <= segment[2] and segment[1] <= box[3] and box[1] <= segment[3]


def _key(fig: Figure, points: Sequence[Point]) -> None:
    """Number -> full name under the chart, in as many columns as the figure's width holds; the figure grows by
    the key's height, so the axes keep their size."""
    from matplotlib.lines import Line2D

    room = fig.get_figwidth() * 0.95 - 0.5  # inches for an entry's text, beside its marker
    chars = 120
    entries = [f"{number}  {point.name}" for number, point in enumerate(points, 1)]
    while chars > 10 and max(text_width(entry, FONT_SIZE) for entry in entries) > room:
        chars -= 10  # a name wider than the figure goes on to further lines, every character kept
        entries = [f"{number}  {wrap_name(point.name, chars)}" for number, point in enumerate(points, 1)]
    handles = [
        Line2D([], [], marker="o", linestyle="", markersize=KEY_MARKER, color=point.colour, alpha=0.85)
        for point in points
    ]
    widest = max(text_width(entry, FONT_SIZE) for entry in entries) + 0.5
    columns = max(1, min(len(entries), int(fig.get_figwidth() * 0.95 // widest)))
    before = fig.get_figheight()
    key = fig.legend(
        handles,
        entries,
        loc="outside lower left",
        ncols=columns,
        fontsize=FONT_SIZE,
        title="key",
        title_fontsize=FONT_SIZE,
        alignment="left",
        labelspacing=0.4,
    )
    key.set_gid("point-key")
    fig.draw_without_rendering()
    fig.set_figheight(before + key.get_window_extent().height / fig.dpi + 0.1)


def text_width(text: str, size: float) -> float:
    """Width in inches of ``text``'s longest line in the current font at ``size`` points, as matplotlib measures
    it (inside :func:`.charts._style`, the charts' fonts)."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    renderer = RendererAgg(1, 1, 72)
    prop = FontProperties(size=size)
    return max(renderer.get_text_width_height_descent(line, prop, ismath=False)[0] for line in text.split("\n")) / 72
