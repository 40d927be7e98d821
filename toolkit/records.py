"""Plain records at the seams: chunks that builders produce and hits that searches return."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

#: ``progress(phase, done, total)``: what long work reports as it goes (builds, comparisons, tokenizing).
Progress = Callable[[str, int, int], None]


class Chunk(NamedTuple):
    """One indexed unit of text with its provenance.

    ``key`` is unique in an index and stable across rebuilds of the same sources: a ``lines`` source
    id (``doc@rev:sha256#L2``), a section's ``path#anchor``, a passage id.
    """

    key: str
    text: str
    path: str = ""
    doc: str = ""
    title: str = ""
    anchor: str = ""
    heading_path: str = ""
    category: str = ""
    line: int | None = None
    revision: str = ""
    sha256: str = ""
    status: str = "current"
    expires: str | None = None


class Hit(NamedTuple):
    """A search result: the chunk, its bm25 score (lower is better, as FTS5 reports it) and a snippet.

    Records are NamedTuples: a search creates one per hit, and a frozen dataclass costs several times
    more to build, which showed up as toolkit overhead over the bare FTS5 statement.
    """

    id: int
    rank: int
    score: float
    snippet: str
    chunk: Chunk

    def as_dict(self) -> dict[str, Any]:
        """Flat JSON-ready provenance for the evidence result (tools, the CLI, the MCP server)."""
        chunk = self.chunk
        data: dict[str, Any] = {
            "rank": self.rank,
            "id": self.id,
            "key": chunk.key,
            "path": chunk.path,
            "doc": chunk.doc,
            "title": chunk.title,
            "heading_path": chunk.heading_path,
            "category": chunk.category,
            "score": self.score,
            "snippet": self.snippet,
            "text": chunk.text,
            # The source file's sha256 at build time: what a citation is checked against (verify).
            "sha256": chunk.sha256,
        }
        if chunk.anchor:
            data["anchor"] = chunk.anchor
        if chunk.line is not None:
            # Seed 000's provenance, under its own names too (source_id, doc_id, lexical_score).
            data.update(
                line=chunk.line,
                revision=chunk.revision,
                status=chunk.status,
                expires=chunk.expires,
                source_id=chunk.key,
                doc_id=chunk.doc,
                lexical_score=self.score,
            )
        return data
