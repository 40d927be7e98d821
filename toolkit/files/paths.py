"""The one path guard: a relative path must stay under its root once symlinks are resolved."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from ..errors import RagEvalError
from .textio import control_character, display_name


def printable_path(relative: str, error: type[RagEvalError]) -> str:
    """``relative`` unchanged, or ``error`` when it is not valid UTF-8 or holds a control character.

    Such names break every line-oriented output (search results, run files, ``index list``), so source
    files are refused by name: C0 controls (newline, tab, ...), DEL, C1 controls, and bytes that are not
    UTF-8 (Python hands them over as surrogate escapes). Messages show the name with ``repr``.
    """
    if any("\ud800" <= char <= "\udfff" for char in relative):
        try:
            shown = repr(os.fsencode(relative))
        except UnicodeError:  # a surrogate no file system would have produced
            shown = repr(relative)
        raise error(f"{shown}: the file name is not valid UTF-8; rename the file")
    char = control_character(relative)
    if char is not None:
        raise error(f"{relative!r}: the file name contains a control character (U+{ord(char):04X}); rename the file")
    return relative


def path_under(root: Path, relative: str, error: type[RagEvalError], *, refuse_dotdot: bool = False) -> Path:
    """``root/relative`` resolved (symlinks followed), or ``error`` naming the path.

    Refused: empty paths, NUL bytes, absolute and drive paths, backslashes (Windows separators), and
    anything that resolves outside ``root`` (``..``, a symlink out), and symbolic link loops; with
    ``refuse_dotdot`` any ``..`` component at all, before touching the file system. Percent-encoding is
    never decoded.
    """
    if not relative or "\x00" in relative:
        raise error(f"{relative!r}: invalid path")
    if relative.startswith("/") or "\\" in relative or (len(relative) > 1 and relative[1] == ":"):
        raise error(f"{display_name(relative)}: relative paths with / separators only")
    shown = display_name(relative)
    if refuse_dotdot and ".." in Path(relative).parts:
        raise error(f"{shown}: a '..' component is refused (it may lead outside the corpus root)")
    root = _resolved(root, error)
    path = _resolved(root / relative, error, shown)
    if not path.is_relative_to(root):
        raise error(f"{shown}: resolves outside the corpus root")  # not named: an agent reads this (serve)
    return path


def hidden(relative: str) -> bool:
    """Whether ``relative`` names a dotfile or something under a dot-folder (``.env``, ``.git/config``), or holds
    a ``.`` or ``..`` component: what a whole-file read never serves."""
    return any(part.startswith(".") for part in relative.split("/"))


def resolved_root(root: Path, error: type[RagEvalError]) -> Path:
    """``root`` with its symlinks resolved, as :func:`path_under` compares against it; ``error`` for a loop."""
    return _resolved(root, error)


def _resolved(path: Path, error: type[RagEvalError], shown: str | None = None) -> Path:
    shown = shown if shown is not None else display_name(str(path))
    # Nothing is raised inside the try: some error classes (ReadError) are OSErrors and would be caught.
    try:
        return path.resolve()
    except RuntimeError:  # Python 3.11's resolve() reports a symlink loop as RuntimeError
        raise error(f"{shown}: is a symbolic link loop") from None
    except OSError as exc:
        raise error(f"{shown}: cannot resolve the path: {exc.strerror or exc}") from None


def sqlite_uri(path: str | Path, *parameters: str) -> str:
    """SQLite's ``file:`` URI for the file at ``path`` (made absolute; ``?``, ``#``, ``%`` and spaces in it
    escaped, as SQLite reads them) with ``parameters`` such as ``mode=ro``."""
    uri = "file:" + quote(os.path.abspath(path))
    return f"{uri}?{'&'.join(parameters)}" if parameters else uri


def _file_identity(name: str | Path) -> tuple[object, ...]:
    """What tells two path arguments apart: the file they open (device and inode), else the normalised path."""
    try:
        info = os.stat(name)
    except (OSError, ValueError):
        return ("path", os.path.abspath(name))
    return ("file", info.st_dev, info.st_ino)


def given_twice(paths: Sequence[str | Path]) -> tuple[str, str] | None:
    """The first two of ``paths`` that name one file, however spelled (``../a.run`` and ``/abs/a.run``, a symbolic
    or hard link to it), as given; None when every path names its own file. An input read twice would count
    twice."""
    first: dict[tuple[object, ...], str] = {}
    repeated: dict[tuple[object, ...], str] = {}
    for path in paths:
        identity = _file_identity(path)
        if identity in first:
            repeated.setdefault(identity, str(path))
        else:
            first[identity] = str(path)
    for identity, name in first.items():  # the first file given twice, in the order given
        if identity in repeated:
            return name, repeated[identity]
    return None
