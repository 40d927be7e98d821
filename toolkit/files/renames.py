"""Renames that never lose what is under the target name, and flushes that make a write fail before it is
published rather than after: Linux's ``renameat2`` (no-replace, exchange), with fallbacks elsewhere."""

from __future__ import annotations

import errno
import functools
import os
import stat
from collections.abc import Callable
from pathlib import Path

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    """Linux's ``renameat2`` (atomic no-replace and exchange renames), or None where the C library has none."""
    if os.uname().sysname != "Linux":
        return None
    import ctypes

    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def _rename2(source: Path, target: Path, flags: int) -> bool:
    """``renameat2(source, target, flags)``: True when done, False when this system or file system cannot."""
    function = _renameat2()
    if function is None:
        return False
    import ctypes

    if function(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(source), None, str(target))


def rename_no_replace(source: Path, target: Path) -> bool:
    """Give ``source`` the name ``target`` if nothing has it: True when done, False when something has it."""
    try:
        if _rename2(source, target, _RENAME_NOREPLACE):
            return True
    except FileExistsError:
        return False
    if source.is_dir() and not source.is_symlink():
        if os.path.lexists(target):
            return False
        try:
            os.rename(source, target)  # only an empty folder could be replaced, in the moment since the check
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                return False
            raise
        return True
    try:
        os.link(source, target)  # fails if ``target`` exists
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links: a rename, checked first
        if os.path.lexists(target):
            return False
        os.rename(source, target)
        return True
    os.unlink(source)
    return True


def exchange(staging: Path, path: Path) -> bool:
    """Swap ``staging`` and ``path`` in one step: True when done, False when this system cannot."""
    return _rename2(staging, path, _RENAME_EXCHANGE)


def sync_tree(folder: Path) -> None:
    """Flush every file under ``folder`` to disk, then the folders: a write a full disk fails fails now."""
    folders = []
    for root, _dirs, files in os.walk(folder):
        folders.append(root)
        for name in files:
            full = os.path.join(root, name)
            if not stat.S_ISREG(os.lstat(full).st_mode):
                continue
            fd = os.open(full, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for root in reversed(folders):
        fd = os.open(root, os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.EROFS):  # a file system that cannot flush a folder
                raise
        finally:
            os.close(fd)


def sync_folder(folder: Path) -> None:
    """Flush a folder's entries (a rename just done in it) to disk, where the file system allows it. The rename
    is done by then: a failure here cannot be taken back, and does not make the command fail."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
