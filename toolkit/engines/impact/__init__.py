"""The impact engine (:class:`ImpactEngine`, entry point ``impact``): its declarations and hooks, which queries it
answers exactly, and every name callers import, re-exported from the modules that hold them.

The engine ranks with FTS5's own bm25, exactly, from per-term postings: :mod:`rag_eval.engines.impact.write` writes
them at build time (its docstring describes the format and why the scores are FTS5's bit for bit),
:mod:`rag_eval.engines.impact.read` reads, checks and caches them, and :mod:`rag_eval.engines.impact.rank` ranks a
query with them (MaxScore pruning included) on the numpy helpers of :mod:`rag_eval.engines.impact.arrays`, and
:mod:`rag_eval.engines.impact.verify` checks them for ``index verify``.

Settings such as ``PRUNE`` or ``CACHE_BYTES`` are re-exported to be read: to change one, set it on the module
that uses it (``impact_rank.PRUNE``, ``impact_read.CACHE_BYTES``).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from ...errors import QueryError
from ...index.store import FTS5_TOKEN_BYTES
from ...search.searcher import FallbackSearcher
from ...search.sql import BY_IDS, Filters, hits_for, ids_json
from ..base import Engine, Ranked, Searcher
from .rank import (
    CHECK_FRACTION,
    CHECK_POSTINGS,
    CHECK_SHARE,
    CUT_MIN_POSTINGS,
    DISTINCT_COST,
    LOOKUP_COST,
    POOL_POSTINGS,
    PRUNE,
    PRUNE_MIN_POSTINGS,
    PRUNE_SHARE,
    Accept,
    Ranking,
    query_keys,
    ranked,
)
from .read import (
    BEST_ROWS,
    CACHE_BYTES,
    CLAMPED_IDF,
    ENTRY_BYTES,
    PRELOAD_BYTES,
    Postings,
    has_impacts,
    idf,
    postings_bytes,
    postings_table,
    preload,
    stored_postings,
)
from .verify import postings_damage
from .write import (
    BLOCK_POSTINGS,
    BLOCK_TERMS,
    BLOCKS_TABLE,
    K1,
    LEGACY_TABLE,
    TABLES,
    B,
    field_key,
    write_impacts,
)

if TYPE_CHECKING:
    from ...index.integrity import Damage
    from ...index.processing import QueryProcessing
    from ...index.store import Index
    from ...search.query import CompiledQuery
    from ...tokenizers import Tokenizer

__all__ = [
    "BEST_ROWS",
    "BLOCKS_TABLE",
    "BLOCK_POSTINGS",
    "BLOCK_TERMS",
    "CACHE_BYTES",
    "CHECK_FRACTION",
    "CHECK_POSTINGS",
    "CHECK_SHARE",
    "CLAMPED_IDF",
    "CUT_MIN_POSTINGS",
    "DISTINCT_COST",
    "ENTRY_BYTES",
    "FTS5_TOKEN_BYTES",
    "ImpactEngine",
    "K1",
    "LEGACY_TABLE",
    "LOOKUP_COST",
    "POOL_POSTINGS",
    "PRELOAD_BYTES",
    "PRUNE",
    "PRUNE_MIN_POSTINGS",
    "PRUNE_SHARE",
    "TABLES",
    "Accept",
    "B",
    "Postings",
    "Ranking",
    "fallback_reason",
    "field_key",
    "has_impacts",
    "idf",
    "postings_bytes",
    "postings_table",
    "preload",
    "query_keys",
    "ranked",
    "stored_postings",
    "write_impacts",
]


class ImpactEngine(Engine):
    """The exact impact engine: FTS5's bm25 from stored per-term postings (same hits, order and scores). A query
    the postings cannot answer exactly (a phrase) is answered by FTS5's statement, its ``fallback``, and compare
    counts those (``fts5_fallbacks``)."""

    name = "impact"
    summary = "exact impact postings (FTS5's scores and order, faster on frequent terms; the default)"
    build_engine = "impact"
    fallback = "fts5"
    tables = TABLES

    def rank(self, index: Index, compiled: CompiledQuery, limit: int, filters: Filters, keys_only: bool) -> Ranked:
        """The postings' ranking, filtered like the FTS5 statement and read from ``chunks`` the same way."""
        reader = index.db.cursor()
        reader.row_factory = None
        accept: Accept | None = None
        if any(filters.given):
            sql = f"SELECT c.id {BY_IDS} WHERE {' AND '.join(filters.clauses())}"
            params = filters.params()

            def accept(ids: list[int]) -> set[int]:
                return {row[0] for row in reader.execute(sql, [ids_json(ids), *params])}

        return Ranked(hits_for(index, reader, ranked(index, compiled, limit, accept), keys_only), index.generation)

    def fallback_reason(self, index: Index, compiled: CompiledQuery) -> str | None:
        present = index.statements.get("impacts")
        if present is None:
            present = index.statements["impacts"] = "yes" if has_impacts(index) else "no"
        if present == "no" and len(index.tokenizer.fields) > 1:
            # Hybrids built before their fields had postings (an ``impact`` build wrote none then).
            return "this hybrid index holds no impact postings; rebuild it with --engine impact"
        if present == "no":
            raise QueryError(
                f"{index.path}: this index holds no impact postings",
                hint="rebuild it with: rag-eval index build --engine impact",
            )
        return fallback_reason(index, compiled)

    def prepare(self, index: Index) -> bool:
        return preload(index)

    def searcher_stats(self, index: Index, *, fallbacks: int, prepared: bool) -> dict[str, Any]:
        # The postings the engine reads into memory (its per-index cache holds each queried term's).
        return {"fts5_fallbacks": fallbacks, "postings_bytes": postings_bytes(index.db), "postings_preloaded": prepared}

    def write_postings(self, db: sqlite3.Connection, tokenizer: Tokenizer, weights: list[float]) -> int:
        return write_impacts(db, tokenizer, weights)

    def check_postings(self, index: Index) -> list[Damage]:
        return postings_damage(index)

    def searcher(
        self, index: Index, *, mode: str, depth: int, as_of: str | None, processing: QueryProcessing | None
    ) -> Searcher:
        return FallbackSearcher(self, index, mode=mode, depth=depth, as_of=as_of, processing=processing)


