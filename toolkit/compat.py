"""The seeds' own call signatures on top of rag-eval, so code written against them keeps working.

Seed 000 (an evidence index for agents): ``connect``, ``sync``, ``retrieve``, ``verify_source``,
``expression``, ``search_tool``; unicode61 by default, any registered tokenizer selectable.
Seed 001 (a Markdown section index): ``DocIndex(docs_root, db_path=":memory:")`` with ``build``,
``search``, ``list`` and ``read``; jieba search mode by default.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import CorpusError, IndexFileError, QueryError, ReadError, SpecError
from .files.textio import path_argument, shown, text_argument
from .index import store, writer
from .index.verify import verify_source
from .search.evidence import evidence
from .search.query import compile_query
from .search.read import list_entries, read
from .search.searching import search
from .tokenizers import get_tokenizer

__all__ = ["DocIndex", "SearchHit", "connect", "expression", "retrieve", "search_tool", "sync", "verify_source"]

#: Seed 000 refused sample files over 100,000 bytes.
SEED_MAX_BYTES = 100_000


class _Connection(sqlite3.Connection):
    """A connection that remembers the tokenizer chosen at ``connect`` and its open Index."""

    rag_eval_tokenizer: str | None = None
    rag_eval_index: store.Index | None = None


def _tokenizer_argument(value: object) -> str | None:
    """``value`` if it is a spec string or None (the default), else SpecError naming its type."""
    if value is not None and not isinstance(value, str):
        raise SpecError(f"tokenizer must be a spec string such as 'jieba', not {type(value).__name__}")
    return value


def connect(path: str | Path, tokenizer: str | None = None, *, check_same_thread: bool = True) -> sqlite3.Connection:
    """Open (or create) an index file.

    ``tokenizer`` (default: the index's own, else unicode61 as in seed 000) is what ``sync`` builds with;
    reading an index built with another tokenizer through this connection is an error.
    """
    name = path_argument(path, "index path", IndexFileError)
    tokenizer = _tokenizer_argument(tokenizer)
    # Opening for writing switches a database to WAL: someone else's must not be touched, even by looking.
    reason = store.foreign_reason(name) if name != ":memory:" else None
    if reason is not None:
        raise IndexFileError(
            f"{name}: refusing to open it as an index: {reason}; rag-eval only writes its own index files",
            hint="choose a new index path",
        )
    try:
        db = store.connect(name, check_same_thread=check_same_thread, factory=_Connection)
    except sqlite3.Error as exc:  # a folder, a missing folder, a file that is not SQLite
        raise IndexFileError(f"{name}: cannot open the index ({exc})") from None
    db.rag_eval_tokenizer = tokenizer  # type: ignore[attr-defined]
    return db


def _path_of(db: sqlite3.Connection) -> str:
    if not isinstance(db, sqlite3.Connection):
        raise IndexFileError(f"db must be a connection from rag_eval.compat.connect, not {type(db).__name__}")
    try:
        file = db.execute("PRAGMA database_list").fetchone()[2]
    except sqlite3.Error as exc:  # closed, or used from another thread
        raise IndexFileError(
            f"cannot use this connection ({exc})", hint="open one with rag_eval.compat.connect"
        ) from None
    return file or ":memory:"


def _as_of_argument(as_of: Any) -> Any:
    """Seed 000 filters every search by date: ``as_of`` may not be None (a search without it would also return
    archived and expired lines); its format is checked by the search."""
    if as_of is None:
        raise QueryError("as-of date None: use YYYY-MM-DD")
    return as_of


def _index(db: sqlite3.Connection) -> store.Index:
    path = _path_of(db)
    cached = getattr(db, "rag_eval_index", None)
    if cached is None:
        cached = store.Index.from_connection(db, path, tokenizer=getattr(db, "rag_eval_tokenizer", None))
        if isinstance(db, _Connection):
            db.rag_eval_index = cached
    return cached


def sync(db: sqlite3.Connection, folder: str | Path, *, tokenizer: str | None = None) -> int:
    """Validate the whole manifest, then replace the index in one transaction; returns the line count."""
    path = _path_of(db)
    source = path_argument(folder, "corpus folder", CorpusError)
    tokenizer = _tokenizer_argument(tokenizer)
    meta = store.read_meta(db)
    chosen = tokenizer or getattr(db, "rag_eval_tokenizer", None) or meta.get("tokenizer") or "unicode61"
    report = writer.build(source, path, builder=f"lines:max_bytes={SEED_MAX_BYTES}", tokenizer=chosen, db=db)
    if isinstance(db, _Connection):
        db.rag_eval_index = None
    return report.chunks


def expression(query: Any, tokenizer: str = "unicode61") -> str | None:
    """The FTS5 expression for ``query`` (seed 000's contract: at most 200 characters and 12 terms, no NUL)."""
    if not isinstance(tokenizer, str):
        raise SpecError(f"tokenizer must be a spec string such as 'unicode61', not {type(tokenizer).__name__}")
    return compile_query(get_tokenizer(tokenizer), query, "and", max_chars=200, max_terms=12).expression


def retrieve(db: sqlite3.Connection, query: str, *, as_of: str, limit: int = 10) -> list[dict[str, Any]]:
    """Current, unexpired lines matching every term, best bm25 first, as seed 000's row dicts."""
    index = _index(db)
    if limit is None:  # seed 000 takes an int from 1 to 20; None is not its default
        raise QueryError(f"limit must be an integer from 1 to 20, not {shown(limit)}")
    hits = search(index, query, mode="and", as_of=_as_of_argument(as_of), limit=limit).hits
    return [
        {
            "id": hit.id,
            "source_id": hit.chunk.key,
            "doc_id": hit.chunk.doc,
            "revision": hit.chunk.revision,
            "path": hit.chunk.path,
            "sha256": hit.chunk.sha256,
            "line": hit.chunk.line,
            "text": hit.chunk.text,
            "status": hit.chunk.status,
            "expires": hit.chunk.expires,
            "title": hit.chunk.title,
            "snippet": hit.snippet,
            "lexical_score": hit.score,
        }
        for hit in hits
    ]


def search_tool(db: sqlite3.Connection, query: str, *, as_of: str) -> dict[str, Any]:
    """Seed 000's tool result: evidence only, ``action_authority: false``, no answer field.

    The same result ``rag-eval search --json`` and the MCP server return (:func:`rag_eval.search.evidence.evidence`),
    searched as seed 000's ``retrieve`` searches: every term, ten hits; each hit has seed 000's row fields.
    """
    return evidence(_index(db), query, as_of=_as_of_argument(as_of), mode="and", limit=10)


@dataclass(frozen=True)
class SearchHit:
    """Seed 001's search result."""

    path: str
    anchor: str
    title: str
    heading_path: str
    category: str
    snippet: str
    score: float


class DocIndex:
    """Seed 001's Markdown section index: ``build()`` offline, then ``search``, ``list`` and ``read``."""

    def __init__(
        self,
        docs_root: str | Path,
        db_path: str | Path = ":memory:",
        *,
        tokenizer: str = "jieba",
        max_chars: int = 2000,
    ) -> None:
        self.docs_root = Path(path_argument(docs_root, "docs_root", CorpusError)).resolve()
        self.db_path = path_argument(db_path, "db_path", IndexFileError)
        self.tokenizer = _tokenizer_argument(tokenizer)
        self.max_chars = max_chars
        self.db = connect(self.db_path, tokenizer, check_same_thread=False)

    def build(self) -> int:
        """Full rebuild from ``docs_root``; returns the number of sections."""
        report = writer.build(
            self.docs_root,
            self.db_path,
            builder=f"sections:max_chars={self.max_chars}",
            tokenizer=self.tokenizer,
            db=self.db,
        )
        self.db.rag_eval_index = None  # type: ignore[attr-defined]
        return report.chunks

    def search(self, query: str, limit: int = 10, *, category: str | None = None) -> list[SearchHit]:
        """Sections ranked by bm25 over an OR of the query's tokens, with 【】 snippets."""
        hits = search(_index(self.db), query, limit=limit, category=category).hits
        return [
            SearchHit(
                h.chunk.path, h.chunk.anchor, h.chunk.title, h.chunk.heading_path, h.chunk.category, h.snippet, h.score
            )
            for h in hits
        ]

    def list(self, category: str | None = None) -> list[dict[str, Any]]:
        """Every section (path, anchor, title, heading path, category, length), optionally one category."""
        return list_entries(_index(self.db), category=category)

    def read(self, path: str, anchor: str | None = None) -> str:
        """A stored section by anchor, or a whole file under ``docs_root`` (PermissionError on escape)."""
        text_argument(path, "path", ReadError)
        if anchor is not None:
            text_argument(anchor, "anchor", ReadError)
        target = f"{path}#{anchor or ''}"  # an empty anchor reads the whole file, whatever its name holds
        return read(_index(self.db), target, root=self.docs_root)

    def close(self) -> None:
        """Close the connection."""
        self.db.close()
