"""SQuAD-style reading comprehension (CMRC 2018, DRCD, DuReader-robust) converted to a retrieval task."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import DatasetError
from ...files.outputs import new_folder
from ...files.paths import given_twice
from ...files.questions import query_text
from ...files.textio import counted, display_name, read_json
from .beir import write_beir
from .records import Dataset, Passage, Query


@dataclass
class ConversionSummary:
    """What the converter saw and merged."""

    files: int = 0
    articles: int = 0
    paragraphs: int = 0
    passages: int = 0
    duplicate_paragraphs: int = 0
    questions: int = 0
    queries: int = 0
    duplicate_questions: int = 0
    qrels: int = 0


def convert_squad(paths: list[str | Path], *, dataset_id: str = "squad") -> tuple[Dataset, ConversionSummary]:
    """Passages are the distinct paragraphs, queries the distinct questions, and a question's relevant
    passages the paragraphs it was asked on (relevance 1). Identical paragraphs or questions (after
    trimming whitespace) are merged, and counted in the summary. Ids are assigned in reading order:
    ``p1``, ``p2`` … and ``q1``, ``q2`` …; the original question ids are kept in ``meta`` (and
    written as ``original_ids.json`` by :func:`export_squad`)."""
    twice = given_twice(paths)
    if twice is not None:  # read twice, each question would be counted twice and listed twice in original_ids.json
        first, again = (display_name(name) for name in twice)
        said = f"{first} is given twice" if first == again else f"{first} and {again} are one file, given twice"
        raise DatasetError(said, hint="give each file once")
    merged = _Merged()
    for path in paths:
        merged.add_file(Path(path))
    summary = merged.summary
    if not merged.queries:  # written out, it would be a set that every command refuses, or scores as nothing
        names = ", ".join(display_name(str(p)) for p in paths)
        raise DatasetError(
            f"{names}: nothing to convert: {counted(summary.paragraphs, 'paragraph')} and no question",
            hint="a SQuAD-style file lists each paragraph's questions under 'qas'",
        )
    summary.passages, summary.queries = len(merged.corpus), len(merged.queries)
    summary.qrels = sum(len(d) for d in merged.qrels.values())
    meta: dict[str, Any] = {
        "format": "squad",
        "sources": [str(p) for p in paths],
        "original_question_ids": merged.original_ids,
    }
    return Dataset(dataset_id, merged.corpus, merged.queries, merged.qrels, meta), summary


class _Merged:
    """The passages, questions and qrels of SQuAD-style files read so far, duplicates merged; each
    ``add_`` method checks its part of the layout (data > paragraphs > qas) and says where it is wrong."""

    def __init__(self) -> None:
        self.summary = ConversionSummary()
        self.corpus: dict[str, Passage] = {}
        self.queries: dict[str, Query] = {}
        self.qrels: dict[str, dict[str, int]] = {}
        self.original_ids: dict[str, list[str]] = {}
        self._passage_ids: dict[str, str] = {}
        self._query_ids: dict[str, str] = {}

    def add_file(self, path: Path) -> None:
        name = display_name(str(path))
        self.summary.files += 1
        data = read_json(path, DatasetError)
        articles = data.get("data") if isinstance(data, dict) else None
        if not isinstance(articles, list):
            raise DatasetError(f"{name}: expected a SQuAD object with a 'data' list")
        for a_number, article in enumerate(articles):
            self._add_article(article, f"{name}: data[{a_number}]")

    def _add_article(self, article: Any, where: str) -> None:
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise DatasetError(f"{where}: expected 'paragraphs' list")
        self.summary.articles += 1
        title = article.get("title") or ""
        if not isinstance(title, str):
            raise DatasetError(f"{where}: 'title' must be text")
        for p_number, paragraph in enumerate(paragraphs):
            self._add_paragraph(paragraph, f"{where}.paragraphs[{p_number}]", title)

    def _add_paragraph(self, paragraph: Any, where: str, title: str) -> None:
        context = paragraph.get("context") if isinstance(paragraph, dict) else None
        qas = paragraph.get("qas", []) if isinstance(paragraph, dict) else None
        if not isinstance(context, str) or not isinstance(qas, list):
            raise DatasetError(f"{where}: expected 'context' text and 'qas' list")
        self.summary.paragraphs += 1
        key = context.strip()
        if not key or "\x00" in key:
            problem = "empty" if not key else "holding a NUL character"
            raise DatasetError(f"{where}: 'context' is {problem}")
        passage_id, new = _intern(self._passage_ids, key, "p")
        if new:
            self.corpus[passage_id] = Passage(passage_id, title, key)
        else:
            self.summary.duplicate_paragraphs += 1
        for q_number, qa in enumerate(qas):
            self._add_question(qa, f"{where}.qas[{q_number}]", passage_id)

    def _add_question(self, qa: Any, where: str, passage_id: str) -> None:
        question = qa.get("question") if isinstance(qa, dict) else None
        if not isinstance(question, str) or not question.strip():
            raise DatasetError(f"{where}: missing 'question'")
        self.summary.questions += 1
        text = query_text(question.strip(), where)
        query_id, new = _intern(self._query_ids, text, "q")
        if new:
            self.queries[query_id] = Query(query_id, text)
        else:
            self.summary.duplicate_questions += 1
        self.qrels.setdefault(query_id, {})[passage_id] = 1
        self.original_ids.setdefault(query_id, []).append(str(qa.get("id", "")))


def _intern(ids: dict[str, str], key: str, prefix: str) -> tuple[str, bool]:
    """The id of ``key``, numbered ``prefix1``, ``prefix2`` ... in order of first sight; True if new."""
    if key in ids:
        return ids[key], False
    ids[key] = f"{prefix}{len(ids) + 1}"
    return ids[key], True


def export_squad(paths: list[str | Path], target: str | Path, *, dataset_id: str | None = None) -> ConversionSummary:
    """Convert SQuAD-style files and write them as a new BEIR folder ``target``, atomically.

    ``target`` must not exist; the folder appears complete or not at all, and nothing else is touched.
    """
    with new_folder(target, what="dataset folder") as staging:
        dataset, summary = convert_squad(paths, dataset_id=dataset_id or Path(target).name)
        write_beir(dataset, staging)
        # Questions are numbered q1, q2, ... (one per distinct text): the source ids they came from, to trace back.
        (staging / "original_ids.json").write_text(
            json.dumps(dataset.meta["original_question_ids"], ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
        )
    return summary
