"""``passages``: a BEIR corpus.jsonl (``_id``, ``title``, ``text``), one chunk per passage, for evaluation.

corpus.jsonl is streamed, never held: ``read`` checks it line by line (UTF-8, size) and hashes it, and
``chunks`` reads it again line by line, re-hashing, so a build's memory does not grow with the corpus.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CorpusError
from ..files.textio import (
    control_character,
    decode_utf8,
    display_name,
    open_regular,
    parse_json_line,
    parse_jsonl,
    read_bytes,
)
from ..records import Chunk
from ..spec import Option, OptionSet, whole
from .base import NUL_REASON, TITLE_WEIGHT, Builder, FileRef, QueryDefaults, SourceFile, locate

_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class StreamedFile(SourceFile):
    """A source file checked and hashed but not held in memory: ``location`` is read again when needed."""

    location: Path = Path()
    length: int = 0

    @property
    def size(self) -> int:
        return self.length

    def lines(self, max_bytes: int) -> Iterator[tuple[int, str]]:
        """``(line number, text)`` of every line, numbered and decoded as the whole-file readers do.

        The bytes are hashed again as they are read: a file that changed since ``read`` hashed it is an
        error at its end (inside a build, whose transaction then rolls back).
        """
        digest = hashlib.sha256()
        yield from _lines(self.location, self.path, max_bytes, digest)
        if digest.hexdigest() != self.sha256:
            raise CorpusError(f"{display_name(self.path)}: changed while it was being read; build again")

    def text(self) -> str:
        """The whole file as text (for callers that want it at once; builds stream ``lines`` instead)."""
        data = read_bytes(self.location, CorpusError, label=self.path)
        if hashlib.sha256(data).hexdigest() != self.sha256:
            raise CorpusError(f"{display_name(self.path)}: changed while it was being read; build again")
        return decode_utf8(data, self.path, CorpusError)


def _lines(location: Path, label: str, max_bytes: int, digest: Any) -> Iterator[tuple[int, str]]:
    """Lines split on ``\\n`` with one trailing ``\\r`` removed and one leading BOM dropped, as
    :func:`rag_eval.files.textio.split_lines` after ``decode_utf8``; invalid UTF-8 gives its message."""
    name = display_name(label)
    offset = 0
    number = 0
    with open_regular(location, CorpusError, max_bytes=max_bytes, label=label) as handle:
        while True:
            try:
                raw = handle.readline()
            except OSError as exc:
                raise CorpusError(f"{name}: cannot read: {exc.strerror or exc}") from None
            if not raw:
                return
            number += 1
            if offset + len(raw) > max_bytes:  # it grew after the size check
                raise CorpusError(f"{name}: more than {max_bytes} bytes, over the limit")
            digest.update(raw)
            skip = len(_BOM) if number == 1 and raw.startswith(_BOM) else 0
            try:
                text = raw[skip:].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorpusError(
                    f"{name}: not valid UTF-8 at byte {offset + skip + exc.start} (line {number})"
                ) from None
            offset += len(raw)
            if text.endswith("\n"):
                text = text[:-1]
            yield number, text[:-1] if text.endswith("\r") else text


class PassagesBuilder(Builder):
    """Each line of corpus.jsonl is a passage; the title is indexed in its own column."""

    name = "passages"
    summary = "BEIR corpus.jsonl passages (title + text), for evaluation"
    option_set = OptionSet(
        (
            # Streamed a line at a time, so the limit is not memory's.
            Option("max_bytes", "largest corpus.jsonl accepted, in bytes", 2_000_000_000, whole(1, 10**12)),
            Option("title_weight", "bm25 weight of the title column (the body has weight 1)", 1.0, TITLE_WEIGHT),
        )
    )

    recognise_order = 20
    recognised_layout = "a corpus.jsonl"
    unit_words = "corpus.jsonl records"

    @classmethod
    def recognises(cls, source: Path) -> bool:
        return (source / "corpus.jsonl").is_file() if source.is_dir() else source.suffix == ".jsonl"

    def _plan(self, source: Path) -> tuple[Path, list[FileRef]]:
        path = source / "corpus.jsonl" if source.is_dir() else source
        locate(path.parent, path.name, max_bytes=self.options["max_bytes"])
        return path.parent, [FileRef(path.name)]

    def source_root(self, source: Path) -> Path:
        return (source if source.is_dir() else source.parent).resolve()

    def read(self, root: Path, ref: FileRef) -> SourceFile:
        """Check and hash corpus.jsonl line by line, holding one line at a time."""
        location = locate(root, ref.path, max_bytes=self.options["max_bytes"])
        digest = hashlib.sha256()
        for _line in _lines(location, ref.path, self.options["max_bytes"], digest):
            pass
        # A file that changes from here on fails the second reading's checksum.
        return StreamedFile(ref.path, b"", digest.hexdigest(), ref.meta, location, location.stat().st_size)

    def chunks(self, file: SourceFile) -> Iterator[Chunk]:
        if isinstance(file, StreamedFile):
            lines: Iterator[tuple[int, Any]] = (
                (number, parse_json_line(text, file.path, number, CorpusError))
                for number, text in file.lines(self.options["max_bytes"])
                if text.strip()
            )
        else:  # bytes already in memory (``index verify`` re-reads a file it has hashed)
            lines = parse_jsonl(decode_utf8(file.data, file.path, CorpusError), file.path, CorpusError)
        seen: set[str] = set()
        for number, record in lines:
            where = f"{file.path}:{number}"
            if not isinstance(record, dict):
                raise CorpusError(f"{where}: not a BEIR passage (expected a JSON object with _id, title, text)")
            passage_id, text, title = record.get("_id"), record.get("text", ""), record.get("title") or ""
            if (
                not isinstance(passage_id, str)
                or not passage_id
                or not isinstance(text, str)
                or not isinstance(title, str)
            ):
                raise CorpusError(f"{where}: _id, title and text must be strings")
            if control_character(passage_id) is not None:
                # An id is a key in search output, run files and qrels: one line per record.
                raise CorpusError(f"{where}: _id {passage_id!r} contains a control character")
            for field, value in (("title", title), ("text", text)):
                if "\x00" in value:
                    raise CorpusError(f"{where}: the {field} holds a NUL character ({NUL_REASON})")
            if passage_id in seen:
                raise CorpusError(f"{where}: duplicate _id {passage_id!r}")
            seen.add(passage_id)
            yield Chunk(key=passage_id, text=text, doc=passage_id, title=title, path=file.path, sha256=file.sha256)
        if not seen:  # as a sections build of a folder without .md files: nothing to index is a mistake
            raise CorpusError(f"{file.path}: no passages (one JSON object with _id, title, text per line)")

    def query_defaults(self) -> QueryDefaults:
        return QueryDefaults(
            mode="or",
            snippet="window",
            open_marker="【",
            close_marker="】",
            ellipsis="…",
            max_query_chars=1000,
            max_terms=None,
            max_results=1000,
            default_limit=10,
            title_weight=self.options["title_weight"],
        )
