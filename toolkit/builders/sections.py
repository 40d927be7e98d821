"""``sections``: seed 001's Markdown section index. One chunk per heading, with a unique anchor."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from ..errors import CorpusError
from ..records import Chunk
from ..spec import Option, OptionSet, whole
from .base import TITLE_WEIGHT, WHOLE_FILE_BYTES, Builder, FileRef, QueryDefaults, SourceFile, locate
from .keys import section_key, unit_of

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
#: A blank line between paragraphs, in LF or CRLF files.
_PARAGRAPH_BREAK = re.compile(r"\r?\n[ \t]*\r?\n")
_SLUG_WORDS = re.compile(r"[\w\u4e00-\u9fff]+")
PREAMBLE = "_preamble"
ROOT = "_root"
#: Characters of a heading that every chunk under it repeats: its title, the heading paths of its parts
#: and subsections, and the anchor slug. Each of those is stored and indexed once per chunk, so an
#: unbounded heading would be copied into all the parts of an oversized section. A longer heading is
#: cut here (the title ends in "…"); the full heading stays in the section's own text.
MAX_HEADING_CHARS = 200


def slugify(heading: str) -> str:
    """NFKC, lowercase, words (CJK kept) joined by ``-``; ``section`` when nothing is left (``ＦＡＱ`` -> ``faq``).

    Only the first ``MAX_HEADING_CHARS`` characters of the heading are used.
    """
    clipped = heading[:MAX_HEADING_CHARS]
    return "-".join(_SLUG_WORDS.findall(unicodedata.normalize("NFKC", clipped).lower())) or "section"


def clip_heading(heading: str) -> str:
    """``heading`` cut to ``MAX_HEADING_CHARS`` characters, ending in ``…`` when it was cut."""
    if len(heading) <= MAX_HEADING_CHARS:
        return heading
    return heading[:MAX_HEADING_CHARS].rstrip() + "…"


def atx_heading(line: str) -> tuple[int, str] | None:
    """``(level, name)`` of an ATX heading line (``#`` to ``######``), or None; the closing ``#``s dropped.

    Read with string scans, not a pattern: ``^ {0,3}(#{1,6})(?:[ \\t]+(.*?))?(?:[ \\t]+#+)?[ \\t]*$`` gives
    the same result but backtracks in quadratic time on a long heading with a long run of inner spaces.
    """
    rest = line.lstrip(" ")
    if len(line) - len(rest) > 3:
        return None
    after = rest.lstrip("#")
    level = len(rest) - len(after)
    if not 1 <= level <= 6 or after[:1] not in ("", " ", "\t"):
        return None
    name = after.strip(" \t")
    without_closing = name.rstrip("#")
    if len(without_closing) < len(name) and without_closing[-1:] in (" ", "\t"):
        name = without_closing.rstrip(" \t")
    return level, name.strip()


class AnchorSet:
    """Hands out anchors unique within one file: ``a``, ``a-2``, ``a-3`` ..., each checked against all used.

    Seed 001's counter gave headings ``A``, ``A``, ``A-2`` the anchors ``a``, ``a-2``, ``a-2``; here the
    third heading gets ``a-2-2`` because every candidate is checked against the anchors already handed out.
    """

    def __init__(self) -> None:
        self.used: set[str] = set()
        # Per base, the last number tried: anchors are never released, so a candidate taken once stays
        # taken, and the next search for the same base resumes there (n equal headings cost n, not n^2).
        self.tried: dict[str, int] = {}

    def reserve(self, base: str) -> str:
        """The first of ``base``, ``base-2``, ``base-3``, ... not used yet."""
        number = self.tried.get(base, 1)
        candidate = base if number == 1 else f"{base}-{number}"
        while candidate in self.used:
            number += 1
            candidate = f"{base}-{number}"
        self.tried[base] = number
        self.used.add(candidate)
        return candidate


@dataclass(frozen=True)
class Section:
    """A heading's section before oversized splitting."""

    anchor: str
    title: str
    heading_path: str
    text: str


def split_markdown(text: str, title: str) -> list[Section]:
    """Sections of a Markdown document at ATX headings (``#`` to ``######``) outside fenced code.

    Setext headings (a line underlined with ``===`` or ``---``) are not split on: in knowledge bases
    ``---`` is more often a thematic break or front matter than a heading. Text before the first heading
    becomes ``_preamble``; a file without headings is one ``_root`` section.
    """
    lines = text.split("\n")
    anchors = AnchorSet()
    anchors.used.update((PREAMBLE, ROOT))
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    current: tuple[str, str, str] | None = None
    body: list[str] = []
    fence: str | None = None

    def flush() -> None:
        block = "\n".join(body).strip("\r\n")
        if current is None:
            if block.strip():
                sections.append(Section(PREAMBLE, title, "", block))
        else:
            sections.append(Section(current[0], current[1], current[2], block))

    for raw in lines:
        # A CRLF file's lines end in "\r": the text keeps it, but a heading's closing #s come before it.
        line = raw[:-1] if raw.endswith("\r") else raw
        fenced = _FENCE.match(line)
        if fence is not None:
            if fenced and fenced.group(1)[0] == fence[0] and len(fenced.group(1)) >= len(fence):
                fence = None
            body.append(raw)
            continue
        if fenced:
            fence = fenced.group(1)
            body.append(raw)
            continue
        heading = atx_heading(line)
        if heading is None:
            body.append(raw)
            continue
        flush()
        level, name = heading
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, clip_heading(name)))
        current = (anchors.reserve(slugify(name)), stack[-1][1], " > ".join(h for _, h in stack))
        body = [raw]
    if current is None and not sections:
        block = "\n".join(body).strip("\r\n")
        return [Section(ROOT, title, "", block)] if block.strip() else []
    flush()
    return sections


