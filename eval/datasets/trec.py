"""TREC topics and qrels files."""

from __future__ import annotations

import math
import re
from pathlib import Path

from ...errors import DatasetError
from ...files.textio import display_name, iter_lines, shown
from ...records import RankedDoc
from .beir import read_qrels, relevance_grade

#: The two qrels formats, as a hint.
QRELS_FORMS = "qrels lines are 'query-id 0 doc-id grade' (TREC) or 'query-id<TAB>doc-id<TAB>grade' (BEIR)"
# A decimal number in ASCII: float() alone would also take "nan", "inf", "1_000" and other scripts' digits.
_SCORE = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def read_trec_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """TREC qrels: ``query-id iteration doc-id relevance`` per line, whitespace separated; grades 0..MAX_RELEVANCE."""
    path = Path(path)
    name = display_name(str(path))
    qrels: dict[str, dict[str, int]] = {}
    for number, line in iter_lines(path, DatasetError):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 4:
            raise DatasetError(f"{name}:{number}: expected 'query-id iteration doc-id relevance'")
        relevance = relevance_grade(parts[3], f"{name}:{number}")
        if parts[2] in qrels.get(parts[0], {}):
            raise DatasetError(f"{name}:{number}: duplicate judgement for {parts[0]!r} / {parts[2]!r}")
        qrels.setdefault(parts[0], {})[parts[2]] = relevance
    return qrels


def trec_qrels_text(qrels: dict[str, dict[str, int]]) -> str:
    """Qrels as TREC's four-column lines ``query-id 0 doc-id relevance``, in the dict's order."""
    return "".join(
        f"{query_id} 0 {doc_id} {relevance}\n" for query_id, docs in qrels.items() for doc_id, relevance in docs.items()
    )


def write_trec_qrels(qrels: dict[str, dict[str, int]], path: str | Path) -> None:
    """Write qrels in TREC's four-column format."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(trec_qrels_text(qrels))


def read_run(path: str | Path) -> list[RankedDoc]:
    """A TREC run file (``qid Q0 docid rank score tag``), re-ranked as trec_eval orders it: by descending
    score, ties by descending document id (the rank column is ignored). Scores must be finite decimal numbers, and
    a query lists a document once (trec_eval refuses a run that lists it twice)."""
    path = Path(path)
    name = display_name(str(path))
    rows: dict[str, list[tuple[float, str]]] = {}
    seen: dict[tuple[str, str], int] = {}  # (query, document) -> the line that listed it
    for number, line in iter_lines(path, DatasetError):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise DatasetError(f"{name}:{number}: expected 'qid Q0 docid rank score tag'")
        score = float(parts[4]) if _SCORE.fullmatch(parts[4]) else math.nan
        if not math.isfinite(score):  # nan, inf, 1e999: they would sort arbitrarily
            raise DatasetError(f"{name}:{number}: score {parts[4][:40]!r} is not a finite number")
        first = seen.setdefault((parts[0], parts[2]), number)
        if first != number:
            raise DatasetError(
                f"{name}:{number}: query {shown(parts[0])} returns document {shown(parts[2])} twice "
                f"(first on line {first})",
                hint="a run lists each document once per query",
            )
        rows.setdefault(parts[0], []).append((score, parts[2]))
    if not rows:  # scored, it would be a row of zeros; fused, a run that adds nothing
        raise DatasetError(
            f"{name}: no results: the run file is empty or blank",
            hint="a TREC run has one 'qid Q0 docid rank score tag' line per result",
        )
    return [
        RankedDoc(query_id, doc_id, rank, score)
        for query_id, docs in rows.items()
        for rank, (score, doc_id) in enumerate(sorted(docs, reverse=True), start=1)
    ]


def read_any_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Given judgments: BEIR's TSV (three tab-separated fields, optional header) or TREC's four fields (any
    whitespace, tabs included), told apart by the first line's field count. A file with no judgment, or with
    no positive grade (no query has a relevant document, so every metric would be 0), is a DatasetError."""
    path = Path(path)
    name = display_name(str(path))
    lines = iter_lines(path, DatasetError)
    try:
        number, first = next(((n, line) for n, line in lines if line.strip()), (0, ""))
    finally:
        lines.close()
    if not first:
        raise DatasetError(f"{name}: no judgments: the file is empty or blank", hint=QRELS_FORMS)
    fields = first.split("\t")
    if len(fields) == 3 and len(fields[2].split()) == 1:  # BEIR ids may hold spaces; its grade is one field
        qrels = read_qrels(path)
    elif len(first.split()) == 4:
        qrels = read_trec_qrels(path)
    else:
        raise DatasetError(
            f"{name}:{number}: not a qrels line: {len(first.split())} fields, where TREC qrels have 4 and BEIR qrels "
            "3 separated by tabs",
            hint=QRELS_FORMS,
        )
    if not qrels:
        raise DatasetError(f"{name}: no judgments: only a header", hint=QRELS_FORMS)
    if not any(grade > 0 for docs in qrels.values() for grade in docs.values()):
        count = sum(len(docs) for docs in qrels.values())
        raise DatasetError(
            f"{name}: no relevant document: {count} judgments of {len(qrels)} queries, none with a positive grade, "
            "so every metric would be 0",
            hint="grades 1 and above mark relevant documents, 0 not relevant",
        )
    return qrels
