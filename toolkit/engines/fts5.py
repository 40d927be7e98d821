"""The fts5 engine: FTS5's own bm25 statement (``ORDER BY bm25(search, weights...), rowid``), the reference every
exact engine reproduces and the fallback of the impact engine.

One statement ranks, cuts and reads the top rows of the chunks table with the build generation
(:func:`top_statement`), so a search with it needs no read transaction. A phrase query on a strategy whose
tokens overlap is answered by ranking every match and keeping those whose normalised text holds the phrase.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..index.columns import column_weights
from ..records import Chunk, Hit
from ..search.searcher import SearchSearcher
from ..search.sql import (
    CHUNK_FIELDS,
    GENERATION_SQL,
    KEY_FIELDS,
    Filters,
    filter_clauses,
    new_chunk,
    new_hit,
)
from ..tokenizers import normalise
from .base import Engine, Ranked, Searcher

if TYPE_CHECKING:
    from ..index.processing import QueryProcessing
    from ..index.store import Index
    from ..search.query import CompiledQuery


class Fts5Engine(Engine):
    """FTS5's own bm25 statement (``ORDER BY bm25(...), rowid``)."""

    name = "fts5"
    summary = "FTS5's bm25 statement (the reference ranking)"
    build_engine = "fts5"
    one_statement = True
    #: ``bm25()`` takes column weights, never a weight per query term.
    weighted_terms = False

    def rank(self, index: Index, compiled: CompiledQuery, limit: int, filters: Filters, keys_only: bool) -> Ranked:
        return Ranked(*fts5_ranked(index, compiled, limit, filters, keys_only))

    def searcher(
        self, index: Index, *, mode: str, depth: int, as_of: str | None, processing: QueryProcessing | None
    ) -> Searcher:
        return SearchSearcher(self, index, mode=mode, depth=depth, as_of=as_of, processing=processing)


def fts5_ranked(
    index: Index, compiled: CompiledQuery, limit: int, filters: Filters, keys_only: bool = False
) -> tuple[list[Hit], str | None]:
    """The hits and the build generation they were read from: returned by the statement itself, or read
    right after it when it found nothing (None for a phrase-filtered search, which runs in a transaction)."""
    params: list[Any] = [compiled.expression, *filters.params()]
    ranking = ranking_sql(index, *filters.given)
    cursor = index.db.cursor()
    cursor.row_factory = None
    if compiled.phrase_filter is None:
        rows = cursor.execute(top_statement(index, ranking, keys_only), [*params, limit]).fetchall()
        if not rows:
            found = cursor.execute(GENERATION_SQL).fetchone()
            return [], None if found is None else found[0]
        rows.sort(key=_rank_order)  # the statement leaves the order to us (see top_statement)
        if keys_only:
            hits = [new_hit((row[0], rank, row[1], "", Chunk(row[2], ""))) for rank, row in enumerate(rows, 1)]
        else:
            hits = [new_hit((row[0], rank, row[1], "", new_chunk(row[2:-1]))) for rank, row in enumerate(rows, 1)]
        return hits, rows[0][-1]
    hits = []
    t2s = index.tokenizer.converts_traditional
    needle = "".join(compiled.phrase_filter.split())
    reader = index.db.cursor()
    reader.row_factory = None
    for chunk_id, score in cursor.execute(ranking, params):
        row = reader.execute(f"SELECT {CHUNK_FIELDS} FROM chunks c WHERE c.id = ?", (chunk_id,)).fetchone()
        chunk = Chunk(*row)
        if any(needle in "".join(normalise(value, t2s=t2s).split()) for value in (chunk.text, chunk.title)):
            hits.append(Hit(chunk_id, len(hits) + 1, score, "", chunk))
            if len(hits) == limit:
                break
    cursor.close()
    return hits, None


def _rank_order(row: tuple) -> tuple[float, int]:
    return row[1], row[0]


def ranking_sql(index: Index, as_of: bool, category: bool, path_prefix: bool) -> str:
    """The ranking statement for a combination of filters, built once per index (it is on the hot path)."""
    key = (as_of, category, path_prefix)
    cached = index.statements.get(key)
    if cached is None:
        where, join = ["search MATCH ?"], ""
        if as_of or category or path_prefix:
            join = " JOIN chunks c ON c.id = search.rowid"
        where += filter_clauses(as_of, category, path_prefix)
        weights = ", ".join(repr(weight) for weight in column_weights(index))
        cached = (
            f"SELECT search.rowid AS id, bm25(search, {weights}) AS score FROM search{join} "
            f"WHERE {' AND '.join(where)} ORDER BY score, search.rowid"
        )
        index.statements[key] = cached
    return cached


def top_statement(index: Index, ranking: str | None = None, keys_only: bool = False) -> str:
    """The one statement a search without a phrase filter issues: rank and cut in FTS5, then read only
    the top rows of the chunks table (plus the build generation). Parameters: the MATCH expression, any
    filter values, the limit. Benchmarks time it bare to measure rag-eval's own overhead.

    It has no outer ORDER BY: SQLite would copy every row, whole texts included, through a sorter (a
    10 MB passage took the statement from 54 to 220 ms); the caller sorts the few rows by (score, id).
    ``keys_only`` reads the chunk's key alone instead of all its fields.
    """
    ranking = ranking or ranking_sql(index, False, False, False)
    fields = KEY_FIELDS if keys_only else CHUNK_FIELDS
    name = (keys_only, ranking)
    cached = index.statements.get(name)
    if cached is None:
        # The last column is the build generation, read in the same statement (the same snapshot) as the rows.
        cached = index.statements[name] = (
            f"SELECT r.id, r.score, {fields}, "
            f"(SELECT value FROM meta WHERE key = 'generation') "
            f"FROM ({ranking} LIMIT ?) AS r "
            f"JOIN chunks c ON c.id = r.id"
        )
    return cached
