"""BEIR directories: corpus.jsonl, queries.jsonl, qrels/<split>.tsv (the canonical form)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import DatasetError
from ...files.textio import control_character, display_name, fits_trec_column, iter_jsonl, iter_lines, shown
from .records import MAX_RELEVANCE, Dataset, Passage, Query

_GRADE = re.compile(r"-?[0-9]+")
_SURROGATE = re.compile("[\ud800-\udfff]")
#: Longest question a questions file (``--queries``) may hold, in characters.
MAX_QUESTION_CHARS = 2_000


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, record in iter_jsonl(path, DatasetError):
        if not isinstance(record, dict):
            raise DatasetError(f"{display_name(str(path))}:{number}: expected a JSON object")
        yield number, record


def _string(record: dict[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = record.get(key, None if required else "")
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise DatasetError(
            f"{where}: field {key!r} must be a non-empty string"
            if required
            else f"{where}: field {key!r} must be a string"
        )
    return value


def _id(record: dict[str, Any], where: str) -> str:
    value = _string(record, "_id", where)
    if control_character(value) is not None:
        # Ids are written one per line (qrels TSV, TREC runs): a tab or newline would corrupt those files.
        raise DatasetError(f"{where}: _id {shown(value)} contains a control character")
    return value


def query_text(text: str, where: str) -> str:
    """A query's text as loaded from any dataset file: no NUL character, no lone surrogate, and no other control
    character but a tab (it would reach the reports, their TSV lines and the terminal; none of CMRC 2018's or
    DRCD's 11,960 queries holds one)."""
    if "\x00" in text:
        raise DatasetError(f"{where}: query text contains a NUL character")
    if _SURROGATE.search(text):
        raise DatasetError(f"{where}: query text contains a lone surrogate")
    bad = control_character(text.replace("\t", " "))
    if bad is not None:
        raise DatasetError(f"{where}: the question contains a control character (U+{ord(bad):04X})")
    return text


def question_text(text: str, where: str) -> str:
    """A question as a questions file (``compare``/``judge``/``search --queries``) gives it, in any format: the
    checks of :func:`query_text`, not blank, no control character but a tab (it would reach the reports and the
    terminal), at most ``MAX_QUESTION_CHARS`` characters."""
    query_text(text, where)
    if not text.strip():
        raise DatasetError(f"{where}: the question is blank")
    if len(text) > MAX_QUESTION_CHARS:
        raise DatasetError(f"{where}: the question is {len(text)} characters, over {MAX_QUESTION_CHARS}")
    return text


def run_query_id(value: str, where: str) -> str:
    """A questions file's query id: one column of a TREC run (non-empty, no whitespace or control character)."""
    if not fits_trec_column(value):
        raise DatasetError(
            f"{where}: question id {shown(value)} cannot be written to a TREC run or qrels file (empty, or holds "
            "whitespace or a control character)",
            hint="TREC runs separate columns by whitespace; give queries ids of visible characters without spaces",
        )
    return value


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
    for number, record in _jsonl(path):
        where = f"{display_name(str(path))}:{number}"
        passage = Passage(
            _id(record, where),
            _string(record, "title", where, required=False),
            _string(record, "text", where, required=False),
        )
        if passage.id in corpus:
            raise DatasetError(f"{where}: duplicate passage id {passage.id!r}")
        corpus[passage.id] = passage
    return corpus


def read_queries(path: Path, *, as_questions: bool = False) -> dict[str, Query]:
    """queries.jsonl: ``{"_id", "text"}`` plus an optional ``kind``; ``as_questions`` reads it as a questions file
    (``--queries``): every text a :func:`question_text`, every id a :func:`run_query_id`."""
    queries: dict[str, Query] = {}
    for number, record in _jsonl(path):
        where = f"{display_name(str(path))}:{number}"
        query_id, text, kind = (
            _id(record, where),
            _string(record, "text", where),
            _string(record, "kind", where, required=False),
        )
        if as_questions and control_character(kind) is not None:  # a kind is a label of the reports
            raise DatasetError(f"{where}: kind {shown(kind)} contains a control character")
        query = Query(
            run_query_id(query_id, where) if as_questions else query_id,
            question_text(text, where) if as_questions else query_text(text, where),
            kind,
        )
        if query.id in queries:
            raise DatasetError(f"{where}: duplicate query id {shown(query.id)}")
        queries[query.id] = query
    return queries


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
