"""Where rag-eval keeps caches and installed models."""

from __future__ import annotations

import fcntl
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .errors import RagEvalError
from .locks import SIDE_FILES

CACHE_ENV = "RAG_EVAL_CACHE"


def cache_dir() -> Path:
    """The cache folder: ``$RAG_EVAL_CACHE`` or the platform's user cache dir (created lazily by users)."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("rag-eval", appauthor=False))


#: The cached indexes ``compare``, ``judge`` and ``tune`` build (``eval.runner.index_path``):
#: ``indexes/<16 hex>/<32 hex>.sqlite``, each with its ``.build.json`` report and SQLite side files.
_CACHED_INDEX = re.compile(r"[0-9a-f]{32}\.sqlite")
_CORPUS_FOLDER = re.compile(r"[0-9a-f]{16}")


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


def clear_indexes(older_than_days: float | None = None) -> tuple[int, int, int]:
    """Remove cached indexes (they are rebuilt when next needed): all, or those not written or used for
    ``older_than_days``. An index a build holds (its lock) is left. Only files named as rag-eval names its cached
    indexes are removed, with their build report and SQLite side files; models and other caches are kept.
    Returns (indexes removed, bytes freed, indexes left because in use)."""
    if older_than_days is not None and not (isinstance(older_than_days, (int, float)) and 0 <= older_than_days < 1e6):
        raise RagEvalError(f"--older-than must be a number of days from 0, not {older_than_days!r}")
    folder = cache_dir() / "indexes"
    cutoff = time.time() - older_than_days * 86400 if older_than_days is not None else None
    removed = freed = busy = 0
    for path in list(_cached_indexes(folder)):
        companions = [Path(f"{path}{suffix}") for suffix in SIDE_FILES] + [path.with_suffix(".build.json")]
        present = [p for p in (path, *companions) if p.is_file()]
        if cutoff is not None and max(p.stat().st_mtime for p in present) > cutoff:
            continue
        try:
            handle = open(path, "rb")
        except OSError:
            continue
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                busy += 1
                continue
            size = sum(p.stat().st_size for p in present)
            for found in present:
                found.unlink(missing_ok=True)
        removed += 1
        freed += size
    for corpus in folder.iterdir() if folder.is_dir() else []:
        if corpus.is_dir() and _CORPUS_FOLDER.fullmatch(corpus.name):
            try:
                corpus.rmdir()  # only when empty
            except OSError:
                pass
    return removed, freed, busy
