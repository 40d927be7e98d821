"""Chunk keys of the Markdown sections builder, built and read back in one place.

A section's key is ``path#anchor``; the parts of a section split for size are ``path#anchor~2``,
``path#anchor~3`` ... An anchor never contains ``#`` (slugs keep only word characters and ``-``), so a key
splits unambiguously at its *last* ``#``, even when the file name contains one (``c#/intro.md#setup``).
Targets given to ``read`` follow the same rule; a whole file whose name contains ``#`` is read with a
trailing ``#`` (``notes#1.md#``), since an empty anchor means the whole file.

A key is an id other tools read: a TREC run or qrels line separates its columns by whitespace. So the path
in a key has its whitespace and control characters percent-encoded (their UTF-8 bytes), as a Markdown link
to the file writes them: ``my notes.md`` gives ``my%20notes.md#intro``, an ideographic space ``%E3%80%80``.
Nothing else is encoded (a ``%`` stays as it is), so every key that was already a valid TREC id keeps its
form; the path itself is stored as it is, and ``read`` takes either form.
"""

from __future__ import annotations

import re
from urllib.parse import quote

#: What a TREC column cannot hold (``textio.fits_trec_column``): whitespace (``str.isspace``, which ``\s``
#: matches in a str pattern) and C0, DEL and C1 control characters.
_UNFIT = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")


def key_path(path: str) -> str:
    """``path`` as a key holds it: whitespace and control characters percent-encoded, nothing else."""
    return _UNFIT.sub(lambda found: quote(found.group(), safe=""), path)


_ESCAPES = re.compile(r"(?:%[0-9A-Fa-f]{2})+")


def path_from_key(path: str) -> str:
    """The path a key's path stands for: the escapes :func:`key_path` writes (whitespace and control
    characters) decoded, every other ``%XX`` left as it is, so ``%2e%2e`` never becomes ``..``."""

    def back(found: re.Match[str]) -> str:
        escapes = found.group()
        data = bytes.fromhex(escapes.replace("%", ""))
        out, at = [], 0
        while at < len(data):
            for size in (1, 2, 3, 4):
                try:
                    char = data[at : at + size].decode("utf-8")
                except UnicodeDecodeError:
                    continue
                out.append(char if _UNFIT.fullmatch(char) else escapes[3 * at : 3 * (at + size)])
                at += size
                break
            else:
                out.append(escapes[3 * at : 3 * at + 3])
                at += 1
        return "".join(out)

    return _ESCAPES.sub(back, path)


def section_key(path: str, anchor: str, part: int = 1) -> str:
    """``path#anchor``, or ``path#anchor~N`` for the N-th part (N > 1) of a split section; the path as
    :func:`key_path` writes it."""
    path = key_path(path)
    return f"{path}#{anchor}" if part == 1 else f"{path}#{anchor}~{part}"


def split_target(target: str) -> tuple[str, str]:
    """``(path, anchor)`` of ``path#anchor`` split at the last ``#``; the anchor is empty for a whole file."""
    path, hash_sign, anchor = target.rpartition("#")
    return (path, anchor) if hash_sign else (target, "")


def unit_of(key: str) -> str:
    """The unit qrels judge a chunk as: a split section's part ``path#anchor~2`` counts as ``path#anchor``."""
    head, tilde, tail = key.rpartition("~")
    return head if tilde and tail.isdigit() and "#" in head else key
