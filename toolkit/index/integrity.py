"""The index checked as a file, before its sources: SQLite's own checks, FTS5's, and the impact postings against
the FTS5 statistics they were made from. ``index verify`` runs this first; a damaged index is reported as such
(which table, how to rebuild) instead of being compared with its sources.

Three layers, each for what the one before cannot see:

- ``PRAGMA integrity_check`` over the whole file (b-tree pages, cells, free list, every index against its
  table); when it fails, each table is checked on its own (``PRAGMA integrity_check(TABLE)``) to name the ones
  damaged. The layers below would only read the same damaged pages again, so they are skipped then.
- FTS5's ``integrity-check`` command for every FTS5 table the schema declares, with the content check
  (``rank`` 1) for a table with a content table, as ``search`` is (``content="chunks"``): its index must be
  what FTS5 makes of the stored text now. The command takes a write lock without writing; where the
  connection cannot write (a read-only folder) or another process is writing, it runs on an in-memory copy.
- The impact postings against FTS5's vocabulary: the postings of a term list exactly the rows FTS5 says hold
  it, so each term's number of postings must equal its document frequency (``fts5vocab`` ``row``; a hybrid's
  postings are per field, which FTS5 counts per column: the count must lie between the largest and the sum
  of its columns' counts), with the same set of terms, rows ascending among the chunks' ids, impacts in bm25's
  range (0, k1 + 1) and each term's stored peak its largest impact exactly. One pass over both, in term order,
  so memory holds one block; it costs about a read of the FTS5 index. The impacts themselves are not
  recomputed (that is a build's pass over every token instance).
"""

from __future__ import annotations

import re
import shlex
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engines.impact.read import postings_table
from ..engines.impact.write import BLOCKS_TABLE, FTS5_TOKEN_BYTES, K1, LEGACY_TABLE, field_key
from ..search.read import SourceStatus, verify_index
from .store import Index

#: Examples a damage's detail names at most (a damaged block may disagree on thousands of terms).
EXAMPLES = 3
#: Characters of SQLite's own message kept in a detail (its integrity report runs to 100 lines).
MESSAGE_CHARS = 300
_VOCAB = "temp.rag_eval_integrity_vocab"
_KEPT = f"length(CAST(term AS BLOB)) < {FTS5_TOKEN_BYTES}"


@dataclass(frozen=True)
class Damage:
    """One table of the index found damaged (``table`` empty: the file, with no table to name)."""

    table: str
    detail: str


@dataclass(frozen=True)
class Verification:
    """What ``index verify`` found: the index's damage (sources are then not checked) or its sources' states."""

    damage: list[Damage]
    sources: list[SourceStatus] = field(default_factory=list)
    #: The command that builds the index again from its source (what to do about damage).
    rebuild: str = ""

    @property
    def ok(self) -> bool:
        """Whether the index is intact and every source is ok."""
        return not self.damage and all(status.status == "ok" for status in self.sources)


def verify(index: Index, root: str | Path | None = None, *, per_chunk: bool = False) -> Verification:
    """``index verify``: the index checked as a file (:func:`check_index`), then, when intact, against its
    sources (:func:`rag_eval.search.read.verify_index`)."""
    damage = check_index(index)
    if damage:
        return Verification(damage, [], rebuild_command(index, root))
    return Verification([], verify_index(index, root, per_chunk=per_chunk), rebuild_command(index, root))


def rebuild_command(index: Index, root: str | Path | None = None) -> str:
    """The ``rag-eval index build`` command that makes ``index`` again from its source, with the builder,
    tokenizer, query processing and engine it records, into a new file then moved over it (a build in place
    reads the damaged file: a sync reuses its stored tokens)."""
    meta = index.meta
    source = str(root) if root is not None else meta.get("source_root", "SOURCE")
    words = ["rag-eval", "index", "build", source, "-b", meta.get("builder", ""), "-t", meta.get("tokenizer", "")]
    if meta.get("query_processing"):
        words += ["--processing", meta["query_processing"]]
    if meta.get("engine"):
        words += ["--engine", meta["engine"]]
    target = Path(index.path)
    fresh = str(target.with_name(f"{target.stem}.rebuilt{target.suffix}"))
    return f"{shlex.join([*words, '-o', fresh])} && {shlex.join(['mv', fresh, index.path])}"


def check_index(index: Index) -> list[Damage]:
    """Every damage found in ``index``'s file, ``[]`` when it is intact (see the module for what is checked)."""
    with index.errors():
        damage = _sqlite_damage(index.db)
        if damage:
            return damage
        damage = _fts5_damage(index)
        if damage:  # the postings are compared with FTS5's statistics: damaged ones would blame them
            return damage
        with index.reading():
            return _postings_damage(index)


def _sqlite_damage(db: sqlite3.Connection) -> list[Damage]:
    """SQLite's own check of the whole file; when it fails, the tables that fail it on their own."""
    whole = _integrity(db, "")
    if whole is None:
        return []
    try:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND rootpage > 0")]
    except sqlite3.DatabaseError as exc:
        return [Damage("", f"SQLite cannot read the schema: {exc}")]
    damaged = []
    for table in sorted(tables):
        found = _integrity(db, table)
        if found is not None:
            damaged.append(Damage(table, f"SQLite's integrity check of {table} (with its indexes) failed: {found}"))
    return damaged or [Damage("", f"SQLite's integrity check of the file failed: {whole}")]


