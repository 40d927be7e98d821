"""Reading sections and files back, and verifying an index against its sources."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..builders.base import WHOLE_FILE_BYTES, SourceFile
from ..builders.lines import DEFAULT_MAX_BYTES as LINES_MAX_BYTES
from ..errors import CorpusError, IndexFileError, QueryError, RagEvalError, ReadError
from ..files.paths import hidden, path_under, resolved_root
from ..files.textio import decode_utf8, display_name, open_regular, read_bytes, shown, split_lines, text_argument
from ..index.columns import all_field_columns
from ..index.keys import path_from_key, split_target
from ..index.store import Index
from ..index.tokenize_pool import tokenize_chunks
from ..records import Chunk


def safe_path(root: Path, path: str) -> Path:
    """``root/path`` if it stays under ``root``: no ``..`` at all, no symlink out; ReadError otherwise."""
    return path_under(root, path, ReadError, refuse_dotdot=True)


def read(index: Index, target: str, *, root: str | Path | None = None) -> str:
    """``path#anchor``: the stored section (no file access). ``path`` or ``path#``: the whole file under the root.

    The target splits at its last ``#`` (see :mod:`rag_eval.index.keys`), so file names may contain ``#``.
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
        _count_argument(max_bytes, "max_bytes", 1)
    path, anchor = split_target(target)
    named = path_from_key(path)  # a key's path, ``my%20notes.md``, names ``my notes.md``
    if anchor:
        with index.reading():
            row = index.db.execute(
                "SELECT key, path, anchor, title, heading_path, category, sha256, text FROM chunks "
                "WHERE path IN (?, ?) AND anchor = ? ORDER BY path = ? DESC, id LIMIT 1",
                (path, named, anchor, path),
            ).fetchone()
            if row is None:
                known = [
                    r[0]
                    for r in index.db.execute("SELECT anchor FROM chunks WHERE path = ? ORDER BY id LIMIT 8", (path,))
                ]
                whole = index.db.execute(  # a file whose name holds the '#'
                    "SELECT 1 FROM chunks WHERE path IN (?, ?) LIMIT 1", (target, path_from_key(target))
                ).fetchone()
        if row is None:
            # a lines or passages index's key (``doc@r1:...#L3``, ``a#b``), or a line's place ``a#b.txt:3``
            chunk = read_chunk(index, target) or _line_at(index, target)
            if chunk is not None:
                return chunk.provenance()
            hint = (
                f"anchors in {path}: {', '.join(known)}" if known else "list sections with: rag-eval index list INDEX"
            )
            if whole is not None and not hidden(path_from_key(target)):
                hint += f"; to read the whole file {target}, add a trailing '#'"
            raise ReadError(f"no section {target!r} in this index", hint=hint)
        return dict(row)
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
    base = resolved_root(_root_of(index, root), ReadError)
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


def _root_of(index: Index, root: str | Path | None) -> Path:
    """The corpus root a read or verify uses: ``root`` (a ``str`` or ``os.PathLike``), else the recorded one."""
    if root is None:
        return index.source_root
    if not isinstance(root, (str, os.PathLike)):
        raise ReadError(f"root must be a str or os.PathLike, not {type(root).__name__}")
    return Path(root)


#: Largest count or offset taken: past any real index or file, and within SQLite's integers.
MAX_COUNT = 2**62


def _count_argument(value: object, what: str, minimum: int) -> int:
    """``value`` if it is an integer (not a bool) from ``minimum`` to MAX_COUNT, else one QueryError naming
    ``what``."""
    if type(value) is not int or not minimum <= value <= MAX_COUNT:
        raise QueryError(f"{what} must be an integer from {minimum} to {MAX_COUNT}, not {shown(value)}")
    return value


