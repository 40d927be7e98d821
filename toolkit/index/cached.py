"""The cached indexes ``compare``, ``judge`` and ``tune`` build in the cache folder: what the folder holds, and
clearing them (``rag-eval cache info`` and ``cache clear``)."""

from __future__ import annotations

import fcntl
import os
import re
import sqlite3
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..cache import cache_dir
from ..errors import RagEvalError
from ..files.paths import sqlite_uri
from .locks import SIDE_FILES, exclusive, remove_database

#: The cached indexes ``compare``, ``judge`` and ``tune`` build (``eval.runner.index_path``):
#: ``indexes/<16 hex>/<32 hex>.sqlite``, each with its ``.build.json`` report and SQLite side files.
_CACHED_INDEX = re.compile(r"[0-9a-f]{32}\.sqlite")
_CORPUS_FOLDER = re.compile(r"[0-9a-f]{16}")
#: What killed writes left beside cached indexes: a first build's hidden ``.KEY.sqlite.XXXXXXXX.building``
#: (``writer``), a build report's ``.KEY.build.json.XXXXXXXX.partial`` (``outputs``) and the lock file
#: ``.KEY.lock`` commands building a cached index take turns on (``locks.key_lock``); each writer holds a
#: ``flock`` on its own while it runs. No run ever reads them, and only a rebuild of the same key removed them.
_LEFT_BEHIND = re.compile(r"\.[0-9a-f]{32}\.(sqlite\.[a-z0-9_]{8}\.building|build\.json\.[a-z0-9_]{8}\.partial|lock)")
#: A build report whose index is gone (a clear or a discard killed between the two removals).
_BUILD_REPORT = re.compile(r"(?P<key>[0-9a-f]{32})\.build\.json")


@dataclass
class CacheReport:
    """What the cache folder holds: its path, and per part (indexes, models, ...) files and bytes."""

    folder: Path
    parts: dict[str, dict[str, int]] = field(default_factory=dict)
    indexes: int = 0


def _files_under(folder: Path) -> Iterator[Path]:
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            yield path


def cache_report() -> CacheReport:
    """Files and bytes per top-level part of the cache folder, and how many cached indexes it holds."""
    folder = cache_dir()
    report = CacheReport(folder)
    if not folder.is_dir():
        return report
    for part in sorted(folder.iterdir()):
        if part.is_dir() and not part.is_symlink():
            sizes = [path.stat().st_size for path in _files_under(part)]
            report.parts[part.name] = {"files": len(sizes), "bytes": sum(sizes)}
    report.indexes = sum(1 for _ in _cached_indexes(folder / "indexes"))
    return report


def _cached_indexes(folder: Path) -> Iterator[Path]:
    """Every cached index file, by the names rag-eval gives them (nothing else under the folder is touched)."""
    if not folder.is_dir():
        return
    for corpus in sorted(folder.iterdir()):
        if corpus.is_dir() and not corpus.is_symlink() and _CORPUS_FOLDER.fullmatch(corpus.name):
            for path in sorted(corpus.iterdir()):
                if _CACHED_INDEX.fullmatch(path.name) and path.is_file() and not path.is_symlink():
                    yield path


class Cleared(NamedTuple):
    """What ``cache clear`` did: indexes removed, bytes freed, indexes kept because in use, and files that killed
    builds had left (their bytes are in ``freed``)."""

    removed: int
    freed: int
    busy: int
    left_behind: int = 0


def clear_indexes(older_than_days: float | None = None) -> Cleared:
    """Remove cached indexes (they are rebuilt when next needed): all, or those not written or used for
    ``older_than_days``. An index in use is left: one a build holds (its lock) or a running command has open
    (``compare``, ``judge``, ``tune`` reading it). Only files named as rag-eval names its cached indexes are
    removed, with their build report and SQLite side files, and what killed builds left beside them; models and
    other caches are kept."""
    if older_than_days is not None and not (isinstance(older_than_days, (int, float)) and 0 <= older_than_days < 1e6):
        raise RagEvalError(f"--older-than must be a number of days from 0, not {older_than_days!r}")
    folder = cache_dir() / "indexes"
    cutoff = time.time() - older_than_days * 86400 if older_than_days is not None else None
    removed = freed = busy = 0
    for path in list(_cached_indexes(folder)):
        companions = [Path(f"{path}{suffix}") for suffix in SIDE_FILES] + [path.with_suffix(".build.json")]
        present = [p for p in (path, *companions) if p.is_file()]
        if not present or (cutoff is not None and max(p.stat().st_mtime for p in present) > cutoff):
            continue
        with exclusive(path) as locked:
            if locked is None:  # gone, or unreadable
                continue
            if not locked or _open_elsewhere(path):
                busy += 1
                continue
            size = sum(p.stat().st_size for p in present if p.exists())
            for found in present:  # the index first: a clear killed midway leaves nothing a run would trust
                found.unlink(missing_ok=True)
        removed += 1
        freed += size
    left_behind, left_bytes = _remove_left_behind(folder)
    for corpus in folder.iterdir() if folder.is_dir() else []:
        if corpus.is_dir() and _CORPUS_FOLDER.fullmatch(corpus.name):
            try:
                corpus.rmdir()  # only when empty
            except OSError:
                pass
    return Cleared(removed, freed + left_bytes, busy, left_behind)


def _open_elsewhere(path: Path) -> bool:
    """Whether another connection has the cached index open: SQLite refuses to take a file out of WAL mode (every
    index of ours is in it) while any other connection to it is open, in this process or another. A file this
    check changes is one about to be removed."""
    try:
        db = sqlite3.connect(sqlite_uri(path, "mode=rw"), uri=True, timeout=0, isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        db.execute("PRAGMA journal_mode = DELETE").fetchall()
    except sqlite3.Error as exc:
        return getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    finally:
        db.close()
    return False


def _remove_left_behind(folder: Path) -> tuple[int, int]:
    """Remove what killed builds and discards left in the corpus folders under ``folder`` (see ``_LEFT_BEHIND``
    and ``_BUILD_REPORT``): regular files only, and none a running build holds. Returns (files, bytes) removed."""
    files = freed = 0
    if not folder.is_dir():
        return files, freed
    for corpus in sorted(folder.iterdir()):
        if not (corpus.is_dir() and not corpus.is_symlink() and _CORPUS_FOLDER.fullmatch(corpus.name)):
            continue
        for path in sorted(corpus.iterdir()):
            report = _BUILD_REPORT.fullmatch(path.name)
            left = _LEFT_BEHIND.fullmatch(path.name) is not None
            orphan = report is not None and not os.path.lexists(corpus / f"{report['key']}.sqlite")
            if not (left or orphan):
                continue
            try:
                info = os.lstat(path)
                if not stat.S_ISREG(info.st_mode):
                    continue
                with open(path, "rb") as handle:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    if left:  # with its side files: a build killed after switching its file to WAL left them
                        remove_database(path)
                    else:
                        path.unlink(missing_ok=True)
            except OSError:  # gone meanwhile, or held by a build still running (BlockingIOError)
                continue
            files += 1
            freed += info.st_size
    return files, freed
