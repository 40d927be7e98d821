"""A passage's Markdown as safe HTML for the judging page, with the question's terms marked in it.

markdown-it-py parses the text (CommonMark with pipe tables and strikethrough, raw HTML off); the HTML is built
here from its tokens, not by its renderer, so what comes out is only the tags in ``TAGS`` (plus ``span`` and
``mark`` of our own), every text escaped, and no attribute taken from the passage but a link's address as a
``title``: a link is its text, never an ``href`` (a hostile or phishing address must not become clickable), an
image is its alt text (never loaded), raw HTML is shown as text. The question's terms are found in the text as
it reads (emphasis markers, link targets and table pipes gone, each cell and block apart) and marked there.
"""

from __future__ import annotations

import html
import itertools
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

#: ``(start, end, level)`` spans of a text to mark: level 2 a word, 1 single characters only (judge_session).
Marks = Sequence[tuple[int, int, int]]
#: Finds the spans to mark in a text (the question's terms under every compared tokenizer).
Marker = Callable[[str], Marks]

#: The tags copied from markdown-it's tokens; any other token keeps its text and loses its tag.
TAGS = frozenset(
    {"p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "ul", "ol", "li", "table", "thead", "tbody", "tr"}
    | {"th", "td", "em", "strong", "s", "code", "pre", "hr", "br"}
)
#: Table cell alignments markdown-it writes as ``style="text-align:..."``, given as classes instead (the page's
#: Content-Security-Policy refuses inline styles).
_ALIGN = {"text-align:left": "left", "text-align:center": "center", "text-align:right": "right"}
#: Tags written without a closing tag.
_VOID = frozenset({"hr", "br"})


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def render_markdown(text: str, mark: Marker | None = None) -> str:
    """``text`` (Markdown) as HTML of the tags in ``TAGS`` with every text escaped; ``mark`` finds the spans of
    the text as it reads (see the module docstring) that are wrapped in ``<mark>``."""
    writer = _Writer()
    writer.blocks(_parser().parse(text))
    return writer.html(mark(writer.plain()) if mark is not None else ())


class _Writer:
    """Tags and text pieces in document order; the text pieces also make up the text as it reads."""

    def __init__(self) -> None:
        self.out: list[str | tuple[int, str]] = []  # a tag, or (offset in the plain text, text to escape and mark)
        self.parts: list[str] = []
        self.length = 0

    def text(self, content: str) -> None:
        if content:
            self.out.append((self.length, content))
            self.parts.append(content)
            self.length += len(content)

    def gap(self) -> None:
        """A break in the text as it reads, so that no term runs across two cells or blocks."""
        self.parts.append("\n")
        self.length += 1

    def tag(self, token: Token) -> None:
        if token.tag not in TAGS or token.hidden:  # hidden: a tight list's paragraphs
            return
        if token.nesting == -1:
            self.out.append(f"</{token.tag}>")
            return
        attributes = ""
        if token.tag in ("th", "td"):
            align = _ALIGN.get(str(token.attrs.get("style", "")))
            attributes = f' class="{align}"' if align else ""
        elif token.tag == "ol":
            start = str(token.attrs.get("start", ""))
            attributes = f' start="{int(start)}"' if start.isascii() and start.isdigit() and len(start) < 10 else ""
        self.out.append(f"<{token.tag}{attributes}>")

    def blocks(self, tokens: Iterable[Token]) -> None:
        for token in tokens:
            if token.type == "inline":
                self.inline(token.children or [])
                self.gap()
            elif token.type in ("fence", "code_block"):
                self.out.append("<pre><code>")
                self.text(token.content)
                self.out.append("</code></pre>")
                self.gap()
            elif token.tag in _VOID:
                self.out.append(f"<{token.tag}>")
                self.gap()
            elif token.nesting != 0:
                self.tag(token)
            else:  # raw HTML (were it ever on) or a token of another kind: its text, escaped
                self.out.append("<p>")
                self.text(token.content)
                self.out.append("</p>")
                self.gap()

    def inline(self, tokens: Iterable[Token]) -> None:
        for token in tokens:
            if token.type == "softbreak":
                self.text("\n")
            elif token.type == "hardbreak":
                self.out.append("<br>")
                self.text("\n")
            elif token.type == "code_inline":
                self.out.append("<code>")
                self.text(token.content)
                self.out.append("</code>")
            elif token.type == "link_open":
                self.out.append(f'<span class="link" title="{html.escape(str(token.attrs.get("href", "")))}">')
            elif token.type == "link_close":
                self.out.append("</span>")
            elif token.type == "image":
                where = html.escape(str(token.attrs.get("src", "")))
                self.out.append(f'<span class="image" title="image: {where}">')
                self.inline(token.children or [])
                self.out.append("</span>")
            elif token.nesting != 0:
                self.tag(token)
            else:  # text, and raw inline HTML (were it ever on) as text
                self.text(token.content)

    def plain(self) -> str:
        """The text as it reads: what the question's terms are looked for in."""
        return "".join(self.parts)

    def html(self, marks: Marks) -> str:
        spans = sorted((start, end, level) for start, end, level in marks if end > start)
        ends = list(itertools.accumulate((end for _, end, _ in spans), max))  # sorted, for bisect
        pieces: list[str] = []
        for piece in self.out:
            if isinstance(piece, str):
                pieces.append(piece)
            else:
                pieces.append(_marked(piece[1], piece[0], spans, ends))
        return "".join(pieces)


def _marked(content: str, offset: int, spans: list[tuple[int, int, int]], ends: list[int]) -> str:
    """``content`` (at ``offset`` in the plain text) escaped, its part of every span in ``<mark>``."""
    pieces: list[str] = []
    at = 0
    stop = offset + len(content)
    for start, end, level in spans[bisect_right(ends, offset) :]:
        if start >= stop:
            break
        begin, finish = max(start - offset, at), min(end, stop) - offset
        if finish <= begin:
            continue  # a span overlapping one marked already
        if begin > at:
            pieces.append(html.escape(content[at:begin], quote=False))
        tag = "<mark>" if level >= 2 else '<mark class="char">'
        pieces.append(tag + html.escape(content[begin:finish], quote=False) + "</mark>")
        at = finish
    pieces.append(html.escape(content[at:], quote=False))
    return "".join(pieces)
