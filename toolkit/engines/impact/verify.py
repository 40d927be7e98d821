"""The impact postings checked against the FTS5 statistics they were made from (``index verify``, through
:meth:`rag_eval.engines.impact.ImpactEngine.check_postings`).

The postings of a term list exactly the rows FTS5 says hold it, so each term's number of postings must equal its
document frequency (``fts5vocab`` ``row``; a hybrid's postings are per field, which FTS5 counts per column: the
count must lie between the largest and the sum of its columns' counts), with the same set of terms, rows ascending
among the chunks' ids, impacts in bm25's range (0, k1 + 1) and each term's stored peak its largest impact exactly.
A block's tfs (what ranking at another k1 and b reads) must be positive, finite, of a width :data:`TF_TYPES` has,
and give its stored impacts again, bit for bit, with FTS5's |D|, avgdl, k1 and b. One pass over both, in term order,
so memory holds one block (and every row's |D|); it costs about a read of the FTS5 index. The tfs themselves are not
counted again from the token instances (that is a build's pass over every one).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...index.integrity import EXAMPLES, Damage
from ...index.store import FTS5_TOKEN_BYTES
from .read import has_tfs, postings_table
from .write import BLOCKS_TABLE, K1, LEGACY_TABLE, average_length, document_sizes, field_key, tf_values
from .write import impacts as bm25_impacts

if TYPE_CHECKING:
    import numpy as np

    from ...index.store import Index

_VOCAB = "temp.rag_eval_integrity_vocab"
_KEPT = f"length(CAST(term AS BLOB)) < {FTS5_TOKEN_BYTES}"


def postings_damage(index: Index) -> list[Damage]:
    """The impact postings against FTS5's document frequencies (call inside ``index.reading()``)."""
    table = postings_table(index.db)
    if table is None:
        return []
    db = index.db
    largest = int(db.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()[0])
    columns = [str(row[1]) for row in db.execute('PRAGMA table_info("search")')]
    fields = len(index.tokenizer.fields)
    db.execute(f"DROP TABLE IF EXISTS {_VOCAB}")
    db.execute(f"CREATE VIRTUAL TABLE {_VOCAB} USING fts5vocab(main, 'search', '{'col' if fields > 1 else 'row'}')")
    vocabulary, postings = db.cursor(), db.cursor()
    try:
        expected = _readable(_expected_counts(vocabulary, columns, fields), "search")
        lengths = (document_sizes(db), average_length(db) or 1.0) if has_tfs(db) else None
        stored = _readable(_stored_postings(db, postings, table, largest, lengths), table)
        return _compared(table, expected, stored)
    except _Malformed as exc:
        return [Damage(table, f"malformed postings {exc}: not what a build writes")]
    except _Unreadable as exc:
        return [Damage(exc.table, f"cannot be read: {exc}")]
    finally:
        vocabulary.close()  # a statement still reading the vocabulary would lock it against the drop
        postings.close()
        db.execute(f"DROP TABLE IF EXISTS {_VOCAB}")


class _Malformed(Exception):
    """Postings that are not what a build writes (the message names where)."""


class _Unreadable(Exception):
    """A table SQLite's check passed that still fails to read (FTS5's structure records, say)."""

    def __init__(self, table: str, exc: sqlite3.DatabaseError) -> None:
        super().__init__(str(exc))
        self.table = table


def _readable(items: Iterator[Any], table: str) -> Iterator[Any]:
    """``items`` with a SQLite error while reading them as :class:`_Unreadable` naming ``table``."""
    try:
        yield from items
    except sqlite3.DatabaseError as exc:
        raise _Unreadable(table, exc) from None


