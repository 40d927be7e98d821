"""The build lock: an exclusive ``flock`` on the index file, held by the building process only."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import IndexFileError

#: Descriptors of the locks this process holds; forked workers close their copies.
_HELD: set[int] = set()
#: Shared locks on cached indexes a command uses (see :func:`hold_in_use`), by absolute path.
_IN_USE: dict[str, int] = {}


#: The files SQLite keeps beside a database: its write-ahead log, shared memory and rollback journal.
SIDE_FILES = ("-wal", "-shm", "-journal")


def remove_database(path: str | Path, *, main: bool = True) -> None:
    """Remove a database file rag-eval wrote and the side files SQLite keeps beside it (only those with
    ``main=False``)."""
    for suffix in ("", *SIDE_FILES) if main else SIDE_FILES:
        Path(f"{path}{suffix}").unlink(missing_ok=True)


@contextmanager
def build_lock(path: str, *, remove_on_error: bool = False) -> Iterator[None]:
    """Refuse a second builder on the same index: an exclusive ``flock`` on the index file itself.

    SQLite's own locks are POSIX record locks, which ``flock`` does not interact with on Linux, so
    readers are unaffected. The kernel drops the lock when the holder dies, so a killed build never
    leaves a stale lock; the descriptor is close-on-exec and forked workers close it
    (:func:`release_inherited_locks`), so only the builder itself holds it. A new index file that fails
    to build is removed (nothing existed before).
    """
    if path == ":memory:":
        yield
        return
    try:
        handle = open(path, "rb")  # Python opens files close-on-exec
    except OSError as exc:
        raise IndexFileError(f"{path}: cannot open the index file: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IndexFileError(f"{path}: another build is running on this index; try again when it ends") from None
        _HELD.add(handle.fileno())
        try:
            yield
        except BaseException:
            if remove_on_error:
                remove_database(path)
            raise
        finally:
            _HELD.discard(handle.fileno())
    finally:
        handle.close()


def release_inherited_locks() -> None:
    """In a forked child: close the inherited lock descriptors (the parent keeps its locks)."""
    for descriptor in [*_HELD, *_IN_USE.values()]:
        try:
            os.close(descriptor)
        except OSError:
            pass
    _HELD.clear()
    _IN_USE.clear()


def _same_file(descriptor: int, path: str) -> bool:
    try:
        held, there = os.fstat(descriptor), os.stat(path)
    except OSError:
        return False
    return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)


def hold_in_use(path: str | Path) -> bool:
    """Take a shared ``flock`` on the file now at ``path`` and keep it until the :func:`in_use_scope` that took
    it ends: ``cache clear`` (an exclusive non-blocking ``flock``) then leaves the file alone. False when there
    is no file, or one being removed or built holds the exclusive lock; the caller builds it anew."""
    key = os.path.abspath(path)
    descriptor = _IN_USE.get(key)
    if descriptor is not None:
        if _same_file(descriptor, key):
            return True
        os.close(_IN_USE.pop(key))  # the file was replaced since: the lock guards nothing
    try:
        descriptor = os.open(key, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        return False
    if not _same_file(descriptor, key):  # removed or replaced between the open and the lock
        os.close(descriptor)
        return False
    _IN_USE[key] = descriptor
    return True


@contextmanager
def exclusive(path: str | Path) -> Iterator[bool | None]:
    """An exclusive non-blocking ``flock`` on the file at ``path`` while the block runs: True when taken, False
    when a build or a command using it (:func:`hold_in_use`) holds a lock on it, None when it cannot be opened."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        yield None
        return
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(descriptor)


@contextmanager
def unused(path: str | Path) -> Iterator[bool]:
    """Whether no other process uses the file at ``path`` (none holds a lock on it): this process's shared lock on
    it is let go, and while the block runs an exclusive one keeps others from taking theirs, so the caller may
    remove the file. True too when there is no file."""
    key = os.path.abspath(path)
    held = _IN_USE.pop(key, None)
    if held is not None:
        os.close(held)
    with exclusive(key) as locked:
        yield locked is not False


@contextmanager
def in_use_scope() -> Iterator[None]:
    """Release, when the block ends, the shared locks :func:`hold_in_use` took inside it (a command's cached
    indexes: held while it runs, so a library caller's later ``cache clear`` is not refused for good)."""
    before = set(_IN_USE)
    try:
        yield
    finally:
        for key in set(_IN_USE) - before:
            os.close(_IN_USE.pop(key))
