"""Writing a user's files safely: rag-eval replaces only what it wrote itself, and every write is atomic.

Every command that writes a file or a folder goes through here. A file or folder is written next to its
target under a unique temporary name and moved into place with one ``rename``, so an interrupted or
failed command leaves the target exactly as it was. An existing target is replaced only when ``owned``
says rag-eval wrote it (a report folder with rag-eval's ``report.json``, a baseline with rag-eval's
schema, ...); anything else is an :class:`OutputError` and nothing is touched.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import RagEvalError
from .renames import exchange, rename_no_replace, sync_folder, sync_tree


class OutputError(RagEvalError):
    """An output path rag-eval refuses to write: it exists and rag-eval did not write it, or it is unusable."""


#: ``owned(path) -> None`` when rag-eval wrote ``path`` and may replace it, else the reason it may not.
Ownership = Callable[[Path], "str | None"]


def umask() -> int:
    """The process's umask (read by setting it and setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def recorded_name(value: str | Path) -> str:
    """A path or argument as an output records it: its bytes that are not UTF-8 (which Python passes on as lone
    surrogates, and no UTF-8 file can hold) shown as ``\\xff``, everything else unchanged."""
    return str(value).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def inside(output: str | Path, source: str | Path) -> bool:
    """Whether ``output`` is the folder ``source`` or lies inside it (``source`` being a folder): a report written
    there would be read as part of that corpus the next time it is indexed."""
    if not Path(source).is_dir():
        return False
    root, folder = Path(source).resolve(), Path(os.path.abspath(output)).resolve()
    return folder == root or root in folder.parents


def source_folder(source: str | Path) -> Path | None:
    """The folder a corpus is read from: ``source`` itself when it is a folder, the folder holding it when it is
    a file (as an index records its source root: ``read`` and ``verify`` resolve paths there), None when
    neither exists."""
    path = Path(source)
    if path.is_dir():
        return path
    if path.exists():
        return path.parent
    return None


def refuse_inside_source(target: str | Path, sources: Iterable[str | Path | None], *, what: str) -> None:
    """OutputError when ``target`` is, or lies inside, the folder of one of ``sources`` (the corpora the command
    reads: :func:`source_folder` of each; None is skipped), once links are followed. Every command that writes
    calls it before any work: a file written into a corpus is part of it the next time that corpus is indexed
    (a report's Markdown becomes sections, a judgments file changes the pool it was made for)."""
    raw = os.fspath(target) if isinstance(target, (str, os.PathLike)) else None
    if not isinstance(raw, str) or not raw or "\x00" in raw:
        return  # not a path: the writer's own check (checked_target) names what is wrong with it
    for source in sources:
        folder = source_folder(source) if source is not None else None
        if folder is None or not inside(target, folder):
            continue
        shown = recorded_name(os.fspath(folder) or ".")
        beside = os.path.join(os.path.dirname(os.path.abspath(folder)), "out", os.path.basename(os.path.abspath(raw)))
        relative = os.path.relpath(beside)  # out/x beside the source, unless that is far from here
        example = beside if relative.startswith(os.path.join(os.pardir, os.pardir)) else relative
        raise OutputError(
            f"{recorded_name(raw)}: the {what} cannot go inside the source folder {shown}: rag-eval writes nothing "
            "into a corpus it reads (the next build would index it as a document)",
            hint=f"write it outside {shown}, e.g. {recorded_name(example)}",
        )


#: The files SQLite keeps beside a database ``X``: ``X-wal`` and ``X-shm`` (WAL mode), ``X-journal`` (rollback
#: journal). An output under such a name would be taken for one: opening the database, SQLite replays a hot journal
#: into it or deletes the file.
SQLITE_SIDE_SUFFIXES = ("-wal", "-shm", "-journal")
#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"


def sqlite_side_file_of(path: str | Path) -> tuple[Path, str] | None:
    """The SQLite database ``path`` is named as a side file of, with the suffix (``X`` and ``-wal`` for
    ``X-wal``), when ``X`` is one (an empty file counts: SQLite opens it as an empty database); else None."""
    path = Path(path)
    for suffix in SQLITE_SIDE_SUFFIXES:
        if path.name.endswith(suffix) and path.name != suffix:
            database = path.with_name(path.name[: -len(suffix)])
            if _is_sqlite(database):
                return database, suffix
    return None


def _is_sqlite(path: Path) -> bool:
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):  # a FIFO is never opened: that would block
            return False
        if info.st_size == 0:
            return True
        with open(path, "rb") as handle:
            return handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except (OSError, ValueError):
        return False


