"""BEIR directories: corpus.jsonl, queries.jsonl, qrels/<split>.tsv (the canonical form)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Iterator

from ..errors import DatasetError, MissingSourceError
from .records import Dataset, Passage, Query


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        handle = open(path, encoding="utf-8")
    except FileNotFoundError:
        raise MissingSourceError(f"{path}: file not found") from None
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"{path}:{number}: invalid JSON ({exc.msg})") from None
                if not isinstance(record, dict):
                    raise DatasetError(f"{path}:{number}: expected a JSON object")
                yield number, record
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{path}: not valid UTF-8 at byte {exc.start}") from None


def _string(record: dict[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = record.get(key, None if required else "")
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise DatasetError(f"{where}: field {key!r} must be a non-empty string" if required else f"{where}: field {key!r} must be a string")
    return value


def read_corpus(path: Path) -> dict[str, Passage]:
    """corpus.jsonl: one ``{"_id", "title", "text"}`` per line; duplicate ids are errors."""
    corpus: dict[str, Passage] = {}
    for number, record in _jsonl(path):
        where = f"{path}:{number}"
        passage = Passage(_string(record, "_id", where), _string(record, "title", where, required=False),
                          _string(record, "text", where, required=False))
        if passage.id in corpus:
            raise DatasetError(f"{where}: duplicate passage id {passage.id!r}")
        corpus[passage.id] = passage
    return corpus


def read_queries(path: Path) -> dict[str, Query]:
    """queries.jsonl: ``{"_id", "text"}`` plus an optional ``kind``."""
    queries: dict[str, Query] = {}
    for number, record in _jsonl(path):
        where = f"{path}:{number}"
        query = Query(_string(record, "_id", where), _string(record, "text", where),
                      _string(record, "kind", where, required=False))
        if query.id in queries:
            raise DatasetError(f"{where}: duplicate query id {query.id!r}")
        queries[query.id] = query
    return queries


def read_qrels(path: Path, corpus: dict[str, Passage] | None = None,
               queries: dict[str, Any] | None = None) -> dict[str, dict[str, int]]:
    """qrels TSV ``query-id  corpus-id  score`` with an optional header; unknown ids are errors."""
    qrels: dict[str, dict[str, int]] = {}
    try:
        handle = open(path, encoding="utf-8", newline="")
    except FileNotFoundError:
        raise MissingSourceError(f"{path}: file not found") from None
    with handle:
        try:
            rows = list(csv.reader(handle, delimiter="\t"))
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{path}: not valid UTF-8 at byte {exc.start}") from None
        for number, row in enumerate(rows, start=1):
            if not row or (number == 1 and row[0] in ("query-id", "query_id", "qid")):
                continue
            where = f"{path}:{number}"
            if len(row) != 3:
                raise DatasetError(f"{where}: expected 3 tab-separated fields (query-id, corpus-id, score), got {len(row)}")
            query_id, doc_id, score = (value.strip() for value in row)
            try:
                relevance = int(score)
            except ValueError:
                raise DatasetError(f"{where}: score {score!r} is not an integer") from None
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
    return Dataset(dataset_id or folder.name, corpus, queries, qrels, {"format": "beir", "split": split, "path": str(folder)})


def write_beir(dataset: Dataset, folder: str | Path, *, split: str = "test") -> Path:
    """Write corpus.jsonl, queries.jsonl (with ``kind`` when set) and qrels/<split>.tsv."""
    folder = Path(folder)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as out:
        for passage in dataset.corpus.values():
            out.write(json.dumps({"_id": passage.id, "title": passage.title, "text": passage.text}, ensure_ascii=False) + "\n")
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
