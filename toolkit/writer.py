"""Writing an index: validate the source, then stream it into one write transaction."""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .builders import Builder, get_builder, infer_builder
from .builders.base import FileRef
from .columns import all_field_columns, field_columns
from .errors import CorpusError, IndexFileError, RagEvalError, SpecError
from .impact import TABLES as IMPACT_TABLES
from .impact import build_engine, write_impacts
from .indexmeta import SCHEMA_VERSION, read_meta, recorded_meta
from .locks import remove_database
from .outputs import make_parents, recorded_name, remove_made, sqlite_side_file_of, umask
from .processing import QueryProcessing
from .records import Chunk, Progress
from .search import weights_for
from .store import BUSY_TIMEOUT_MS, build_lock, connect, create_schema, foreign_reason, index_size
from .textio import path_argument
from .tokenize_pool import tokenize_chunks
from .tokenizers import Tokenizer, get_tokenizer


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
    :mod:`rag_eval.processing`) is recorded in the index: its searches use it unless
    they name their own. ``engine`` (see :mod:`rag_eval.impact`) is recorded too; ``impact`` also writes
    the impact postings, in the same transaction; ``auto`` is ``impact``
    (:func:`rag_eval.impact.build_engine`).
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
                    _remove_stale_builds(path)
                    building = _new_building_file(path)
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
                            _bulk_load(db)
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
                _flush_to_disk(building)
                _publish(building, path)
    except BaseException:
        remove_made(made)
        raise
    report.tokenizer_load_seconds = load_seconds
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


#: Chunks tokenized and inserted together, by count or by characters awaiting tokenization, whichever
#: comes first; bounds the memory a build holds besides one file, and is large enough for the pool
#: (tokenize_pool.POOL_MIN_CHARS) to pay off on corpora of short chunks.
FLUSH_CHUNKS = 20_000
FLUSH_CHARS = 600_000
#: The chunks table's columns before the extra fields' token columns.
_BASE_COLUMNS = 17

#: What a chunk's tokens are stored as: field 0's title and body terms and offsets, then the title and body
#: terms of every further field.
Stored = tuple[Any, ...]


class _Writer:
    """Inserts chunk rows in id order, tokenizing the ones without reusable tokens in batches."""

    def __init__(self, db: sqlite3.Connection, tokenizer: Tokenizer, keep_offsets: bool) -> None:
        self.db = db
        self.tokenizer = tokenizer
        self.keep_offsets = keep_offsets
        extra = 2 * (len(tokenizer.fields) - 1)
        self.insert = "INSERT INTO chunks VALUES (" + ", ".join("?" * (_BASE_COLUMNS + extra)) + ")"
        self.buffer: list[tuple[Chunk, str, Stored | None]] = []
        self.pending_chars = 0
        #: Chunks handed in without reusable tokens so far (tokenized now or at the next flush).
        self.queued = 0
        self.rows = 0
        self.tokenized = 0
        self.tokenize_wall = 0.0
        self.tokenize_cpu = 0.0
        self.workers = 1
        self.start_method = ""
        self.worker_load_seconds: list[float] = []
        #: Each tokenize call's plan (tokenize_pool.PoolPlan): one process or a pool, and why.
        self.plans: list[tuple[int, str]] = []
        self.on_insert: Callable[[int], None] | None = None
        self.progress: Progress | None = None

    def _duplicate(self, rows: list[tuple[Any, ...]]) -> str | None:
        """The first key in ``rows`` that an earlier row of the batch or of the index already has, with the
        sources of both (two names can make one key: ``a b.md`` and ``a%20b.md`` are both ``a%20b.md``)."""
        seen: dict[str, str] = {}
        for row in rows:
            found = self.db.execute("SELECT id, path FROM chunks WHERE key = ?", (row[1],)).fetchone()
            earlier = seen.get(row[1])  # a path: never None once seen
            if earlier is None and found is not None and found[0] != row[0]:
                earlier = found[1]
            if earlier is not None:
                sources = f"{earlier!r}" if earlier == row[2] else f"{earlier!r} and {row[2]!r}"
                return f"{row[1]!r} (from {sources})"
            seen[row[1]] = row[2]
        return None

    def plan_summary(self) -> str:
        """The first tokenize call's plan, and how many of the calls used a pool when there were several."""
        if len(self.plans) < 2:
            return self.plans[0][1] if self.plans else ""
        pooled = sum(workers > 1 for workers, _plan in self.plans)
        return f"{self.plans[0][1]} (first of {len(self.plans)} tokenize calls; {pooled} pooled)"

    def add(self, chunk: Chunk, title: str, stored: Stored | None) -> None:
        self.buffer.append((chunk, title, stored))
        if stored is None:
            self.queued += 1
            self.pending_chars += len(title) + len(chunk.text)
        if len(self.buffer) >= FLUSH_CHUNKS or self.pending_chars >= FLUSH_CHARS:
            self.flush()

    def flush(self) -> None:
        pending = [(title, chunk.text) for chunk, title, stored in self.buffer if stored is None]
        tokenized: list[Stored] = []
        if pending:
            fields = self.tokenizer.fields
            per_field = []
            for number, field in enumerate(fields):
                report = self.progress
                done_before = self.tokenized * len(fields) + number * len(pending)
                total = self.queued * len(fields)
                results, pool = tokenize_chunks(
                    field.tokenizer,
                    pending,
                    keep_offsets=self.keep_offsets and number == 0,
                    progress=None if report is None else _tokenizing(report, done_before, total),
                )
                per_field.append(results)
                self.tokenize_wall += pool.wall_seconds
                self.tokenize_cpu += pool.cpu_seconds
                self.plans.append((pool.workers, pool.plan))
                if pool.workers > 1:
                    self.workers, self.start_method = pool.workers, pool.start_method
                    self.worker_load_seconds = sorted(set(self.worker_load_seconds) | set(pool.worker_load_seconds))
            # Field 0's (title, body, offsets), then (title, body) of every further field.
            tokenized = [
                first + tuple(term for rest in others for term in rest[:2])
                for first, *others in zip(*per_field, strict=True)
            ]
            self.tokenized += len(pending)
        self.pending_chars = 0
        fresh = iter(tokenized)
        rows = []
        for chunk, _title, stored in self.buffer:
            tokens = stored if stored is not None else next(fresh)
            self.rows += 1
            rows.append(
                (
                    self.rows,
                    chunk.key,
                    chunk.path,
                    chunk.doc,
                    chunk.title,
                    chunk.anchor,
                    chunk.heading_path,
                    chunk.category,
                    chunk.line,
                    chunk.revision,
                    chunk.sha256,
                    chunk.status,
                    chunk.expires,
                    chunk.text,
                    *tokens,
                )
            )
        self.buffer = []
        try:
            # chunks.key is UNIQUE: SQLite finds a duplicate without a set of every key in memory (807,231
            # lines keys held 140 MB of a 200 MB corpus's build).
            self.db.executemany(self.insert, rows)
        except sqlite3.IntegrityError:
            duplicate = self._duplicate(rows)
            if duplicate is None:
                raise
            raise RagEvalError(f"duplicate chunk key {duplicate}") from None
        if self.on_insert is not None:
            self.on_insert(self.rows)


