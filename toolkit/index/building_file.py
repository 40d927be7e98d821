"""A new index's hidden building file beside it: created, bulk-loaded, synced, then published under its name."""

from __future__ import annotations

import fcntl
import os
import re
import sqlite3
import stat
import tempfile
from pathlib import Path

from ..errors import IndexFileError
from ..files.outputs import umask
from .locks import remove_database, remove_left_side_files

#: The hidden file a new index is built in, beside it: ``.NAME.XXXXXXXX.building``.
BUILDING_SUFFIX = ".building"


def new_building_file(path: str) -> str:
    """A new empty hidden file beside ``path`` for its first build, with the mode ``open`` would give."""
    target = Path(path)
    handle, building = tempfile.mkstemp(prefix=f".{target.name}.", suffix=BUILDING_SUFFIX, dir=target.parent)
    try:
        os.fchmod(handle, 0o666 & ~umask())
    finally:
        os.close(handle)
    return building


def remove_stale_builds(path: str) -> None:
    """Remove what first builds of ``path`` that were killed left beside it: their hidden files that no build
    holds locked (a running build holds its own)."""
    target = Path(path)
    # Exactly the names new_building_file gives (mkstemp's eight characters): nothing else is a build's.
    ours = re.compile(rf"\.{re.escape(target.name)}\.[a-z0-9_]{{8}}{re.escape(BUILDING_SUFFIX)}")
    try:
        names = [entry.name for entry in os.scandir(target.parent) if ours.fullmatch(entry.name)]
    except OSError:
        return
    for name in names:
        found = target.parent / name
        try:
            descriptor = os.open(found, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                continue  # never a build's: mkstemp makes regular files
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # another build of the same new index is running
            remove_database(found)
        except OSError:
            continue
        finally:
            os.close(descriptor)


def publish(building: str, path: str) -> None:
    """Give the complete index in ``building`` its name ``path``, never replacing a file that appeared there
    meanwhile (another build's): a hard link fails if ``path`` exists."""
    if Path(f"{building}-wal").exists() and Path(f"{building}-wal").stat().st_size > 0:
        raise IndexFileError(f"{path}: the new index was not fully written (its log is not empty); build again")
    if not os.path.lexists(path):
        # An index deleted while a reader had it open leaves its -wal and -shm behind: SQLite would replay that old
        # log onto the new file under the same name. They belong to no file any more.
        remove_left_side_files(path)
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


def bulk_load(db: sqlite3.Connection) -> None:
    """Write a first build's hidden file without a log on disk and without syncing each step.

    Nothing else can see the file while it is built, and a build that fails or is killed leaves it to be
    removed, so the WAL (every page written twice, each commit and checkpoint synced) buys nothing there; the
    rollback journal stays in memory for a failed statement. The file is synced once, before it gets its name
    (:func:`flush_to_disk`). On ``cmrc2018_dev_trial`` with jieba this took a third off the write phase
    (reports/builds.md, "A new index bulk-loaded").
    """
    db.execute("PRAGMA journal_mode = MEMORY")
    db.execute("PRAGMA synchronous = OFF")


def flush_to_disk(building: str) -> None:
    """Sync a bulk-loaded index file before it is published, so that the name never points at pages the
    system has not yet written."""
    handle = os.open(building, os.O_RDONLY)
    try:
        os.fsync(handle)
    except OSError as exc:
        raise IndexFileError(f"{building}: cannot write the new index to disk ({exc.strerror or exc})") from None
    finally:
        os.close(handle)