def read_chunk(index: Index, key: str) -> Chunk | None:
    """The stored chunk whose key is ``key`` (a line's source id, a section's ``path#anchor``, a passage id)."""
    text_argument(key, "key", ReadError)
    with index.reading():
        cursor = index.db.cursor()
        cursor.row_factory = None
        row = cursor.execute(f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE key = ?", (key,)).fetchone()
    return None if row is None else Chunk(*row)


#: The most :func:`verify_source` reads of a hit's file unless told otherwise: what a lines build accepts by
#: default (``lines:max_bytes``). A larger file is never read, so a hostile or huge file at a hit's path costs
#: nothing; the hit is not verified.
VERIFY_MAX_BYTES = LINES_MAX_BYTES


class _TooLarge(ReadError):
    """A source file over the size a verify reads: not read, so not verified."""


def build_limit(index: Index) -> int:
    """The largest source file ``index``'s build accepted, its builder's ``max_bytes``: a larger file cannot hold
    the bytes that were indexed. A builder that declares none gets the limit of the whole-file builders' option."""
    limit = index.builder.options.get("max_bytes")
    return limit if type(limit) is int and limit > 0 else int(WHOLE_FILE_BYTES.high)


def _oversized(exc: _TooLarge, index: Index) -> str:
    return f"{exc}, the most its build ({index.builder.system}) accepted: the file changed since the build"


def verify_chunk(index: Index, chunk: Chunk, root: str | Path | None = None) -> SourceStatus:
    """Whether the source behind one stored chunk still has the sha256 recorded at build time.

    ``ok``: the file's bytes are unchanged (and a line still reads the same, as seed 000's
    ``verify_source`` checks); ``stale``: they changed (a file now larger than the build accepted, its
    builder's ``max_bytes``, is stale without being read); ``missing``: the file is gone or cannot be read
    under the root (default: the recorded corpus root). Reads one file, never re-chunks or re-tokenizes.
    """
    base = _root_of(index, root)
    try:
        path = safe_path(base, chunk.path)
        sha, raw = _read_source(path, chunk.path, build_limit(index), whole=chunk.line is not None)
    except _TooLarge as exc:
        return SourceStatus(chunk.path, "stale", 1, _oversized(exc, index), chunk.key)
    except RagEvalError as exc:
        return SourceStatus(chunk.path, "missing", 1, str(exc), chunk.key)
    unchanged = sha == chunk.sha256
    detail = "" if unchanged else "the file changed since the build"
    if chunk.line is not None:
        same = _line_reads(raw, chunk.path, chunk.line, chunk.text)
        if not same or not unchanged:
            detail = "; ".join(filter(None, [detail, f"line {chunk.line} {'reads the same' if same else 'differs'}"]))
        unchanged = unchanged and same
    return SourceStatus(chunk.path, "ok" if unchanged else "stale", 1, detail, chunk.key)


def _read_source(path: Path, label: str, limit: int, *, whole: bool) -> tuple[str, bytes]:
    """The sha256 of the file at ``path`` and, with ``whole``, its bytes (else none: it is hashed a block at a
    time, as a corpus.jsonl of gigabytes needs). ReadError when it is missing or unreadable; ``_TooLarge``, without
    reading it, when it is over ``limit`` bytes (or grows past it while it is read)."""
    if whole:
        raw = read_bytes(path, ReadError, max_bytes=limit, label=label, too_large=_TooLarge)
        return hashlib.sha256(raw).hexdigest(), raw
    digest, total = hashlib.sha256(), 0
    with open_regular(path, ReadError, max_bytes=limit, label=label, too_large=_TooLarge) as handle:
        try:
            while block := handle.read(1 << 20):
                total += len(block)
                if total > limit:
                    raise _TooLarge(f"{display_name(label)}: more than {limit} bytes, over the limit")
                digest.update(block)
        except OSError as exc:
            raise ReadError(f"{display_name(label)}: cannot read: {exc.strerror or exc}") from None
    return digest.hexdigest(), b""


def verify_source(root: str | Path, hit: Mapping[str, Any], *, max_bytes: int = VERIFY_MAX_BYTES) -> bool:
    """True when the file behind a line hit still has the same sha256 and that line still reads the same.

    Never raises for a hit or its file: a missing file, an escape from the root, undecodable bytes and a file
    over ``max_bytes`` (default ``VERIFY_MAX_BYTES``, what a lines build accepts by default; give the
    ``lines:max_bytes`` an index was built with), which is not read, are all False: not verified.
    """
    _count_argument(max_bytes, "max_bytes", 1)
    try:
        path = safe_path(Path(root), str(hit["path"]))
        raw = read_bytes(path, ReadError, max_bytes=max_bytes)
        return hashlib.sha256(raw).hexdigest() == hit["sha256"] and _line_reads(
            raw, str(hit["path"]), hit["line"], hit["text"]
        )
    except (OSError, RagEvalError, KeyError, TypeError, ValueError):
        return False


def _line_reads(raw: bytes, path: str, line: object, text: object) -> bool:
    """Whether line ``line`` (1-based) of the file's bytes ``raw`` reads ``text``; bytes that are no longer
    UTF-8 have no line that reads the same."""
    try:
        lines = split_lines(decode_utf8(raw, path, ReadError))
    except ReadError:
        return False
    return type(line) is int and 1 <= line <= len(lines) and lines[line - 1] == text


#: Source states ``index verify`` reports.
STATES = ("ok", "stale", "missing", "new")


@dataclass(frozen=True)
class SourceStatus:
    """One source file (or, per chunk, one chunk) against the files on disk."""

    path: str
    status: str  # ok | stale | missing | new
    chunks: int = 0
    detail: str = ""
    key: str = ""


def verify_index(index: Index, root: str | Path | None = None, *, per_chunk: bool = False) -> list[SourceStatus]:
    """Check the index against its sources, one status per source file (``per_chunk``: per chunk).

    - ``missing``: the file is gone or unreadable; ``stale``: its bytes changed since the build, or the
      chunks or tokens stored for it are not what the recorded builder and tokenizer make of it now
      (a build with other options, a damaged or tampered index); ``new``: the source has a file the
      index does not hold; ``ok`` otherwise. A source that cannot be listed (a FIFO in a Markdown folder) is
      one ``missing`` entry of path ``.`` when no other entry explains it: its new files cannot be seen.

    The recorded builder re-reads the source listing (new files) and re-chunks every unchanged file;
    Python strategies re-tokenize its chunks, so this costs about as much as a build's tokenization.
    """
    base = _root_of(index, root)
    builder = index.builder
    with index.reading():
        files = [tuple(row) for row in index.db.execute("SELECT path, sha256, chunks FROM files ORDER BY rowid")]
        stored: dict[str, list[tuple]] = {path: [] for path, _, _ in files}
        columns = "" if index.tokenizer.native else ", " + ", ".join(all_field_columns(len(index.tokenizer.fields)))
        for row in index.db.execute(f"SELECT key, path, title, text{columns} FROM chunks ORDER BY id"):
            stored.setdefault(row["path"], []).append(tuple(row))
    try:
        _root, refs = builder.plan(base)
        listed: dict[str, Any] | None = {ref.path: ref for ref in refs}
        plan_error = ""
    except RagEvalError as exc:
        listed, plan_error = None, str(exc)
    statuses: list[SourceStatus] = []
    for path, sha, count in files:
        status, detail = _check_file(index, base, path, sha, stored[path], listed, plan_error)
        if per_chunk:
            statuses += [SourceStatus(path, status, 1, detail, row[0]) for row in stored[path]]
        else:
            statuses.append(SourceStatus(path, status, count, detail))
    for path in sorted(set(listed or {}) - set(stored)):
        statuses.append(SourceStatus(path, "new", 0, "in the source but not in the index; rebuild to add it"))
    if listed is None and all(s.status == "ok" for s in statuses):
        # Nothing else explains the failed listing (a file the manifest names is missing would be reported as
        # such): without it, files added to the source go unseen, and "all ok" would claim what was not checked.
        detail = f"the source cannot be listed now, so files added to it are not known: {plan_error}"
        statuses.append(SourceStatus(".", "missing", 0, detail))
    return statuses


def _check_file(
    index: Index, base: Path, path: str, sha: str, rows: list[tuple], listed: dict[str, Any] | None, plan_error: str
) -> tuple[str, str]:
    try:
        data = read_bytes(
            safe_path(base, path), ReadError, max_bytes=build_limit(index), label=path, too_large=_TooLarge
        )
    except _TooLarge as exc:
        return "stale", _oversized(exc, index)
    except RagEvalError as exc:
        return "missing", str(exc)
    if hashlib.sha256(data).hexdigest() != sha:
        return "stale", "the file changed since the build"
    if listed is None:  # e.g. another file of the manifest is missing: that one is reported as such
        return "ok", f"unchanged; its chunks were not re-checked because the source cannot be listed now: {plan_error}"
    if path not in listed:
        return "stale", "the source no longer lists this file"
    builder = index.builder
    try:
        chunks = builder.chunks(SourceFile(path, data, sha, listed[path].meta))
    except CorpusError as exc:
        return "stale", f"the builder cannot read it now: {exc}"
    made = [(c.key, c.title, c.text) for c in chunks]
    if made != [row[:1] + row[2:4] for row in rows]:
        return "stale", f"its chunks differ from what {builder.system} makes of it now; rebuild the index"
    tokenizer = index.tokenizer
    if tokenizer.native:
        return "ok", ""
    pairs = [(title if builder.index_title else "", text) for _key, title, text in made]
    for number, field in enumerate(tokenizer.fields):
        fresh, _report = tokenize_chunks(field.tokenizer, pairs, keep_offsets=False)
        stored = [row[4 + 2 * number : 6 + 2 * number] for row in rows]
        if [(title, body) for title, body, _offsets in fresh] != stored:
            return (
                "stale",
                f"its stored tokens differ from what {field.tokenizer.system} makes of its text; rebuild the index",
            )
    return "ok", ""


def list_entries(
    index: Index, *, category: str | None = None, offset: int = 0, limit: int | None = None
) -> list[dict[str, Any]]:
    """Documents (lines indexes) or sections (other builders), in index order, optionally one category;
    ``offset`` and ``limit`` give one page of them."""
    where, params = _category_filter(category)
    _count_argument(offset, "offset", 0)
    if limit is not None:
        _count_argument(limit, "limit", 0)
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
