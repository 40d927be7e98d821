"""The SQL a search issues: FTS5's bm25 ranking with the filters and column weights, and both engines' hits
read from the chunks table."""

from __future__ import annotations

import functools
import sqlite3
from typing import Any

from ..builders import QueryDefaults
from ..engines import impact
from ..errors import IndexFileError
from ..index.store import Index
from ..records import Chunk, Hit
from ..tokenizers import Tokenizer, normalise
from .query import CompiledQuery

#: Chunk's fields, in order, as columns of ``chunks c``.
CHUNK_FIELDS = ", ".join(f"c.{name}" for name in Chunk._fields)
#: What a keys-only search reads of each hit's row.
KEY_FIELDS = "c.key"
#: Chunks read for a list of ids, driven by the list (CROSS JOIN keeps that order of loops): one rowid lookup
#: per id, no scan.
_BY_IDS = "FROM json_each(?) AS j CROSS JOIN chunks c ON c.id = j.value"


def impact_ranked(
    index: Index,
    compiled: CompiledQuery,
    limit: int,
    as_of: str | None,
    category: str | None,
    path_prefix: str | None,
    keys_only: bool = False,
) -> list[Hit]:
    """The impact engine's hits, filtered like the FTS5 statement and read from ``chunks`` the same way."""
    reader = index.db.cursor()
    reader.row_factory = None
    accept: impact.Accept | None = None
    if as_of is not None or category is not None or path_prefix is not None:
        where = " AND ".join(filter_clauses(as_of is not None, category is not None, path_prefix is not None))
        sql = f"SELECT c.id {_BY_IDS} WHERE {where}"
        params = filter_params(as_of, category, path_prefix)

        def accept(ids: list[int]) -> set[int]:
            return {row[0] for row in reader.execute(sql, [impact.ids_json(ids), *params])}

    return hits_for(index, reader, impact.ranked(index, compiled, limit, accept), keys_only)


def hits_for(index: Index, reader: sqlite3.Cursor, top: list[tuple[int, float]], keys_only: bool = False) -> list[Hit]:
    """Hits for ranked ``(chunk id, score)`` pairs of ``index``, their chunks read from ``chunks`` (only the
    key with ``keys_only``, from a cache of the build's keys); ``reader`` returns plain tuples."""
    if not top:
        return []
    ids = [i for i, _ in top]
    if keys_only:
        chunks = _keys_of(index, reader, ids)
        return [_hit((i, rank, score, "", chunks[i])) for rank, (i, score) in enumerate(top, 1)]
    rows = {row[0]: row[1:] for row in reader.execute(_ROWS_SQL, [impact.ids_json(ids)])}
    if len(rows) < len(ids):
        _check_found(index, ids, rows)
    return [_hit((i, rank, score, "", _chunk(rows[i]))) for rank, (i, score) in enumerate(top, 1)]


def _check_found(index: Index, ids: list[int], found: dict[int, Any]) -> None:
    """Every ranked id has its chunk: postings naming a lost row (a damaged or tampered index) are an error,
    not a KeyError."""
    lost = next((i for i in ids if i not in found), None)
    if lost is not None:
        raise IndexFileError(
            f"{index.path}: damaged index: its postings name chunk {lost}, which its chunks table does not hold",
            hint="rebuild it with: rag-eval index build",
        )


#: ``Hit(*values)`` and ``Chunk(*values)`` without the generated ``__new__``'s Python frame: a run's 100 hits
#: per query took 0.15 ms to build that way, 0.05 ms this way (the values are in field order).
_hit = functools.partial(tuple.__new__, Hit)
_chunk = functools.partial(tuple.__new__, Chunk)


_ROWS_SQL = f"SELECT c.id, {CHUNK_FIELDS} {_BY_IDS}"
_KEYS_SQL = f"SELECT c.id, {KEY_FIELDS} {_BY_IDS}"
#: Chunk keys kept per open index for keys-only searches, which ask for the same rows query after query (a
#: run's 100 hits' keys read by SQL took about as long as ranking them); past this many the cache starts over.
#: The index starts it over for every build it moves to (``Index.keys``).
CACHE_KEYS = 200_000


