"""Plain records at the seams: chunks that builders produce, hits that searches return, the questions a batch
answers and the ranked documents of the run it writes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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

    def provenance(self) -> dict[str, Any]:
        """Flat JSON-ready provenance: where the text came from, with the text."""
        data: dict[str, Any] = {
            "key": self.key,
            "path": self.path,
            "doc": self.doc,
            "title": self.title,
            "heading_path": self.heading_path,
            "category": self.category,
            "text": self.text,
            # The source file's sha256 at build time: what a citation is checked against (verify).
            "sha256": self.sha256,
        }
        if self.anchor:
            data["anchor"] = self.anchor
        if self.line is not None:
            # Seed 000's provenance, under its own names too (source_id, doc_id).
            data.update(
                line=self.line,
                revision=self.revision,
                status=self.status,
                expires=self.expires,
                source_id=self.key,
                doc_id=self.doc,
            )
        return data


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
        data: dict[str, Any] = {
            "rank": self.rank,
            "id": self.id,
            **self.chunk.provenance(),
            "score": self.score,
            "snippet": self.snippet,
        }
        if self.chunk.line is not None:
            data["lexical_score"] = self.score  # seed 000's name for the bm25 score
        return data


class Query(NamedTuple):
    """A labelled query; ``kind`` tags it (keyword, paraphrase, no-answer, ...) when the dataset does."""

    id: str
    text: str
    kind: str = ""


@dataclass(frozen=True)
class RankedDoc:
    """One line of a run: query, document, rank (1-based) and a strictly decreasing score."""

    query_id: str
    doc_id: str
    rank: int
    score: float
