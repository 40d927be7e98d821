"""Reading rendered pages: an HTML page's tags and text, Markdown as GitHub shows it, Debian's chromium."""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser

#: Debian's chromium: Playwright drives it and never downloads a browser of its own.
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


class Page(HTMLParser):
    """Tags, ids and text of an HTML page (or of Markdown rendered to HTML)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.ids: list[str] = []
        self.text: list[str] = []
        self.headings: list[str] = []
        self._heading: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.ids += [value or "" for name, value in attrs if name == "id"]
        if tag in ("h1", "h2"):
            self._heading = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h1", "h2") and self._heading is not None:
            self.headings.append("".join(self._heading).strip())
            self._heading = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._heading is not None:
            self._heading.append(data)


def markdown_html(markdown: str) -> str:
    """Markdown as a CommonMark renderer with GFM tables shows it, raw HTML allowed (as GitHub's input is)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def _tables(html: str) -> list[list[int]]:
    """Cells per row of every table of rendered HTML."""
    return [
        [len(re.findall(r"<t[hd][ >]", row)) for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)]
        for table in re.findall(r"<table>(.*?)</table>", html, re.S)
    ]
