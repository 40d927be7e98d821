"""The impact engine: FTS5's own bm25, exactly, from per-term postings with the term weight precomputed.

FTS5 scores every row a query matches and cannot stop early, so a question full of frequent characters
costs milliseconds. bm25 splits into an IDF per query term times a per-(term, row) factor that depends only
on the index; the build stores that factor (the *impact*) per term, and a query sums ``idf * impact`` with
numpy in the query's term order, which reproduces FTS5's floating-point arithmetic operation by operation
(``fts5Bm25Function`` in SQLite's ``fts5_aux.c``):

- ``tf``: for every instance of the term in the row, in (column, offset) order, ``tf += column weight``
  (the weight is applied before saturation);
- ``impact = tf * (k1 + 1) / (tf + k1 * (1 - b + b * |D| / avgdl))``, k1 = 1.2, b = 0.75, ``|D|`` the row's
  tokens over all columns (``search_docsize``), avgdl = all tokens / all rows (FTS5's averages record);
- ``idf = log((N - n + 0.5) / (n + 0.5))``, 1e-6 when that is not positive; ``score = -sum(idf * impact)``
  over the query's terms in expression order.

Terms come from ``fts5vocab``'s instance table, so they are exactly the tokens FTS5 holds, for native and
Python strategies alike. Queries the engine cannot answer exactly (phrases, a quoted term FTS5 would split
into several tokens, hybrids' column filters) are answered by the FTS5 statement; ``--explain`` says which.

Lossless pruning: a term with a clamped IDF (``n >= N/2``) contributes at most ``1e-6 * (k1 + 1)`` per row.
Dropping it preserves neither the scores (they must match FTS5 within 1e-9 relative) nor the order of rows
whose other scores tie or differ by less than that bound, nor the rows matching only such terms; so the
engine keeps every term (see reports/latency.md for what it costs).
"""

from __future__ import annotations

import json
import math
import sqlite3
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .errors import IndexFileError, QueryError

if TYPE_CHECKING:
    import numpy as np

    from .query import CompiledQuery
    from .store import Index
    from .tokenizers import Tokenizer

#: The engines a system can rank with: FTS5's bm25 statement, or the impact postings (same scores).
ENGINES = ("fts5", "impact")
K1 = 1.2
B = 0.75
#: FTS5's IDF for a term in half of the rows or more.
CLAMPED_IDF = 1e-6

_SCHEMA = "CREATE TABLE impacts (term TEXT PRIMARY KEY, rowids BLOB NOT NULL, weights BLOB NOT NULL) WITHOUT ROWID"
_VOCAB = "temp.rag_eval_instances"

#: ``accept(ids)``: which of these chunk ids pass the search's filters.
Accept = Callable[[list[int]], set[int]]


def check_engine(name: object) -> str:
    """``name`` if it is an engine, else one QueryError naming the choices."""
    if name not in ENGINES:
        raise QueryError(f"unknown engine {name!r}; choose from: {', '.join(ENGINES)}")
    return str(name)


def _varints(data: bytes) -> list[int]:
    """SQLite's variable-length integers (FTS5's docsize and averages records)."""
    values = []
    position = 0
    while position < len(data):
        value = 0
        for step in range(9):
            byte = data[position]
            position += 1
            if step == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        values.append(value)
    return values