def _tokenizing(report: Progress, done_before: int, total: int) -> Callable[[int], None]:
    return lambda done: report("tokenizing", done_before + done, total)


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
        writer = _Writer(db, tokenizer, keep_offsets)
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


#: The hidden file a new index is built in, beside it: ``.NAME.XXXXXXXX.building``.
BUILDING_SUFFIX = ".building"


def _new_building_file(path: str) -> str:
    """A new empty hidden file beside ``path`` for its first build, with the mode ``open`` would give."""
    target = Path(path)
    handle, building = tempfile.mkstemp(prefix=f".{target.name}.", suffix=BUILDING_SUFFIX, dir=target.parent)
    try:
        os.fchmod(handle, 0o666 & ~umask())
    finally:
        os.close(handle)
    return building


def _remove_stale_builds(path: str) -> None:
    """Remove what first builds of ``path`` that were killed left beside it: their hidden files that no build
    holds locked (a running build holds its own)."""
    target = Path(path)
    for found in target.parent.glob(f".{glob.escape(target.name)}.*{BUILDING_SUFFIX}"):
        try:
            with open(found, "rb") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # another build of the same new index is running
                remove_database(found)
        except OSError:
            continue


def _publish(building: str, path: str) -> None:
    """Give the complete index in ``building`` its name ``path``, never replacing a file that appeared there
    meanwhile (another build's): a hard link fails if ``path`` exists."""
    if Path(f"{building}-wal").exists() and Path(f"{building}-wal").stat().st_size > 0:
        raise IndexFileError(f"{path}: the new index was not fully written (its log is not empty); build again")
    if not os.path.lexists(path):
        # An index deleted while a reader had it open leaves its -wal and -shm behind: SQLite would replay that old
        # log onto the new file under the same name. They belong to no file any more.
        remove_database(path, main=False)
    try:
        os.link(building, path)
    except FileExistsError:
        raise IndexFileError(
            f"{path}: another build created this index while this one ran; it was left as that build wrote it",
            hint="run the build again to sync it",
        ) from None
    except OSError:  # a file system without hard links: a rename, checked first
        if os.path.lexists(path):
            raise IndexFileError(f"{path}: another build created this index while this one ran") from None
        os.rename(building, path)
        return
    remove_database(building)


def _bulk_load(db: sqlite3.Connection) -> None:
    """Write a first build's hidden file without a log on disk and without syncing each step.

    Nothing else can see the file while it is built, and a build that fails or is killed leaves it to be
    removed, so the WAL (every page written twice, each commit and checkpoint synced) buys nothing there; the
    rollback journal stays in memory for a failed statement. The file is synced once, before it gets its name
    (:func:`_flush_to_disk`). On ``cmrc2018_dev_trial`` with jieba this took a third off the write phase
    (reports/builds.md, section 10).
    """
    db.execute("PRAGMA journal_mode = MEMORY")
    db.execute("PRAGMA synchronous = OFF")


def _flush_to_disk(building: str) -> None:
    """Sync a bulk-loaded index file before it is published, so that the name never points at pages the
    system has not yet written."""
    handle = os.open(building, os.O_RDONLY)
    try:
        os.fsync(handle)
    except OSError as exc:
        raise IndexFileError(f"{building}: cannot write the new index to disk ({exc.strerror or exc})") from None
    finally:
        os.close(handle)


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