def split_oversized(section: Section, max_chars: int) -> list[Section]:
    """Pack paragraphs (blank-line separated) into parts of at most ``max_chars``; suffix ``~2``, ``~3``.

    Only a single paragraph longer than ``max_chars`` is cut hard, at ``max_chars``.
    """
    if len(section.text) <= max_chars:
        return [section]
    pieces: list[str] = []
    for paragraph in _PARAGRAPH_BREAK.split(section.text):
        cut = 0
        while len(paragraph) - cut > max_chars:  # offsets, not re-slicing the rest: linear in the paragraph
            pieces.append(paragraph[cut : cut + max_chars])
            cut += max_chars
        if paragraph[cut:].strip():
            pieces.append(paragraph[cut:])
    parts: list[str] = []
    for piece in pieces:
        if parts and len(parts[-1]) + 2 + len(piece) <= max_chars:
            parts[-1] += "\n\n" + piece
        else:
            parts.append(piece)
    return [
        Section(section.anchor if i == 0 else f"{section.anchor}~{i + 1}", section.title, section.heading_path, part)
        for i, part in enumerate(parts)
    ]


class SectionsBuilder(Builder):
    """Markdown files under a root (recursive, sorted); one chunk per heading, heading line included.

    Anchors keep CJK and are unique per file (``path#anchor`` is the key); the heading path reads
    "A > B > C"; the category is the top-level folder; sections over ``max_chars`` split at blank lines.
    Titles, heading paths and anchors use at most ``MAX_HEADING_CHARS`` characters of each heading.
    """

    name = "sections"
    summary = "Markdown sections with unique anchors and heading paths (seed 001)"
    option_set = OptionSet(
        (
            Option(
                "max_chars",
                "split sections longer than this at blank lines (~2, ~3 suffixes)",
                2000,
                whole(1, 1_000_000_000),
            ),
            Option("max_bytes", "largest Markdown file accepted, in bytes", 5_000_000, WHOLE_FILE_BYTES),
            Option("title_weight", "bm25 weight of the heading column (the body has weight 1)", 1.0, TITLE_WEIGHT),
        )
    )

    recognise_order = 30
    recognised_layout = "Markdown files"
    text_markup = "markdown"
    unit_words = "whole Markdown sections"

    @classmethod
    def recognises(cls, source: Path) -> bool:
        return source.is_dir() and next(source.rglob("*.md"), None) is not None

    def _plan(self, source: Path) -> tuple[Path, list[FileRef]]:
        if not source.is_dir():
            raise CorpusError(f"{source}: the sections builder needs a folder of Markdown files")
        root = source.resolve()
        names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md") if not p.is_dir())
        if not names:
            raise CorpusError(f"{source}: no .md files found")
        for name in names:
            locate(root, name, max_bytes=self.options["max_bytes"])
        return root, [FileRef(name) for name in names]

    def chunks(self, file: SourceFile) -> list[Chunk]:
        path = file.path
        category = path.split("/", 1)[0] if "/" in path else ""
        title = Path(path).stem
        chunks = []
        for section in split_markdown(file.text(), title):
            for part in split_oversized(section, self.options["max_chars"]):
                chunks.append(
                    Chunk(
                        key=section_key(path, part.anchor),
                        text=part.text,
                        path=path,
                        doc=path,
                        title=part.title,
                        anchor=part.anchor,
                        heading_path=part.heading_path,
                        category=category,
                        sha256=file.sha256,
                    )
                )
        return chunks

    def chunk_words(self) -> str:
        """Sections, the longer ones in parts: why an index has more chunks than compare has passages."""
        return f"Markdown sections, one longer than {self.options['max_chars']:,} characters split into parts"

    def unit(self, key: str) -> str:
        """A split section's part ``path#anchor~2`` is judged as its section ``path#anchor``."""
        return unit_of(key)

    def units(self, file: SourceFile) -> list[tuple[str, str, str]]:
        """Whole sections (before splitting for size), titled by their heading path."""
        return [
            (section_key(file.path, section.anchor), section.heading_path or section.title, section.text)
            for section in split_markdown(file.text(), Path(file.path).stem)
        ]

    def query_defaults(self) -> QueryDefaults:
        return QueryDefaults(
            mode="or",
            snippet="window",
            open_marker="【",
            close_marker="】",
            ellipsis="…",
            window=150,
            max_highlights=5,
            max_len=300,
            max_query_chars=200,
            max_terms=None,
            max_results=20,
            default_limit=10,
            title_weight=self.options["title_weight"],
        )