def write_impacts(db: sqlite3.Connection, tokenizer: Tokenizer, weights: list[float]) -> int:
    """Create and fill the ``impacts`` table from the ``search`` table just built (inside the caller's
    transaction); ``weights`` are bm25's column weights. Returns the number of terms; a hybrid gets no
    table (its column filters are answered by FTS5)."""
    import numpy as np

    if len(tokenizer.fields) != 1:
        return 0
    db.execute(_SCHEMA)
    reader = db.cursor()
    reader.row_factory = None
    found = reader.execute("SELECT block FROM search_data WHERE id = 1").fetchone()
    totals = _varints(found[0]) if found is not None else [0]
    rows, tokens = totals[0], sum(totals[1:])
    if rows == 0:
        return 0
    avgdl = float(tokens) / float(rows)
    sized = [(rowid, sum(_varints(blob))) for rowid, blob in reader.execute("SELECT id, sz FROM search_docsize")]
    sizes = np.zeros(1 + max((rowid for rowid, _ in sized), default=0))
    sizes[[rowid for rowid, _ in sized]] = [size for _, size in sized]
    columns = [row[1] for row in reader.execute("PRAGMA table_info(search)")]
    weight_of = dict(zip(columns, weights, strict=True))
    reader.execute(f"DROP TABLE IF EXISTS {_VOCAB}")
    reader.execute(f"CREATE VIRTUAL TABLE {_VOCAB} USING fts5vocab(main, 'search', 'instance')")
    count = 0
    batch = _Batch()
    try:
        for term, rowids, frequencies in _postings(reader.execute(f"SELECT term, doc, col FROM {_VOCAB}"), weight_of):
            batch.add(term, rowids, frequencies)
            if len(batch.rowids) >= _BATCH_POSTINGS:
                count += batch.write(db, sizes, avgdl)
        count += batch.write(db, sizes, avgdl)
    finally:
        reader.execute(f"DROP TABLE IF EXISTS {_VOCAB}")
    return count


#: Postings computed together: numpy on one long array instead of one small array per term (trigram has
#: hundreds of thousands of terms), with memory bounded by the batch rather than the index.
_BATCH_POSTINGS = 1_000_000