def _expected_counts(reader: sqlite3.Cursor, columns: list[str], fields: int) -> Iterator[tuple[str, int, int]]:
    """Each postings key FTS5's vocabulary calls for, ascending, with the fewest and most postings it may have:
    a term's document frequency; a hybrid field's, between its columns' largest and their sum."""
    reader.row_factory = None
    if fields == 1:
        for term, documents in reader.execute(f"SELECT term, doc FROM {_VOCAB} WHERE {_KEPT} ORDER BY term"):
            yield term, documents, documents
        return
    field_of = {column: number // 2 for number, column in enumerate(columns)}  # field n: columns 2n and 2n + 1
    current: str | None = None
    per_field: dict[int, list[int]] = {}
    for term, column, documents in reader.execute(f"SELECT term, col, doc FROM {_VOCAB} WHERE {_KEPT} ORDER BY term"):
        if term != current:
            yield from _field_bounds(current, per_field)
            current, per_field = term, {}
        per_field.setdefault(field_of[column], []).append(documents)
    yield from _field_bounds(current, per_field)


def _field_bounds(term: str | None, per_field: dict[int, list[int]]) -> Iterator[tuple[str, int, int]]:
    if term is None:
        return
    for number in sorted(per_field):
        counts = per_field[number]
        yield field_key(number, term), max(counts), sum(counts)


def _stored_postings(
    db: sqlite3.Connection,
    reader: sqlite3.Cursor,
    table: str,
    largest: int,
    lengths: tuple[np.ndarray, float] | None = None,
) -> Iterator[tuple[str, int]]:
    """Each stored key with its number of postings, ascending; :class:`_Malformed` for what a build never
    writes (rows out of order or outside the chunks' ids, impacts outside bm25's range, a wrong peak, tfs that do
    not give the impacts; ``lengths``: every row's |D| and avgdl, when the blocks hold tfs)."""
    import numpy as np

    reader.row_factory = None
    previous: str | None = None
    if table == LEGACY_TABLE:
        names = {row[1] for row in db.execute(f"PRAGMA table_info({LEGACY_TABLE})")}
        peak = "peak" if "peak" in names else "NULL"
        rows: Any = reader.execute(f"SELECT term, rowids, weights, {peak} FROM {LEGACY_TABLE} ORDER BY term")
        blocks = (_legacy_row(*row) for row in rows)
    else:
        tfs = "tfs" if lengths is not None else "NULL"
        rows = reader.execute(f"SELECT terms, bounds, rowids, weights, peaks, {tfs} FROM {BLOCKS_TABLE} ORDER BY first")
        blocks = (_decoded_block(*row) for row in rows)
    for terms, bounds, rowids, weights, peaks, *tf_blob in blocks:
        where = f"of term {_shown_key(terms[0])}"
        if previous is not None and not previous < terms[0]:
            raise _Malformed(where)
        previous = terms[-1]
        if not isinstance(rowids, bytes) or not isinstance(weights, bytes) or len(rowids) != len(weights):
            raise _Malformed(where)
        if not rowids or len(rowids) % 8 or 8 * int(bounds[-1]) != len(rowids):
            raise _Malformed(where)
        ids = np.frombuffer(rowids, dtype="<i8")
        impacts = np.frombuffer(weights, dtype="<f8")
        starts = bounds[:-1]
        steps = np.diff(ids)
        if len(steps):
            steps[starts[1:] - 1] = 1  # a new term starts its rows anew
        in_range = bool(np.all((ids >= 1) & (ids <= largest)))
        bounded = bool(np.all(np.isfinite(impacts) & (impacts > 0) & (impacts < K1 + 1)))
        if not (in_range and bounded and bool(np.all(steps > 0))):
            raise _Malformed(where)
        tops = np.maximum.reduceat(impacts, starts)
        if peaks is not None:  # an older build's row without a peak has None: nothing to compare
            if not isinstance(peaks, (bytes, float)):
                raise _Malformed(where)
            stored = np.frombuffer(peaks, dtype="<f8") if isinstance(peaks, bytes) else np.array([peaks])
            if len(stored) != len(terms) or not np.array_equal(stored, tops):
                raise _Malformed(where)
        if lengths is not None:
            _check_tfs(where, tf_blob[0], ids, impacts, lengths)
        yield from zip(terms, np.diff(bounds).tolist(), strict=True)


def _check_tfs(
    where: str, blob: object, ids: np.ndarray, stored: np.ndarray, lengths: tuple[np.ndarray, float]
) -> None:
    """A block's tfs: bytes of a width :data:`~rag_eval.engines.impact.write.TF_TYPES` has, positive and finite,
    giving its stored impacts again exactly at FTS5's k1 and b (what ranking at another pair reads must be what the
    impacts were made of); else :class:`_Malformed`."""
    import numpy as np

    sizes, avgdl = lengths
    tf = tf_values(blob, len(ids)) if isinstance(blob, bytes) else None
    if tf is None or not bool(np.all(np.isfinite(tf) & (tf > 0))) or int(ids.max()) >= len(sizes):
        raise _Malformed(f"{where} (their tfs)")
    if not np.array_equal(bm25_impacts(tf, sizes[ids], avgdl), stored):
        raise _Malformed(f"{where} (their tfs do not give their impacts)")


def _legacy_row(term: object, rowids: object, weights: object, peak: object) -> tuple:
    """An older build's row per term as a block of one term (no peak recorded before 2026-12-01: None)."""
    import numpy as np

    if not isinstance(term, str) or not isinstance(rowids, bytes):
        raise _Malformed(f"of term {_shown_key(str(term))}")
    return [term], np.array([0, len(rowids) // 8], dtype="<i8"), rowids, weights, peak


def _decoded_block(terms: object, bounds: object, rowids: object, weights: object, peaks: object, tfs: object) -> tuple:
    """An ``impact_blocks`` row's parts: its terms (strictly ascending) and its bounds (from 0, increasing)."""
    import json

    import numpy as np

    try:
        listed = json.loads(terms) if isinstance(terms, str) else None
    except ValueError:
        listed = None
    if not isinstance(listed, list) or not listed or not all(isinstance(term, str) for term in listed):
        raise _Malformed("in a block whose terms cannot be read")
    where = f"of term {_shown_key(listed[0])}"
    if listed != sorted(set(listed)) or not isinstance(bounds, bytes) or len(bounds) != 8 * (len(listed) + 1):
        raise _Malformed(where)
    offsets = np.frombuffer(bounds, dtype="<i8")
    if offsets[0] != 0 or bool(np.any(offsets[1:] <= offsets[:-1])) or not isinstance(peaks, bytes):
        raise _Malformed(where)
    return (listed, offsets, rowids, weights, peaks) if tfs is None else (listed, offsets, rowids, weights, peaks, tfs)


def _compared(table: str, expected: Iterator[tuple[str, int, int]], stored: Iterator[tuple[str, int]]) -> list[Damage]:
    """The stored keys and counts merged with the expected ones (both ascending): every disagreement counted."""
    wrong = 0
    examples: list[str] = []

    def note(text: str) -> None:
        nonlocal wrong
        wrong += 1
        if len(examples) < EXAMPLES:
            examples.append(text)

    want = next(expected, None)
    have = next(stored, None)
    while want is not None or have is not None:
        if have is None or (want is not None and want[0] < have[0]):
            assert want is not None
            note(f"{_shown_key(want[0])}: no postings, FTS5 has it in {_rows(want)}")
            want = next(expected, None)
        elif want is None or have[0] < want[0]:
            note(f"{_shown_key(have[0])}: {have[1]} postings, FTS5 does not hold it")
            have = next(stored, None)
        else:
            if not want[1] <= have[1] <= want[2]:
                note(f"{_shown_key(have[0])}: {have[1]} postings, FTS5 has it in {_rows(want)}")
            want, have = next(expected, None), next(stored, None)
    if not wrong:
        return []
    terms = "1 term" if wrong == 1 else f"{wrong} terms"
    detail = f"the postings of {terms} disagree with FTS5's document frequencies, e.g. {'; '.join(examples)}"
    return [Damage(table, detail)]


def _rows(want: tuple[str, int, int]) -> str:
    if want[1] == want[2]:
        return "1 row" if want[1] == 1 else f"{want[1]} rows"
    return f"{want[1]} to {want[2]} rows"


def _shown_key(key: str) -> str:
    """A postings key as a message shows it: a hybrid's ``term\\x1fNN`` as the term and its field."""
    word, separator, number = key.partition("\x1f")
    shown = repr(word if len(word) <= 40 else word[:37] + "...")
    return f"{shown} (field {number[1:]})" if separator else shown
