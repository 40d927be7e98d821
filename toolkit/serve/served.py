"""The indexes one server answers from: each call reads the file as it is now, one snapshot per call.

A server runs for days while its indexes are rebuilt. A rebuild in place (``rag-eval index build`` on
the same file) is a new SQLite snapshot that :class:`rag_eval.index.store.Index` notices by itself, tokenizer
included; a file replaced or removed (``rm`` and build again, ``mv new.sqlite docs.sqlite``) is a new
inode, noticed here by a ``stat`` before every call, and reopened. A damaged or removed index is one
:class:`~rag_eval.errors.IndexFileError` for that call, and the next call tries again.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..builders.keys import split_target
from ..builders.lines import iso_date
from ..errors import CorpusError, IndexFileError, QueryError, RagEvalError, ReadError, ServeError
from ..files.paths import printable_path
from ..files.textio import shown
from ..index.store import Index
from ..index.verify import verify_chunk
from ..search.evidence import evidence
from ..search.read import count_entries, list_entries, read_chunk, read_entry
from ..search.request import SearchRequest
from ..search.searching import warm
from ..search.sql import Filters

#: Whole files a ``read`` returns are at most this large (an agent's context is the limit, not the disk); so is
#: the text of any ``read`` as it is sent (JSON escapes a control character in six bytes).
MAX_READ_BYTES = 1_000_000
#: A search hit's text is cut to this many characters in what the server returns (a lines index may hold a
#: line of megabytes; 20 of them made a 6 MB result); the hit says so, and ``read`` gives the whole text.
MAX_HIT_CHARS = 10_000
#: Entries one ``list`` call returns at most, and by default.
MAX_PAGE = 500
DEFAULT_PAGE = 100
#: Largest ``list`` offset: past any real index, and within SQLite's integers.
MAX_OFFSET = 10**12


def parse_as_of(value: str | None) -> str | None:
    """A fixed ``YYYY-MM-DD`` date, or None for "today in UTC at each call" (``today`` or nothing)."""
    if value is None or value == "today":
        return None
    try:
        return iso_date(value, "--as-of")
    except CorpusError as exc:
        raise ServeError(str(exc), hint="give a date as YYYY-MM-DD, or 'today'") from None


@dataclass
class _Slot:
    """One served index file: its open Index (None until first needed) and the file it was opened from."""

    name: str
    path: Path
    lock: threading.Lock = field(default_factory=threading.Lock)
    index: Index | None = None
    identity: tuple[int, int] | None = None
    #: The build whose postings were last read whole (:func:`rag_eval.search.searching.warm`).
    warmed: str | None = None

    def drop(self) -> None:
        if self.index is not None:
            self.index.close()
        self.index, self.identity, self.warmed = None, None, None


#: What ``root`` may be: one folder (one index served), folders by index name, or ``--root`` values as given
#: (``DIR`` or ``NAME=DIR`` each).
Roots = str | Path | Mapping[str, str | Path] | list[str | Path] | tuple[str | Path, ...] | None


class IndexSet:
    """Indexes served by name (the file stem), with the host's as-of date and each index's whole-file root."""

    def __init__(self, paths: Sequence[str | Path], *, as_of: str | None = None, root: Roots = None):
        if not paths:
            raise ServeError("name at least one index to serve")
        self._fixed_as_of = parse_as_of(as_of)
        self._slots: dict[str, _Slot] = {}
        for given in paths:
            path = Path(given)
            # Names and paths are sent to clients: text that cannot be encoded as UTF-8 would end the server.
            printable_path(str(path), ServeError)
            name = path.stem
            if name in self._slots:
                raise ServeError(
                    f"two indexes are named {name!r} ({self._slots[name].path} and {path})",
                    hint="tools name an index by its file stem: rename one file",
                )
            self._slots[name] = _Slot(name, path)
        self._roots = self._check_roots(root)
        try:
            for slot in self._slots.values():
                with self._open(slot.name) as index:  # reads the postings whole when small (_warm)
                    # The first call should not wait for a dictionary or the normalisation tables to load.
                    index.tokenizer.tokenize("预热 warm-up")
        except BaseException:
            self.close()
            raise

    def _check_roots(self, root: Roots) -> dict[str, Path]:
        """Each index's whole-file root, checked: a folder of each, by the index's name."""
        roots = {}
        for name, folder in self._named_roots(root).items():
            if name not in self._slots:
                raise ServeError(
                    f"--root {name}={folder}: no served index is named {name!r}; served: {', '.join(self._slots)}"
                )
            if not str(folder):  # Path("") is the working directory, whose every file was then readable
                hint = "give the corpus folder whole files are read from"
                raise ServeError(f"--root for index {name!r}: no folder given", hint=hint)
            roots[name] = Path(printable_path(str(folder), ServeError))
            if not roots[name].is_dir():
                raise ServeError(
                    f"--root {folder}: no such folder", hint="give the corpus folder whole files are read from"
                )
        return roots

    def _named_roots(self, root: Roots) -> Mapping[str, str | Path]:
        """``root`` by index name. ``--root`` values as given are one ``DIR``, or ``NAME=DIR`` for each index whose
        files may be read (a ``DIR`` whose text before an ``=`` is no served index's name is a folder). One folder
        serves one index only: an index's files are its own corpus's, and a folder shared by several indexes
        answered one index's reads from another's corpus."""
        if root is None or isinstance(root, Mapping):
            return root or {}
        if isinstance(root, (list, tuple)):
            named: dict[str, str | Path] = {}
            bare: list[str | Path] = []
            for value in root:
                name, equals, folder = str(value).partition("=")
                if equals and name in self._slots:
                    if name in named:
                        raise ServeError(f"--root {value}: index {name!r} is given a root twice")
                    named[name] = folder
                elif equals and name and os.sep not in name and not os.path.isdir(value):
                    # NAME=DIR with a NAME no index has (an index's name is a file stem: no separator), and no
                    # folder of that whole name either: the name is what is wrong, not a missing folder.
                    raise ServeError(
                        f"--root {value}: no served index is named {shown(name)}; served: {', '.join(self._slots)}",
                        hint="NAME is an index file's stem",
                    )
                else:
                    bare.append(value)
            if bare and (named or len(bare) > 1):
                raise ServeError(
                    f"--root {bare[0]}: give one folder for one index, or NAME=DIR for each index",
                    hint=f"served: {', '.join(self._slots)}",
                )
            if not bare:
                return named
            root = bare[0]
        if len(self._slots) > 1:
            raise ServeError(
                f"--root {root}: several indexes are served ({', '.join(self._slots)}); name the index each "
                "folder belongs to",
                hint=f"--root {next(iter(self._slots))}=DIR, once per index whose files may be read",
            )
        return {next(iter(self._slots)): root}

    def root_of(self, name: str) -> Path | None:
        """The folder whole files of index ``name`` are read from, or None (whole-file reads refused)."""
        return self._roots.get(name)

    @property
    def whole_file_reads(self) -> bool:
        """Whether any served index allows whole-file reads."""
        return bool(self._roots)

    @property
    def names(self) -> list[str]:
        """The served indexes' names, in the order given."""
        return list(self._slots)

    def as_of(self) -> str:
        """The host's as-of date: the fixed ``--as-of``, else today in UTC (read at each call)."""
        return self._fixed_as_of or datetime.now(UTC).date().isoformat()

    def _slot(self, name: str | None) -> _Slot:
        if name is None:
            if len(self._slots) == 1:
                return next(iter(self._slots.values()))
            raise QueryError(f"name an index: one of {', '.join(self._slots)}")
        slot = self._slots.get(name) if isinstance(name, str) else None
        if slot is None:
            raise QueryError(f"unknown index {shown(name)}; choose from: {', '.join(self._slots)}")
        return slot

    @contextmanager
    def _open(self, name: str | None) -> Iterator[Index]:
        """The index as the file is now, held for this call only; errors drop it so the next call reopens."""
        slot = self._slot(name)
        with slot.lock:
            try:
                info = os.stat(slot.path)
            except OSError as exc:
                slot.drop()
                raise IndexFileError(
                    f"index {slot.name!r}: {slot.path}: {exc.strerror}",
                    hint="build it with: rag-eval index build",
                ) from None
            identity = (info.st_dev, info.st_ino)
            if slot.index is None or slot.identity != identity:
                slot.drop()
                slot.index, slot.identity = Index.open(slot.path, check_same_thread=False), identity
            try:
                self._warm(slot, slot.index)
                yield slot.index
            except IndexFileError:
                slot.drop()
                raise

    @staticmethod
    def _warm(slot: _Slot, index: Index) -> None:
        """Read a build's postings whole once (when small): at start, and again after the file was rebuilt in
        place (a sync), so that its questions are answered warm like the first build's."""
        with index.reading():  # notices a rebuild: the meta, and with it the generation, is read again
            if index.generation is None or index.generation != slot.warmed:
                warm(index)
                slot.warmed = index.generation

    def search(
        self,
        query: str,
        *,
        index: str | None = None,
        mode: str | None = None,
        limit: int | None = None,
        category: str | None = None,
        path_prefix: str | None = None,
    ) -> dict[str, Any]:
        """Seed 000's evidence result from one index, as of the host's date (never the caller's): the tool's
        arguments as one :class:`~rag_eval.search.request.SearchRequest`."""
        if isinstance(query, str) and not query.strip():
            raise QueryError("query is empty")
        with self._open(index) as opened:
            filters = Filters(as_of=self.as_of(), category=category, path_prefix=path_prefix)
            found = evidence(opened, SearchRequest(query, mode=mode, limit=limit, filters=filters))
        for hit in found["hits"]:
            text = hit.get("text")
            if isinstance(text, str) and len(text) > MAX_HIT_CHARS:
                hit["text"] = text[:MAX_HIT_CHARS]
                hit["text_truncated"] = True
                hit["text_chars"] = len(text)
        return found

    def read(self, key: str, *, index: str | None = None) -> dict[str, Any]:
        """One stored chunk by key (or a section by its path as named) with its provenance; by path, a whole file
        the index was built from (:func:`rag_eval.search.read.served_file`), only when the index has a root."""
        if isinstance(key, str) and not key:
            raise ReadError("key is empty", hint="keys come from search hits and list")
        with self._open(index) as opened:
            name = self._slot(index).name
            root = self.root_of(name)
            chunk = read_chunk(opened, key)
            if chunk is not None:
                entry = chunk.provenance()
            elif split_target(key)[1]:
                try:  # a section by its path as named (``my notes.md#intro``, whose key is ``my%20notes.md#intro``)
                    entry = read_entry(opened, key)
                except ReadError:
                    raise ReadError(
                        f"no chunk {key!r} in index {name!r}", hint="keys come from search hits and list"
                    ) from None
            elif root is None:
                raise ReadError(
                    f"no chunk {key!r} in index {name!r}",
                    hint="keys come from search hits and list; whole files are read only when the server runs "
                    "with --root DIR",
                )
            else:
                entry = read_entry(opened, key, root=root, max_bytes=MAX_READ_BYTES)
        sent = len(json.dumps(entry["text"], ensure_ascii=False).encode())
        if sent > MAX_READ_BYTES:
            raise ReadError(
                f"{key[:200]!r} is {sent:,} bytes as sent, over the {MAX_READ_BYTES:,} one read returns",
                hint="search for the passage you need within it",
            )
        return {"kind": "document_source", "index": name, **entry, "action_authority": False}

    def verify(self, key: str, *, index: str | None = None) -> dict[str, Any]:
        """Whether a cited chunk's source file still has its recorded sha256: ok, stale or missing."""
        with self._open(index) as opened:
            chunk = read_chunk(opened, key)
            if chunk is None:
                raise ReadError(
                    f"no chunk {key!r} in index {Path(opened.path).stem!r}",
                    hint="the index may have been rebuilt since the key was cited: search again",
                )
            status = verify_chunk(opened, chunk, self.root_of(self._slot(index).name))
            return {
                "kind": "source_check",
                "index": Path(opened.path).stem,
                "key": chunk.key,
                "path": chunk.path,
                "line": chunk.line,
                "sha256": chunk.sha256,
                "status": status.status,
                "detail": status.detail,
                "checked_at": datetime.now(UTC).isoformat(timespec="seconds"),
            }

    def entries(
        self, *, index: str | None = None, category: str | None = None, offset: int = 0, limit: int = DEFAULT_PAGE
    ) -> dict[str, Any]:
        """One page of an index's documents (lines) or sections, from one snapshot."""
        if type(offset) is not int or not 0 <= offset <= MAX_OFFSET:
            raise QueryError(f"offset must be a whole number from 0 to {MAX_OFFSET}, not {shown(offset)}")
        if type(limit) is not int or not 1 <= limit <= MAX_PAGE:
            raise QueryError(f"limit must be an integer from 1 to {MAX_PAGE}, not {shown(limit)}")
        with self._open(index) as opened, opened.reading():
            total = count_entries(opened, category=category)
            page = list_entries(opened, category=category, offset=offset, limit=limit)
            following = offset + len(page)
            return {
                "kind": f"{opened.builder.list_by}_list",
                "index": Path(opened.path).stem,
                "category": category,
                "total": total,
                "offset": offset,
                "entries": page,
                "next_offset": following if following < total else None,
            }

    def describe(self) -> dict[str, Any]:
        """Every served index: builder, tokenizer, chunk count, build time, search defaults, as-of date."""
        as_of = self.as_of()
        described = []
        for name in self._slots:
            try:
                described.append(self._describe(name, as_of))
            except RagEvalError as exc:  # one removed or damaged index must not hide the others
                described.append({"name": name, "file": str(self._slots[name].path), "error": str(exc)})
        return {"kind": "index_list", "as_of": as_of, "whole_file_reads": self.whole_file_reads, "indexes": described}

    def _describe(self, name: str, as_of: str) -> dict[str, Any]:
        with self._open(name) as opened, opened.reading():
            defaults = opened.defaults
            return {
                "name": name,
                "file": str(self._slots[name].path),
                "builder": opened.meta["builder"],
                "tokenizer": opened.tokenizer.spec,
                "chunks": opened.chunks,
                "files": int(opened.meta.get("files") or 0),
                "built_at": opened.meta.get("built_at"),
                "engine": opened.meta.get("engine") or "fts5",
                "lists": opened.builder.list_by + "s",
                "mode": defaults.mode,
                "default_limit": defaults.default_limit,
                "max_results": defaults.max_results,
                "max_query_chars": defaults.max_query_chars,
                "as_of": as_of,
                "whole_file_reads": self.root_of(name) is not None,
            }

    def limits(self) -> dict[str, int]:
        """The largest ``limit`` and query length any served index accepts (tool schemas state them)."""
        results, chars = 1, 1
        for name in self._slots:
            with self._open(name) as opened:
                results = max(results, opened.defaults.max_results)
                chars = max(chars, opened.defaults.max_query_chars)
        return {"max_results": results, "max_query_chars": chars}

    def close(self) -> None:
        """Close every open index."""
        for slot in self._slots.values():
            with slot.lock:
                slot.drop()
