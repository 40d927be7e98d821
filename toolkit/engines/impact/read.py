"""Reading the impact postings a build stored: which table holds them, their blocks decoded and checked (a
damaged file is one IndexFileError, never a traceback or a wrong ranking), and the per-index cache that keeps
what searches read (:func:`preload` fills it whole), for FTS5's k1 and b (the stored impacts) or another pair
(impacts computed from the stored tf, once per term). The format is described in
:mod:`rag_eval.engines.impact.write`.
"""

from __future__ import annotations

import bisect
import json
import math
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from ...errors import IndexFileError, QueryError
from .write import BLOCKS_TABLE, LEGACY_TABLE, TABLES, TF_COLUMN, average_length, document_sizes, impacts, tf_values

if TYPE_CHECKING:
    import numpy as np

    from ...index.store import Index


def has_impacts(index: Index) -> bool:
    """Whether the index holds impact postings (built with ``engine=impact``)."""
    return postings_table(index.db) is not None


def postings_table(db: sqlite3.Connection) -> str | None:
    """The table holding the postings: ``impact_blocks``, an older build's ``impacts``, or None."""
    names = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return next((table for table in TABLES if table in names), None)


def has_tfs(db: sqlite3.Connection) -> bool:
    """Whether the postings hold each posting's tf (built since 2026-12-04): they rank at any k1 and b."""
    if postings_table(db) != BLOCKS_TABLE:
        return False
    return any(row[1] == TF_COLUMN for row in db.execute(f"PRAGMA table_info({BLOCKS_TABLE})"))


def current_layout(db: sqlite3.Connection) -> bool:
    """Whether the postings are in the layout this version writes (blocks with their tf)."""
    return has_tfs(db)


#: FTS5's k1 and b (None: the stored impacts) or another pair the impacts are computed at.
Parameters = tuple[float, float] | None


def postings_bytes(db: sqlite3.Connection) -> int:
    """Bytes of stored postings (row ids and impacts)."""
    table = postings_table(db)
    if table is None:
        return 0
    found = db.execute(f"SELECT coalesce(sum(length(rowids) + length(weights)), 0) FROM {table}").fetchone()
    return int(found[0])


def stored_postings(db: sqlite3.Connection) -> Iterator[tuple[str, bytes, bytes, float]]:
    """Every stored (key, row ids, impacts, peak), ascending by key, whichever table holds them (for tests
    and reports: the exact bytes a build wrote)."""
    import numpy as np

    table = postings_table(db)
    if table == LEGACY_TABLE:
        for key, rowids, weights in db.execute(f"SELECT term, rowids, weights FROM {table} ORDER BY term"):
            yield key, rowids, weights, float(np.frombuffer(weights, dtype="<f8").max())
    elif table is not None:
        for terms, bounds, rowids, weights, peaks in db.execute(
            "SELECT terms, bounds, rowids, weights, peaks FROM impact_blocks ORDER BY first"
        ):
            offsets = np.frombuffer(bounds, dtype="<i8").tolist()
            tops = np.frombuffer(peaks, dtype="<f8").tolist()
            for number, key in enumerate(json.loads(terms)):
                low, high = 8 * offsets[number], 8 * offsets[number + 1]
                yield key, rowids[low:high], weights[low:high], tops[number]


class Postings(NamedTuple):
    """A term's rows ascending, what it adds to each row's score (``idf * impact``, computed once per index
    build, as FTS5 computes it per row) and the largest of those (the bound pruning relies on)."""

    ids: np.ndarray
    scores: np.ndarray
    most: float


#: Postings kept in memory per open index and build (a frequent term's list is read once, not per query),
#: up to this many bytes of blocks and scores (about 24 per posting); past it the cache starts over. All 4,218
#: questions of cmrc2018_dev_trial_sent replicated 10x read 97 MB for unigram, 81 MB for bigram, 61 MB for
#: jieba; with 64 MB, and a block's postings counted again with each of its terms' lists, unigram started
#: over 18 times in 1,500 questions (each question's first run 3x slower than its repeats).
CACHE_BYTES = 128_000_000


class _Block(NamedTuple):
    """A decoded ``impact_blocks`` row: its terms, their postings' bounds, the blobs and the peaks; at another k1
    and b, the weights are the postings' tfs (float64) and the peaks are not read."""

    terms: list[str]
    bounds: np.ndarray
    rowids: bytes
    weights: bytes
    peaks: np.ndarray