def refuse_inputs(target: str | Path, inputs: Iterable[tuple[str, str | Path]], *, what: str) -> None:
    """OutputError when ``target`` is one of a command's ``inputs`` (``(what it is, path)`` pairs), however it is
    spelled (``./x``, a symbolic or hard link): the output would replace what the command reads."""
    for kind, given in inputs:
        try:
            same = os.path.samefile(target, given)
        except (OSError, TypeError, ValueError):  # one is missing (a new output is no input), or not a path
            same = False
        if same:
            raise OutputError(
                f"{target}: the {what} cannot be written over the {kind} it reads ({given})",
                hint=f"choose a new path for the {what}",
            )


def checked_target(target: str | Path, *, what: str, file: bool = False) -> Path:
    """``target`` as an absolute path with a name, never the working folder or one of its parents, nor a name
    SQLite takes for a side file of an existing database (``X-wal``, ``X-shm``, ``X-journal``). ``file``: the
    output is a file, so a path that ends in a separator (``out.run/``, which names a folder) is refused too."""
    if not isinstance(target, (str, os.PathLike)):  # str(None) would name a file "None"
        raise OutputError(f"the {what} must be a path (str or os.PathLike), not {target!r:.80}")
    raw = os.fspath(target)
    if not isinstance(raw, str):
        raise OutputError(f"the {what} must be a path of text, not {raw!r:.80}")
    if not raw or "\x00" in raw:
        raise OutputError(f"{raw!r}: invalid {what} path")
    if raw == "-":  # the usual name of standard output: written as asked, it would be a file "-" in the working folder
        raise OutputError(
            f"-: the {what} cannot be written to standard output; name a path",
            hint=f"a file or folder named '-' is written as {os.path.join(os.getcwd(), '-')}",
        )
    if file:
        ending = next((end for end in ("/.", os.sep, os.altsep) if end and raw.endswith(end)), None)
        if ending is not None:
            # pathlib and abspath drop the separator: written as given, "out.run/" would be a file "out.run".
            raise OutputError(
                f"{raw}: the {what} is a file, but this path ends in {ending!r}, which names a folder",
                hint=f"name the file without the trailing {ending!r}",
            )
    path = Path(os.path.abspath(raw))
    cwd = Path(os.getcwd())
    if path == cwd or path in cwd.parents or not path.name:
        raise OutputError(
            f"{raw}: the {what} cannot be the current folder or one of its parents",
            hint="name a new file or folder, e.g. out/report",
        )
    if os.path.basename(raw.rstrip(os.sep)) == "..":
        # "a/../.." names a folder only once "a" exists; normalised it would be another path than the one written.
        raise OutputError(
            f"{raw}: invalid {what} path: it ends in '..'", hint="name a new file or folder, e.g. out/report"
        )
    # Refused now rather than after the work: a parent that is a file (or a link to one) cannot hold it.
    parent = path.parent
    while not (parent.exists() or parent.is_symlink()) and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{raw}: cannot create it: {parent} is not a folder")
    side = sqlite_side_file_of(path)
    if side is not None:
        database, suffix = side
        raise OutputError(
            f"{raw}: refusing to write the {what} there: SQLite would take it for the {suffix} file of the "
            f"database {database} (and replay, rewrite or delete it)",
            hint=f"choose another name for the {what}",
        )
    return path


def _refuse(path: Path, reason: str, what: str, owned: Ownership | None) -> OutputError:
    # Says which rule refused: some outputs are replaced when rag-eval wrote them, others (owned=None) never are.
    rule = (
        f"rag-eval only replaces a {what} it wrote"
        if owned is not None
        else f"rag-eval never replaces a {what}: it writes one only to a new path"
    )
    return OutputError(
        f"{path}: refusing to replace it: {reason}; {rule}",
        hint="choose a new path, or move the existing one away",
    )


#: What a write leaves beside its target while it runs: ``.NAME.XXXXXXXX.partial`` (the file or folder being
#: written) and ``.NAME.XXXXXXXX.old`` (the previous folder, moved aside for a moment). The writing process holds
#: an exclusive ``flock`` on each; one nobody holds was left by a killed command and is cleared by the next write.
_LEFT_BEHIND = re.compile(r"\.(?P<name>.+)\.[A-Za-z0-9_]{8}\.(?P<kind>partial|old)")


def _missing_parents(path: str | Path) -> list[Path]:
    """``path``'s parent folders that do not exist yet, deepest first: what writing it will create, and what
    :func:`remove_made` removes again when the write fails."""
    missing = []
    parent = Path(path).parent
    while not os.path.lexists(parent) and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    return missing


