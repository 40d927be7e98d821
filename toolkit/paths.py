"""The one path guard: a relative path must stay under its root once symlinks are resolved."""

from __future__ import annotations

from pathlib import Path

from .errors import RagEvalError


def path_under(root: Path, relative: str, error: type[RagEvalError], *, refuse_dotdot: bool = False) -> Path:
    """``root/relative`` resolved (symlinks followed), or ``error`` naming the path.

    Refused: empty paths, NUL bytes, absolute and drive paths, backslashes (Windows separators), and
    anything that resolves outside ``root`` (``..``, a symlink out); with ``refuse_dotdot`` any ``..``
    component at all, before touching the file system. Percent-encoding is never decoded.
    """
    if not relative or "\x00" in relative:
        raise error(f"{relative!r}: invalid path")
    if relative.startswith("/") or "\\" in relative or (len(relative) > 1 and relative[1] == ":"):
        raise error(f"{relative}: relative paths with / separators only")
    root = root.resolve()
    if refuse_dotdot and ".." in Path(relative).parts:
        raise error(f"{relative}: resolves outside the corpus root {root}")
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise error(f"{relative}: resolves outside the corpus root {root}")
    return path
