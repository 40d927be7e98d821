"""The index checked as a file, before its sources: SQLite's own checks, FTS5's, and each engine's postings
against the FTS5 statistics they were made from. ``index verify`` runs this first; a damaged index is reported as
such (which table, how to rebuild) instead of being compared with its sources.

Three layers, each for what the one before cannot see:

- ``PRAGMA integrity_check`` over the whole file (b-tree pages, cells, free list, every index against its
  table); when it fails, each table is checked on its own (``PRAGMA integrity_check(TABLE)``) to name the ones
  damaged. The layers below would only read the same damaged pages again, so they are skipped then.
- FTS5's ``integrity-check`` command for every FTS5 table the schema declares, with the content check
  (``rank`` 1) for a table with a content table, as ``search`` is (``content="chunks"``): its index must be
  what FTS5 makes of the stored text now. The command takes a write lock without writing; where the
  connection cannot write (a read-only folder) or another process is writing, it runs on an in-memory copy.
- Each engine's postings (an engine that declares ``tables``), checked by the engine itself
  (:meth:`rag_eval.engines.base.Engine.check_postings`; the impact engine's:
  :mod:`rag_eval.engines.impact.verify`).
"""

from __future__ import annotations

import re
import shlex
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from ..engines.base import postings_engines
from .store import Index
from .verify import SourceStatus, verify_index

#: Examples a damage's detail names at most (a damaged block may disagree on thousands of terms).
EXAMPLES = 3
#: Characters of SQLite's own message kept in a detail (its integrity report runs to 100 lines).
MESSAGE_CHARS = 300


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
    sources (:func:`rag_eval.index.verify.verify_index`)."""
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
            return [found for engine in postings_engines() for found in engine.check_postings(index)]


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