@dataclass
class _Cache:
    """What searches have read of one build's postings, held on its Index (which drops it for another build)."""

    layout: str | None
    #: The k1 and b its impacts are computed at (None: the stored ones).
    parameters: Parameters = None
    #: At another k1 and b: every row's ``|D|`` and avgdl, read once, then k1 and b.
    lengths: tuple[np.ndarray, float, float, float] | None = None
    lists: dict[str, Postings | None] = field(default_factory=dict)
    #: Blocks read so far by their first term, and those first terms sorted: a term between a block's first
    #: and last terms is answered from it without a statement.
    blocks: dict[str, _Block] = field(default_factory=dict)
    firsts: list[str] = field(default_factory=list)
    #: The statement reading an older build's row per term (its columns depend on the build).
    legacy: str = ""
    #: Bytes held: blocks' blobs, scores, an older build's rows, and :data:`ENTRY_BYTES` per term asked for.
    bytes: int = 0
    #: Per term, the rows it adds most to (:func:`_best_rows_of`), asked for by pruning.
    best: dict[str, np.ndarray] = field(default_factory=dict)
    #: True once every block is held (:func:`preload`): a term no block spans is absent, without a statement.
    complete: bool = False

    def best_rows(self, term: str, found: Postings) -> np.ndarray:
        """:func:`_best_rows_of` ``term``'s postings ``found``, computed once and counted in :attr:`bytes`."""
        rows = self.best.get(term)
        if rows is None:
            rows = self.best[term] = _best_rows_of(found)
            self.bytes += rows.nbytes if rows is not found.ids else 0
        return rows


_BLOCK = (
    "SELECT first, terms, bounds, rowids, weights, peaks FROM impact_blocks WHERE first <= ?"
    " ORDER BY first DESC LIMIT 1"
)
_ALL_BLOCKS = "SELECT first, terms, bounds, rowids, weights, peaks FROM impact_blocks ORDER BY first"
#: At another k1 and b: the tfs in place of the stored impacts, and no peaks (each term's comes with its impacts).
_TF_BLOCK = (
    "SELECT first, terms, bounds, rowids, tfs, NULL FROM impact_blocks WHERE first <= ? ORDER BY first DESC LIMIT 1"
)
_ALL_TF_BLOCKS = "SELECT first, terms, bounds, rowids, tfs, NULL FROM impact_blocks ORDER BY first"


#: An engine about to answer many queries of one index (compare's runs, batch search) reads all its blocks of
#: postings first when they take at most this many bytes, so that its queries are answered warm rather than
#: each reading, for the first time, a block per term (a cold trigram question on the handbook read about
#: seven). The handbook's take 0.2-1.8 MB per strategy, cmrc2018_dev_trial_sent's 1.1-8.8 MB (replicated 10x, 11-88 MB).
PRELOAD_BYTES = 32_000_000


#: What a cached term costs beyond its arrays (its dict entry, the Postings and array objects), counted so that
#: a stream of terms no row holds, each cached as absent, fills the cache too instead of growing it unbounded.
ENTRY_BYTES = 200


def _cache_of(index: Index, parameters: Parameters = None) -> _Cache:
    """The index's postings cache for ``parameters``, started (over) when it has none for this build and pair
    or it is full; QueryError when the index holds no tfs to rank at another pair."""
    cache = index.postings
    if not isinstance(cache, _Cache) or cache.bytes > CACHE_BYTES or cache.parameters != parameters:
        cache = _Cache(postings_table(index.db), parameters)
        if parameters is not None:
            cache.lengths = _lengths(index, parameters)
        index.postings = cache
    return cache


def _lengths(index: Index, parameters: tuple[float, float]) -> tuple[np.ndarray, float, float, float]:
    """Every row's ``|D|`` and avgdl, to rank at ``parameters``; QueryError naming the rebuild when the postings
    hold no tf (an index built before 2026-12-04, or no impact build)."""
    if not has_tfs(index.db):
        k1, b = parameters
        raise QueryError(
            f"{index.path}: this index's impact postings hold no term frequencies (built before 2026-12-04), so "
            f"they rank only at FTS5's k1 = 1.2 and b = 0.75, not at k1 = {k1:g}, b = {b:g}",
            hint="rebuild it with: rag-eval index build SOURCE -o INDEX --engine impact (then any k1 and b rank)",
        )
    avgdl = average_length(index.db)
    return document_sizes(index.db), avgdl if avgdl is not None else 1.0, *parameters


