"""The index file: one SQLite database with chunks, an FTS5 table and meta; atomic, locked builds."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..builders import Builder, get_builder
from ..engines.base import postings_tables
from ..errors import IndexFileError, SpecError
from ..files.outputs import SQLITE_HEADER
from ..files.paths import sqlite_uri
from ..files.textio import file_kind
from ..records import Chunk
from ..tokenizers import Tokenizer
from .columns import field_columns
from .locks import build_lock
from .meta import SCHEMA_VERSION, RagEvalWarning, load_meta, parse_defaults, read_meta
from .processing import QueryProcessing

__all__ = [
    "Index",
    "RagEvalWarning",
    "SCHEMA_VERSION",
    "build_lock",
    "connect",
    "foreign_reason",
    "index_size",
    "read_meta",
]

BUSY_TIMEOUT_MS = 10_000
#: FTS5 keeps at most this many bytes of a token (``FTS5_MAX_TOKEN_SIZE``), cut anywhere, even inside a character.
FTS5_TOKEN_BYTES = 32_768

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
#: Every table an index holds (FTS5's shadow tables of ``search`` included; ``*_old`` only inside a build), besides
#: the tables its engine's postings live in (each engine declares them: :func:`own_tables`).
OWN_TABLES = frozenset(
    {
        "meta",
        "chunks",
        "files",
        "chunks_old",
        "files_old",
        "search",
        "search_data",
        "search_idx",
        "search_docsize",
        "search_config",
        "search_content",
    }
)


def own_tables() -> frozenset[str]:
    """Every table a rag-eval index may hold: :data:`OWN_TABLES` and every engine's postings tables."""
    return OWN_TABLES | frozenset(postings_tables())


def create_schema(db: sqlite3.Connection, fields: int = 1) -> None:
    """Create the chunks, files and meta tables, with token columns for ``fields`` fields (the FTS5 table
    comes from the writer, per tokenizer)."""
    for statement in _SCHEMA.strip().split(";"):
        if statement.strip():
            db.execute(statement)
    for number in range(1, fields):
        title, body = field_columns(number)
        db.execute(f"ALTER TABLE chunks ADD COLUMN {title} TEXT NOT NULL DEFAULT ''")
        db.execute(f"ALTER TABLE chunks ADD COLUMN {body} TEXT")


