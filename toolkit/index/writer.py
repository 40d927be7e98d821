"""Writing an index: validate the source, then stream it into one write transaction."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..builders import Builder, get_builder, infer_builder
from ..builders.base import FileRef, SourceFile
from ..engines.base import AUTO, Engine, build_engine, postings_tables
from ..errors import CorpusError, IndexFileError, SpecError
from ..files.outputs import make_parents, recorded_name, remove_made, sqlite_side_file_of
from ..files.textio import path_argument
from ..records import Chunk, Progress
from ..tokenizers import Tokenizer, get_tokenizer
from .building_file import bulk_load, flush_to_disk, new_building_file, publish, remove_stale_builds
from .chunk_writer import ChunkWriter, Stored
from .columns import all_field_columns, field_columns, weights_for
from .locks import check_side_files
from .meta import SCHEMA_VERSION, read_meta, recorded_meta
from .processing import QueryProcessing
from .store import BUSY_TIMEOUT_MS, build_lock, connect, create_schema, foreign_reason, index_size


@dataclass
class BuildReport:
    """What a build did and what it cost."""

    chunks: int
    files: int
    files_tokenized: int
    chunks_tokenized: int
    tokenizer_load_seconds: float
    tokenize_seconds: float
    write_seconds: float
    seconds: float
    index_bytes: int
    extra: dict[str, Any] = field(default_factory=dict)


def fts_schema(tokenizer: Tokenizer) -> str:
    """The FTS5 table over the chunks table (external content, rowid = chunk id): a title and a body
    column per field."""
    # A native strategy's FTS5 tokenizer reads the raw text; other strategies' tokens are stored per field.
    if tokenizer.native:
        columns = "fts_title, text"
    else:
        columns = ", ".join(all_field_columns(len(tokenizer.fields)))
    clause = tokenizer.fts5_clause.replace('"', '""')
    return (
        f'CREATE VIRTUAL TABLE search USING fts5({columns}, content="chunks", content_rowid="id", tokenize="{clause}")'
    )


def corpus_checksum(files: list[tuple[str, str]]) -> str:
    """sha256 over the sorted (path, sha256) pairs of the sources."""
    digest = hashlib.sha256()
    for path, sha in sorted(files):
        digest.update(f"{path}\0{sha}\n".encode())
    return digest.hexdigest()


def build(
    source: str | Path,
    index_path: str | Path,
    *,
    builder: str | Builder | None,
    tokenizer: str | Tokenizer | None,
    progress: Progress | None = None,
    db: sqlite3.Connection | None = None,
    on_insert: Callable[[int], None] | None = None,
    processing: str | QueryProcessing | None = None,
    engine: str | None = AUTO,
) -> BuildReport:
    """Build or sync an index from ``source`` in one transaction, streaming file by file.

    The source is validated first (names, manifest, sizes); then, inside one write transaction, each
    file is read once, hashed, chunked, tokenized and inserted, so memory stays bounded by a file and a
    batch of chunks rather than the corpus. A chunk whose text and title are unchanged since the last
    build, built with the same builder and tokenizer specs, reuses its stored tokens (only Python
    strategies store tokens), so a sync re-tokenizes only what changed; any change of either spec
    re-tokenizes everything. Chunk ids are assigned afresh in source order, so a sync gives the same ids
    as a fresh build. Any error rolls the transaction back and leaves the previous index exactly as it
    was; a new index file that failed is removed.

    ``index_path`` must be new, empty, or an index rag-eval wrote: any other file (someone's own SQLite
    database, a text file) is refused before anything is read or written. ``on_insert(rows)`` is called
    inside the transaction after each batch of chunk rows (fault-injection tests kill the process there).
    What is left None is what the index records (a sync keeps its settings unless told otherwise), or for a
    new index: ``builder``, the one whose layout ``source`` has (:func:`rag_eval.builders.infer_builder`);
    ``tokenizer``, ``DEFAULT_TOKENIZER``; ``processing``, none; ``engine``, ``auto``. ``processing`` (see
    :mod:`rag_eval.index.processing`) is recorded in the index: its searches use it unless
    they name their own. ``engine`` (an engine that is not a peer, see :mod:`rag_eval.engines.base`) is recorded
    too, and the engine writes its postings (:meth:`~rag_eval.engines.base.Engine.write_postings`) in the same
    transaction; ``auto`` is :data:`rag_eval.engines.base.DEFAULT_ENGINE`.
    """
    started = time.perf_counter()
    source, path = _checked_paths(source, index_path, builder, tokenizer)
    settings = _settings(source, path, db, builder, tokenizer, processing, engine)
    _refuse_target(path, db)
    root, refs = settings.builder.plan(source)
    load_seconds = _load(settings.tokenizer, progress)
    report = _build_file(
        path, db, lambda opened: _write(opened, path, source, root, refs, settings, progress, on_insert)
    )
    report.tokenizer_load_seconds = load_seconds
    report.extra["chunks_are"] = settings.builder.chunk_words()  # compare's passages are units, which chunks may split
    report.seconds = time.perf_counter() - started
    report.index_bytes = index_size(path)
    return report


#: The tokenizer of a new index built without one.
DEFAULT_TOKENIZER = "bigram"


@dataclass(frozen=True)
class _Settings:
    """What a build makes: the builder, the tokenizer, the query processing recorded ("" for none), the engine."""

    builder: Builder
    tokenizer: Tokenizer
    processing: str
    engine: Engine


def _checked_paths(source: str | Path, index_path: str | Path, builder: object, tokenizer: object) -> tuple[Path, str]:
    """The source and the index path, after their types, the specs' types and the paths' UTF-8 are checked."""
    path_argument(source, "the source", IndexFileError)
    path_argument(index_path, "the index path", IndexFileError)
    given_specs: tuple[tuple[object, str, type], ...] = (
        (builder, "builder", Builder),
        (tokenizer, "tokenizer", Tokenizer),
    )
    for given, what, kind in given_specs:
        if given is not None and not isinstance(given, (str, kind)):
            raise SpecError(f"the {what} must be a spec string or a {kind.__name__}, not {type(given).__name__}")
    path = str(index_path)
    for value, what in ((str(source), "source"), (path, "index")):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a file name's non-UTF-8 bytes: the index records both paths as text
            raise IndexFileError(
                f"{recorded_name(value)}: the {what} path is not valid UTF-8, and the index records it",
                hint="rename it with UTF-8 characters",
            ) from None
    return Path(source), path


def _settings(
    source: Path,
    path: str,
    db: sqlite3.Connection | None,
    builder: str | Builder | None,
    tokenizer: str | Tokenizer | None,
    processing: str | QueryProcessing | None,
    engine: str | None,
) -> _Settings:
    """The settings given, with what is left None taken from the index (a sync) or the defaults (a new index)."""
    kept = _recorded_settings(path, db) if None in (builder, tokenizer, processing, engine) else {}
    if builder is None:
        builder = kept.get("builder") or infer_builder(source)
    if tokenizer is None:
        tokenizer = kept.get("tokenizer") or DEFAULT_TOKENIZER
    if processing is None:
        processing = kept.get("query_processing", "")
    if engine is None:
        engine = kept.get("engine") or AUTO
    chosen = processing if isinstance(processing, QueryProcessing) else QueryProcessing.parse(processing or "")
    settings = _Settings(
        builder if isinstance(builder, Builder) else get_builder(builder),
        tokenizer if isinstance(tokenizer, Tokenizer) else get_tokenizer(tokenizer),
        chosen.system if chosen.active else "",
        build_engine(engine),
    )
    # Feedback's weighted queries need an engine that weights terms, and the builder's default mode to be `or`.
    settings.engine.check_processing(chosen, settings.builder.query_defaults().mode, "index build")
    return settings


def _recorded_settings(path: str, db: sqlite3.Connection | None) -> dict[str, str]:
    """What an existing rag-eval index records of how it was built (builder, tokenizer, query_processing,
    engine), or nothing (a new path, or not an index of ours)."""
    if db is not None:
        try:
            meta = read_meta(db)
        except sqlite3.Error:
            return {}
    elif path == ":memory:" or not Path(path).is_file() or foreign_reason(path) is not None:
        return {}
    else:
        meta = recorded_meta(path)
    return {key: meta[key] for key in ("builder", "tokenizer", "query_processing", "engine") if key in meta}


def _refuse_target(path: str, db: sqlite3.Connection | None) -> None:
    """Refuse, before any work, an index path rag-eval must not write: someone else's file, or a name SQLite
    takes for another database's side file (or, for a new index, whose own log a user's file would be)."""
    if path == ":memory:":
        return
    reason = foreign_reason(path)
    if reason is not None:
        raise IndexFileError(
            f"{path}: refusing to build into it: {reason}; rag-eval only writes its own index files",
            hint="choose a new index path",
        )
    side = sqlite_side_file_of(path)
    if side is not None:  # an index there would be taken for that database's journal, and replayed into it
        raise IndexFileError(
            f"{path}: refusing to build into it: SQLite would take it for the {side[1]} file of the database {side[0]}",
            hint="choose a new index path",
        )
    if db is None and not Path(path).exists() and not Path(path).is_symlink():
        check_side_files(path)  # a user's file named like the new index's log is refused


def _load(tokenizer: Tokenizer, progress: Progress | None) -> float:
    """Load the tokenizer (pkuseg's model takes seconds: said before it starts); the seconds it took."""
    started = time.perf_counter()
    if progress is not None:
        progress(f"loading {tokenizer.name}", 0, 1)
    tokenizer.load()
    seconds = time.perf_counter() - started
    if progress is not None:
        progress(f"loading {tokenizer.name}", 1, 1)
    return seconds


def _build_file(
    path: str, db: sqlite3.Connection | None, write: Callable[[sqlite3.Connection], BuildReport]
) -> BuildReport:
    """Run ``write`` on the index at ``path`` under its build lock.

    A new index is built in a hidden file beside it and appears under its name only when complete, so that a
    build that fails or is killed (even with SIGKILL) leaves no file under that name; a given connection
    (``db``) is the caller's, built where it points. The folders a failed build created are removed.
    """
    created = path != ":memory:" and not Path(path).exists() and not Path(path).is_symlink()
    aside = created and db is None
    building = path
    made: list[Path] = []
    try:
        if created:
            try:
                made = make_parents(Path(path))
                if aside:
                    remove_stale_builds(path)
                    building = new_building_file(path)
                else:
                    Path(path).touch()
            except OSError as exc:
                raise IndexFileError(f"{path}: cannot create the index file: {exc.strerror or exc}") from None
        with build_lock(building, remove_on_error=created):
            report = _write_connected(path, building, db, aside, write)
            if aside:
                flush_to_disk(building)
                publish(building, path)
    except BaseException:
        remove_made(made)
        raise
    return report


def _write_connected(
    path: str,
    building: str,
    db: sqlite3.Connection | None,
    aside: bool,
    write: Callable[[sqlite3.Connection], BuildReport],
) -> BuildReport:
    """``write`` on ``db``, or on a connection to ``building`` opened (bulk-loading a file built aside) and closed."""
    own_db = db is None
    try:
        if db is None:
            try:
                db = connect(building)
                if aside:
                    bulk_load(db)
            except sqlite3.Error as exc:
                raise IndexFileError(
                    f"{path}: cannot open the index for writing ({exc})",
                    hint="check that the folder and the file are writable",
                ) from None
        report = write(db)
        if aside:
            db.execute("PRAGMA journal_mode = WAL")  # what every index of ours uses once published
        return report
    finally:
        if own_db and db is not None:
            db.close()


def _write(
    db: sqlite3.Connection,
    path: str,
    source: Path,
    root: Path,
    refs: list[FileRef],
    settings: _Settings,
    progress: Progress | None,
    on_insert: Callable[[int], None] | None = None,
) -> BuildReport:
    """Write the whole index in one transaction on ``db``: any error rolls it back and leaves the previous index."""
    meta = read_meta(db)
    tokenizer, builder = settings.tokenizer, settings.builder
    # FTS5-style snippets (lines) of Python strategies need token offsets: stored, not re-computed per query
    # (a hybrid's snippets come from all its fields' tokens, re-tokenized for the few hits).
    keep_offsets = not tokenizer.native and len(tokenizer.fields) == 1 and builder.query_defaults().style.offsets
    write_started = time.perf_counter()
    db.execute("BEGIN IMMEDIATE")
    try:
        _replace_tables(db, bool(meta), tokenizer)
        writer = ChunkWriter(db, tokenizer, keep_offsets)
        writer.on_insert, writer.progress = on_insert, progress
        chunks = _Chunks(db, builder, tokenizer, writer, _reusable(meta, builder, tokenizer), keep_offsets)
        total_bytes = sum((root / ref.path).stat().st_size for ref in refs)
        done_bytes = 0
        for ref in refs:
            file = builder.read(root, ref)
            chunks.add(file)
            done_bytes += file.size
            if progress is not None:
                progress("index", done_bytes, total_bytes)
        writer.flush()
        db.execute("DROP TABLE IF EXISTS chunks_old")
        db.execute("DROP TABLE IF EXISTS files_old")
        db.executemany("INSERT INTO files VALUES (?, ?, ?)", chunks.file_rows)
        db.execute(fts_schema(tokenizer))
        db.execute("INSERT INTO search(search) VALUES ('rebuild')")
        db.execute("INSERT INTO search(search) VALUES ('optimize')")
        settings.engine.write_postings(db, tokenizer, weights_for(tokenizer, builder.query_defaults()))
        new_meta = _new_meta(source, settings, writer, chunks.file_rows)
        new_meta["build_seconds_write"] = f"{time.perf_counter() - write_started - writer.tokenize_wall:.3f}"
        db.executemany("INSERT INTO meta VALUES (?, ?)", sorted(new_meta.items()))
        db.execute("COMMIT")
    except BaseException as exc:
        if db.in_transaction:  # SQLite has already rolled back after some errors (SQLITE_FULL)
            db.execute("ROLLBACK")
        if isinstance(exc, sqlite3.OperationalError):
            # Disk full (SQLITE_FULL), read-only file, I/O error: the previous index is intact.
            raise IndexFileError(f"{path}: writing the index failed ({exc}); the previous index is unchanged") from exc
        raise
    if path != ":memory:":
        _checkpoint(db)
    return _report(writer, chunks, time.perf_counter() - write_started - writer.tokenize_wall)


def _reusable(meta: dict[str, str], builder: Builder, tokenizer: Tokenizer) -> bool:
    """Whether stored tokens may be reused: only for an index built with the very same builder and tokenizer specs
    (and only for a chunk whose text and title are unchanged, checked chunk by chunk); any other change
    re-tokenizes."""
    return (
        bool(meta)
        and not tokenizer.native
        and meta.get("tokenizer_spec") == tokenizer.spec
        and meta.get("builder") == builder.system
    )


def _replace_tables(db: sqlite3.Connection, has_old: bool, tokenizer: Tokenizer) -> None:
    """Inside the build's transaction: every derived table dropped (the FTS5 table, every engine's postings), the
    previous chunks and files kept aside as ``*_old`` (stored tokens are reused from them), a fresh schema."""
    db.execute("DROP TABLE IF EXISTS search")
    for table in postings_tables():
        db.execute(f"DROP TABLE IF EXISTS {table}")
    db.execute("DROP INDEX IF EXISTS chunks_path")
    db.execute("DROP TABLE IF EXISTS chunks_old")
    db.execute("DROP TABLE IF EXISTS files_old")
    if has_old:
        db.execute("ALTER TABLE chunks RENAME TO chunks_old")
        db.execute("ALTER TABLE files RENAME TO files_old")
    create_schema(db, len(tokenizer.fields))
    db.execute("DELETE FROM meta")


class _Chunks:
    """The chunks of each file read, added to the writer: a Python strategy's stored tokens reused for a chunk
    unchanged since the last build; the files table's rows and how many files were tokenized, counted."""

    def __init__(
        self,
        db: sqlite3.Connection,
        builder: Builder,
        tokenizer: Tokenizer,
        writer: ChunkWriter,
        reusable: bool,
        keep_offsets: bool,
    ) -> None:
        self.builder, self.tokenizer, self.writer, self.keep_offsets = builder, tokenizer, writer, keep_offsets
        self.reader = db.cursor()
        self.reader.row_factory = None  # whatever the caller's connection uses
        # ``reusable`` implies a previous index, whose files the build has renamed ``files_old``.
        self.old_files = dict(self.reader.execute("SELECT path, sha256 FROM files_old").fetchall()) if reusable else {}
        self.stored_columns = ", ".join(
            ["fts_title", "fts_body", "offsets"]
            + [column for number in range(1, len(tokenizer.fields)) for column in field_columns(number)]
        )
        self.paths: set[str] = set()
        self.file_rows: list[tuple[str, str, int]] = []
        self.changed = 0

    def add(self, file: SourceFile) -> None:
        if file.path in self.paths:
            raise CorpusError(f"{file.path}: the source lists this file twice")
        self.paths.add(file.path)
        count = 0
        reuse = self.old_files.get(file.path) == file.sha256
        tokenized_before = self.writer.queued
        for chunk in self.builder.chunks(file):  # may stream from disk (passages): never held as a list
            count += 1
            title = chunk.title if self.builder.index_title else ""
            self.writer.add(chunk, title, self._stored(chunk, title, reuse))
        self.changed += self.tokenizer.native or self.writer.queued > tokenized_before
        self.file_rows.append((file.path, file.sha256, count))

    def _stored(self, chunk: Chunk, title: str, reuse: bool) -> Stored | None:
        """What the chunk's row stores already made: a native strategy's title; a reused chunk's tokens; else None."""
        if self.tokenizer.native:
            return (title, None, None)
        if not reuse:
            return None
        found = self.reader.execute(
            f"SELECT {self.stored_columns} FROM chunks_old WHERE key = ? AND text = ? AND title = ?",
            (chunk.key, chunk.text, chunk.title),
        ).fetchone()
        return found if found is not None and (found[2] is not None) == self.keep_offsets else None


def _new_meta(
    source: Path, settings: _Settings, writer: ChunkWriter, file_rows: list[tuple[str, str, int]]
) -> dict[str, str]:
    """What the index records of this build (``build_seconds_write`` is added when it is known)."""
    builder, tokenizer = settings.builder, settings.tokenizer
    return {
        "schema_version": str(SCHEMA_VERSION),
        "builder": builder.system,
        "tokenizer": tokenizer.system,
        "tokenizer_spec": tokenizer.spec,
        "tokenizer_fingerprint": json.dumps(tokenizer.fingerprint(), sort_keys=True),
        "fts5_tokenize": tokenizer.fts5_clause,
        "query_defaults": json.dumps(builder.query_defaults().__dict__, ensure_ascii=False, sort_keys=True),
        "source_root": str(builder.source_root(source)),
        "corpus_sha256": corpus_checksum([(p, sha) for p, sha, _ in file_rows]),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        # Unique per build: readers compare it to notice a rebuild (new tokenizer, new defaults).
        "generation": uuid.uuid4().hex,
        "query_processing": settings.processing,
        "engine": settings.engine.system,
        "chunks": str(writer.rows),
        "files": str(len(file_rows)),
        "tokenize_plan": writer.plan_summary(),
    }


def _report(writer: ChunkWriter, chunks: _Chunks, write_seconds: float) -> BuildReport:
    """The build's report (load time, total time and size are filled in by :func:`build`)."""
    speedup = round(writer.tokenize_cpu / writer.tokenize_wall, 2) if writer.tokenize_wall else 1.0
    return BuildReport(
        chunks=writer.rows,
        files=len(chunks.file_rows),
        files_tokenized=chunks.changed,
        chunks_tokenized=writer.tokenized,
        tokenizer_load_seconds=0.0,
        tokenize_seconds=writer.tokenize_wall,
        write_seconds=write_seconds,
        seconds=0.0,
        index_bytes=0,
        extra={
            "workers": writer.workers,
            "start_method": writer.start_method,
            "worker_load_seconds": writer.worker_load_seconds,
            "tokenize_cpu_seconds": round(writer.tokenize_cpu, 3),
            "tokenize_speedup": speedup,
            "tokenize_plan": writer.plan_summary(),
        },
    )


def _checkpoint(db: sqlite3.Connection) -> None:
    """Fold the WAL back into the index and truncate it, without ever waiting for readers.

    A reader inside a transaction pins the WAL; waiting for it (the busy timeout) made builds hang for
    10 s. With no busy wait, a blocked checkpoint simply leaves the WAL for SQLite's next automatic one.
    """
    db.execute("PRAGMA busy_timeout = 0")
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.OperationalError:  # SQLITE_BUSY: a reader holds the WAL; nothing is lost
        pass
    finally:
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