def check_parameters(index: Index, parameters: Parameters) -> None:
    """QueryError naming the rebuild when ``index`` cannot rank at ``parameters`` (see :func:`_lengths`)."""
    if parameters is not None:
        _cache_of(index, parameters)


def preload(index: Index, budget: int = PRELOAD_BYTES, parameters: Parameters = None) -> bool:
    """Read every block of ``index``'s postings into its cache, checked as a query's reads are, when they take at
    most ``budget`` bytes; afterwards no query reads a block. False (nothing read) when they are larger, or
    kept in an older build's table: queries then read what they need as they go."""
    cache = _cache_of(index, parameters)
    if cache.complete:
        return True
    if cache.layout != BLOCKS_TABLE or postings_bytes(index.db) > budget:
        return False
    for row in index.db.execute(_ALL_BLOCKS if parameters is None else _ALL_TF_BLOCKS):
        _decoded(index, cache, row, str(row[0]))  # a damaged block is named by its first term, whatever it holds
    cache.complete = True
    return True


def _postings_of(index: Index, term: str, parameters: Parameters = None) -> Postings | None:
    cache = _cache_of(index, parameters)
    if term in cache.lists:
        return cache.lists[term]
    stored = _read(index, cache, term)
    found = None
    if stored is not None:
        ids, weights, peak = stored
        weight = idf(index.chunks, len(ids))
        found = Postings(ids, weight * weights, weight * peak)
    cache.lists[term] = found
    cache.bytes += ENTRY_BYTES
    if found is not None:
        # The scores are a new array; the row ids (and stored impacts) are views of the block, counted with it,
        # or of an older build's row, counted here.
        cache.bytes += found.scores.nbytes + (found.ids.nbytes * 2 if cache.layout == LEGACY_TABLE else 0)
    return found


def _read(index: Index, cache: _Cache, term: str) -> tuple[np.ndarray, np.ndarray, float] | None:
    """A term's stored postings (row ids, impacts, peak), None when no row holds it; IndexFileError when
    what is stored is not what a build writes (a damaged or tampered file must not become a traceback, a
    huge allocation or a pruned-away hit)."""
    import numpy as np

    if cache.layout == LEGACY_TABLE:
        if not cache.legacy:
            columns = {row[1] for row in index.db.execute(f"PRAGMA table_info({LEGACY_TABLE})")}
            peak = "peak" if "peak" in columns else "NULL"  # built before peaks were stored: computed
            cache.legacy = f"SELECT rowids, weights, {peak} FROM {LEGACY_TABLE} WHERE term = ?"
        row = index.db.execute(cache.legacy, (term,)).fetchone()
        return None if row is None else _checked(index, term, *row)
    block = _block_of(index, cache, term)
    if block is None:
        return None
    number = bisect.bisect_left(block.terms, term)
    if number == len(block.terms) or block.terms[number] != term:
        return None
    low, high = int(block.bounds[number]), int(block.bounds[number + 1])
    if not 0 <= low < high:
        _damaged(index, term)
    ids = np.frombuffer(block.rowids, dtype="<i8", count=high - low, offset=8 * low)
    values = np.frombuffer(block.weights, dtype="<f8", count=high - low, offset=8 * low)
    if cache.lengths is None:
        return _valid(index, term, ids, values, float(block.peaks[number]))
    # Another k1 and b: ``values`` are the tfs; the impacts (and their peak) are computed here, once per term.
    sizes, avgdl, k1, b = cache.lengths
    if int(ids.min()) < 1 or int(ids.max()) >= len(sizes):
        _damaged(index, term)
    return _valid(index, term, ids, impacts(values, sizes[ids], avgdl, k1, b), None)


def _block_of(index: Index, cache: _Cache, term: str) -> _Block | None:
    """The block whose terms would hold ``term``: a cached one that spans it, else read (and cached)."""
    position = bisect.bisect_right(cache.firsts, term) - 1
    if position >= 0:
        known = cache.blocks[cache.firsts[position]]
        if term <= known.terms[-1]:
            return known
    if cache.complete:
        return None
    row = index.db.execute(_BLOCK if cache.parameters is None else _TF_BLOCK, (term,)).fetchone()
    return None if row is None else _decoded(index, cache, row, term)