def foreign_reason(path: str | Path) -> str | None:
    """None when ``path`` may be (re)built by rag-eval: missing, empty, an empty SQLite database, or a
    rag-eval index; otherwise what was found there, for the refusal message. Never writes."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return None
    if path.is_symlink():
        return "it is a symbolic link"
    if not path.is_file():
        return "it is not a regular file"
    size = path.stat().st_size
    if size == 0:
        return None
    try:
        with open(path, "rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if header != SQLITE_HEADER:
        return f"it is not a SQLite database ({size} bytes of something else)"
    try:
        # Looking must leave no trace: without a WAL file the main file holds everything, and reading it
        # immutable creates no -wal/-shm files next to someone else's database.
        if Path(f"{path}-wal").exists():
            db = _open_readonly(str(path))
        else:
            db = sqlite3.connect(sqlite_uri(path, "immutable=1"), uri=True)
    except sqlite3.Error as exc:
        return f"it cannot be read as a SQLite database ({exc})"
    try:
        tables = sorted(
            row[0]
            for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not row[0].startswith("sqlite_")
        )
        if not tables:
            return None
        meta = read_meta(db) if "meta" in tables else {}
    except sqlite3.Error as exc:
        return f"it cannot be read as a SQLite database ({exc})"
    finally:
        db.close()
    own = own_tables()
    others = [name for name in tables if name not in own]
    if others or not all(key in meta for key in ("schema_version", "builder", "tokenizer")):
        shown = ", ".join(others or tables)
        return f"it is a SQLite database that is not a rag-eval index (tables: {shown})"
    return None


def _open_readonly(path: str, *, check_same_thread: bool = True) -> sqlite3.Connection:
    """A read-only connection. In a folder we cannot write, SQLite cannot create the WAL index, so the file
    is opened immutable there (nobody can rebuild an index in such a folder either)."""
    modes = ["mode=ro"]
    if not os.access(os.path.dirname(os.path.abspath(path)), os.W_OK):
        modes.append("immutable=1")
    for number, mode in enumerate(modes, start=1):
        db = sqlite3.connect(
            sqlite_uri(path, mode),
            uri=True,
            timeout=BUSY_TIMEOUT_MS / 1000,
            check_same_thread=check_same_thread,
            isolation_level=None,
        )
        try:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.OperationalError:
            db.close()
            if number == len(modes):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


#: What a SQLite error whose message Python cannot decode (it quotes a damaged schema's bytes) is reported as.
UNDECODABLE = "database disk image is malformed (SQLite's message quotes bytes that are not UTF-8)"


def connect(
    path: str | Path,
    *,
    check_same_thread: bool = True,
    write: bool = True,
    factory: type[sqlite3.Connection] = sqlite3.Connection,
) -> sqlite3.Connection:
    """A connection in autocommit mode with a busy timeout and Row results.

    ``write=True`` (builds) switches the file to WAL. Readers (``write=False``) need no write access: when
    the file cannot be opened for writing they fall back to a read-only connection.
    """
    path = str(path)
    db = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=check_same_thread, isolation_level=None, factory=factory
    )
    if not write and path != ":memory:":
        try:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            db.close()
            db = _open_readonly(path, check_same_thread=check_same_thread)
        except UnicodeDecodeError:
            # SQLite's message quotes the damaged schema, and Python fails to decode it: damage all the same
            db.close()
            raise sqlite3.DatabaseError(UNDECODABLE) from None
    db.row_factory = sqlite3.Row
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if write and path != ":memory:":
        db.execute("PRAGMA journal_mode = WAL")
    return db


class Index:
    """An open index: its connection, tokenizer, builder and recorded query defaults.

    Every read goes through :meth:`reading` (one read transaction, so results come from one snapshot even
    while the file is rebuilt) or checks the build ``generation`` its statement returned; either way a
    rebuild committed by another connection since the last read is noticed, and the index's meta,
    tokenizer and query defaults are re-read before anything is answered with stale ones.

    An index opened with ``check_same_thread=False`` may be shared by threads: :meth:`reading` and
    :meth:`errors` hold the index's lock, so one thread's search, read or verify runs at a time on its
    one connection (each still reads one snapshot).
    """

    def __init__(
        self,
        db: sqlite3.Connection,
        path: str,
        meta: dict[str, str],
        tokenizer: Tokenizer,
        *,
        expected: str | None = None,
        version: int = 0,
    ) -> None:
        self.db = db
        self.path = path
        self.expected = expected
        self._version = version
        self._vocabulary = False
        #: Serialises the connection's use (and the caches below) between threads; re-entrant for nesting.
        self.lock = threading.RLock()
        self._apply(meta, tokenizer)

    def _apply(self, meta: dict[str, str], tokenizer: Tokenizer) -> None:
        self.meta = meta
        self.tokenizer = tokenizer
        self.defaults = parse_defaults(self.path, meta)
        #: The build that wrote the meta in use (None for indexes written before generations were recorded).
        self.generation: str | None = meta.get("generation")
        #: SQL statements built once per index by the search module.
        self.statements: dict[Any, str] = {}
        #: Chunks by id, their key alone, that keys-only searches have read from this build (the search
        #: module's cache).
        self.keys: dict[int, Chunk] = {}
        #: Impact postings read from this build (the impact module's cache; None until a search reads some).
        self.postings: Any = None

    @classmethod
    def open(cls, path: str | Path, *, tokenizer: str | None = None, check_same_thread: bool = True) -> Index:
        """Open an existing index; a tokenizer whose options or model changed since the build is an error,
        and so is ``tokenizer`` (a spec) when it names another tokenizer or other options than the index's."""
        path = _index_path(path)
        if tokenizer is not None and not isinstance(tokenizer, str):
            raise SpecError(f"tokenizer must be a spec string such as 'jieba', not {type(tokenizer).__name__}")
        if path != ":memory:" and not Path(path).is_file():
            if Path(path).exists():
                raise IndexFileError(f"{path}: {file_kind(os.stat(path).st_mode)}, not an index file")
            raise IndexFileError(f"{path}: no such index", hint="build one with: rag-eval index build")
        try:
            db = connect(path, check_same_thread=check_same_thread, write=False)
        except sqlite3.DatabaseError as exc:
            raise _damaged(path, exc, opening=True) from None
        try:
            return cls.from_connection(db, path, tokenizer=tokenizer)
        except BaseException:
            db.close()
            raise

    @classmethod
    def from_connection(cls, db: sqlite3.Connection, path: str = "", *, tokenizer: str | None = None) -> Index:
        """Wrap an open connection to an index (``tokenizer``: the spec the caller expects, if any)."""
        with _mapped_errors(path, opening=True), _transaction(db):
            meta, recorded = load_meta(db, path, expected=tokenizer)
            version = _data_version(db)
        return cls(db, path, meta, recorded, expected=tokenizer, version=version)

    @contextmanager
    def reading(self) -> Iterator[None]:
        """One read transaction (unless the caller holds one), meta reloaded first if the file was rebuilt;
        SQLite errors (a damaged file) become one IndexFileError."""
        with self.lock, _mapped_errors(self.path), _transaction(self.db):
            version = _data_version(self.db)
            if version != self._version:
                self._reload()
                self._version = version
            yield

    @contextmanager
    def errors(self) -> Iterator[None]:
        """SQLite errors (a damaged or foreign file) as one IndexFileError naming the index; holds the index's
        lock (see the class) for the block."""
        with self.lock, _mapped_errors(self.path):
            yield

    def refresh(self) -> bool:
        """Re-read the meta now (after a statement saw another generation); True when search settings changed."""
        with self.lock, _mapped_errors(self.path), _transaction(self.db):
            settings = ("query_defaults", "query_processing")
            before = (self.tokenizer.spec, *(self.meta.get(key) for key in settings))
            self._reload()
            self._version = _data_version(self.db)
            return before != (self.tokenizer.spec, *(self.meta.get(key) for key in settings))

    def _reload(self) -> None:
        meta = read_meta(self.db)
        if meta == self.meta:
            return
        if meta.get("tokenizer_spec") == self.meta.get("tokenizer_spec") and meta.get("tokenizer") == self.meta.get(
            "tokenizer"
        ):
            _meta, tokenizer = load_meta(self.db, self.path, expected=self.expected, tokenizer=self.tokenizer)
        else:
            _meta, tokenizer = load_meta(self.db, self.path, expected=self.expected)
        self._apply(meta, tokenizer)

    @property
    def builder(self) -> Builder:
        """The builder recorded in the index."""
        return get_builder(self.meta["builder"])

    @property
    def source_root(self) -> Path:
        """The corpus root recorded at build time."""
        return Path(self.meta["source_root"])

    def document_frequency(self, term: str) -> int:
        """In how many chunks ``term`` occurs, in any column (FTS5's own vocabulary; call inside ``reading``)."""
        if not self._vocabulary:
            self.db.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.rag_eval_vocab USING fts5vocab(main, 'search', 'row')"
            )
            self._vocabulary = True
        row = self.db.execute("SELECT doc FROM temp.rag_eval_vocab WHERE term = ?", (term,)).fetchone()
        return int(row[0]) if row is not None else 0

    @property
    def processing(self) -> QueryProcessing | None:
        """The query processing recorded at build time (searches use it unless they name their own)."""
        recorded = self.meta.get("query_processing", "")
        return QueryProcessing.parse(recorded) if recorded else None

    @property
    def chunks(self) -> int:
        """The number of chunks, as the build recorded it."""
        return int(self.meta.get("chunks") or 0)

    def count(self) -> int:
        """Number of chunks."""
        with self.reading():
            return int(self.db.execute("SELECT count(*) FROM chunks").fetchone()[0])

    def close(self) -> None:
        """Close the connection (once another thread's search on it has finished); closing twice is harmless."""
        with self.lock:
            self.db.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _data_version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA data_version").fetchone()[0])


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """A read transaction around the block, unless the caller already holds one."""
    if db.in_transaction:
        yield
        return
    db.execute("BEGIN")
    try:
        yield
    finally:
        if db.in_transaction:
            db.execute("COMMIT")