def fallback_reason(index: Index, compiled: CompiledQuery) -> str | None:
    """Why the impact engine cannot answer ``compiled`` exactly (FTS5 answers then), or None when it can."""
    if compiled.mode not in ("or", "and") or compiled.phrase_filter is not None:
        return f"{compiled.mode} queries are answered by FTS5"
    for term in compiled.terms:
        if _too_long(term):
            return f"FTS5 keeps only the first {FTS5_TOKEN_BYTES:,} bytes of a {len(term):,}-character term"
        if not _single_token(index.tokenizer, term):
            return f"FTS5 reads the quoted term {term!r} as a phrase of several tokens"
    return None


def _too_long(term: str) -> bool:
    """Whether FTS5 may hold ``term`` cut short: it keeps fewer than :data:`FTS5_TOKEN_BYTES` bytes whole."""
    return len(term) * 4 >= FTS5_TOKEN_BYTES and len(term.encode("utf-8", "surrogatepass")) >= FTS5_TOKEN_BYTES


def _single_token(tokenizer: Tokenizer, term: str) -> bool:
    """Whether FTS5 tokenizes the quoted ``term`` into exactly the one token ``term``."""
    if tokenizer.native:
        return tokenizer.terms(term) == [term]  # the Python mirror gives FTS5's tokens (test_fts5_parity)
    # A Python strategy's column: FTS5's ascii tokenizer splits on whitespace and control characters and
    # folds A-Z; a term with none of them is one token, itself.
    return bool(term) and not any(c <= " " or c == "\x7f" or "A" <= c <= "Z" for c in term)
