"""The impact engine: FTS5's own bm25, exactly, from per-term postings with the term weight precomputed.

FTS5 scores every row a query matches and cannot stop early, so a question full of frequent characters
costs milliseconds. bm25 splits into an IDF per query term times a per-(term, row) factor that depends only
on the index; the build stores that factor (the *impact*) per term, and a query sums ``idf * impact`` with
numpy in the query's term order, which reproduces FTS5's floating-point arithmetic operation by operation
(``fts5Bm25Function`` in SQLite's ``fts5_aux.c``):

- ``tf``: for every instance of the term in the row, in (column, offset) order, ``tf += column weight``
  (the weight is applied before saturation);
- ``impact = (tf * (k1 + 1)) / (tf + k1 * ((1 - b) + (b * |D|) / avgdl))``, ``|D|`` the row's tokens over all
  columns (``search_docsize``), avgdl = all tokens / all rows (FTS5's averages record, ``search_data`` id 1);
- ``idf = log((N - n + 0.5) / (n + 0.5))`` (N rows, n of them holding the term), 1e-6 when that is not
  positive; ``score = -sum(idf * impact)`` over the query's terms in expression order.

FTS5 fixes k1 = 1.2 and b = 0.75 (:data:`K1`, :data:`B`); the stored impacts are at those. The engine's options
``impact:k1=K,b=B`` (k1 from 0 to 1000, b from 0 to 1) rank with the same formula at any other pair: each block
also stores its postings' weighted ``tf`` (``tfs``, in the narrowest of uint8, uint16, float32 and float64 that
holds every value exactly), and a query's term gets its impacts from them, ``|D|`` (read once per open index
from ``search_docsize``) and avgdl, computed once per index and pair and cached like the stored ones, its peak
with them. At the defaults the stored impacts are read, so ``impact:k1=1.2,b=0.75`` is ``impact`` itself: the
same system, name and scores. An index built before ``tfs`` ranks at the defaults only (a query at another pair
is one error naming the rebuild).

Terms come from ``fts5vocab``'s instance table, so they are exactly the tokens FTS5 holds, for native and
Python strategies alike. A hybrid's query gives each field's terms a column filter (``{fts_title_1
fts_body_1} : (...)``), under which FTS5 counts only that field's instances for ``tf`` and only the rows
holding the term there for ``n``, while ``|D|`` stays over every column: so a hybrid's postings are per
(field, term) (:func:`field_key`) and its queries are exact too; its ``and`` matches a row when any one field
holds all its terms there, and FTS5 then counts only the terms of the fields that match the row
(:meth:`rag_eval.engines.impact.rank._Scorer.any_group`). Queries the engine cannot answer exactly (phrases, a
quoted term FTS5 would split into several tokens) are answered by the FTS5 statement
(:func:`rag_eval.engines.impact.fallback_reason`); ``--explain`` says which.

The postings are stored in blocks of up to :data:`BLOCK_TERMS` consecutive terms (``impact_blocks``), written
with numpy from one grouped pass over FTS5's instances; an index built before blocks (``impacts``, a row per
term) is still read.

Rank-safe pruning: each term's largest impact is stored with its postings (at another k1 and b, computed with its
impacts), so ``idf * peak`` bounds what the term adds to any row; MaxScore never reads the lists of terms whose
bounds together stay below the ``k``-th best score, and ``and`` queries intersect by binary search. The result
is the unpruned one bit for bit (exact scores are always summed in query order). By default an ``or`` query is
pruned when one long list (a frequent term's) holds most of its postings, where it measured faster
(:data:`rag_eval.engines.impact.rank.PRUNE`); otherwise every row is scored with numpy.

This module writes the postings at build time (:func:`write_impacts`); :mod:`rag_eval.engines.impact.read` reads
them and :mod:`rag_eval.engines.impact.rank` ranks queries with them.
"""

from __future__ import annotations

import json
import sqlite3
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from ...index.store import FTS5_TOKEN_BYTES

if TYPE_CHECKING:
    import numpy as np

    from ...tokenizers import Tokenizer

K1 = 1.2
B = 0.75

#: The postings in blocks of consecutive terms (one row per block: a row per term cost more to insert than
#: the rest of the postings' write, about 4 us each, 50,581 rows for jieba on cmrc2018_dev_trial, hundreds of
#: thousands for trigram). ``first``: the block's first term, its key; ``terms``: a JSON array of its terms,
#: ascending as SQLite's BINARY collation orders them; ``bounds``: int64 offsets of each term's postings in
#: ``rowids`` (int64) and ``weights`` (float64 impacts), one more than the terms; ``peaks``: each term's
#: largest impact (float64), the bound rank-safe pruning relies on; ``tfs``: each posting's weighted tf, for
#: ranking at another k1 and b, in the narrowest of :data:`TF_TYPES` that holds every one exactly (its width is
#: its length over the postings'; since 2026-12-04, read only when ranking at another k1 or b).
_SCHEMA = (
    "CREATE TABLE impact_blocks (first TEXT PRIMARY KEY, terms TEXT NOT NULL, bounds BLOB NOT NULL,"
    " rowids BLOB NOT NULL, weights BLOB NOT NULL, peaks BLOB NOT NULL, tfs BLOB NOT NULL) WITHOUT ROWID"
)
#: The column an index built before 2026-12-04 lacks: it ranks at FTS5's k1 and b only.
TF_COLUMN = "tfs"
#: A ``tfs`` blob's numbers by their width in bytes: whole counts below 256 or 65,536, else float32 when every
#: value is one exactly (integer column weights keep tf whole), else float64.
TF_TYPES = {1: "<u1", 2: "<u2", 4: "<f4", 8: "<f8"}
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