def _index_path(path: object) -> str:
    """``path`` (a ``str`` or ``os.PathLike``) as a string; anything else is an IndexFileError naming its type."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise IndexFileError(f"index path must be a str or os.PathLike, not {type(path).__name__}")
    if not path:
        raise IndexFileError("index path is empty", hint="name an index file built with: rag-eval index build")
    return path


#: What Python's sqlite3 says when a connection is used after ``close()`` or from a thread it was not opened
#: in (``check_same_thread=True``): not a damaged file, so not reported as one.
_CLOSED = "closed database"
_OTHER_THREAD = "same thread"


@contextmanager
def _mapped_errors(path: str, *, opening: bool = False) -> Iterator[None]:
    try:
        yield
    except sqlite3.ProgrammingError as exc:
        if _CLOSED in str(exc):
            raise IndexFileError(
                f"{path or 'database'}: the index is closed", hint="open it again with Index.open"
            ) from None
        if _OTHER_THREAD in str(exc):
            raise IndexFileError(
                f"{path or 'database'}: this index was opened in another thread",
                hint="share it between threads with Index.open(path, check_same_thread=False), or open one per thread",
            ) from None
        raise _damaged(path, exc, opening) from None
    except sqlite3.DatabaseError as exc:
        raise _damaged(path, exc, opening) from None
    except UnicodeDecodeError:  # an error message quoting damaged bytes, which Python cannot decode
        raise _damaged(path, sqlite3.DatabaseError(UNDECODABLE), opening) from None


def _damaged(path: str, exc: sqlite3.DatabaseError, opening: bool) -> IndexFileError:
    """The one error a SQLite error reading (or ``opening``) the index at ``path`` becomes."""
    if opening:
        return IndexFileError(
            f"{path or 'database'}: not a rag-eval index or damaged ({exc})",
            hint="rebuild it with: rag-eval index build",
        )
    return IndexFileError(
        f"{path or 'database'}: cannot read the index ({exc}); the file may be damaged",
        hint="check it with: rag-eval index verify; rebuild it with: rag-eval index build",
    )


def index_size(path: str) -> int:
    """Bytes on disk of the index file and its WAL (0 for in-memory)."""
    if path == ":memory:":
        return 0
    return sum(Path(path + s).stat().st_size for s in ("", "-wal") if Path(path + s).exists())
