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
from ..builders.base import FileRef
from ..engines.impact import TABLES as IMPACT_TABLES
from ..engines.impact import build_engine, write_impacts
from ..errors import CorpusError, IndexFileError, SpecError
from ..files.outputs import make_parents, recorded_name, remove_made, sqlite_side_file_of
from ..files.textio import path_argument
from ..records import Progress
from ..search.processing import QueryProcessing
from ..search.sql import weights_for
from ..tokenizers import Tokenizer, get_tokenizer
from .building_file import bulk_load, flush_to_disk, new_building_file, publish, remove_stale_builds
from .chunk_writer import ChunkWriter, Stored
from .columns import all_field_columns, field_columns
from .locks import check_side_files
from .meta import SCHEMA_VERSION, read_meta, recorded_meta
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
    engine: str | None = "auto",
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
    :mod:`rag_eval.search.processing`) is recorded in the index: its searches use it unless
    they name their own. ``engine`` (see :mod:`rag_eval.engines.impact`) is recorded too; ``impact`` also writes
    the impact postings, in the same transaction; ``auto`` is ``impact``
    (:func:`rag_eval.engines.impact.build_engine`).
    """
    started = time.perf_counter()
    path_argument(source, "the source", IndexFileError)
    path_argument(index_path, "the index path", IndexFileError)
    given_specs: tuple[tuple[object, str, type], ...] = (
        (builder, "builder", Builder),
        (tokenizer, "tokenizer", Tokenizer),
    )
    for given, what, kind in given_specs:
        if given is not None and not isinstance(given, (str, kind)):
            raise SpecError(f"the {what} must be a spec string or a {kind.__name__}, not {type(given).__name__}")
    source = Path(source)
    path = str(index_path)
    for value, what in ((str(source), "source"), (path, "index")):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a file name's non-UTF-8 bytes: the index records both paths as text
            raise IndexFileError(
                f"{recorded_name(value)}: the {what} path is not valid UTF-8, and the index records it",
                hint="rename it with UTF-8 characters",
            ) from None
    kept = _recorded_settings(path, db) if None in (builder, tokenizer, processing, engine) else {}
    if builder is None:
        builder = kept.get("builder") or infer_builder(source)
    if tokenizer is None:
        tokenizer = kept.get("tokenizer") or DEFAULT_TOKENIZER
    if processing is None:
        processing = kept.get("query_processing", "")
    if engine is None:
        engine = kept.get("engine") or "auto"
    builder = builder if isinstance(builder, Builder) else get_builder(builder)
    tokenizer = tokenizer if isinstance(tokenizer, Tokenizer) else get_tokenizer(tokenizer)
    chosen = processing if isinstance(processing, QueryProcessing) else QueryProcessing.parse(processing or "")
    recorded = chosen.system if chosen.active else ""
    engine = build_engine(engine)
    if path != ":memory:":
        reason = foreign_reason(path)
        if reason is not None:
            raise IndexFileError(
                f"{path}: refusing to build into it: {reason}; rag-eval only writes its own index files",
                hint="choose a new index path",
            )
        side = sqlite_side_file_of(path)
        if side is not None:  # an index there would be taken for that database's journal, and replayed into it
            raise IndexFileError(
                f"{path}: refusing to build into it: SQLite would take it for the {side[1]} file of the "
                f"database {side[0]}",
                hint="choose a new index path",
            )
        if db is None and not Path(path).exists() and not Path(path).is_symlink():
            check_side_files(path)  # before any work: a user's file named like the new index's log is refused
    root, refs = builder.plan(source)
    load_started = time.perf_counter()
    if progress is not None:  # pkuseg's model takes seconds to load: say so before it starts
        progress(f"loading {tokenizer.name}", 0, 1)
    tokenizer.load()
    load_seconds = time.perf_counter() - load_started
    if progress is not None:
        progress(f"loading {tokenizer.name}", 1, 1)

    created = path != ":memory:" and not Path(path).exists() and not Path(path).is_symlink()
    # A new index is built in a hidden file beside it and appears under its name only when complete, so that a
    # build that fails or is killed (even with SIGKILL) leaves no file under that name; a given connection
    # (``db``) is the caller's, built where it points.
    aside = created and db is None
    building = path
    made: list[Path] = []  # the folders this build creates, removed if it fails
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
                report = _write(db, path, source, root, refs, builder, tokenizer, progress, on_insert, recorded, engine)
                if aside:
                    db.execute("PRAGMA journal_mode = WAL")  # what every index of ours uses once published
            finally:
                if own_db and db is not None:
                    db.close()
            if aside:
                flush_to_disk(building)
                publish(building, path)
    except BaseException:
        remove_made(made)
        raise
    report.tokenizer_load_seconds = load_seconds
    report.extra["chunks_are"] = builder.chunk_words()  # compare's passages are units, which chunks may split
    report.seconds = time.perf_counter() - started
    report.index_bytes = index_size(path)
    return report


#: The tokenizer of a new index built without one.
DEFAULT_TOKENIZER = "bigram"


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


def _write(
    db: sqlite3.Connection,
    path: str,
    source: Path,
    root: Path,
    refs: list[FileRef],
    builder: Builder,
    tokenizer: Tokenizer,
    progress: Progress | None,
    on_insert: Callable[[int], None] | None = None,
    processing: str = "",
    engine: str = "fts5",
) -> BuildReport:
    meta = read_meta(db)
    # Stored tokens are reused only for an index built with the very same builder and tokenizer specs, and
    # only for a chunk whose text and title are unchanged (checked below): any other change re-tokenizes.
    reusable = (
        bool(meta)
        and not tokenizer.native
        and meta.get("tokenizer_spec") == tokenizer.spec
        and meta.get("builder") == builder.system
    )
    # FTS5-style snippets (lines) of Python strategies need token offsets: stored, not re-computed per query
    # (a hybrid's snippets come from all its fields' tokens, re-tokenized for the few hits).
    keep_offsets = not tokenizer.native and len(tokenizer.fields) == 1 and builder.query_defaults().snippet == "fts5"
    stored_columns = ", ".join(
        ["fts_title", "fts_body", "offsets"]
        + [column for number in range(1, len(tokenizer.fields)) for column in field_columns(number)]
    )
    write_started = time.perf_counter()
    db.execute("BEGIN IMMEDIATE")
    try:
        has_old = bool(meta)
        db.execute("DROP TABLE IF EXISTS search")
        for table in IMPACT_TABLES:
            db.execute(f"DROP TABLE IF EXISTS {table}")
        db.execute("DROP INDEX IF EXISTS chunks_path")
        db.execute("DROP TABLE IF EXISTS chunks_old")
        db.execute("DROP TABLE IF EXISTS files_old")
        if has_old:
            db.execute("ALTER TABLE chunks RENAME TO chunks_old")
            db.execute("ALTER TABLE files RENAME TO files_old")
        create_schema(db, len(tokenizer.fields))
        db.execute("DELETE FROM meta")
        reader = db.cursor()
        reader.row_factory = None  # whatever the caller's connection uses
        old_files = (
            dict(reader.execute("SELECT path, sha256 FROM files_old").fetchall()) if has_old and reusable else {}
        )
        writer = ChunkWriter(db, tokenizer, keep_offsets)
        writer.on_insert, writer.progress = on_insert, progress
        paths: set[str] = set()
        file_rows: list[tuple[str, str, int]] = []
        changed = 0
        total_bytes = sum((root / ref.path).stat().st_size for ref in refs)
        done_bytes = 0
        for ref in refs:
            file = builder.read(root, ref)
            if file.path in paths:
                raise CorpusError(f"{file.path}: the source lists this file twice")
            paths.add(file.path)
            count = 0
            reuse = old_files.get(file.path) == file.sha256
            tokenized_before = writer.queued
            for chunk in builder.chunks(file):  # may stream from disk (passages): never held as a list
                count += 1
                title = chunk.title if builder.index_title else ""
                stored: Stored | None = None
                if tokenizer.native:
                    stored = (title, None, None)
                elif reuse:
                    found = reader.execute(
                        f"SELECT {stored_columns} FROM chunks_old WHERE key = ? AND text = ? AND title = ?",
                        (chunk.key, chunk.text, chunk.title),
                    ).fetchone()
                    if found is not None and (found[2] is not None) == keep_offsets:
                        stored = found
                writer.add(chunk, title, stored)
            changed += tokenizer.native or writer.queued > tokenized_before
            file_rows.append((file.path, file.sha256, count))
            done_bytes += file.size
            if progress is not None:
                progress("index", done_bytes, total_bytes)
        writer.flush()
        db.execute("DROP TABLE IF EXISTS chunks_old")
        db.execute("DROP TABLE IF EXISTS files_old")
        db.executemany("INSERT INTO files VALUES (?, ?, ?)", file_rows)
        db.execute(fts_schema(tokenizer))
        db.execute("INSERT INTO search(search) VALUES ('rebuild')")
        db.execute("INSERT INTO search(search) VALUES ('optimize')")
        if engine == "impact":
            write_impacts(db, tokenizer, weights_for(tokenizer, builder.query_defaults()))
        new_meta = {
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
            "query_processing": processing,
            "engine": engine,
            "chunks": str(writer.rows),
            "files": str(len(file_rows)),
            "build_seconds_write": f"{time.perf_counter() - write_started - writer.tokenize_wall:.3f}",
            "tokenize_plan": writer.plan_summary(),
        }
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
    speedup = round(writer.tokenize_cpu / writer.tokenize_wall, 2) if writer.tokenize_wall else 1.0
    return BuildReport(
        chunks=writer.rows,
        files=len(file_rows),
        files_tokenized=changed,
        chunks_tokenized=writer.tokenized,
        tokenizer_load_seconds=0.0,
        tokenize_seconds=writer.tokenize_wall,
        write_seconds=time.perf_counter() - write_started - writer.tokenize_wall,
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
