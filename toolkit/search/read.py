"""Reading an index back: a stored section, line or passage by key, a whole source file it was built from, and
its entries listed by page (verifying it against its sources is :mod:`rag_eval.index.verify`)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from ..builders.keys import path_from_key, split_target
from ..errors import IndexFileError, ReadError
from ..files.paths import hidden, resolved_root
from ..files.textio import decode_utf8, display_name, read_bytes, shown, text_argument
from ..index.store import Index
from ..index.verify import corpus_root, count_argument, safe_path
from ..records import Chunk


def read(index: Index, target: str, *, root: str | Path | None = None) -> str:
    """``path#anchor``: the stored section (no file access). ``path`` or ``path#``: the whole file under the root.

    The target splits at its last ``#`` (see :mod:`rag_eval.builders.keys`), so file names may contain ``#``.
    """
    return read_entry(index, target, root=root)["text"]


def read_entry(
    index: Index, target: str, *, root: str | Path | None = None, max_bytes: int | None = None
) -> dict[str, Any]:
    """What ``read`` returns, with its provenance: key, path, anchor, title, heading path, category, sha256.

    ``max_bytes`` refuses a whole file larger than that (the MCP server's bound on what one call returns).
    """
    text_argument(target, "target", ReadError)
    if max_bytes is not None:
        count_argument(max_bytes, "max_bytes", 1)
    path, anchor = split_target(target)
    named = path_from_key(path)  # a key's path, ``my%20notes.md``, names ``my notes.md``
    if anchor:
        return _section(index, target, path, named, anchor)
    chunk = read_chunk(index, target) or _line_at(index, target)  # a passage id is a key without '#'
    if chunk is not None:
        return chunk.provenance()
    path, candidate = served_file(index, path, root)
    label = display_name(path)
    try:
        data = read_bytes(candidate, ReadError, label=label, max_bytes=max_bytes)
    except ReadError as exc:
        if "file not found" in str(exc):
            raise ReadError(f"{shown(path)}: the index's source file is gone from the corpus root") from None
        raise
    text = decode_utf8(data, label, ReadError)
    return {
        "key": path,
        "path": path,
        "anchor": "",
        "title": "",
        "heading_path": "",
        "category": "",
        "sha256": hashlib.sha256(data).hexdigest(),
        "text": text,
    }


def _section(index: Index, target: str, path: str, named: str, anchor: str) -> dict[str, Any]:
    """The stored section ``path#anchor`` (``named``: the file its key form names), or the chunk whose key or
    place ``target`` is; else one ReadError naming the anchors the file has."""
    with index.reading():
        row = index.db.execute(
            "SELECT key, path, anchor, title, heading_path, category, sha256, text FROM chunks "
            "WHERE path IN (?, ?) AND anchor = ? ORDER BY path = ? DESC, id LIMIT 1",
            (path, named, anchor, path),
        ).fetchone()
        if row is None:
            known = [
                r[0] for r in index.db.execute("SELECT anchor FROM chunks WHERE path = ? ORDER BY id LIMIT 8", (path,))
            ]
            whole = index.db.execute(  # a file whose name holds the '#'
                "SELECT 1 FROM chunks WHERE path IN (?, ?) LIMIT 1", (target, path_from_key(target))
            ).fetchone()
    if row is None:
        # a lines or passages index's key (``doc@r1:...#L3``, ``a#b``), or a line's place ``a#b.txt:3``
        chunk = read_chunk(index, target) or _line_at(index, target)
        if chunk is not None:
            return chunk.provenance()
        hint = f"anchors in {path}: {', '.join(known)}" if known else "list sections with: rag-eval index list INDEX"
        if whole is not None and not hidden(path_from_key(target)):
            hint += f"; to read the whole file {target}, add a trailing '#'"
        raise ReadError(f"no section {target!r} in this index", hint=hint)
    return dict(row)


_CHUNK_COLUMNS = ", ".join(Chunk._fields)
_PATH_LINE = re.compile(r"(.+):([1-9][0-9]{0,9})")


def _line_at(index: Index, target: str) -> Chunk | None:
    """The chunk that starts at ``path:N``, as plain ``search`` output shows a line's place, or None."""
    found = _PATH_LINE.fullmatch(target)
    if found is None:
        return None
    with index.reading():
        cursor = index.db.cursor()
        cursor.row_factory = None
        row = cursor.execute(
            f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE path = ? AND line = ? ORDER BY id LIMIT 1",
            (found.group(1), int(found.group(2))),
        ).fetchone()
    return None if row is None else Chunk(*row)


def served_file(index: Index, path: str, root: str | Path | None = None) -> tuple[str, Path]:
    """The source a whole-file read of ``path`` (or of the file its key form names, ``my%20notes.md``) opens:
    ``(path as the index holds it, file under the root)``.

    Only a file the index was built from (its ``files`` table) is served, never a dotfile or a file under a
    dot-folder, and, checked now, only where it still resolves inside the root to a file the index holds (a
    link swapped in that leads elsewhere is refused). Anything else is one ReadError that names the path as
    given and is decided before the disk is looked at, so it never tells whether such a file exists.
    """
    named = path_from_key(path)
    with index.reading():
        held = {row[0] for row in index.db.execute("SELECT path FROM files WHERE path IN (?, ?)", (path, named))}
    chosen = path if path in held else named if named in held else None
    if chosen is None or hidden(chosen):
        raise _not_served(path)
    base = resolved_root(corpus_root(index, root), ReadError)
    candidate = safe_path(base, chosen)  # still inside the root once links are followed (its own message)
    try:
        actual = candidate.relative_to(base).as_posix()
    except ValueError:  # the root itself was swapped for a link meanwhile
        raise _not_served(path) from None
    if actual != chosen:  # reached through a link: the file it leads to must be one the index serves too
        with index.reading():
            linked = index.db.execute("SELECT 1 FROM files WHERE path = ?", (actual,)).fetchone()
        if linked is None or hidden(actual):
            raise _not_served(path)
    return chosen, candidate


def _not_served(path: str) -> ReadError:
    """The one refusal of a whole-file read the index does not serve (the same words whether or not it exists)."""
    return ReadError(
        f"no file {shown(path)} is served from this index",
        hint="whole files are read only for the files the index was built from, never a dotfile or a file "
        "under a dot-folder; see them with: rag-eval index list INDEX",
    )


def read_chunk(index: Index, key: str) -> Chunk | None:
    """The stored chunk whose key is ``key`` (a line's source id, a section's ``path#anchor``, a passage id)."""
    text_argument(key, "key", ReadError)
    with index.reading():
        cursor = index.db.cursor()
        cursor.row_factory = None
        row = cursor.execute(f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE key = ?", (key,)).fetchone()
    return None if row is None else Chunk(*row)


def list_entries(
    index: Index, *, category: str | None = None, offset: int = 0, limit: int | None = None
) -> list[dict[str, Any]]:
    """Documents (lines indexes) or sections (other builders), in index order, optionally one category;
    ``offset`` and ``limit`` give one page of them."""
    where, params = _category_filter(category)
    count_argument(offset, "offset", 0)
    if limit is not None:
        count_argument(limit, "limit", 0)
    # SQLite reads a negative LIMIT as "no limit": an offset alone skips entries and keeps the rest.
    page = f" LIMIT {-1 if limit is None else limit} OFFSET {offset}" if limit is not None or offset else ""
    with index.reading():
        if index.builder.list_by == "document":
            sql = (
                f"SELECT doc, revision, status, expires, path, category, title, count(*) AS lines, min(id) AS first "
                f"FROM chunks {where} GROUP BY doc ORDER BY first{page}"
            )
            return _whole(
                index, [{k: row[k] for k in row.keys() if k != "first"} for row in index.db.execute(sql, params)]
            )
        sql = (
            "SELECT key, path, anchor, title, heading_path, category, length(text) AS chars "
            f"FROM chunks {where} ORDER BY id{page}"
        )
        return _whole(index, [dict(row) for row in index.db.execute(sql, params)])


#: Columns of ``chunks`` that a build never leaves NULL (``store.SCHEMA``); ``expires`` may be.
_MAY_BE_NULL = frozenset({"expires"})


def _whole(index: Index, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``entries``, refusing one with NULL where a build never writes it: a damaged (or tampered) page read back,
    which would otherwise fail later as a Python error."""
    for entry in entries:
        lost = next((k for k, v in entry.items() if v is None and k not in _MAY_BE_NULL), None)
        if lost is not None:
            raise IndexFileError(
                f"{index.path}: damaged index: an entry's {lost} is missing",
                hint="rebuild it with: rag-eval index build",
            )
    return entries


def count_entries(index: Index, *, category: str | None = None) -> int:
    """How many entries :func:`list_entries` lists (documents or sections)."""
    where, params = _category_filter(category)
    counted = "DISTINCT doc" if index.builder.list_by == "document" else "*"
    with index.reading():
        return int(index.db.execute(f"SELECT count({counted}) FROM chunks {where}", params).fetchone()[0])


def unknown_category_hint(index: Index, category: str | None) -> str | None:
    """The hint a search that found nothing prints when no chunk of ``index`` has ``category`` (a typo, or
    another index's category), else None."""
    if not category or count_entries(index, category=category) > 0:
        return None
    return f"no chunk has category {shown(category)}; see the categories with: rag-eval index list INDEX"


def _category_filter(category: str | None) -> tuple[str, list[str]]:
    """The WHERE clause and parameters of :func:`list_entries`' and :func:`count_entries`' category."""
    if category is None:
        return "", []
    text_argument(category, "category", ReadError)
    return "WHERE category = ?", [category]