def _keys_of(index: Index, reader: sqlite3.Cursor, ids: list[int]) -> dict[int, Chunk]:
    """The chunks of ``ids`` in the build ``index`` reads now with their key alone, each read once per build."""
    known = index.keys
    if len(known) > CACHE_KEYS:
        known.clear()
    missing = [i for i in ids if i not in known]
    if missing:
        known.update((i, Chunk(key, "")) for i, key in reader.execute(_KEYS_SQL, [impact.ids_json(missing)]))
        _check_found(index, missing, known)  # only ids just read can be lost: the cached ones were found
    return known


def _rank_order(row: tuple) -> tuple[float, int]:
    return row[1], row[0]


#: What a search with no hit reads after its statement: which build answered (the statement returned no
#: row to carry it). Benchmarks count it as part of the SQL a search issues.
GENERATION_SQL = "SELECT value FROM meta WHERE key = 'generation'"


def current_generation(index: Index) -> str | None:
    """The build generation ``index``'s file records now (None if it records none)."""
    row = index.db.execute(GENERATION_SQL).fetchone()
    return None if row is None else row[0]


def fts5_ranked(
    index: Index,
    compiled: CompiledQuery,
    limit: int,
    as_of: str | None,
    category: str | None,
    path_prefix: str | None,
    keys_only: bool = False,
) -> tuple[list[Hit], str | None]:
    """The hits and the build generation they were read from: returned by the statement itself, or read
    right after it when it found nothing (None for a phrase-filtered search, which runs in a transaction)."""
    params: list[Any] = [compiled.expression, *filter_params(as_of, category, path_prefix)]
    ranking = ranking_sql(index, as_of is not None, category is not None, path_prefix is not None)
    cursor = index.db.cursor()
    cursor.row_factory = None
    if compiled.phrase_filter is None:
        rows = cursor.execute(top_statement(index, ranking, keys_only), [*params, limit]).fetchall()
        if not rows:
            found = cursor.execute(GENERATION_SQL).fetchone()
            return [], None if found is None else found[0]
        rows.sort(key=_rank_order)  # the statement leaves the order to us (see top_statement)
        if keys_only:
            hits = [_hit((row[0], rank, row[1], "", Chunk(row[2], ""))) for rank, row in enumerate(rows, 1)]
        else:
            hits = [_hit((row[0], rank, row[1], "", _chunk(row[2:-1]))) for rank, row in enumerate(rows, 1)]
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


def column_weights(index: Index) -> list[float]:
    """bm25's weight for each FTS5 column: title and body weights, times each field's weight.

    FTS5 multiplies a column's weight into the term frequency before saturation, so a weight w also acts
    like k1 / w on that column: a field weight is a saturation knob as much as a weight.
    """
    return weights_for(index.tokenizer, index.defaults)


def weights_for(tokenizer: Tokenizer, defaults: QueryDefaults) -> list[float]:
    """:func:`column_weights` of an index built with ``tokenizer`` and a builder's ``defaults``."""
    if tokenizer.native:
        return [defaults.title_weight, defaults.body_weight]
    return [
        w
        for field in tokenizer.fields
        for w in (defaults.title_weight * field.weight, defaults.body_weight * field.weight)
    ]


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


def filter_clauses(as_of: bool, category: bool, path_prefix: bool) -> list[str]:
    """The WHERE clauses over ``chunks c`` of a search's filters (both engines use these)."""
    where = []
    if as_of:
        where.append("c.status = 'current' AND (c.expires IS NULL OR c.expires > ?)")
    if category:
        where.append("c.category = ?")
    if path_prefix:
        where.append("substr(c.path, 1, ?) = ?")
    return where


def filter_params(as_of: str | None, category: str | None, path_prefix: str | None) -> list[Any]:
    """The parameters of :func:`filter_clauses`, in order."""
    params: list[Any] = []
    if as_of is not None:
        params.append(as_of)
    if category is not None:
        params.append(category)
    if path_prefix is not None:
        params += [len(path_prefix), path_prefix]
    return params


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
