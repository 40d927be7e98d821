"""Whether a matplotlib figure can be read: no text drawn over another, none outside the figure.

The boxes are matplotlib's own text extents (``Text.get_window_extent``) of the texts a draw actually puts on
the page: tick labels of ticks outside the view, empty strings and hidden texts are not drawn, so they are not
counted. Display coordinates: pixels at the figure's dpi, origin at the bottom left.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.text import Text

#: Pixels two boxes may share, or a box may stick out, before it counts: rounding, not a clash.
TOLERANCE = 0.5


class TextBox(NamedTuple):
    """One drawn text and its box (x0, y0, x1, y1) in display coordinates."""

    text: str
    box: tuple[float, float, float, float]


class Legibility(NamedTuple):
    """What makes a figure hard to read: pairs of texts drawn over each other, texts (partly) outside it."""

    overlaps: list[tuple[TextBox, TextBox]]
    outside: list[TextBox]

    def __bool__(self) -> bool:
        return bool(self.overlaps or self.outside)

    def describe(self) -> str:
        """The problems in words, one a line, for an assertion message."""
        lines = [f"overlap: {a.text!r} {_rounded(a.box)} and {b.text!r} {_rounded(b.box)}" for a, b in self.overlaps]
        lines += [f"outside the figure: {item.text!r} {_rounded(item.box)}" for item in self.outside]
        return "\n".join(lines)


def drawn_texts(fig: Figure) -> list[TextBox]:
    """Every text a draw of ``fig`` puts on the page, with its box, in drawing order."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.text import Text

    drawn: dict[str, Text] = {}
    unknown: list[str] = []

    class Recorder(RendererAgg):
        """Draws nothing; notes which texts a draw opens (``Text.draw`` opens a group named by its gid)."""

        def open_group(self, s: str, gid: str | None = None) -> None:
            if s == "text":
                if gid in marked:
                    drawn.setdefault(gid, marked[gid])
                else:
                    unknown.append(str(gid))

        def draw_text(self, *args: Any, **kwargs: Any) -> None:
            pass

    with warnings.catch_warnings():
        # As when the chart was drawn: Han glyphs missing from the measuring font are the browser's to draw.
        warnings.filterwarnings("ignore", message=r"Glyph .* missing from font", category=UserWarning)
        fig.draw_without_rendering()  # every tick made, so each text the next draw opens is one marked here
        texts = fig.findobj(Text)
        kept = [text.get_gid() for text in texts]
        marked = {f"legibility-{number}": text for number, text in enumerate(texts)}
        for gid, text in marked.items():
            text.set_gid(gid)
        try:
            width, height = fig.get_size_inches() * fig.dpi
            renderer = Recorder(int(width), int(height), fig.dpi)
            fig.draw(renderer)
            boxes = []
            for text in drawn.values():
                # The text's own box: an annotation's extent also holds its arrow and the box drawn behind it.
                extent = Text.get_window_extent(text, renderer)
                box = (float(extent.x0), float(extent.y0), float(extent.x1), float(extent.y1))
                boxes.append(TextBox(text.get_text(), box))
        finally:
            for text, original in zip(texts, kept, strict=True):
                text.set_gid(original)
    if unknown:
        raise RuntimeError(f"texts drawn that were not in the figure before the draw: {unknown}")
    return boxes


def text_problems(fig: Figure, tolerance: float = TOLERANCE) -> Legibility:
    """The texts of ``fig`` that overlap one another, and those not wholly inside the figure."""
    boxes = drawn_texts(fig)
    width, height = fig.get_size_inches() * fig.dpi
    overlaps = [
        (a, b)
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if min(a.box[2], b.box[2]) - max(a.box[0], b.box[0]) > tolerance
        and min(a.box[3], b.box[3]) - max(a.box[1], b.box[1]) > tolerance
    ]
    outside = [
        item
        for item in boxes
        if item.box[0] < -tolerance
        or item.box[1] < -tolerance
        or item.box[2] > width + tolerance
        or item.box[3] > height + tolerance
    ]
    return Legibility(overlaps, outside)


def _rounded(box: tuple[float, float, float, float]) -> tuple[float, ...]:
    return tuple(round(value, 1) for value in box)