class _Batch:
    """Terms' postings awaiting their impacts and their rows in the ``impacts`` table."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.terms: list[str] = []
        self.ends: list[int] = []
        self.rowids: list[int] = []
        self.frequencies: list[float] = []

    def add(self, term: str, rowids: list[int], frequencies: list[float]) -> None:
        self.terms.append(term)
        self.rowids += rowids
        self.frequencies += frequencies
        self.ends.append(len(self.rowids))

    def write(self, db: sqlite3.Connection, sizes: np.ndarray, avgdl: float) -> int:
        import numpy as np

        ids = np.array(self.rowids, dtype="<i8")
        tf = np.array(self.frequencies, dtype="<f8")
        length = sizes[ids]
        # The operations of fts5Bm25Function, in its order (C: 1 - b + b * D / avgdl), element by element.
        impact = ((tf * (K1 + 1.0)) / (tf + K1 * ((1 - B) + (B * length) / avgdl))).astype("<f8")
        starts = [0, *self.ends[:-1]]
        db.executemany(
            "INSERT INTO impacts VALUES (?, ?, ?)",
            (
                (term, ids[start:end].tobytes(), impact[start:end].tobytes())
                for term, start, end in zip(self.terms, starts, self.ends, strict=True)
            ),
        )
        written = len(self.terms)
        self.clear()
        return written


def _postings(
    instances: Iterator[tuple[str, int, str]], weight_of: dict[str, float]
) -> Iterator[tuple[str, list[int], list[float]]]:
    """Per term, its rows ascending and each row's weighted tf, summed instance by instance as FTS5 does
    (``aFreq += w`` per instance: for a weight like 0.3 repeated addition differs from ``w * tf``)."""
    term: str | None = None
    rowids: list[int] = []
    frequencies: list[float] = []
    for found, rowid, column in instances:
        if found != term:
            if term is not None:
                yield term, rowids, frequencies
            term, rowids, frequencies = found, [], []
        if not rowids or rowids[-1] != rowid:
            rowids.append(rowid)
            frequencies.append(0.0)
        frequencies[-1] += weight_of[column]
    if term is not None:
        yield term, rowids, frequencies


def has_impacts(index: Index) -> bool:
    """Whether the index holds impact postings (built with ``engine=impact``)."""
    found = index.db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'impacts'").fetchone()
    return found is not None


def fallback_reason(index: Index, compiled: CompiledQuery) -> str | None:
    """Why the impact engine cannot answer ``compiled`` exactly (FTS5 answers then), or None when it can."""
    if len(index.tokenizer.fields) != 1:
        return "a hybrid's per-field column filters are answered by FTS5"
    if compiled.mode not in ("or", "and") or compiled.phrase_filter is not None:
        return f"{compiled.mode} queries are answered by FTS5"
    for term in compiled.terms:
        if not _single_token(index.tokenizer, term):
            return f"FTS5 reads the quoted term {term!r} as a phrase of several tokens"
    return None


def _single_token(tokenizer: Tokenizer, term: str) -> bool:
    """Whether FTS5 tokenizes the quoted ``term`` into exactly the one token ``term``."""
    if tokenizer.native:
        return tokenizer.terms(term) == [term]  # the Python mirror gives FTS5's tokens (test_fts5_parity)
    # A Python strategy's column: FTS5's ascii tokenizer splits on whitespace and control characters and
    # folds A-Z; a term with none of them is one token, itself.
    return bool(term) and not any(c <= " " or c == "\x7f" or "A" <= c <= "Z" for c in term)


#: Postings kept in memory per open index and build (a frequent term's list is read once, not per query),
#: up to this many postings in all (16 bytes each); past it the cache starts over.
CACHE_POSTINGS = 4_000_000
_cache: weakref.WeakKeyDictionary[Index, tuple[str | None, dict[str, Any]]] = weakref.WeakKeyDictionary()


def _postings_of(index: Index, term: str) -> tuple[np.ndarray, np.ndarray] | None:
    generation, cached = _cache.get(index, (None, {}))
    if generation != index.generation or not cached or cached.get("", 0) > CACHE_POSTINGS:
        cached = {"": 0}
        _cache[index] = (index.generation, cached)
    if term in cached:
        found: tuple[np.ndarray, np.ndarray] | None = cached[term]
        return found
    row = index.db.execute("SELECT rowids, weights FROM impacts WHERE term = ?", (term,)).fetchone()
    found = None if row is None else _checked(index, term, row[0], row[1])
    cached[term] = found
    cached[""] += 0 if found is None else len(found[0])
    return found


def _checked(index: Index, term: str, rowids: object, weights: object) -> tuple[np.ndarray, np.ndarray]:
    """A term's postings as arrays, or IndexFileError when the stored ones are not what a build writes
    (a damaged or tampered file must not become a traceback or a huge allocation)."""
    import numpy as np

    if isinstance(rowids, bytes) and isinstance(weights, bytes) and len(rowids) == len(weights) > 0:
        if len(rowids) % 8 == 0:
            ids = np.frombuffer(rowids, dtype="<i8")
            values = np.frombuffer(weights, dtype="<f8")
            ascending = len(ids) == 1 or bool(np.all(ids[1:] > ids[:-1]))
            positive = bool(np.all(np.isfinite(values) & (values > 0)))
            if ascending and positive and 1 <= ids[0] and ids[-1] <= index.chunks:
                return ids, values
    raise IndexFileError(
        f"{index.path}: damaged index: the impact postings of term {term!r} are malformed",
        hint="rebuild it with: rag-eval index build --engine impact",
    )


def idf(rows: int, matching: int) -> float:
    """FTS5's IDF of a term found in ``matching`` of ``rows`` rows."""
    value = math.log((rows - matching + 0.5) / (matching + 0.5))
    return value if value > 0.0 else CLAMPED_IDF


