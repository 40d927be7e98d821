"""Chunk keys of the Markdown sections builder, built and read back in one place.

A section's key is ``path#anchor``; the parts of a section split for size are ``path#anchor~2``,
``path#anchor~3`` ... An anchor never contains ``#`` (slugs keep only word characters and ``-``), so a key
splits unambiguously at its *last* ``#``, even when the file name contains one (``c#/intro.md#setup``).
Targets given to ``read`` follow the same rule; a whole file whose name contains ``#`` is read with a
trailing ``#`` (``notes#1.md#``), since an empty anchor means the whole file.
"""

from __future__ import annotations


def section_key(path: str, anchor: str, part: int = 1) -> str:
    """``path#anchor``, or ``path#anchor~N`` for the N-th part (N > 1) of a split section."""
    return f"{path}#{anchor}" if part == 1 else f"{path}#{anchor}~{part}"


def split_target(target: str) -> tuple[str, str]:
    """``(path, anchor)`` of ``path#anchor`` split at the last ``#``; the anchor is empty for a whole file."""
    path, hash_sign, anchor = target.rpartition("#")
    return (path, anchor) if hash_sign else (target, "")


def unit_of(key: str) -> str:
    """The unit qrels judge a chunk as: a split section's part ``path#anchor~2`` counts as ``path#anchor``."""
    head, tilde, tail = key.rpartition("~")
    return head if tilde and tail.isdigit() and "#" in head else key
