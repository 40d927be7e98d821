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
Python strategies alike. A hybrid's query gives each field's terms a column filter (``{fts_title_1
fts_body_1} : (...)``), under which FTS5 counts only that field's instances for ``tf`` and only the rows
holding the term there for ``n``, while ``|D|`` stays over every column: so a hybrid's postings are per
(field, term) (:func:`field_key`) and its queries are exact too; its ``and`` matches a row when any one field
holds all its terms there, and FTS5 then counts only the terms of the fields that match the row
(:meth:`_Scorer.any_group`). Queries the engine cannot answer exactly (phrases, a quoted term FTS5 would
split into several tokens) are answered by the FTS5 statement; ``--explain`` says which.

The postings are stored in blocks of up to :data:`BLOCK_TERMS` consecutive terms (``impact_blocks``), written
with numpy from one grouped pass over FTS5's instances; an index built before blocks (``impacts``, a row per
term) is still read.

Rank-safe pruning: each term's largest impact is stored with its postings, so ``idf * peak`` bounds what the
term adds to any row; MaxScore never reads the lists of terms whose bounds together stay below the ``k``-th best
score, and ``and`` queries intersect by binary search. The result is the unpruned one bit for bit (exact scores
are always summed in query order). By default an ``or`` query is pruned when one long list (a frequent term's)
holds most of its postings, where it measured faster (:data:`PRUNE`); otherwise every row is scored with numpy.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import json
import math
import sqlite3
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

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

#: The postings in blocks of consecutive terms (one row per block: a row per term cost more to insert than
#: the rest of the postings' write, about 4 us each, 50,581 rows for jieba on cmrc2018_dev_trial, hundreds of
#: thousands for trigram). ``first``: the block's first term, its key; ``terms``: a JSON array of its terms,
#: ascending as SQLite's BINARY collation orders them; ``bounds``: int64 offsets of each term's postings in
#: ``rowids`` (int64) and ``weights`` (float64 impacts), one more than the terms; ``peaks``: each term's
#: largest impact (float64), the bound rank-safe pruning relies on.
_SCHEMA = (
    "CREATE TABLE impact_blocks (first TEXT PRIMARY KEY, terms TEXT NOT NULL, bounds BLOB NOT NULL,"
    " rowids BLOB NOT NULL, weights BLOB NOT NULL, peaks BLOB NOT NULL) WITHOUT ROWID"
)
#: The table older builds wrote, one row per term (``peak`` from 2026-12-01 on); still read.
LEGACY_TABLE = "impacts"
#: The table this version writes postings to.
BLOCKS_TABLE = "impact_blocks"
#: The tables impact postings live in (a build drops both before writing).
TABLES = (BLOCKS_TABLE, LEGACY_TABLE)
#: A block holds at most this many terms, and starts anew after a term that brings it this many postings.
BLOCK_TERMS = 64
BLOCK_POSTINGS = 512
_VOCAB = "temp.rag_eval_instances"

#: ``accept(ids)``: which of these chunk ids pass the search's filters.
Accept = Callable[[list[int]], set[int]]


#: What a build may be asked for: an engine, or ``auto`` (the default), which :func:`build_engine` resolves.
BUILD_ENGINES = ("auto", *ENGINES)


def build_engine(choice: object) -> str:
    """The engine a build records for ``choice``: ``auto`` is the impact engine.

    Measured on cmrc2018_dev_trial_sent and its 3x and 10x replicas for all six strategies
    (reports/latency.md, reports/engines.md): the same ranking bit for bit, and faster than FTS5's statement
    end to end for every strategy at every size (even for unicode61 at 1x; 30 to 70x for unigram, jieba
    and pkuseg at 10x), for a larger file (1.6 to 12 MB of postings at 13.5k rows) and a longer build; for
    two hybrids there, the same ranking on all 4,218 questions and 6 to 10x faster at p95 (reports/latency.md,
    "Hybrids").
    """
    if choice == "auto":
        return "impact"
    return check_engine(choice)


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
    """Create and fill the ``impact_blocks`` table from the ``search`` table just built (inside the caller's
    transaction); ``weights`` are bm25's column weights. Returns the number of terms (a hybrid's: of its
    (field, term) keys, see :func:`field_key`)."""
    import numpy as np

    db.execute(_SCHEMA)
    reader = db.cursor()
    reader.row_factory = None
    found = reader.execute("SELECT block FROM search_data WHERE id = 1").fetchone()
    totals = _varints(found[0]) if found is not None else [0]
    rows, tokens = totals[0], sum(totals[1:])
    if rows == 0:
        return 0
    avgdl = float(tokens) / float(rows)
    # Filled row by row: a list of (rowid, size) pairs first held about 90 bytes per row (800,000 lines rows).
    largest = reader.execute("SELECT max(id) FROM search_docsize").fetchone()[0]
    sizes = np.zeros(1 + (largest or 0))
    for rowid, blob in reader.execute("SELECT id, sz FROM search_docsize"):
        # Columns under 128 tokens are one byte each (a varint's high bit marks a continuation).
        sizes[rowid] = sum(blob) if blob.isascii() else sum(_varints(blob))
    columns = [row[1] for row in reader.execute("PRAGMA table_info(search)")]
    weight_of = dict(zip(columns, weights, strict=True))
    # A hybrid's field n owns columns 2n and 2n + 1 (title, body): its postings are keyed by field.
    field_of = {column: number // 2 for number, column in enumerate(columns)} if len(tokenizer.fields) > 1 else None
    reader.execute(f"DROP TABLE IF EXISTS {_VOCAB}")
    reader.execute(f"CREATE VIRTUAL TABLE {_VOCAB} USING fts5vocab(main, 'search', 'instance')")
    try:
        try:
            return _write_counted(db, weights, len(tokenizer.fields), _Blocks(db, sizes, avgdl))
        except _OutOfStep:  # pragma: no cover - FTS5 walks its terms in order and group_concat follows
            db.execute("DELETE FROM impact_blocks")
        blocks = _Blocks(db, sizes, avgdl)
        batch = _Batch()
        found = reader.execute(f"SELECT term, doc, col FROM {_VOCAB} WHERE {_KEPT_TERM}")
        for term, rowids, frequencies in _postings(found, weight_of, field_of):
            batch.add(term, rowids, frequencies)
            if len(batch.rowids) >= _BATCH_POSTINGS:
                batch.write(blocks)
        batch.write(blocks)
    finally:
        reader.execute(f"DROP TABLE IF EXISTS {_VOCAB}")
    return blocks.terms


#: Instances the counted path reads into numpy at a time (a longer list is read whole).
_BATCH_INSTANCES = 50_000
#: FTS5 keeps at most this many bytes of a token (``FTS5_MAX_TOKEN_SIZE``), cut anywhere, even inside a
#: character. Terms this long get no postings, and a query holding one is answered by FTS5
#: (:func:`fallback_reason`): the term FTS5 holds is not the one asked for.
FTS5_TOKEN_BYTES = 32_768
#: The instance pass's filter of such terms (a blob's length is its bytes; the text is never decoded).
_KEPT_TERM = f"length(CAST(term AS BLOB)) < {FTS5_TOKEN_BYTES}"


class _OutOfStep(Exception):
    """A term's instances did not come in FTS5's order, or not all of them (never seen)."""


def _write_counted(db: sqlite3.Connection, weights: list[float], fields: int, blocks: _Blocks) -> int:
    """The postings with numpy instead of a Python step per token instance.

    One pass over the instance table grouped by term (FTS5 walks it in term order, so SQLite groups without
    sorting) gives each term its instances as one text of numbers ``row * columns + column``, in FTS5's
    (row, column, offset) order; a batch of terms is parsed by numpy at once. A hybrid's instances are then
    grouped by field (a stable sort keeps each row's instances in order). Each (term, field, row)'s tf adds
    the column weights of its instances in that order: with integer weights every partial sum is an integer
    below 2**53, so ``np.add.reduceat`` (any order) gives FTS5's ``tf`` exactly; other weights are added one
    instance position at a time across all groups, as FTS5 adds them (instances of one column carry one
    weight, so only the column order matters). SQLite does not promise ``group_concat``'s order: a term
    whose numbers are not ascending, or counts that do not add up, is :class:`_OutOfStep`.
    """
    import numpy as np

    names = [row[1] for row in db.execute("PRAGMA table_info(search)")]
    # One field whose columns weigh the same needs no column: the numbers are bare rows (a third shorter).
    width = len(names) if fields > 1 or len(set(weights)) > 1 else 1
    cases = " ".join("WHEN ? THEN ?" for _ in names)
    params = [value for number, name in enumerate(names) for value in (name, number)] if width > 1 else []
    number = f"doc * {width} + CASE col {cases} END" if width > 1 else "doc"
    grouped = db.cursor()
    grouped.row_factory = None
    found = grouped.execute(
        f"SELECT term, count(*), group_concat({number}) FROM {_VOCAB} GROUP BY term HAVING {_KEPT_TERM}", params
    )
    column_weight = np.array(weights, dtype="<f8")
    integral = all(float(weight).is_integer() for weight in weights)
    count = pending = 0
    terms: list[str] = []
    counts: list[int] = []
    texts: list[str] = []

    def flush() -> int:
        total = sum(counts)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a malformed text must not pass as a shorter array
            try:
                numbers = np.fromstring(",".join(texts), dtype="<i8", sep=",")
            except (DeprecationWarning, ValueError) as exc:
                raise _OutOfStep from exc
        if len(numbers) != total:
            raise _OutOfStep
        term_starts = np.cumsum([0, *counts[:-1]])
        step = np.diff(numbers)
        step[term_starts[1:] - 1] = 0  # a new term may start anywhere
        if len(step) and step.min() < 0:
            raise _OutOfStep
        docs, columns = np.divmod(numbers, width)
        new_row = np.empty(total, dtype=bool)
        new_row[0] = True
        np.not_equal(docs[1:], docs[:-1], out=new_row[1:])
        new_row[term_starts] = True
        if fields > 1:
            key_of = np.repeat(np.arange(len(terms)), counts) * fields + columns // 2
            order = np.argsort(key_of, kind="stable")  # rows stay ascending, instances in order, per key
            docs, columns, key_of = docs[order], columns[order], key_of[order]
            new_row[1:] = docs[1:] != docs[:-1]
            new_row[1:] |= key_of[1:] != key_of[:-1]
        starts = np.flatnonzero(new_row)
        values = column_weight[columns]
        tf = np.add.reduceat(values, starts) if integral else _in_order(values, starts)
        if fields > 1:
            group_key = key_of[starts]
            key_starts = np.flatnonzero(np.concatenate(([True], group_key[1:] != group_key[:-1])))
            keyed = [field_key(key % fields, terms[key // fields]) for key in group_key[key_starts].tolist()]
            written = blocks.write(keyed, docs[starts], tf, [*key_starts[1:].tolist(), len(starts)])
        else:
            term_ends = np.searchsorted(starts, [*term_starts[1:].tolist(), total]).tolist()
            written = blocks.write(terms, docs[starts], tf, term_ends)
        terms.clear()
        counts.clear()
        texts.clear()
        return written

    try:
        for term, instances_of_term, text in found:
            terms.append(term)
            counts.append(instances_of_term)
            texts.append(text)
            pending += instances_of_term
            if pending >= _BATCH_INSTANCES:
                count += flush()
                pending = 0
        if terms:
            count += flush()
    finally:
        grouped.close()
    return count


def _in_order(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Each group's sum (groups begin at ``starts``) added left to right, one position at a time across all
    groups: ``((0 + v0) + v1) + ...``, FTS5's ``aFreq += w`` per instance, for weights whose sums round."""
    import numpy as np

    lengths = np.diff(np.append(starts, len(values)))
    tf = np.zeros(len(starts))
    alive = np.arange(len(starts))
    step = 0
    while len(alive):
        tf[alive] += values[starts[alive] + step]
        step += 1
        alive = alive[lengths[alive] > step]
    return tf


#: Postings computed together: numpy on one long array instead of one small array per term (trigram has
#: hundreds of thousands of terms), with memory bounded by the batch rather than the index (50,000 postings:
#: a 10 MB corpus.jsonl built with impacts peaked at 174 MB RSS with batches of 1,000,000, under 60 MB now).
_BATCH_POSTINGS = 50_000


class _Batch:
    """Terms' postings awaiting their impacts and their blocks."""

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

    def write(self, blocks: _Blocks) -> None:
        import numpy as np

        blocks.write(self.terms, np.array(self.rowids, dtype="<i8"), np.array(self.frequencies, dtype="<f8"), self.ends)
        self.clear()


class _Blocks:
    """Writes consecutive terms' postings as ``impact_blocks`` rows; terms must come in ascending order."""

    def __init__(self, db: sqlite3.Connection, sizes: np.ndarray, avgdl: float) -> None:
        self.db = db
        self.sizes = sizes
        self.avgdl = avgdl
        self.last: str | None = None
        self.terms = 0

    def write(self, terms: list[str], ids: np.ndarray, tf: np.ndarray, ends: list[int]) -> int:
        """Term ``i`` owns ``ids``/``tf`` up to ``ends[i]``. Returns the number of terms written."""
        import numpy as np

        if not terms:
            return 0
        length = self.sizes[ids]
        # The operations of fts5Bm25Function, in its order (C: 1 - b + b * D / avgdl), element by element.
        impact = ((tf * (K1 + 1.0)) / (tf + K1 * ((1 - B) + (B * length) / self.avgdl))).astype("<f8")
        starts = [0, *ends[:-1]]
        peaks = np.maximum.reduceat(impact, starts)
        ids = ids.astype("<i8", copy=False)
        previous = self.last
        for term in terms:
            if previous is not None and not previous < term:
                raise _OutOfStep
            previous = term
        self.last = previous
        rows = []
        first = 0
        term_ends = np.asarray(ends, dtype="<i8")
        while first < len(terms):
            # Up to BLOCK_TERMS terms, ending with the first whose postings bring the block to BLOCK_POSTINGS.
            full = int(np.searchsorted(term_ends, starts[first] + BLOCK_POSTINGS, side="left")) + 1
            last = min(first + BLOCK_TERMS, full, len(terms))
            low, high = starts[first], ends[last - 1]
            bounds = np.concatenate(([0], term_ends[first:last] - low)).astype("<i8")
            rows.append(
                (
                    terms[first],
                    json.dumps(terms[first:last], ensure_ascii=False),
                    bounds.tobytes(),
                    ids[low:high].tobytes(),
                    impact[low:high].tobytes(),
                    peaks[first:last].tobytes(),
                )
            )
            first = last
        self.db.executemany("INSERT INTO impact_blocks VALUES (?, ?, ?, ?, ?, ?)", rows)
        self.terms += len(terms)
        return len(terms)


def _postings(
    instances: Iterator[tuple[str, int, str]], weight_of: dict[str, float], field_of: dict[str, int] | None = None
) -> Iterator[tuple[str, list[int], list[float]]]:
    """Per term, its rows ascending and each row's weighted tf, summed instance by instance as FTS5 does
    (``aFreq += w`` per instance: for a weight like 0.3 repeated addition differs from ``w * tf``).

    With ``field_of`` (a hybrid's column -> field), a term's instances are split by field and each field's
    postings come under :func:`field_key`: a field's column filter makes FTS5 count only that field's
    instances, and the rows holding the term there, for its tf and IDF."""
    term: str | None = None
    lists: dict[int, tuple[list[int], list[float]]] = {}
    for found, rowid, column in instances:
        if found != term:
            yield from _flush(term, lists, field_of is not None)
            term, lists = found, {}
        number = 0 if field_of is None else field_of[column]
        rowids, frequencies = lists.setdefault(number, ([], []))
        if not rowids or rowids[-1] != rowid:
            rowids.append(rowid)
            frequencies.append(0.0)
        frequencies[-1] += weight_of[column]
    yield from _flush(term, lists, field_of is not None)


def _flush(
    term: str | None, lists: dict[int, tuple[list[int], list[float]]], keyed: bool
) -> Iterator[tuple[str, list[int], list[float]]]:
    if term is None:
        return
    for number in sorted(lists):
        rowids, frequencies = lists[number]
        yield (field_key(number, term) if keyed else term), rowids, frequencies


def field_key(number: int, term: str) -> str:
    """The postings key of a hybrid field's term: the term, a unit separator, then the field's number after
    its count of digits (``a\x1f10``, ``a\x1f212``), so keys ascend as the terms do, then by field (a
    column's terms never hold a control character: FTS5 splits on them)."""
    digits = str(number)
    return f"{term}\x1f{len(digits)}{digits}"


def query_keys(compiled: CompiledQuery) -> tuple[str, ...]:
    """The postings keys of a query's terms in expression order (FTS5 sums its phrases in that order): a
    one-field query's terms, or the terms of every field in the expression under their field's key."""
    return tuple(key for group in _key_groups(compiled) for key in group)


def _key_groups(compiled: CompiledQuery) -> list[tuple[str, ...]]:
    """The postings keys of each field in the expression (one group for a one-field query)."""
    if not compiled.fields:
        return [compiled.terms]
    return [tuple(field_key(number, term) for term in compiled.fields[number]) for number in compiled.matching]


def has_impacts(index: Index) -> bool:
    """Whether the index holds impact postings (built with ``engine=impact``)."""
    return postings_table(index.db) is not None


def postings_table(db: sqlite3.Connection) -> str | None:
    """The table holding the postings: ``impact_blocks``, an older build's ``impacts``, or None."""
    names = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return next((table for table in TABLES if table in names), None)


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
    """A decoded ``impact_blocks`` row: its terms, their postings' bounds, the blobs and the peaks."""

    terms: list[str]
    bounds: np.ndarray
    rowids: bytes
    weights: bytes
    peaks: np.ndarray


@dataclass
class _Cache:
    """What searches have read of one build's postings, held on its Index (which drops it for another build)."""

    layout: str | None
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


#: An engine about to answer many queries of one index (compare's runs, batch search) reads all its blocks of
#: postings first when they take at most this many bytes, so that its queries are answered warm rather than
#: each reading, for the first time, a block per term (a cold trigram question on the handbook read about
#: seven). The handbook's take 0.2-1.8 MB per strategy, cmrc2018_dev_trial_sent's 1.1-8.8 MB (replicated 10x, 11-88 MB).
PRELOAD_BYTES = 32_000_000


#: What a cached term costs beyond its arrays (its dict entry, the Postings and array objects), counted so that
#: a stream of terms no row holds, each cached as absent, fills the cache too instead of growing it unbounded.
ENTRY_BYTES = 200


def _cache_of(index: Index) -> _Cache:
    """The index's postings cache, started (over) when it has none for this build or it is full."""
    cache = index.postings
    if not isinstance(cache, _Cache) or cache.bytes > CACHE_BYTES:
        cache = index.postings = _Cache(postings_table(index.db))
    return cache


def preload(index: Index, budget: int = PRELOAD_BYTES) -> bool:
    """Read every block of ``index``'s postings into its cache, checked as a query's reads are, when they take at
    most ``budget`` bytes; afterwards no query reads a block. False (nothing read) when they are larger, or
    kept in an older build's table: queries then read what they need as they go."""
    cache = _cache_of(index)
    if cache.complete:
        return True
    if cache.layout != BLOCKS_TABLE or postings_bytes(index.db) > budget:
        return False
    for row in index.db.execute(_ALL_BLOCKS):
        _decoded(index, cache, row, str(row[0]))  # a damaged block is named by its first term, whatever it holds
    cache.complete = True
    return True


def _postings_of(index: Index, term: str) -> Postings | None:
    cache = _cache_of(index)
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
    return _valid(index, term, ids, values, float(block.peaks[number]))


def _block_of(index: Index, cache: _Cache, term: str) -> _Block | None:
    """The block whose terms would hold ``term``: a cached one that spans it, else read (and cached)."""
    position = bisect.bisect_right(cache.firsts, term) - 1
    if position >= 0:
        known = cache.blocks[cache.firsts[position]]
        if term <= known.terms[-1]:
            return known
    if cache.complete:
        return None
    row = index.db.execute(_BLOCK, (term,)).fetchone()
    return None if row is None else _decoded(index, cache, row, term)


def _decoded(index: Index, cache: _Cache, row: tuple[Any, ...], term: str) -> _Block:
    """An ``impact_blocks`` row checked, decoded and cached; ``term`` (the one asked for) names a damaged one."""
    import numpy as np

    first, terms, bounds, rowids, weights, peaks = row
    try:
        listed = json.loads(terms)
    except (TypeError, ValueError):
        listed = None
    # Checked with C-level set and sort rather than a Python step per term: a cold query reads a block per term.
    if not isinstance(listed, list) or not listed or set(map(type, listed)) != {str}:
        _damaged(index, term)
    blobs = (bounds, rowids, weights, peaks)
    if listed[0] != first or not all(isinstance(blob, bytes) for blob in blobs):
        _damaged(index, term)
    if len(bounds) != 8 * (len(listed) + 1) or len(peaks) != 8 * len(listed) or len(weights) != len(rowids):
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


def idf(rows: int, matching: int) -> float:
    """FTS5's IDF of a term found in ``matching`` of ``rows`` rows."""
    value = math.log((rows - matching + 0.5) / (matching + 0.5))
    return value if value > 0.0 else CLAMPED_IDF


#: Whether :func:`ranked` prunes by default; None: an ``or`` query whose longest list holds at least
#: :data:`PRUNE_SHARE` of its postings and at least :data:`PRUNE_MIN_POSTINGS` is pruned. MaxScore skips such a
#: list (a frequent term's) at a cost per query (bounds, binary searches, exact scores) that only a long list
#: repays: at 10x cmrc2018_dev_trial_sent (135k rows) it paid for jieba and pkuseg questions led by 的's
#: 71k-posting list and never for unigram's flatter ones; on drcd_dev replicated 30x (30k rows) no list was
#: long enough for it to pay (reports/latency.md, "Pruning where it pays").
PRUNE: bool | None = None
PRUNE_SHARE = 0.6
PRUNE_MIN_POSTINGS = 40_000


def _pays(present: dict[str, Postings]) -> bool:
    """Whether MaxScore is expected to beat scoring every row (see :data:`PRUNE`)."""
    lengths = [len(found.ids) for found in present.values()]
    longest = max(lengths)
    return len(lengths) > 1 and longest >= PRUNE_MIN_POSTINGS and longest >= PRUNE_SHARE * sum(lengths)


def ranked(
    index: Index, compiled: CompiledQuery, limit: int, accept: Accept | None = None, *, prune: bool | None = None
) -> list[tuple[int, float]]:
    """The top ``limit`` (chunk id, bm25 score) of ``compiled`` (see :func:`fallback_reason`), in FTS5's
    order: score ascending, ties by id; ``accept`` filters (called on candidates in rank order).
    ``prune`` (default :data:`PRUNE`: where it pays) skips rows that provably cannot make the top (MaxScore for
    ``or``, intersection by lookups for ``and``; see :class:`_Scorer`); the result is the same either way, bit
    for bit."""
    groups = _key_groups(compiled)
    keys = tuple(key for group in groups for key in group)  # query_keys(compiled)
    postings = {key: _postings_of(index, key) for key in dict.fromkeys(keys)}
    present = {key: found for key, found in postings.items() if found is not None}
    hybrid_and = compiled.mode == "and" and len(groups) > 1
    if not present or (compiled.mode == "and" and not hybrid_and and len(present) < len(postings)):
        return []
    # Reading the postings above left the index holding the cache that has them (see _postings_of).
    scorer = _Scorer(keys, present, conjunctive=compiled.mode == "and", best=index.postings.best_rows)
    chosen = PRUNE if prune is None else prune
    if chosen is None:
        chosen = compiled.mode != "and" and _pays(present)
    if hybrid_and:
        scorer.groups = [group for group in groups if all(key in present for key in group)]
        top_of = scorer.any_group
    elif not chosen:
        top_of = scorer.everything
    elif compiled.mode == "and":
        top_of = scorer.intersection
    else:
        top_of = scorer.maxscore
    if accept is None:
        return top_of(limit)[0]
    hits: list[tuple[int, float]] = []
    seen = 0
    wanted = limit
    while True:
        top, exhausted = top_of(wanted)
        fresh = top[seen:]
        passed = accept([chunk_id for chunk_id, _ in fresh]) if fresh else set()
        hits += [(chunk_id, score) for chunk_id, score in fresh if chunk_id in passed]
        if len(hits) >= limit or exhausted:
            return hits[:limit]
        seen, wanted = len(top), wanted * 4


#: Relative slack on score bounds: far above the rounding of a sum of a few dozen terms, far below any gap
#: that decides a ranking.
_SLACK = 1e-9
#: Below this many postings in all, scoring every row ranks every matching row without a cut (the cut's
#: pool costs more than it saves; at 10x unigram the cut took engine p95 from 1.78 to 1.08 ms).
CUT_MIN_POSTINGS = 20_000
#: The cut before ranking is taken from the rows of the rarest lists, up to this many postings.
POOL_POSTINGS = 2000
#: Rows per term among which MaxScore takes its threshold: the rows the term adds most to.
BEST_ROWS = 256
#: MaxScore raises its threshold (a sort of the best rows so far) before summing a list of at least this many
#: postings, a quarter of those summed, and an eighth of the rows: a shorter list costs less to sum than the
#: bound (tried at 10x: 1,000 to 8,000 postings and shares from a quarter to none measured alike, within noise).
CHECK_POSTINGS = 4000
CHECK_SHARE = 4
CHECK_FRACTION = 8
#: MaxScore takes its candidates by sorting the summed lists' rows while fewer than the rows / this, else by
#: testing every row of the dense sums (4, 16 and 64 measured alike at 10x, within noise).
DISTINCT_COST = 16
#: A binary search per candidate costs about this many postings scattered (numpy, measured 10 to 15).
LOOKUP_COST = 10

Ranking = tuple[list[tuple[int, float]], bool]


class _Scorer:
    """One query over its terms' postings. Each method returns the top ``k`` and whether that is every match.

    Exact scores are always summed term by term in the query's order (repeats included), as FTS5 does, so a
    row's score is bit-identical whichever method found it; bounds use any order, with ``_SLACK``.
    """

    def __init__(
        self,
        terms: tuple[str, ...],
        present: dict[str, Postings],
        *,
        conjunctive: bool,
        best: Callable[[str, Postings], np.ndarray] | None = None,
    ) -> None:
        self.terms = [term for term in terms if term in present]
        self.present = present
        self.best = best or (lambda _term, found: _best_rows_of(found))
        self.conjunctive = conjunctive
        self.size = 1 + max(int(found.ids[-1]) for found in present.values())
        self._all: tuple[np.ndarray, np.ndarray] | None = None
        self._scores: np.ndarray | None = None
        self._known: tuple[np.ndarray, np.ndarray] | None = None
        #: A hybrid's ``and``: each field's keys, for the fields whose every term some row holds.
        self.groups: list[tuple[str, ...]] = []

    def everything(self, k: int) -> Ranking:
        """Every matching row scored (numpy scatter per term), then ranked above a cut where one is known."""
        import numpy as np

        if self._all is None or not self.conjunctive:
            scores = self._dense()
        if not self.conjunctive:
            cut = self._cut(scores, k)
            if cut > 0:
                candidates = _nonzero(scores, cut)
                values = np.negative(scores[candidates])
                top = _top(candidates, values, k)
                return top, len(top) < k
        if self._all is None:
            if self.conjunctive:
                matched = _buffer("matched", self.size, "i4")
                matched.fill(0)
                for ids, _, _ in self.present.values():
                    matched[ids] += 1
                candidates = np.flatnonzero(matched == len(self.present))
            else:
                candidates = _nonzero(scores, 0.0)  # every idf and impact is positive
            values = np.take(scores, candidates, out=_buffer("ranked", len(candidates)))
            self._all = candidates, np.negative(values, out=values)
        candidates, values = self._all
        top = _top(candidates, values, k)
        return top, len(top) == len(candidates)

    def _dense(self) -> np.ndarray:
        """Every row's score (0 where no term is), summed once per query."""
        import numpy as np

        if self._scores is None:
            scores = self._scores = _zeros("scores", self.size)
            for term in self.terms:  # FTS5 sums phrase by phrase in expression order
                ids, values, _ = self.present[term]
                np.add.at(scores, ids, values)  # ids are unique: scores[ids] += values, several times faster
        return self._scores

    def _cut(self, scores: np.ndarray, k: int) -> float:
        """The ``k``-th best exact score among the rows of the rarest lists (so at most the ``k``-th best of
        all), when those rows are few against all the postings; else 0. Ranking only rows at or above it
        keeps every row of the top and every row tied with its last."""

        total = sum(len(found.ids) for found in self.present.values())
        if total < CUT_MIN_POSTINGS:
            return 0.0
        lists = []
        taken = 0
        for found in sorted(self.present.values(), key=lambda found: len(found.ids)):
            lists.append(found.ids)
            taken += len(found.ids)
            if taken >= max(POOL_POSTINGS, 4 * k):
                break
        if taken * 4 > total:
            return 0.0
        return _kth(scores, _distinct(lists), k)

    def exact(self, candidates: np.ndarray) -> np.ndarray:
        """The scores (positive) of ``candidates`` (ascending), term by term in query order; rows scored by
        the previous call are not scored again."""
        import numpy as np

        known = self._known
        if known is not None and len(known[0]):
            positions = known[0].searchsorted(candidates)
            hit = known[0].take(positions, mode="clip") == candidates
            scores = np.empty(len(candidates))
            scores[hit] = known[1][positions[hit]]
            scores[~hit] = self._exact(candidates[~hit])
        else:
            scores = self._exact(candidates)
        self._known = candidates, scores
        return scores

    def _exact(self, candidates: np.ndarray) -> np.ndarray:
        import numpy as np

        scores = np.zeros(len(candidates))
        for term in self.terms:
            ids, values, _ = self.present[term]
            positions = ids.searchsorted(candidates)
            # A miss adds +0.0, which leaves a sum of positive terms bit for bit as it was.
            scores += np.where(ids.take(positions, mode="clip") == candidates, values.take(positions, mode="clip"), 0.0)
        return scores

    def intersection(self, k: int) -> Ranking:
        """``and``: the shortest list's rows looked up in the others, then scored; no row is scanned twice."""
        if self._all is None:
            candidates = _intersected([found.ids for found in self.present.values()])
            self._all = candidates, -self.exact(candidates)
        return self.everything(k)

    def any_group(self, k: int) -> Ranking:
        """A hybrid's ``and``: the rows where some field holds all its terms (a union of intersections). FTS5
        counts a field's terms only in the rows that field matches (it clears the positions of a conjunction
        that failed), so a row's score sums, in expression order, the terms of the fields it matches."""
        import numpy as np

        if self._all is None:
            matched = [_intersected([self.present[key].ids for key in dict.fromkeys(group)]) for group in self.groups]
            nonempty = [rows for rows in matched if len(rows)]
            candidates = _distinct(nonempty) if nonempty else np.zeros(0, dtype=np.int64)
            scores = np.zeros(len(candidates))
            for group, rows in zip(self.groups, matched, strict=True):
                if not len(rows):
                    continue
                inside = _lookup(rows, candidates)[1]
                within = candidates[inside]
                sums = scores[inside]
                for key in group:  # repeats included, as FTS5 sums every phrase
                    ids, values, _ = self.present[key]
                    sums += values[ids.searchsorted(within)]  # every row of ``within`` holds every key
                scores[inside] = sums
            self._all = candidates, np.negative(scores)
        candidates, values = self._all
        top = _top(candidates, values, k)
        return top, len(top) == len(candidates)

    def maxscore(self, k: int) -> Ranking:
        """``or`` with MaxScore's bounds: rows only in lists whose largest contributions together stay below
        the ``k``-th best score cannot make the top.

        1. Lists are summed into a dense array most valuable term first (``idf * peak`` times the term's
           repeats: rare terms, short lists). After each, ``theta`` (at most the true ``k``-th best score) is
           the ``k``-th best sum so far among the rows the summed terms add most to (:func:`_best_rows_of`,
           kept per term): a sum of some of a row's contributions is at most its score.
        2. Summing stops when the terms left, whose maxima together stay below ``theta``, are non-essential: a
           row in none of the summed lists scores below ``theta``, and their lists are never scanned.
        3. Candidates are the summed lists' rows whose sum plus the non-essential maxima can reach ``theta``;
           the non-essential terms, most valuable first, add their contributions (binary search when the rows
           left are few against the list, else a dense array), and rows whose bound falls below are dropped.
        4. The rows whose (unordered) sum can still be among the ``k`` best are scored exactly and ranked.
        """
        import numpy as np

        present = self.present
        if len(present) < 2:
            return self.everything(k)
        repeats = collections.Counter(self.terms)
        factor = {term: float(repeats[term]) for term in present}
        most = {term: factor[term] * found.most for term, found in present.items()}
        order = sorted(present, key=most.__getitem__, reverse=True)
        left = list(itertools.accumulate([most[term] for term in reversed(order)], initial=0.0))[::-1]
        partial = _clean("partial", self.size)
        summed: list[np.ndarray] = []
        try:
            theta = 0.0
            spent = 0
            best: list[np.ndarray] = []
            while len(summed) < len(order) and left[len(summed)] * (1 + _SLACK) >= theta:
                term = order[len(summed)]
                summed.append(present[term].ids)  # before it is added to: cleared whatever happens
                self._scatter(partial, term, factor[term])
                spent += len(summed[-1])
                best.append(self.best(term, present[term]))
                following = len(present[order[len(summed)]].ids) if len(summed) < len(order) else 0
                # ``theta`` is worth raising only before a list longer than those summed (short lists cost
                # less to sum than the bound), and when no list is left, for the candidates' cut.
                if following >= max(CHECK_POSTINGS, spent // CHECK_SHARE, self.size // CHECK_FRACTION) or not following:
                    theta = max(theta, _kth(partial, _distinct(best), k))
            first = len(summed)
            cut = theta * (1 - _SLACK) - left[first]
            if spent * DISTINCT_COST < self.size:
                candidates = _distinct(summed)
                candidates = candidates[partial[candidates] >= cut]
            else:
                candidates = _nonzero(partial, cut)
            # The non-essential terms add to the candidates only (binary search), or, when the candidates are
            # many against a list, the list is summed like the others: either way into ``partial``.
            for position, term in enumerate(order[first:], first):
                if position > first:
                    keep = (partial[candidates] + left[position]) * (1 + _SLACK) >= theta
                    candidates = candidates[keep]
                ids, values, _ = present[term]
                if len(candidates) * LOOKUP_COST < len(ids):
                    positions, hit = _lookup(ids, candidates)
                    partial[candidates[hit]] += factor[term] * values[positions[hit]]  # candidates are distinct
                else:
                    summed.append(ids)
                    self._scatter(partial, term, factor[term])
            upper = partial[candidates]
        finally:
            _clear(partial, summed)
        if len(candidates) > k:
            # ``upper`` is now each row's score summed in another order: within rounding of the exact one.
            kth = float(np.partition(upper, len(upper) - k)[len(upper) - k])
            candidates = candidates[upper * (1 + _SLACK) >= max(theta, kth * (1 - _SLACK))]
        top = _top(candidates, -self.exact(candidates), k)
        return top, len(top) < k

    def _scatter(self, partial: np.ndarray, term: str, factor: float) -> None:
        import numpy as np

        ids, values, _ = self.present[term]
        np.add.at(partial, ids, values if factor == 1.0 else factor * values)


_local = threading.local()


def _buffer(name: str, size: int, dtype: str = "f8", *, zeroed: bool = False) -> np.ndarray:
    """A reusable array of ``size`` (contents left from its last use), one per name and thread: a fresh
    megabyte array per query costs page faults, which at 135k rows took longer than the additions.
    ``zeroed``: a new array starts as zeros (see :func:`_clean`)."""
    import numpy as np

    buffers = _local.__dict__.setdefault("buffers", {})
    found = buffers.get(name)
    if found is None or len(found) < size:
        found = buffers[name] = (np.zeros if zeroed else np.empty)(size, dtype=dtype)
    view: np.ndarray = found[:size]
    return view


def _zeros(name: str, size: int) -> np.ndarray:
    view = _buffer(name, size)
    view.fill(0.0)
    return view


def _clean(name: str, size: int) -> np.ndarray:
    """A reusable array of ``size`` zeros, kept zero between uses by :func:`_clear` (filling a megabyte per
    query cost about as much as summing a rare term's list); its own name space, apart from other buffers'."""
    return _buffer(f"clean:{name}", size, zeroed=True)


def _clear(view: np.ndarray, lists: list[np.ndarray]) -> None:
    """Zero what :func:`_clean`'s ``view`` received from ``lists`` (all of it when they are long)."""
    if sum(len(ids) for ids in lists) * 4 > len(view):
        view.fill(0.0)
    else:
        for ids in lists:
            view[ids] = 0.0


def _distinct(lists: list[np.ndarray]) -> np.ndarray:
    """The rows of ``lists`` (each ascending), ascending, each once."""
    import numpy as np

    if len(lists) == 1:
        return lists[0]
    rows = np.sort(np.concatenate(lists))  # np.unique's hashing is slower at this size
    return rows[np.concatenate(([True], rows[1:] != rows[:-1]))]


def _kth(values: np.ndarray, rows: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``values`` at ``rows`` (0 when fewer)."""
    import numpy as np

    if len(rows) < k:
        return 0.0
    taken = values[rows]
    return float(np.partition(taken, len(taken) - k)[len(taken) - k])


def _nonzero(scores: np.ndarray, cut: float) -> np.ndarray:
    """The ids whose score is positive and at least ``cut`` (a boolean mask first: numpy's nonzero on a
    float array is several times slower)."""
    import numpy as np

    mask = _buffer("mask", len(scores), "?")
    if cut > 0:
        np.greater_equal(scores, cut, out=mask)
    else:
        np.greater(scores, 0.0, out=mask)
    return np.flatnonzero(mask)


def _intersected(lists: list[np.ndarray]) -> np.ndarray:
    """The rows in every one of ``lists`` (each ascending): the shortest list's rows looked up in the others."""
    lists = sorted(lists, key=len)
    rows = lists[0]
    for ids in lists[1:]:
        rows = rows[_lookup(ids, rows)[1]]
    return rows


def _lookup(ids: np.ndarray, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each candidate is in ``ids`` (ascending), and which candidates are there at all."""
    import numpy as np

    positions = np.searchsorted(ids, candidates)
    np.minimum(positions, len(ids) - 1, out=positions)
    return positions, ids[positions] == candidates


def _top(candidates: np.ndarray, values: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The first ``k`` (id, score) by (score, id): ``candidates`` ascend, so a stable sort breaks ties."""
    import numpy as np

    if len(values) > k:
        ordered = _buffer("partition", len(values))
        ordered[:] = values
        ordered.partition(k - 1)
        mask = np.less_equal(values, ordered[k - 1], out=_buffer("kept", len(values), "?"))
        kept = np.flatnonzero(mask)  # every row tied with the k-th stays in the running
        candidates, values = candidates[kept], values[kept]
    order = np.argsort(values, kind="stable")[:k]
    return list(zip(candidates[order].tolist(), values[order].tolist(), strict=True))


def _best_rows_of(found: Postings) -> np.ndarray:
    """The (at most :data:`BEST_ROWS`) rows a term adds most to, ascending."""
    import numpy as np

    if len(found.ids) <= BEST_ROWS:
        return found.ids
    top = np.argpartition(found.scores, len(found.scores) - BEST_ROWS)[len(found.scores) - BEST_ROWS :]
    return np.sort(found.ids[top])


def ids_json(ids: list[int]) -> str:
    """Chunk ids as one JSON array parameter (``json_each``), free of SQLite's limit on variables."""
    return json.dumps(ids)
