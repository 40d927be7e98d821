"""An index checked against its sources: does each source file still have the bytes the build recorded, and do
its chunks and stored tokens still read as the recorded builder and tokenizer make them now (``index verify``,
after :mod:`rag_eval.index.integrity` has checked the file itself); one chunk's source for a citation (the MCP
server's ``verify``); and seed 000's ``verify_source`` of a line hit. Reads resolve sources under the recorded corpus
root the same way (:func:`corpus_root`, :func:`safe_path`)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..builders.base import WHOLE_FILE_BYTES, SourceFile
from ..builders.lines import DEFAULT_MAX_BYTES as LINES_MAX_BYTES
from ..errors import CorpusError, QueryError, RagEvalError, ReadError
from ..files.paths import path_under
from ..files.textio import decode_utf8, display_name, open_regular, read_bytes, shown, split_lines
from ..records import Chunk
from .columns import all_field_columns
from .store import Index
from .tokenize_pool import tokenize_chunks


def safe_path(root: Path, path: str) -> Path:
    """``root/path`` if it stays under ``root``: no ``..`` at all, no symlink out; ReadError otherwise."""
    return path_under(root, path, ReadError, refuse_dotdot=True)


def corpus_root(index: Index, root: str | Path | None) -> Path:
    """The corpus root a read or verify uses: ``root`` (a ``str`` or ``os.PathLike``), else the recorded one."""
    if root is None:
        return index.source_root
    if not isinstance(root, (str, os.PathLike)):
        raise ReadError(f"root must be a str or os.PathLike, not {type(root).__name__}")
    return Path(root)


#: Largest count or offset taken: past any real index or file, and within SQLite's integers.
MAX_COUNT = 2**62


def count_argument(value: object, what: str, minimum: int) -> int:
    """``value`` if it is an integer (not a bool) from ``minimum`` to MAX_COUNT, else one QueryError naming
    ``what``."""
    if type(value) is not int or not minimum <= value <= MAX_COUNT:
        raise QueryError(f"{what} must be an integer from {minimum} to {MAX_COUNT}, not {shown(value)}")
    return value


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
    base = corpus_root(index, root)
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
    count_argument(max_bytes, "max_bytes", 1)
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
    base = corpus_root(index, root)
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
