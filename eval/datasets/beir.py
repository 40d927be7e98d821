"""BEIR directories: corpus.jsonl, queries.jsonl, qrels/<split>.tsv (the canonical form)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ...errors import DatasetError
from ...files.questions import jsonl_objects, read_queries, record_id, string_field
from ...files.textio import display_name, iter_lines
from .records import MAX_RELEVANCE, Dataset, Passage

_GRADE = re.compile(r"-?[0-9]+")


def relevance_grade(raw: str, where: str) -> int:
    """A qrels grade: an integer from 0 to MAX_RELEVANCE, written in ASCII digits."""
    if not _GRADE.fullmatch(raw):
        raise DatasetError(f"{where}: score {raw!r} is not an integer")
    # Compared as text first: int() of thousands of digits is slow or refused outright.
    if raw.startswith("-") or len(raw.lstrip("0")) > len(str(MAX_RELEVANCE)) or int(raw) > MAX_RELEVANCE:
        raise DatasetError(
            f"{where}: relevance grade {raw[:24]}{'…' if len(raw) > 24 else ''} is outside 0..{MAX_RELEVANCE}"
        )
    return int(raw)


def read_corpus(path: Path) -> dict[str, Passage]:
    """corpus.jsonl: one ``{"_id", "title", "text"}`` per line; duplicate ids are errors."""
    corpus: dict[str, Passage] = {}
    for number, record in jsonl_objects(path):
        where = f"{display_name(str(path))}:{number}"
        passage = Passage(
            record_id(record, where),
            string_field(record, "title", where, required=False),
            string_field(record, "text", where, required=False),
        )
        if passage.id in corpus:
            raise DatasetError(f"{where}: duplicate passage id {passage.id!r}")
        corpus[passage.id] = passage
    return corpus


def read_qrels(
    path: Path, corpus: dict[str, Passage] | None = None, queries: dict[str, Any] | None = None
) -> dict[str, dict[str, int]]:
    """qrels TSV ``query-id  corpus-id  score`` with an optional header; unknown ids are errors.

    Fields are split at tabs (quotes are data, as in BEIR's files), so line N of the file is line N here.
    """
    qrels: dict[str, dict[str, int]] = {}
    for number, line in iter_lines(path, DatasetError):
        row = line.split("\t")
        if not line.strip() or (number == 1 and row[0] in ("query-id", "query_id", "qid")):
            continue
        where = f"{display_name(str(path))}:{number}"
        if len(row) != 3:
            raise DatasetError(f"{where}: expected 3 tab-separated fields (query-id, corpus-id, score), got {len(row)}")
        query_id, doc_id, score = (value.strip() for value in row)
        relevance = relevance_grade(score, where)
        if queries is not None and query_id not in queries:
            raise DatasetError(f"{where}: unknown query id {query_id!r}")
        if corpus is not None and doc_id not in corpus:
            raise DatasetError(f"{where}: unknown passage id {doc_id!r}")
        if doc_id in qrels.get(query_id, {}):
            raise DatasetError(f"{where}: duplicate judgement for {query_id!r} / {doc_id!r}")
        qrels.setdefault(query_id, {})[doc_id] = relevance
    return qrels


def load_beir(folder: str | Path, *, split: str = "test", dataset_id: str | None = None) -> Dataset:
    """Load a BEIR directory; every qrel must name a known query and passage."""
    folder = Path(folder)
    corpus = read_corpus(folder / "corpus.jsonl")
    queries = read_queries(folder / "queries.jsonl")
    qrels = read_qrels(folder / "qrels" / f"{split}.tsv", corpus, queries)
    return Dataset(
        dataset_id or folder.name, corpus, queries, qrels, {"format": "beir", "split": split, "path": str(folder)}
    )


def write_beir(dataset: Dataset, folder: str | Path, *, split: str = "test") -> Path:
    """Write corpus.jsonl, queries.jsonl (with ``kind`` when set) and qrels/<split>.tsv."""
    folder = Path(folder)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as out:
        for passage in dataset.corpus.values():
            out.write(
                json.dumps({"_id": passage.id, "title": passage.title, "text": passage.text}, ensure_ascii=False) + "\n"
            )
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as out:
        for query in dataset.queries.values():
            record = {"_id": query.id, "text": query.text}
            if query.kind:
                record["kind"] = query.kind
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    with open(folder / "qrels" / f"{split}.tsv", "w", encoding="utf-8", newline="") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for qrel in dataset.qrel_list():
            out.write(f"{qrel.query_id}\t{qrel.doc_id}\t{qrel.relevance}\n")
    return folder
