"""TREC topics and qrels files."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import DatasetError, MissingSourceError
from .metrics import RankedDoc
from .records import Query

_TOP = re.compile(r"<top>(.*?)</top>", re.S)
_FIELD = re.compile(r"<(num|title|desc|narr)>(.*?)(?=<num>|<title>|<desc>|<narr>|\Z)", re.S)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MissingSourceError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not valid UTF-8 at byte {exc.start}") from None


def read_topics(path: str | Path) -> dict[str, Query]:
    """TREC topics: SGML ``<top><num>…<title>…</top>`` blocks (the title is the query), or ``qid<TAB>text`` lines."""
    path = Path(path)
    text = _read(path)
    queries: dict[str, Query] = {}
    if "<top>" in text:
        for block in _TOP.finditer(text):
            line = text.count("\n", 0, block.start()) + 1
            fields = {name: value.strip() for name, value in _FIELD.findall(block.group(1))}
            number = re.sub(r"^Number:\s*", "", fields.get("num", ""))
            title = re.sub(r"^Topic:\s*", "", fields.get("title", ""))
            if not number or not title:
                raise DatasetError(f"{path}:{line}: topic without <num> or <title>")
            if number in queries:
                raise DatasetError(f"{path}:{line}: duplicate topic {number!r}")
            queries[number] = Query(number, " ".join(title.split()))
        return queries
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("\t", 1)
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise DatasetError(f"{path}:{number}: expected 'query-id<TAB>text'")
        if parts[0].strip() in queries:
            raise DatasetError(f"{path}:{number}: duplicate topic {parts[0].strip()!r}")
        queries[parts[0].strip()] = Query(parts[0].strip(), parts[1].strip())
    return queries


def read_trec_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """TREC qrels: ``query-id iteration doc-id relevance`` per line, whitespace separated."""
    path = Path(path)
    qrels: dict[str, dict[str, int]] = {}
    for number, line in enumerate(_read(path).splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 4:
            raise DatasetError(f"{path}:{number}: expected 'query-id iteration doc-id relevance'")
        try:
            relevance = int(parts[3])
        except ValueError:
            raise DatasetError(f"{path}:{number}: relevance {parts[3]!r} is not an integer") from None
        if parts[2] in qrels.get(parts[0], {}):
            raise DatasetError(f"{path}:{number}: duplicate judgement for {parts[0]!r} / {parts[2]!r}")
        qrels.setdefault(parts[0], {})[parts[2]] = relevance
    return qrels


def write_trec_qrels(qrels: dict[str, dict[str, int]], path: str | Path) -> None:
    """Write qrels in TREC's four-column format."""
    with open(path, "w", encoding="utf-8") as out:
        for query_id, docs in qrels.items():
            for doc_id, relevance in docs.items():
                out.write(f"{query_id} 0 {doc_id} {relevance}\n")


def read_run(path: str | Path) -> list[RankedDoc]:
    """A TREC run file (``qid Q0 docid rank score tag``), re-ranked by descending score with ties by
    document id, as trec_eval orders it."""
    path = Path(path)
    rows: dict[str, list[tuple[float, str]]] = {}
    for number, line in enumerate(_read(path).splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise DatasetError(f"{path}:{number}: expected 'qid Q0 docid rank score tag'")
        try:
            score = float(parts[4])
        except ValueError:
            raise DatasetError(f"{path}:{number}: score {parts[4]!r} is not a number") from None
        rows.setdefault(parts[0], []).append((score, parts[2]))
    return [RankedDoc(query_id, doc_id, rank, score)
            for query_id, docs in rows.items()
            for rank, (score, doc_id) in enumerate(sorted(docs, key=lambda d: (-d[0], d[1])), start=1)]


def read_any_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Qrels in BEIR's TSV (tab-separated, optional header) or TREC's four-column format."""
    path = Path(path)
    first = _read(path).split("\n", 1)[0]
    if "\t" in first:
        from .beir import read_qrels

        return read_qrels(path)
    return read_trec_qrels(path)