def _decoded(index: Index, cache: _Cache, row: tuple[Any, ...], term: str) -> _Block:
    """An ``impact_blocks`` row checked, decoded and cached; ``term`` (the one asked for) names a damaged one."""
    import numpy as np

    first, terms, bounds, rowids, weights, peaks = row
    computed = cache.parameters is not None  # ``weights`` are the tfs, and no peaks were read
    try:
        listed = json.loads(terms)
    except (TypeError, ValueError):
        listed = None
    # Checked with C-level set and sort rather than a Python step per term: a cold query reads a block per term.
    if not isinstance(listed, list) or not listed or set(map(type, listed)) != {str}:
        _damaged(index, term)
    blobs = (bounds, rowids, weights) if computed else (bounds, rowids, weights, peaks)
    if listed[0] != first or not all(isinstance(blob, bytes) for blob in blobs):
        _damaged(index, term)
    if computed:
        tfs = tf_values(weights, len(rowids) // 8) if len(rowids) % 8 == 0 else None
        if tfs is None:
            _damaged(index, term)
        weights, peaks = tfs.tobytes(), b""
    elif len(peaks) != 8 * len(listed):
        _damaged(index, term)
    if len(bounds) != 8 * (len(listed) + 1) or len(weights) != len(rowids):
        _damaged(index, term)
    offsets = np.frombuffer(bounds, dtype="<i8")
    if offsets[0] != 0 or 8 * int(offsets[-1]) != len(rowids) or bool(np.any(offsets[1:] <= offsets[:-1])):
        _damaged(index, term)
    if listed != sorted(set(listed)):  # strictly ascending
        _damaged(index, term)
    block = _Block(listed, offsets, rowids, weights, np.frombuffer(peaks, dtype="<f8"))
    if first not in cache.blocks:
        bisect.insort(cache.firsts, first)
    else:  # read again (preload after queries): counted once
        cache.bytes -= len(cache.blocks[first].rowids) + len(cache.blocks[first].weights)
    cache.blocks[first] = block
    cache.bytes += len(rowids) + len(weights)
    return block


def _damaged(index: Index, term: str) -> NoReturn:
    word, separator, field = term.partition("\x1f")  # a hybrid's key (field_key): its term and field
    where = f"term {word!r} of field {field[1:]}" if separator else f"term {term!r}"
    raise IndexFileError(
        f"{index.path}: damaged index: the impact postings of {where} are malformed",
        hint="rebuild it with: rag-eval index build --engine impact",
    )


def _checked(
    index: Index, term: str, rowids: object, weights: object, peak: object
) -> tuple[np.ndarray, np.ndarray, float]:
    """A legacy row's postings as arrays, checked (see :func:`_read`)."""
    import numpy as np

    if isinstance(rowids, bytes) and isinstance(weights, bytes) and len(rowids) == len(weights) > 0:
        if len(rowids) % 8 == 0 and (peak is None or isinstance(peak, float)):
            return _valid(index, term, np.frombuffer(rowids, dtype="<i8"), np.frombuffer(weights, dtype="<f8"), peak)
    _damaged(index, term)


def _valid(
    index: Index, term: str, ids: np.ndarray, values: np.ndarray, peak: float | None
) -> tuple[np.ndarray, np.ndarray, float]:
    """``ids`` ascending within the index's rows, impacts finite and positive, ``peak`` (None: computed) their
    largest exactly; else IndexFileError."""
    import numpy as np

    ascending = len(ids) == 1 or bool(np.all(ids[1:] > ids[:-1]))
    positive = bool(np.all(np.isfinite(values) & (values > 0)))
    if ascending and positive and 1 <= ids[0] and ids[-1] <= index.chunks:
        top = float(values.max())
        # A stored peak below the true one would let pruning drop a hit: it must be exact.
        if peak is None or peak == top:
            return ids, values, top
    _damaged(index, term)


#: FTS5's IDF for a term in half of the rows or more.
CLAMPED_IDF = 1e-6


def idf(rows: int, matching: int) -> float:
    """FTS5's IDF of a term found in ``matching`` of ``rows`` rows."""
    value = math.log((rows - matching + 0.5) / (matching + 0.5))
    return value if value > 0.0 else CLAMPED_IDF


#: Rows per term among which MaxScore takes its threshold: the rows the term adds most to.
BEST_ROWS = 256


def _best_rows_of(found: Postings) -> np.ndarray:
    """The (at most :data:`BEST_ROWS`) rows a term adds most to, ascending."""
    import numpy as np

    if len(found.ids) <= BEST_ROWS:
        return found.ids
    top = np.argpartition(found.scores, len(found.scores) - BEST_ROWS)[len(found.scores) - BEST_ROWS :]
    return np.sort(found.ids[top])
