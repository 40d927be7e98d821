"""The build lock: an exclusive ``flock`` on the index file, held by the building process only."""

from __future__ import annotations

import fcntl
import os
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import IndexFileError

#: Descriptors of the locks this process holds; forked workers close their copies.
_HELD: set[int] = set()
#: Shared locks on cached indexes a command uses (see :func:`hold_in_use`), by absolute path.
_IN_USE: dict[str, int] = {}


#: How often :func:`key_lock` creates its lock file again when it was removed before the lock was taken.
_LOCK_FILE_ATTEMPTS = 100

#: The files SQLite keeps beside a database: its write-ahead log, shared memory and rollback journal.
SIDE_FILES = ("-wal", "-shm", "-journal")


#: How SQLite's side files begin (its file format): a write-ahead log's magic (either checksum byte order), a
#: rollback journal's header, and the shared-memory WAL index's version number, 3007000, in native byte order.
_SIDE_FILE_STARTS = {
    "-wal": (bytes.fromhex("377f0682"), bytes.fromhex("377f0683")),
    "-shm": ((3007000).to_bytes(4, sys.byteorder),),
    "-journal": (bytes.fromhex("d9d505f920a163d7"),),
}


def remove_database(path: str | Path, *, main: bool = True) -> None:
    """Remove a database file rag-eval wrote and the side files SQLite keeps beside it (only those with
    ``main=False``)."""
    for suffix in ("", *SIDE_FILES) if main else SIDE_FILES:
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _side_file_kind(path: Path, suffix: str) -> str | None:
    """``sqlite`` for a regular file that begins as SQLite writes that side file, ``empty`` for an empty one,
    None when nothing is there, else ``other`` (a user's file, a folder, a FIFO, a link)."""
    try:
        info = os.lstat(path)
    except OSError:  # none there, or its folder is not one: the build itself then says what is wrong
        return None
    if not stat.S_ISREG(info.st_mode):
        return "other"
    if info.st_size == 0:
        return "empty"
    try:
        with open(path, "rb") as handle:
            start = handle.read(8)
    except OSError:
        return "other"
    return "sqlite" if any(start.startswith(magic) for magic in _SIDE_FILE_STARTS[suffix]) else "other"


def check_side_files(path: str | Path) -> dict[str, str | None]:
    """Refuse a new database at ``path`` when a file named as one of its side files is not SQLite's: SQLite would
    read it as that database's log or journal, and overwrite it. Returns what each side file is (see
    :func:`_side_file_kind`), by suffix."""
    kinds = {suffix: _side_file_kind(Path(f"{path}{suffix}"), suffix) for suffix in SIDE_FILES}
    for suffix, kind in kinds.items():
        if kind == "other":
            raise IndexFileError(
                f"{path}{suffix}: refusing to create the index {path}: this file is not SQLite's, and SQLite would "
                f"take it for the index's {suffix[1:]} file and overwrite it",
                hint="move that file away, or choose another index path",
            )
    return kinds


def remove_left_side_files(path: str | Path) -> None:
    """Before a new database appears at ``path``: remove the side files an earlier database there left (a file
    deleted while a reader had it open leaves its log behind, which SQLite would replay onto the new one), only
    those that begin as SQLite writes them; any other file under such a name is refused
    (:func:`check_side_files`)."""
    for suffix, kind in check_side_files(path).items():
        if kind == "sqlite":
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
    try:  # never blocks: a FIFO put there opens at once, and is no index
        descriptor = os.open(key, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError
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
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
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


@contextmanager
def key_lock(path: str | Path, *, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """One command at a time past this point for ``path`` (a lock file, created here): an exclusive ``flock``,
    waited for when another command holds it (``on_wait`` is called first). The holder removes the file as it
    lets go; a waiter that then locks the removed file sees it is no longer at ``path`` and locks the new one.
    A holder that is killed leaves the file unlocked, and the next one takes it."""
    for _attempt in range(_LOCK_FILE_ATTEMPTS):
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
        except FileNotFoundError:  # its folder is new, or was removed as empty (``cache clear``) meanwhile
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise IndexFileError(f"{Path(path).parent}: cannot create the folder: {exc.strerror or exc}") from None
            continue
        except OSError as exc:
            raise IndexFileError(f"{path}: cannot create the lock file: {exc.strerror or exc}") from None
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise IndexFileError(f"{path}: not a regular file; rag-eval locks its cached index builds there")
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait()
                fcntl.flock(descriptor, fcntl.LOCK_EX)
        except BaseException:
            os.close(descriptor)
            raise
        if _same_file(descriptor, str(path)):
            break
        os.close(descriptor)  # removed by the holder it waited for: lock the file now at the path
    else:
        raise IndexFileError(
            f"{path}: the lock file was removed {_LOCK_FILE_ATTEMPTS} times as it was taken; run again"
        )
    _HELD.add(descriptor)
    try:
        yield
    finally:
        _HELD.discard(descriptor)
        try:
            os.unlink(path)
        except OSError:
            pass
        os.close(descriptor)