def _integrity(db: sqlite3.Connection, table: str) -> str | None:
    """None when ``PRAGMA integrity_check`` (of ``table`` alone, if given) says ok, else its first problem."""
    pragma = f'PRAGMA integrity_check("{table.replace(chr(34), chr(34) * 2)}")' if table else "PRAGMA integrity_check"
    try:
        rows = [str(row[0]) for row in db.execute(pragma)]
    except sqlite3.DatabaseError as exc:  # a page too damaged to walk: SQLite stops with an error
        return str(exc)
    if rows == ["ok"]:
        return None
    lines = [line for row in rows for line in row.splitlines() if line and not line.startswith("***")]
    return _cut("; ".join(lines[:EXAMPLES]) or "no detail")


def _cut(text: str) -> str:
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."


_CONTENT = re.compile(r"""\bcontent\s*=\s*(?:'((?:[^']|'')*)'|"((?:[^"]|"")*)"|([\w$]*))""", re.IGNORECASE)


def _fts5_tables(db: sqlite3.Connection) -> list[tuple[str, bool]]:
    """Every FTS5 table the schema declares, with whether it has a content table to check against (its own,
    or an external one such as ``content="chunks"``; a contentless table, ``content=''``, has none)."""
    tables = []
    for name, sql in db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND rootpage = 0"):
        if not isinstance(sql, str) or not re.search(r"\busing\s+fts5\b", sql, re.IGNORECASE):
            continue
        declared = _CONTENT.search(sql)
        contentless = declared is not None and not any(declared.groups())
        tables.append((str(name), not contentless))
    return tables


def _fts5_damage(index: Index) -> list[Damage]:
    damage = []
    for table, with_content in _fts5_tables(index.db):
        quoted = '"' + table.replace('"', '""') + '"'
        statement = f"INSERT INTO {quoted}({quoted}, rank) VALUES ('integrity-check', {int(with_content)})"
        try:
            _run_check(index, statement)
        except sqlite3.DatabaseError as exc:
            against = " against its content table" if with_content else ""
            damage.append(Damage(table, f"FTS5's integrity check{against} failed: {exc}"))
    return damage


def _run_check(index: Index, statement: str) -> None:
    """Run an FTS5 check command (a write statement that writes nothing) on the index, or on an in-memory copy
    of it where this connection cannot take the write lock at once: a read-only file or folder, a build under
    way (whose lock it would otherwise wait out, the busy timeout)."""
    waited = index.db.execute("PRAGMA busy_timeout").fetchone()[0]
    index.db.execute("PRAGMA busy_timeout = 0")
    try:
        index.db.execute(statement)
        return
    except sqlite3.OperationalError as exc:
        if not any(word in str(exc) for word in ("readonly", "read-only", "locked", "busy")):
            raise
    finally:
        index.db.execute(f"PRAGMA busy_timeout = {int(waited)}")
    copy = sqlite3.connect(":memory:")
    try:
        index.db.backup(copy)
        copy.execute(statement)
    finally:
        copy.close()


def _postings_damage(index: Index) -> list[Damage]:
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
        stored = _readable(_stored_postings(db, postings, table, largest), table)
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
    db: sqlite3.Connection, reader: sqlite3.Cursor, table: str, largest: int
) -> Iterator[tuple[str, int]]:
    """Each stored key with its number of postings, ascending; :class:`_Malformed` for what a build never
    writes (rows out of order or outside the chunks' ids, impacts outside bm25's range, a wrong peak)."""
    import numpy as np

    reader.row_factory = None
    previous: str | None = None
    if table == LEGACY_TABLE:
        names = {row[1] for row in db.execute(f"PRAGMA table_info({LEGACY_TABLE})")}
        peak = "peak" if "peak" in names else "NULL"
        rows: Any = reader.execute(f"SELECT term, rowids, weights, {peak} FROM {LEGACY_TABLE} ORDER BY term")
        blocks = (_legacy_row(*row) for row in rows)
    else:
        rows = reader.execute(f"SELECT terms, bounds, rowids, weights, peaks FROM {BLOCKS_TABLE} ORDER BY first")
        blocks = (_decoded_block(*row) for row in rows)
    for terms, bounds, rowids, weights, peaks in blocks:
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
        yield from zip(terms, np.diff(bounds).tolist(), strict=True)


def _legacy_row(term: object, rowids: object, weights: object, peak: object) -> tuple:
    """An older build's row per term as a block of one term (no peak recorded before 2026-12-01: None)."""
    import numpy as np

    if not isinstance(term, str) or not isinstance(rowids, bytes):
        raise _Malformed(f"of term {_shown_key(str(term))}")
    return [term], np.array([0, len(rowids) // 8], dtype="<i8"), rowids, weights, peak


def _decoded_block(terms: object, bounds: object, rowids: object, weights: object, peaks: object) -> tuple:
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
    return listed, offsets, rowids, weights, peaks


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