def average_length(db: sqlite3.Connection) -> float | None:
    """FTS5's avgdl: all tokens over all rows, from its averages record (None for an empty index)."""
    found = db.execute("SELECT block FROM search_data WHERE id = 1").fetchone()
    totals = _varints(found[0]) if found is not None else [0]
    rows, tokens = totals[0], sum(totals[1:])
    return float(tokens) / float(rows) if rows else None


def document_sizes(db: sqlite3.Connection | sqlite3.Cursor) -> np.ndarray:
    """Every row's ``|D|``, its tokens over all columns (``search_docsize``), indexed by rowid (0 elsewhere)."""
    import numpy as np

    reader = db.cursor() if isinstance(db, sqlite3.Connection) else db
    reader.row_factory = None
    # Filled row by row: a list of (rowid, size) pairs first held about 90 bytes per row (800,000 lines rows).
    largest = reader.execute("SELECT max(id) FROM search_docsize").fetchone()[0]
    sizes = np.zeros(1 + (largest or 0))
    for rowid, blob in reader.execute("SELECT id, sz FROM search_docsize"):
        # Columns under 128 tokens are one byte each (a varint's high bit marks a continuation).
        sizes[rowid] = sum(blob) if blob.isascii() else sum(_varints(blob))
    return sizes


def impacts(tf: np.ndarray, sizes: np.ndarray, avgdl: float, k1: float = K1, b: float = B) -> np.ndarray:
    """bm25's per-(term, row) factor for weighted ``tf`` in rows of ``sizes`` tokens: the operations of
    fts5Bm25Function, in its order (C: ``1 - b + b * D / avgdl``), element by element."""
    return ((tf * (k1 + 1.0)) / (tf + k1 * ((1 - b) + (b * sizes) / avgdl))).astype("<f8", copy=False)


def tf_blob(tf: np.ndarray) -> bytes:
    """``tf`` (positive float64) in the narrowest of :data:`TF_TYPES` that holds every value exactly."""
    import numpy as np

    top = float(tf.max()) if len(tf) else 0.0
    if np.array_equal(np.floor(tf), tf):
        if top < 256:
            return tf.astype("<u1").tobytes()
        if top < 65536:
            return tf.astype("<u2").tobytes()
    narrow = tf.astype("<f4")
    if np.array_equal(narrow.astype("<f8"), tf):
        return narrow.tobytes()
    return tf.astype("<f8").tobytes()


