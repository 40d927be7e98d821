"""Writing a user's files safely: rag-eval replaces only what it wrote itself, and every write is atomic.

Every command that writes a file or a folder goes through here. A file or folder is written next to its
target under a unique temporary name and moved into place with one ``rename``, so an interrupted or
failed command leaves the target exactly as it was. An existing target is replaced only when ``owned``
says rag-eval wrote it (a report folder with rag-eval's ``report.json``, a baseline with rag-eval's
schema, ...); anything else is an :class:`OutputError` and nothing is touched.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import RagEvalError


class OutputError(RagEvalError):
    """An output path rag-eval refuses to write: it exists and rag-eval did not write it, or it is unusable."""


#: ``owned(path) -> None`` when rag-eval wrote ``path`` and may replace it, else the reason it may not.
Ownership = Callable[[Path], "str | None"]


def umask() -> int:
    """The process's umask (read by setting it and setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def checked_target(target: str | Path, *, what: str) -> Path:
    """``target`` as an absolute path with a name, never the working folder or one of its parents."""
    raw = str(target)
    if not raw or "\x00" in raw:
        raise OutputError(f"{raw!r}: invalid {what} path")
    path = Path(os.path.abspath(raw))
    cwd = Path(os.getcwd())
    if path == cwd or path in cwd.parents or not path.name:
        raise OutputError(
            f"{raw}: the {what} cannot be the current folder or one of its parents",
            hint="name a new file or folder, e.g. out/report",
        )
    # Refused now rather than after the work: a parent that is a file (or a link to one) cannot hold it.
    parent = path.parent
    while not (parent.exists() or parent.is_symlink()) and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{raw}: cannot create it: {parent} is not a folder")
    return path


def _refuse(path: Path, reason: str, what: str) -> OutputError:
    return OutputError(
        f"{path}: refusing to replace it: {reason}; rag-eval only replaces a {what} it wrote",
        hint="choose a new path, or move the existing one away",
    )


@contextmanager
def publish_folder(target: str | Path, *, owned: Ownership, what: str) -> Iterator[Path]:
    """Yield an empty staging folder; when the block ends without error, it replaces ``target`` in one rename.

    ``target`` must not exist, or ``owned(target)`` must return None. A failure (or Ctrl-C) inside the
    block removes the staging folder and leaves ``target`` untouched. The previous folder is moved aside
    under a unique name and deleted only after the new one is in place.
    """
    path = checked_target(target, what=what)
    _check_folder(path, owned, what)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent))
    try:
        staging.chmod(0o777 & ~umask())  # mkdtemp makes it private; the folder gets what mkdir would give
        yield staging
        _check_folder(path, owned, what)  # again: the block may have run for minutes
        if path.exists() or path.is_symlink():
            trash = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            path.rename(trash / "previous")
            staging.rename(path)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            staging.rename(path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _check_folder(path: Path, owned: Ownership, what: str) -> None:
    if path.is_symlink():
        raise _refuse(path, "it is a symbolic link", what)
    if not path.exists():
        return
    if not path.is_dir():
        raise _refuse(path, "it is not a folder", what)
    reason = owned(path)
    if reason is not None:
        raise _refuse(path, reason, what)


def check_new_target(target: str | Path, *, what: str) -> Path:
    """``target`` checked as :func:`new_folder` will check it: a path that does not exist yet."""
    path = checked_target(target, what=what)
    if path.exists() or path.is_symlink():
        raise OutputError(
            f"{path}: it already exists; rag-eval writes a {what} only to a new path",
            hint="choose a new path, or move the existing one away",
        )
    return path


@contextmanager
def new_folder(target: str | Path, *, what: str) -> Iterator[Path]:
    """Like :func:`publish_folder` for a folder that must not exist yet (export, convert, synth)."""
    check_new_target(target, what=what)

    def taken(_path: Path) -> str:
        return "it appeared while it was being written"

    with publish_folder(target, owned=taken, what=what) as staging:
        yield staging


def check_file_target(target: str | Path, *, owned: Ownership | None, what: str) -> Path:
    """``target`` as :func:`write_text_atomic` will accept it, checked now (before minutes of work): a new
    path, or a regular file that ``owned`` allows replacing (``owned=None``: none)."""
    path = checked_target(target, what=what)
    if path.is_symlink() or path.exists():
        if not path.is_file() or path.is_symlink():
            raise _refuse(path, "it is not a regular file", what)
        reason = "it already exists" if owned is None else owned(path)
        if reason is not None:
            raise _refuse(path, reason, what)
    return path


def write_text_atomic(target: str | Path, text: str, *, owned: Ownership | None, what: str) -> Path:
    """Write ``text`` (UTF-8) to ``target`` through a temporary file and one rename.

    An existing ``target`` is replaced only when ``owned`` allows it (``owned=None``: never).
    """
    path = check_file_target(target, owned=owned, what=what)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        os.fchmod(handle, 0o666 & ~umask())  # mkstemp makes it private; the file gets what open() would give
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def only_names(path: Path, allowed: Callable[[Path], bool], what: str = "") -> str | None:
    """None when every entry under folder ``path`` passes ``allowed`` (the names a command writes), else the first
    one that does not, for a refusal message; ``what`` names the kind of folder that command writes."""
    for entry in sorted(path.rglob("*")):
        if not allowed(entry.relative_to(path)):
            kind = f"a {what}" if what else "this command's output"
            return f"it holds {entry.relative_to(path)}, which is not part of {kind}"
    return None
