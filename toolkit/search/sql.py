"""The SQL every engine shares: a search's filters as clauses over ``chunks c``, and ranked chunk ids read back
from the chunks table as hits (the key alone for a keys-only search). Each engine ranks in its own module
(:mod:`rag_eval.engines.fts5`, :mod:`rag_eval.engines.impact`)."""

from __future__ import annotations

import functools
import json
import sqlite3
from typing import Any, NamedTuple

from ..errors import IndexFileError
from ..index.store import Index
from ..records import Chunk, Hit

#: Chunk's fields, in order, as columns of ``chunks c``.
CHUNK_FIELDS = ", ".join(f"c.{name}" for name in Chunk._fields)
#: What a keys-only search reads of each hit's row.
KEY_FIELDS = "c.key"
#: Chunks read for a list of ids, driven by the list (CROSS JOIN keeps that order of loops): one rowid lookup
#: per id, no scan.
BY_IDS = "FROM json_each(?) AS j CROSS JOIN chunks c ON c.id = j.value"


def hits_for(index: Index, reader: sqlite3.Cursor, top: list[tuple[int, float]], keys_only: bool = False) -> list[Hit]:
    """Hits for ranked ``(chunk id, score)`` pairs of ``index``, their chunks read from ``chunks`` (only the
    key with ``keys_only``, from a cache of the build's keys); ``reader`` returns plain tuples."""
    if not top:
        return []
    ids = [i for i, _ in top]
    if keys_only:
        chunks = _keys_of(index, reader, ids)
        return [new_hit((i, rank, score, "", chunks[i])) for rank, (i, score) in enumerate(top, 1)]
    rows = {row[0]: row[1:] for row in reader.execute(_ROWS_SQL, [ids_json(ids)])}
    if len(rows) < len(ids):
        _check_found(index, ids, rows)
    return [new_hit((i, rank, score, "", new_chunk(rows[i]))) for rank, (i, score) in enumerate(top, 1)]


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
new_hit = functools.partial(tuple.__new__, Hit)
new_chunk = functools.partial(tuple.__new__, Chunk)


_ROWS_SQL = f"SELECT c.id, {CHUNK_FIELDS} {BY_IDS}"
_KEYS_SQL = f"SELECT c.id, {KEY_FIELDS} {BY_IDS}"
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
        known.update((i, Chunk(key, "")) for i, key in reader.execute(_KEYS_SQL, [ids_json(missing)]))
        _check_found(index, missing, known)  # only ids just read can be lost: the cached ones were found
    return known


#: What a search with no hit reads after its statement: which build answered (the statement returned no
#: row to carry it). Benchmarks count it as part of the SQL a search issues.
GENERATION_SQL = "SELECT value FROM meta WHERE key = 'generation'"


def current_generation(index: Index) -> str | None:
    """The build generation ``index``'s file records now (None if it records none)."""
    row = index.db.execute(GENERATION_SQL).fetchone()
    return None if row is None else row[0]


def ids_json(ids: list[int]) -> str:
    """Chunk ids as one JSON array parameter (``json_each``), free of SQLite's limit on variables."""
    return json.dumps(ids)


class Filters(NamedTuple):
    """What a search keeps: current chunks not expired by ``as_of``, one ``category``, paths under ``path_prefix``
    (None: no such filter). Every engine filters with the same clauses."""

    as_of: str | None = None
    category: str | None = None
    path_prefix: str | None = None

    @property
    def given(self) -> tuple[bool, bool, bool]:
        """Which filters are set (the key of an engine's statement built per combination)."""
        return self.as_of is not None, self.category is not None, self.path_prefix is not None

    def clauses(self) -> list[str]:
        """The WHERE clauses over ``chunks c`` (:func:`filter_clauses`)."""
        return filter_clauses(*self.given)

    def params(self) -> list[Any]:
        """The clauses' parameters, in order (:func:`filter_params`)."""
        return filter_params(*self)


def filter_clauses(as_of: bool, category: bool, path_prefix: bool) -> list[str]:
    """The WHERE clauses over ``chunks c`` of a search's filters (every engine uses these)."""
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