def make_parents(path: Path) -> list[Path]:
    """Create ``path``'s missing parent folders; the ones created, deepest first (for :func:`remove_made`).
    When one cannot be made, those already made are removed again before the error goes on."""
    missing = _missing_parents(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except BaseException:
        remove_made(missing)
        raise
    return missing


def remove_made(folders: list[Path]) -> None:
    """Remove the folders a failed write created (see :func:`make_parents`), deepest first, while empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def _hold(path: Path) -> int:
    """An exclusive ``flock`` on ``path`` (a file or a folder), held while the returned descriptor is open."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _release(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def clear_left_behind(target: str | Path) -> None:
    """Remove what writes of ``target`` that were killed (SIGKILL, a power cut) left beside it: staging files and
    folders no running command holds. A previous folder moved aside just before the kill is put back when
    ``target`` is missing, so the kill leaves the target as it was."""
    path = Path(target)
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return
    found = [e for e in entries if (m := _LEFT_BEHIND.fullmatch(e.name)) is not None and m["name"] == path.name]
    # The previous folder first: put back before the staged new one is removed.
    for entry in sorted(found, key=lambda e: not e.name.endswith(".old")):
        left = Path(entry.path)
        try:
            info = os.lstat(left)
            if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
                continue
            fd = _hold(left)
        except OSError:
            continue  # gone, or held by a command still writing
        try:
            if entry.name.endswith(".old"):
                previous = left / "previous"
                if not os.path.lexists(path) and os.path.lexists(previous):
                    previous.rename(path)
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(left, ignore_errors=True)
            else:
                left.unlink(missing_ok=True)
        except OSError:
            pass
        finally:
            _release(fd)


@contextmanager
def publish_folder(target: str | Path, *, owned: Ownership | None, what: str) -> Iterator[Path]:
    """Yield an empty staging folder; when the block ends without error, it replaces ``target`` in one rename.

    ``target`` must not exist, or ``owned(target)`` must return None (``owned=None``: it must not exist). A
    failure (or Ctrl-C) inside the block removes the staging folder (and the parent folders it created) and
    leaves ``target`` untouched. The previous folder is moved aside under a unique name and deleted only after
    the new one is in place. What a write killed outright (SIGKILL) left is cleared by the next write of the
    same target (:func:`clear_left_behind`).
    """
    path = checked_target(target, what=what)
    clear_left_behind(path)  # first: a previous folder a killed write had moved aside is back before it is checked
    _check_folder(path, owned, what)
    made = make_parents(path)
    held = -1
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent))
    except BaseException:
        remove_made(made)
        raise
    try:
        held = _hold(staging)  # a later write of the same target leaves it alone while this one runs
        staging.chmod(0o777 & ~umask())  # mkdtemp makes it private; the folder gets what mkdir would give
        yield staging
        sync_tree(staging)  # a full disk the file system reports only now fails here, before anything moves
        _put_folder_in_place(staging, path, owned, what)
        sync_folder(path.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        remove_made(made)  # a failed or interrupted command leaves no folder it created either
        raise
    finally:
        if held >= 0:
            _release(held)


def _put_folder_in_place(staging: Path, path: Path, owned: Ownership | None, what: str) -> None:
    """Move the complete ``staging`` folder to ``path``: never over anything that appeared there meanwhile unless
    ``owned`` allows it, and an existing folder is swapped with the new one in one step, so ``path`` is never
    missing (a kill between two renames used to leave only the previous folder, hidden, beside it)."""
    _check_folder(path, owned, what)  # again: the block may have run for minutes
    for _attempt in range(3):
        if rename_no_replace(staging, path):
            return
        # Something is there: ours to replace only if it passes the check again (the block may have run for minutes).
        _check_folder(path, owned, what)
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            continue  # removed meanwhile: a new folder again
        staging.chmod(mode)  # a folder the user made private stays private
        if exchange(staging, path):
            shutil.rmtree(staging, ignore_errors=True)  # the previous folder, now under the staging name
            return
        _replace_folder_in_two_steps(staging, path)
        return
    raise OutputError(f"{path}: it keeps changing while rag-eval writes it; try again")


def _replace_folder_in_two_steps(staging: Path, path: Path) -> None:
    """Where the system cannot swap two names at once: the previous folder is moved aside under a name
    :func:`clear_left_behind` recognises, the new one moved in, then the previous one removed."""
    trash = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
    trash_held = _hold(trash)
    try:
        path.rename(trash / "previous")
        try:
            staging.rename(path)
        except BaseException:
            (trash / "previous").rename(path)  # the previous folder goes back under its name
            raise
        shutil.rmtree(trash, ignore_errors=True)
    finally:
        _release(trash_held)


def _check_folder(path: Path, owned: Ownership | None, what: str) -> None:
    if path.is_symlink():
        raise _refuse(path, "it is a symbolic link", what, owned)
    if not path.exists():
        return
    if not path.is_dir():
        raise _refuse(path, "it is not a folder", what, owned)
    reason = "it already exists" if owned is None else owned(path)
    if reason is not None:
        raise _refuse(path, reason, what, owned)


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
    with publish_folder(target, owned=None, what=what) as staging:
        yield staging


def check_file_target(target: str | Path, *, owned: Ownership | None, what: str) -> Path:
    """``target`` as :func:`write_text_atomic` will accept it, checked now (before minutes of work): a new
    path, or a regular file that ``owned`` allows replacing (``owned=None``: none)."""
    path = checked_target(target, what=what, file=True)
    if path.is_symlink() or path.exists():
        if not path.is_file() or path.is_symlink():
            raise _refuse(path, "it is not a regular file", what, owned)
        reason = "it already exists" if owned is None else owned(path)
        if reason is not None:
            raise _refuse(path, reason, what, owned)
    return path


class StagedFile:
    """A file written in full beside its target and not yet in place: :meth:`commit` moves it there in one
    rename, :meth:`discard` removes it. Lets a command write several outputs and put them in place only once
    every one of them was written (a failure in any leaves every target as it was)."""

    def __init__(
        self, path: Path, temporary: Path, held: int, owned: Ownership | None, what: str, made: list[Path]
    ) -> None:
        self.path, self._temporary, self._held, self._owned, self._what = path, temporary, held, owned, what
        self._made = made  # the parent folders staging created, removed again when the file is discarded

    def commit(self) -> Path:
        """Put the file in place (an existing target is checked again: it may have changed meanwhile)."""
        try:
            check_file_target(self.path, owned=self._owned, what=self._what)
            # A new path: never over a file that appeared since the check (another run's, or the user's).
            if not rename_no_replace(self._temporary, self.path):
                check_file_target(self.path, owned=self._owned, what=self._what)
                # A file the user made private stays private.
                os.chmod(self._temporary, stat.S_IMODE(os.stat(self.path).st_mode))
                os.replace(self._temporary, self.path)
            sync_folder(self.path.parent)
        except BaseException:
            self.discard()
            raise
        self._close()
        return self.path

    def discard(self) -> None:
        """Remove the staged file (and the folders made for it); the target is left as it was."""
        Path(self._temporary).unlink(missing_ok=True)
        self._close()
        remove_made(self._made)

    def _close(self) -> None:
        if self._held >= 0:
            _release(self._held)
            self._held = -1


def stage_text(target: str | Path, text: str, *, owned: Ownership | None, what: str) -> StagedFile:
    """Write ``text`` (UTF-8) beside ``target`` (checked as :func:`write_text_atomic` checks it) and return it
    staged, not yet in place."""
    clear_left_behind(checked_target(target, what=what, file=True))
    path = check_file_target(target, owned=owned, what=what)
    made = make_parents(path)
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    except BaseException:
        remove_made(made)
        raise
    held = -1
    try:
        try:
            held = _hold(Path(temporary))  # a later write of the same target leaves it alone while this one runs
            os.fchmod(handle, 0o666 & ~umask())  # mkstemp makes it private; the file gets what open() would give
        except BaseException:
            os.close(handle)
            raise
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        if held >= 0:
            _release(held)
        remove_made(made)
        raise
    return StagedFile(path, Path(temporary), held, owned, what, made)


def write_text_atomic(target: str | Path, text: str, *, owned: Ownership | None, what: str) -> Path:
    """Write ``text`` (UTF-8) to ``target`` through a temporary file and one rename.

    An existing ``target`` is replaced only when ``owned`` allows it (``owned=None``: never).
    """
    return stage_text(target, text, owned=owned, what=what).commit()


def only_names(path: Path, allowed: Callable[[Path], bool], what: str = "") -> str | None:
    """None when every entry under folder ``path`` passes ``allowed`` (the names a command writes), else the first
    one that does not, for a refusal message; ``what`` names the kind of folder that command writes."""
    for entry in sorted(path.rglob("*")):
        if not allowed(entry.relative_to(path)):
            kind = f"a {what}" if what else "this command's output"
            return f"it holds {entry.relative_to(path)}, which is not part of {kind}"
    return None