def tf_values(blob: bytes, postings: int) -> np.ndarray | None:
    """A ``tfs`` blob of ``postings`` values as float64, None when its length fits no :data:`TF_TYPES` width."""
    import numpy as np

    if postings <= 0 or len(blob) % postings:
        return None
    dtype = TF_TYPES.get(len(blob) // postings)
    return None if dtype is None else np.frombuffer(blob, dtype=dtype).astype("<f8")


def write_impacts(db: sqlite3.Connection, tokenizer: Tokenizer, weights: list[float]) -> int:
    """Create and fill the ``impact_blocks`` table from the ``search`` table just built (inside the caller's
    transaction); ``weights`` are bm25's column weights. Returns the number of terms (a hybrid's: of its
    (field, term) keys, see :func:`field_key`)."""

    db.execute(_SCHEMA)
    reader = db.cursor()
    reader.row_factory = None
    avgdl = average_length(db)
    if avgdl is None:
        return 0
    sizes = document_sizes(reader)
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
#: The instance pass's filter of terms FTS5 may hold cut (:data:`~rag_eval.index.store.FTS5_TOKEN_BYTES`): they get
#: no postings, and a query holding one is answered by FTS5 (:func:`rag_eval.engines.impact.fallback_reason`): the
#: term FTS5 holds is not the one asked for. A blob's length is its bytes; the text is never decoded.
_KEPT_TERM = f"length(CAST(term AS BLOB)) < {FTS5_TOKEN_BYTES}"


class _OutOfStep(Exception):
    """A term's instances did not come in FTS5's order, or not all of them (never seen)."""


def _write_counted(db: sqlite3.Connection, weights: list[float], fields: int, blocks: _Blocks) -> int:
    """The postings with numpy instead of a Python step per token instance.

    One pass over the instance table grouped by term (FTS5 walks it in term order, so SQLite groups without
    sorting) gives each term its instances as one text of numbers ``row * columns + column``, in FTS5's
    (row, column, offset) order; a batch of terms is parsed by numpy at once (:func:`_write_batch`). SQLite does
    not promise ``group_concat``'s order: a term whose numbers are not ascending, or counts that do not add up,
    is :class:`_OutOfStep`.
    """
    names = [row[1] for row in db.execute("PRAGMA table_info(search)")]
    layout = _Layout.of(names, weights, fields)
    cases = " ".join("WHEN ? THEN ?" for _ in names)
    params = [value for number, name in enumerate(names) for value in (name, number)] if layout.width > 1 else []
    number = f"doc * {layout.width} + CASE col {cases} END" if layout.width > 1 else "doc"
    grouped = db.cursor()
    grouped.row_factory = None
    found = grouped.execute(
        f"SELECT term, count(*), group_concat({number}) FROM {_VOCAB} GROUP BY term HAVING {_KEPT_TERM}", params
    )
    count = pending = 0
    batch: list[tuple[str, int, str]] = []
    try:
        for term, instances_of_term, text in found:
            batch.append((term, instances_of_term, text))
            pending += instances_of_term
            if pending >= _BATCH_INSTANCES:
                count += _write_batch(batch, layout, blocks)
                batch.clear()
                pending = 0
        if batch:
            count += _write_batch(batch, layout, blocks)
    finally:
        grouped.close()
    return count


class _Layout(NamedTuple):
    """How the instance numbers read: ``width`` columns per row (1: bare rows), ``fields`` fields (a hybrid's field
    n has columns 2n and 2n + 1), each column's bm25 weight, and whether every weight is a whole number."""

    width: int
    fields: int
    column_weight: np.ndarray
    integral: bool

    @classmethod
    def of(cls, names: list[str], weights: list[float], fields: int) -> _Layout:
        import numpy as np

        # One field whose columns weigh the same needs no column: the numbers are bare rows (a third shorter).
        width = len(names) if fields > 1 or len(set(weights)) > 1 else 1
        integral = all(float(weight).is_integer() for weight in weights)
        return cls(width, fields, np.array(weights, dtype="<f8"), integral)


def _write_batch(batch: list[tuple[str, int, str]], layout: _Layout, blocks: _Blocks) -> int:
    """Write a batch of terms' postings, each term given with its instance count and numbers.

    A hybrid's instances are grouped by field (a stable sort keeps each row's instances in order). Each
    (term, field, row)'s tf adds the column weights of its instances in that order: with integer weights every
    partial sum is an integer below 2**53, so ``np.add.reduceat`` (any order) gives FTS5's ``tf`` exactly; other
    weights are added one instance position at a time across all groups, as FTS5 adds them (instances of one
    column carry one weight, so only the column order matters)."""
    import numpy as np

    terms = [term for term, _, _ in batch]
    counts = [instances for _, instances, _ in batch]
    numbers, term_starts = _numbers(batch, counts)
    total = len(numbers)
    docs, columns = np.divmod(numbers, layout.width)
    new_row = np.empty(total, dtype=bool)
    new_row[0] = True
    np.not_equal(docs[1:], docs[:-1], out=new_row[1:])
    new_row[term_starts] = True
    fields = layout.fields
    if fields > 1:
        key_of = np.repeat(np.arange(len(terms)), counts) * fields + columns // 2
        order = np.argsort(key_of, kind="stable")  # rows stay ascending, instances in order, per key
        docs, columns, key_of = docs[order], columns[order], key_of[order]
        new_row[1:] = docs[1:] != docs[:-1]
        new_row[1:] |= key_of[1:] != key_of[:-1]
    starts = np.flatnonzero(new_row)
    values = layout.column_weight[columns]
    tf = np.add.reduceat(values, starts) if layout.integral else _in_order(values, starts)
    if fields > 1:
        group_key = key_of[starts]
        key_starts = np.flatnonzero(np.concatenate(([True], group_key[1:] != group_key[:-1])))
        keyed = [field_key(key % fields, terms[key // fields]) for key in group_key[key_starts].tolist()]
        return blocks.write(keyed, docs[starts], tf, [*key_starts[1:].tolist(), len(starts)])
    term_ends = np.searchsorted(starts, [*term_starts[1:].tolist(), total]).tolist()
    return blocks.write(terms, docs[starts], tf, term_ends)


def _numbers(batch: list[tuple[str, int, str]], counts: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The batch's instance numbers parsed at once, and where each term's start; :class:`_OutOfStep` when a text is
    malformed, the counts do not add up or a term's numbers are not ascending."""
    import numpy as np

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a malformed text must not pass as a shorter array
        try:
            numbers = np.fromstring(",".join(text for _, _, text in batch), dtype="<i8", sep=",")
        except (DeprecationWarning, ValueError) as exc:
            raise _OutOfStep from exc
    if len(numbers) != sum(counts):
        raise _OutOfStep
    term_starts = np.cumsum([0, *counts[:-1]])
    step = np.diff(numbers)
    step[term_starts[1:] - 1] = 0  # a new term may start anywhere
    if len(step) and step.min() < 0:
        raise _OutOfStep
    return numbers, term_starts


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
        impact = impacts(tf, self.sizes[ids], self.avgdl)
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
                    tf_blob(tf[low:high]),
                )
            )
            first = last
        self.db.executemany("INSERT INTO impact_blocks VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
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
