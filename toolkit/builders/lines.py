"""``lines``: seed 000's evidence index. A manifest names documents; every non-empty line is a chunk."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import CorpusError, MissingSourceError
from ..files.textio import display_name, read_json, refuse_unknown_keys, split_lines
from ..records import Chunk
from ..spec import Option, OptionSet
from .base import WHOLE_FILE_BYTES, Builder, FileRef, QueryDefaults, SourceFile, locate

__all__ = ["DEFAULT_MAX_BYTES", "LinesBuilder", "MANIFEST_KEYS", "MAX_MANIFEST_BYTES", "iso_date", "split_lines"]

_ID = re.compile(r"[a-z0-9-]{1,40}\Z")
_STATUSES = ("current", "archived")
#: Largest source file a lines build accepts unless its ``max_bytes`` option says otherwise; also the most
#: ``rag_eval.index.verify.verify_source`` reads of a hit's file by default.
DEFAULT_MAX_BYTES = 1_000_000
#: Largest manifest.json accepted: about 200,000 entries, far more than a hand-kept evidence corpus.
MAX_MANIFEST_BYTES = 50_000_000
#: The keys of a manifest entry (seed 000's). Any other is refused: a misspelt ``expire`` would leave a line that
#: never expires.
MANIFEST_KEYS = ("doc_id", "revision", "status", "expires", "path")


def iso_date(value: Any, what: str = "date") -> str:
    """A strict ``YYYY-MM-DD`` date (it must round-trip; ``2026-1-1`` and ``20261001`` are refused)."""
    try:
        if isinstance(value, str) and date.fromisoformat(value).isoformat() == value:
            return value
    except ValueError:
        pass
    raise CorpusError(f"{what} {value!r}: use YYYY-MM-DD")


class LinesBuilder(Builder):
    """manifest.json lists ``{doc_id, revision, status, expires, path}``; one chunk per non-empty line.

    Source ids are ``doc@revision:sha256#Lline``: renaming a file keeps them, editing it changes them.
    Validation is all-or-nothing before anything is written: ids ``[a-z0-9-]{1,40}`` without duplicates,
    relative ``.txt`` paths that resolve inside the corpus root (no ``..``, no symlink escapes), each file
    named by one entry only (``a.txt`` and ``./a.txt`` are the same file), a size limit, UTF-8 only (one
    leading BOM ignored), status ``current`` or ``archived``, ``expires`` strictly ``YYYY-MM-DD`` or null, and no
    key but those five (``MANIFEST_KEYS``).
    """

    name = "lines"
    summary = "line-level evidence from a manifest (seed 000): doc@rev:sha256#Lline provenance, status, expiry"
    option_set = OptionSet(
        (Option("max_bytes", "largest source file accepted, in bytes", DEFAULT_MAX_BYTES, WHOLE_FILE_BYTES),)
    )
    index_title = False
    list_by = "document"
    recognise_order = 10
    recognised_layout = "a lines manifest.json"
    unit_words = "non-empty lines of the manifest's documents"

    @classmethod
    def recognises(cls, source: Path) -> bool:
        return (source / "manifest.json").is_file() if source.is_dir() else source.name == "manifest.json"

    def _plan(self, source: Path) -> tuple[Path, list[FileRef]]:
        root = source if source.is_dir() else source.parent
        manifest_path = root / "manifest.json"
        try:
            manifest = read_json(manifest_path, CorpusError, max_bytes=MAX_MANIFEST_BYTES)
        except MissingSourceError:
            raise MissingSourceError(
                f"{manifest_path}: file not found (a lines corpus needs a manifest.json)"
            ) from None
        if not isinstance(manifest, list):
            raise CorpusError(f"{manifest_path}: the manifest must be a JSON list of documents")
        if not manifest:
            raise CorpusError(f"{manifest_path}: the manifest lists no documents")
        refs: list[FileRef] = []
        seen: set[str] = set()
        files: dict[Path, tuple[int, str]] = {}
        for number, item in enumerate(manifest, start=1):
            where = f"{manifest_path.name} entry {number}"
            if not isinstance(item, dict):
                raise CorpusError(f"{where}: expected an object with doc_id, revision, status, path")
            refuse_unknown_keys(item, MANIFEST_KEYS, f"{display_name(str(manifest_path))} entry {number}", CorpusError)
            doc, revision = item.get("doc_id"), item.get("revision")
            for label, value in (("doc_id", doc), ("revision", revision)):
                if not isinstance(value, str) or not _ID.match(value):
                    raise CorpusError(f"{where}: invalid {label} {value!r} (use [a-z0-9-], 1 to 40 characters)")
            assert isinstance(doc, str)  # checked above; tells the type checker
            if doc in seen:
                raise CorpusError(f"{where}: duplicate doc_id {doc!r}")
            seen.add(doc)
            status = item.get("status")
            if status not in _STATUSES:
                raise CorpusError(f"{where}: unknown status {status!r} (use current or archived)")
            expires = item.get("expires")
            if expires is not None:
                iso_date(expires, f"{where}: expires")
            relative = item.get("path")
            if not isinstance(relative, str) or not relative.endswith(".txt"):
                raise CorpusError(f"{where}: path {relative!r} must be a relative path to a .txt file")
            meta = {"doc": doc, "revision": revision, "status": status, "expires": expires}
            try:
                path = locate(root, relative, max_bytes=self.options["max_bytes"])
            except CorpusError as exc:
                raise type(exc)(f"{where}: {exc}") from None
            # Even a '..' that stays inside the root: read and verify refuse every '..' (they take paths from
            # hits, which may be hostile), so evidence stored under such a path could never be verified.
            if ".." in PurePosixPath(relative).parts:
                raise CorpusError(f"{where}: path {relative!r} has a '..' component; name the file without it")
            # One file, one document: the index keeps one row per file. Compared after resolving, so
            # a.txt, ./a.txt and a symlink to a.txt are the same file.
            if path in files:
                first, spelling = files[path]
                raise CorpusError(f"{where}: path {relative!r} names the same file as entry {first} ({spelling!r})")
            files[path] = (number, relative)
            refs.append(FileRef(relative, meta))
        return root, refs

    def chunks(self, file: SourceFile) -> list[Chunk]:
        meta = file.meta
        lines = split_lines(file.text())
        title = next((line.strip() for line in lines if line.strip()), "")
        return [
            Chunk(
                key=f"{meta['doc']}@{meta['revision']}:{file.sha256}#L{number}",
                text=line,
                path=file.path,
                doc=meta["doc"],
                title=title,
                line=number,
                revision=meta["revision"],
                sha256=file.sha256,
                status=meta["status"],
                expires=meta["expires"],
            )
            for number, line in enumerate(lines, start=1)
            if line.strip()
        ]

    def query_defaults(self) -> QueryDefaults:
        return QueryDefaults(
            mode="and",
            snippet="fts5",
            open_marker="[",
            close_marker="]",
            ellipsis=" … ",
            snippet_tokens=18,
            max_query_chars=200,
            max_terms=12,
            max_results=20,
            default_limit=10,
        )