def ranked(
    index: Index, compiled: CompiledQuery, limit: int, accept: Accept | None = None, *, prune: bool = False
) -> list[tuple[int, float]]:
    """The top ``limit`` (chunk id, bm25 score) of ``compiled`` (see :func:`fallback_reason`), in FTS5's
    order: score ascending, ties by id; ``accept`` filters (called on candidates in rank order).
    ``prune=True`` skips scanning clamped terms where that is exact (see :func:`_pruned`): off by default,
    as on 13.5k rows it measured slower than scoring every row (reports/latency.md)."""
    import numpy as np

    rows = index.chunks
    postings = {term: _postings_of(index, term) for term in dict.fromkeys(compiled.terms)}
    present = {term: found for term, found in postings.items() if found is not None}
    if not present or (compiled.mode == "and" and len(present) < len(postings)):
        return []
    if accept is None and compiled.mode == "or" and prune:
        top = _pruned(compiled.terms, present, rows, limit)
        if top is not None:
            return top
    size = 1 + max(int(ids[-1]) for ids, _ in present.values())
    scores = np.zeros(size)
    matched = np.zeros(size, dtype=np.int32)
    for ids, _ in present.values():
        matched[ids] += 1
    for term in compiled.terms:  # FTS5 sums phrase by phrase in expression order
        found = present.get(term)
        if found is not None:
            ids, weights = found
            scores[ids] += idf(rows, len(ids)) * weights
    candidates = np.flatnonzero(matched == len(present) if compiled.mode == "and" else matched)
    values = -scores[candidates]
    if accept is None:
        return _top(candidates, values, limit)
    hits: list[tuple[int, float]] = []
    seen = 0
    wanted = limit
    while True:
        top = _top(candidates, values, wanted)
        fresh = top[seen:]
        passed = accept([chunk_id for chunk_id, _ in fresh])
        hits += [(chunk_id, score) for chunk_id, score in fresh if chunk_id in passed]
        if len(hits) >= limit or len(top) == len(candidates):
            return hits[:limit]
        seen, wanted = len(top), wanted * 4


#: Relative slack on score bounds: far above the rounding of a sum of a few dozen terms, far below any gap
#: that decides a ranking.
_SLACK = 1e-9


def _pruned(
    terms: tuple[str, ...], present: dict[str, tuple[np.ndarray, np.ndarray]], rows: int, limit: int
) -> list[tuple[int, float]] | None:
    """Lossless pruning of clamped terms in an ``or`` query, or None where it cannot be shown exact.

    A term in half the rows or more has IDF 1e-6, so it adds less than ``1e-6 * (k1 + 1)`` to any row. The
    rows are bounded by their score over the other terms: ``partial <= exact <= partial + bound``. A row whose
    upper bound is below the ``limit``-th best partial score cannot make the top, and neither can a row
    matching only clamped terms when the bound is below it (else: None, every row is scored). The few rows
    left get their exact scores, term by term in query order (bit-identical to FTS5), by binary search in
    each term's postings: the clamped terms' long lists are never scanned.
    """
    import numpy as np

    clamped = {term for term, (ids, _) in present.items() if idf(rows, len(ids)) == CLAMPED_IDF}
    regular = [term for term in present if term not in clamped]
    if not clamped or not regular:
        return None
    size = 1 + max(int(present[term][0][-1]) for term in regular)
    partial = np.zeros(size)
    for term in regular:
        ids, weights = present[term]
        partial[ids] += idf(rows, len(ids)) * weights
    matching = np.flatnonzero(partial)
    if len(matching) < limit:
        return None
    values = partial[matching]
    kth = np.partition(values, len(values) - limit)[len(values) - limit]
    bound = CLAMPED_IDF * (K1 + 1.0) * sum(terms.count(term) for term in clamped)
    floor = kth * (1 - _SLACK)
    if bound * (1 + _SLACK) >= floor:
        return None
    candidates = matching[(values + bound) * (1 + _SLACK) >= floor]
    exact = np.zeros(len(candidates))
    for term in terms:
        found = present.get(term)
        if found is None:
            continue
        ids, weights = found
        positions = np.searchsorted(ids, candidates)
        inside = positions < len(ids)
        hit = np.zeros(len(candidates), dtype=bool)
        hit[inside] = ids[positions[inside]] == candidates[inside]
        exact[hit] += idf(rows, len(ids)) * weights[positions[hit]]
    return _top(candidates, -exact, limit)


def _top(candidates: np.ndarray, values: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The first ``k`` (id, score) by (score, id): ``candidates`` ascend, so a stable sort breaks ties."""
    import numpy as np

    if len(values) > k:
        cut = np.partition(values, k - 1)[k - 1]
        kept = np.flatnonzero(values <= cut)  # every row tied with the k-th stays in the running
        candidates, values = candidates[kept], values[kept]
    order = np.argsort(values, kind="stable")[:k]
    return list(zip(candidates[order].tolist(), values[order].tolist(), strict=True))


def ids_json(ids: list[int]) -> str:
    """Chunk ids as one JSON array parameter (``json_each``), free of SQLite's limit on variables."""
    return json.dumps(ids)
