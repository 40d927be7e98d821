"""``passages``: a BEIR corpus.jsonl (``_id``, ``title``, ``text``), one chunk per passage, for evaluation."""

from __future__ import annotations

from pathlib import Path

from ..errors import CorpusError
from ..records import Chunk
from ..spec import Option, OptionSet
from ..textio import control_character, parse_jsonl
from .base import Builder, FileRef, QueryDefaults, SourceFile, locate


class PassagesBuilder(Builder):
    """Each line of corpus.jsonl is a passage; the title is indexed in its own column."""

    name = "passages"
    summary = "BEIR corpus.jsonl passages (title + text), for evaluation"
    option_set = OptionSet(
        (
            Option("max_bytes", "largest corpus.jsonl accepted, in bytes", 2_000_000_000, int),
            Option("title_weight", "bm25 weight of the title column (the body has weight 1)", 1.0, float),
        )
    )

    recognise_order = 20

    @classmethod
    def recognises(cls, source: Path) -> bool:
        return (source / "corpus.jsonl").is_file() if source.is_dir() else source.suffix == ".jsonl"

    def _plan(self, source: Path) -> tuple[Path, list[FileRef]]:
        path = source / "corpus.jsonl" if source.is_dir() else source
        locate(path.parent, path.name, max_bytes=self.options["max_bytes"])
        return path.parent, [FileRef(path.name)]

    def source_root(self, source: Path) -> Path:
        return (source if source.is_dir() else source.parent).resolve()

    def chunks(self, file: SourceFile) -> list[Chunk]:
        chunks = []
        seen: set[str] = set()
        for number, record in parse_jsonl(file.text(), file.path, CorpusError):
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
            if passage_id in seen:
                raise CorpusError(f"{where}: duplicate _id {passage_id!r}")
            seen.add(passage_id)
            chunks.append(
                Chunk(key=passage_id, text=text, doc=passage_id, title=title, path=file.path, sha256=file.sha256)
            )
        return chunks

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
