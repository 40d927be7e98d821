"""``lines``: seed 000's evidence index. A manifest names documents; every non-empty line is a chunk."""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path
from typing import Any

from ..errors import CorpusError, MissingSourceError
from ..records import Chunk
from ..spec import Option, OptionSet
from .base import Builder, FileRef, QueryDefaults, SourceFile, locate

_ID = re.compile(r"[a-z0-9-]{1,40}\Z")
_STATUSES = ("current", "archived")


def iso_date(value: Any, what: str = "date") -> str:
    """A strict ``YYYY-MM-DD`` date (it must round-trip; ``2026-1-1`` and ``20261001`` are refused)."""
    try:
        if isinstance(value, str) and date.fromisoformat(value).isoformat() == value:
            return value
    except ValueError:
        pass
    raise CorpusError(f"{what} {value!r}: use YYYY-MM-DD")


def split_lines(text: str) -> list[str]:
    """Lines as editors number them: split on ``\\n`` only, one trailing ``\\r`` removed (CRLF files).

    Unlike ``str.splitlines`` this does not break at form feeds, ``\\x1c``-``\\x1e``, NEL or U+2028, so
    line N here is line N in an editor and in ``grep -n``.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


class LinesBuilder(Builder):
    """manifest.json lists ``{doc_id, revision, status, expires, path}``; one chunk per non-empty line.

    Source ids are ``doc@revision:sha256#Lline``: renaming a file keeps them, editing it changes them.
    Validation is all-or-nothing before anything is written: ids ``[a-z0-9-]{1,40}`` without duplicates,
    relative ``.txt`` paths that resolve inside the corpus root (no ``..``, no symlink escapes), a size
    limit, UTF-8 only, status ``current`` or ``archived``, ``expires`` strictly ``YYYY-MM-DD`` or null.
    """

    name = "lines"
    summary = "line-level evidence from a manifest (seed 000): doc@rev:sha256#Lline provenance, status, expiry"
    option_set = OptionSet((Option("max_bytes", "largest source file accepted, in bytes", 1_000_000, int),))
    index_title = False

    def _plan(self, source: Path) -> tuple[Path, list[FileRef]]:
        root = source if source.is_dir() else source.parent
        manifest_path = root / "manifest.json"
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise MissingSourceError(f"{manifest_path}: no manifest.json in the corpus folder") from None
        except UnicodeDecodeError as exc:
            raise CorpusError(f"{manifest_path}: not valid UTF-8 at byte {exc.start}") from None
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{manifest_path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
        if not isinstance(manifest, list):
            raise CorpusError(f"{manifest_path}: the manifest must be a JSON list of documents")
        refs: list[FileRef] = []
        seen: set[str] = set()
        for number, item in enumerate(manifest, start=1):
            where = f"{manifest_path.name} entry {number}"
            if not isinstance(item, dict):
                raise CorpusError(f"{where}: expected an object with doc_id, revision, status, path")
            doc, revision = item.get("doc_id"), item.get("revision")
            for label, value in (("doc_id", doc), ("revision", revision)):
                if not isinstance(value, str) or not _ID.match(value):
                    raise CorpusError(f"{where}: invalid {label} {value!r} (use [a-z0-9-], 1 to 40 characters)")
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
                locate(root, relative, max_bytes=self.options["max_bytes"])
            except CorpusError as exc:
                raise type(exc)(f"{where}: {exc}") from None
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
        return QueryDefaults(mode="and", snippet="fts5", open_marker="[", close_marker="]", ellipsis=" … ",
                             snippet_tokens=18, max_query_chars=200, max_terms=12, max_results=20, default_limit=10)
