"""The index file: one SQLite database with chunks, an FTS5 table and meta; atomic, locked builds."""

from __future__ import annotations

import fcntl
import json
import sqlite3
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from .builders import Builder, QueryDefaults, get_builder
from .errors import IndexFileError
from .records import Chunk
from .tokenizers import Tokenizer, get_tokenizer
from .tokenizers.fts5_rules import check_fts5

SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 10_000
#: Fingerprint keys that only record library versions: drift is a warning, not an error.
VERSION_KEYS = {"jieba", "spacy-pkuseg", "opencc", "unicode", "sqlite"}

class RagEvalWarning(UserWarning):
    """Something works but deserves attention (for example library versions drifted since a build)."""


_CHUNK_COLUMNS = ("id", "key", "path", "doc", "title", "anchor", "heading_path", "category", "line", "revision",
                  "sha256", "status", "expires", "text")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    key TEXT UNIQUE NOT NULL,
    path TEXT NOT NULL,
    doc TEXT NOT NULL,
    title TEXT NOT NULL,
    anchor TEXT NOT NULL,
    heading_path TEXT NOT NULL,
    category TEXT NOT NULL,
    line INTEGER,
    revision TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    status TEXT NOT NULL,
    expires TEXT,
    text TEXT NOT NULL,
    fts_title TEXT NOT NULL,
    fts_body TEXT,
    offsets BLOB
);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, sha256 TEXT NOT NULL, chunks INTEGER NOT NULL);
"""


def connect(path: str | Path, *, check_same_thread: bool = True) -> sqlite3.Connection:
    """A connection with WAL (files only), a busy timeout and Row results."""
    db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=check_same_thread,
                         isolation_level=None)
    db.row_factory = sqlite3.Row
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if str(path) != ":memory:":
        db.execute("PRAGMA journal_mode = WAL")
    return db


class Index:
    """An open index: its connection, tokenizer, builder and recorded query defaults."""

    def __init__(self, db: sqlite3.Connection, path: str, meta: dict[str, str], tokenizer: Tokenizer) -> None:
        self.db = db
        self.path = path
        self.meta = meta
        self.tokenizer = tokenizer
        self.defaults = QueryDefaults(**json.loads(meta["query_defaults"]))
        #: SQL statements built once per index by the search module.
        self.statements: dict[Any, str] = {}

    @classmethod
    def open(cls, path: str | Path, *, tokenizer: str | None = None, check_same_thread: bool = True) -> "Index":
        """Open an existing index; a tokenizer whose options or model changed since the build is an error,
        and so is ``tokenizer`` (a spec) when it names another tokenizer or other options than the index's."""
        path = str(path)
        if path != ":memory:" and not Path(path).is_file():
            raise IndexFileError(f"{path}: no such index", hint="build one with: rag-eval index build")
        try:
            db = connect(path, check_same_thread=check_same_thread)
        except sqlite3.DatabaseError as exc:
            raise IndexFileError(f"{path}: not a rag-eval index ({exc})") from None
        try:
            return cls.from_connection(db, path, tokenizer=tokenizer)
        except BaseException as exc:
            db.close()
            if isinstance(exc, sqlite3.DatabaseError):
                raise IndexFileError(f"{path}: not a rag-eval index ({exc})") from None
            raise

    @classmethod
    def from_connection(cls, db: sqlite3.Connection, path: str = "", *, tokenizer: str | None = None) -> "Index":
        """Wrap an open connection to an index (``tokenizer``: the spec the caller expects, if any)."""
        meta = read_meta(db)
        if not meta:
            raise IndexFileError(f"{path or 'database'}: not a rag-eval index (no meta table)",
                                 hint="build one with: rag-eval index build")
        if int(meta.get("schema_version", 0)) != SCHEMA_VERSION:
            raise IndexFileError(f"{path}: index schema {meta.get('schema_version')} is not {SCHEMA_VERSION}; rebuild it")
        recorded = get_tokenizer(meta["tokenizer"])
        if tokenizer is not None and get_tokenizer(tokenizer).system != recorded.system:
            raise IndexFileError(
                f"{path}: this index was built with tokenizer {recorded.system}, not {get_tokenizer(tokenizer).system}",
                hint="search it without naming a tokenizer, or rebuild it with: rag-eval index build -t SPEC",
            )
        check_fts5(recorded.name if recorded.native else "ascii")
        check_fingerprint(path, json.loads(meta["tokenizer_fingerprint"]), recorded)
        return cls(db, path, meta, recorded)

    @property
    def builder(self) -> Builder:
        """The builder recorded in the index."""
        return get_builder(self.meta["builder"])

    @property
    def source_root(self) -> Path:
        """The corpus root recorded at build time."""
        return Path(self.meta["source_root"])

    def chunk(self, row: sqlite3.Row) -> Chunk:
        """A Chunk from a row of the chunks table."""
        return Chunk(**{name: row[name] for name in _CHUNK_COLUMNS if name != "id"})

    def count(self) -> int:
        """Number of chunks."""
        return int(self.db.execute("SELECT count(*) FROM chunks").fetchone()[0])

    def close(self) -> None:
        """Close the connection."""
        self.db.close()

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_meta(db: sqlite3.Connection) -> dict[str, str]:
    """The meta table as a dict (empty when there is none)."""
    try:
        return {row[0]: row[1] for row in db.execute("SELECT key, value FROM meta")}
    except sqlite3.OperationalError:
        return {}


def check_fingerprint(path: str, recorded: dict[str, str], tokenizer: Tokenizer) -> None:
    """Error when a model or dictionary changed; warn when only library versions drifted."""
    current = tokenizer.fingerprint()
    changed = {k for k in set(recorded) | set(current) if recorded.get(k) != current.get(k)}
    hard = sorted(k for k in changed if k not in VERSION_KEYS)
    if hard:
        details = "; ".join(f"{k}: built with {recorded.get(k)}, now {current.get(k)}" for k in hard)
        raise IndexFileError(f"{path}: the tokenizer changed since this index was built ({details})",
                             hint="rebuild it with: rag-eval index build")
    if changed:
        details = ", ".join(f"{k} {recorded.get(k)} -> {current.get(k)}" for k in sorted(changed))
        warnings.warn(f"{path}: library versions changed since the build ({details}); rebuild to be sure "
                      "results match", RagEvalWarning, stacklevel=3)


@contextmanager
def build_lock(path: str, *, remove_on_error: bool = False) -> Iterator[None]:
    """Refuse a second builder on the same index: an exclusive ``flock`` on the index file itself.

    SQLite's own locks are POSIX record locks, which ``flock`` does not interact with on Linux, so
    readers are unaffected. A new index file that fails to build is removed (nothing existed before).
    """
    if path == ":memory:":
        yield
        return
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise IndexFileError(f"{path}: cannot open the index file: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IndexFileError(f"{path}: another build is running on this index; try again when it ends") from None
        try:
            yield
        except BaseException:
            if remove_on_error:
                for suffix in ("", "-wal", "-shm", "-journal"):
                    Path(path + suffix).unlink(missing_ok=True)
            raise
    finally:
        handle.close()


def index_size(path: str) -> int:
    """Bytes on disk of the index file and its WAL (0 for in-memory)."""
    if path == ":memory:":
        return 0
    return sum(Path(path + s).stat().st_size for s in ("", "-wal") if Path(path + s).exists())



