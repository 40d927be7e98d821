"""TREC topics and qrels files."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path

from ...errors import DatasetError
from ...files.textio import display_name, iter_lines, read_text, shown, split_lines
from ..metrics.measures import RankedDoc
from .beir import question_text, read_qrels, relevance_grade, run_query_id
from .records import Qrel, Query

_TOP = re.compile(r"<top>(.*?)</top>", re.S | re.I)
_TOP_TAG = re.compile(r"</?top>", re.I)
_TOP_OPEN = re.compile(r"<top>", re.I)
# Any SGML tag ends the field before it: <smry>, <con>, <E-title>, </title> are not part of a title.
_TAG = re.compile(r"<(/?)([A-Za-z][\w-]*)[^<>]*>")
# A reference XML defines without a DTD: one of the five predefined entities or a character reference.
_REFERENCE = re.compile(r"&(#[^;\s&<]*|[A-Za-z][A-Za-z0-9._-]*);")
_NUMERIC = re.compile(r"#([0-9]+)|#[xX]([0-9A-Fa-f]+)")
_ENTITIES = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}
_BLANKS = re.compile(r"[ \t\r\n]+")
#: The fields of a topic that are read; the others are skipped.
_TOPIC_FIELDS = ("num", "title")
#: The two qrels formats, as a hint.
QRELS_FORMS = "qrels lines are 'query-id 0 doc-id grade' (TREC) or 'query-id<TAB>doc-id<TAB>grade' (BEIR)"
# A decimal number in ASCII: float() alone would also take "nan", "inf", "1_000" and other scripts' digits.
_SCORE = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def read_topics(path: str | Path) -> dict[str, Query]:
    """TREC topics: SGML ``<top><num>…<title>…</top>`` blocks (the title is the query), or ``qid<TAB>text`` lines.

    Topics are queries to run: every title is a :func:`~rag_eval.eval.datasets.beir.question_text` and every id a
    :func:`~rag_eval.eval.datasets.beir.run_query_id`. In blocks, ``<!-- -->`` comments are skipped and the XML entities
    ``&amp; &lt; &gt; &quot; &apos;`` and character references (``&#x5BFC;``) are decoded; any other entity, a
    CDATA section or a ``<!DOCTYPE``/``<!ENTITY`` declaration is an error (nothing is ever expanded from a DTD).
    """
    path = Path(path)
    name = display_name(str(path))
    text = read_text(path, DatasetError)
    queries: dict[str, Query] = {}
    if _TOP_OPEN.search(text):
        text = _without_comments(text, name)
        _refuse_declarations(text, name)
        _check_top_blocks(text, name)
        topic_line, counted_to = 1, 0
        for block in _TOP.finditer(text):
            # Counted on from the previous block: counting from the start each time took minutes on 10 MB.
            topic_line += text.count("\n", counted_to, block.start())
            counted_to = block.start()
            where = f"{name}:{topic_line}"
            fields = {key: _decoded(value, where) for key, value in _topic_fields(block.group(1), where).items()}
            topic_id = re.sub(r"^Number:\s*", "", fields.get("num", "").strip(), flags=re.I)
            title = re.sub(r"^Topic:\s*", "", fields.get("title", "").strip(), flags=re.I)
            if not topic_id or not title:
                raise DatasetError(f"{where}: topic without <num> or <title>")
            run_query_id(topic_id, where)
            if topic_id in queries:
                raise DatasetError(f"{where}: duplicate topic {shown(topic_id)}")
            # A title may run over lines; a control character other than a line break is refused, not joined.
            flat = question_text(_BLANKS.sub(" ", title), where)
            queries[topic_id] = Query(topic_id, " ".join(flat.split()))
        return queries
    for line_number, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        where = f"{name}:{line_number}"
        parts = line.split("\t", 1)
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise DatasetError(f"{where}: expected 'query-id<TAB>text'")
        topic_id = run_query_id(parts[0].strip(), where)
        if topic_id in queries:
            raise DatasetError(f"{where}: duplicate topic {shown(topic_id)}")
        queries[topic_id] = Query(topic_id, question_text(parts[1].strip(), where))
    return queries


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _without_comments(text: str, name: str) -> str:
    """``text`` with every ``<!-- ... -->`` comment blanked out, its line breaks kept (line numbers stay right): a
    topic inside a comment is not a topic. An unclosed comment is an error."""
    parts, position = [], 0
    while (start := text.find("<!--", position)) != -1:
        end = text.find("-->", start + 4)
        if end == -1:
            raise DatasetError(f"{name}:{_line_of(text, start)}: '<!--' comment without its '-->'")
        parts += [text[position:start], "\n" * text.count("\n", start, end)]
        position = end + 3
    return "".join(parts) + text[position:] if parts else text


def _refuse_declarations(text: str, name: str) -> None:
    """Refuse a CDATA section or a markup declaration (``<!DOCTYPE``, ``<!ENTITY``): read as text, its content
    would be searched or a ``<top>`` inside it read as a topic; its entities are never expanded (no XXE)."""
    found = text.find("<!")
    if found != -1:
        raise DatasetError(
            f"{name}:{_line_of(text, found)}: {shown(text[found : found + 20])} is not read: TREC topics are "
            "<top> blocks without CDATA sections or DOCTYPE/ENTITY declarations",
            hint="write the text in the field itself, & < > as &amp; &lt; &gt;",
        )


def _decoded(text: str, where: str) -> str:
    """A field's text with XML's five predefined entities and character references decoded; a lone ``&`` (SGML
    topics have them: ``AT&T``) stays as it is, and an unknown entity or a reference to no character is an error."""

    def character(found: re.Match[str]) -> str:
        reference = found.group(1)
        if not reference.startswith("#"):
            if reference in _ENTITIES:
                return _ENTITIES[reference]
            raise DatasetError(
                f"{where}: unknown entity {shown(found.group())}",
                hint="only &amp; &lt; &gt; &quot; &apos; and character references (&#23548; &#x5BFC;) are decoded",
            )
        numeric = _NUMERIC.fullmatch(reference)
        code = -1
        # Compared as text first: int() of thousands of digits is slow or refused outright.
        if numeric and len((numeric.group(1) or numeric.group(2)).lstrip("0")) <= 7:
            code = int(numeric.group(1), 10) if numeric.group(1) else int(numeric.group(2), 16)
        if not 0 < code <= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise DatasetError(f"{where}: character reference {shown(found.group())} names no Unicode character")
        return chr(code)

    return _REFERENCE.sub(character, text)


def _check_top_blocks(text: str, name: str) -> None:
    """Every ``<top>`` is closed by a ``</top>`` before the next one opens: an unclosed block is an error,
    not a topic silently dropped or merged into its neighbour."""
    expect_open = True
    for tag in _TOP_TAG.finditer(text):
        opens = not tag.group().startswith("</")
        if opens != expect_open:
            line = text.count("\n", 0, tag.start()) + 1
            problem = "<top> inside an unclosed <top> block" if opens else "</top> without its <top>"
            raise DatasetError(f"{name}:{line}: {problem}")
        expect_open = not expect_open
    if not expect_open:
        line = text.count("\n", 0, text.lower().rfind("<top>")) + 1
        raise DatasetError(f"{name}:{line}: <top> without its </top>")


def _topic_fields(block: str, where: str) -> dict[str, str]:
    """A topic's ``num`` and ``title``: each runs from its tag to the next tag of any name (closing tags and
    fields rag-eval does not read included); tag names are case-insensitive; a repeated field is an error."""
    fields: dict[str, str] = {}
    tags = list(_TAG.finditer(block))
    for number, tag in enumerate(tags):
        end = tags[number + 1].start() if number + 1 < len(tags) else len(block)
        field = tag.group(2).lower()
        if tag.group(1) or field not in _TOPIC_FIELDS:
            continue
        if field in fields:
            raise DatasetError(f"{where}: topic with more than one <{field}>")
        fields[field] = block[tag.end() : end].strip()
    return fields


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


def evaluate_files(
    run_file: str | Path, qrels_file: str | Path, metrics: Iterable[str] = ()
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Score a TREC run file against qrels (BEIR TSV or TREC four-column): trec_eval's ``all`` values (the mean
    over the judged queries; for the counts NumQ, NumRel and NumRet, their total) and per-query values, keyed by
    each metric's canonical name (``ndcg@10`` and ``NDCG@10`` are one ``nDCG@10``)."""
    from ..metrics.measures import DEFAULT_METRICS, evaluate, metric_names, totalled

    names = metric_names(list(metrics) or DEFAULT_METRICS)  # before any file is read
    qrels = read_any_qrels(qrels_file)
    run = read_run(run_file)
    # A run of none of the judged questions is a wrong pair of files, not a score of 0 for every query.
    ran = {doc.query_id for doc in run}
    if ran and qrels and not ran & set(qrels):
        raise DatasetError(
            f"{display_name(str(run_file))} and {display_name(str(qrels_file))} share no query id (the run's "
            f"{len(ran)} include {min(ran)!r}; the qrels' {len(qrels)} include {min(qrels)!r})",
            hint="score a run against the judgments of its own questions",
        )
    qrel_list = [Qrel(query, doc, grade) for query, docs in qrels.items() for doc, grade in docs.items()]
    means, values = evaluate(qrel_list, run, names)
    for name in totalled(names):  # trec_eval prints num_ret's total, not the mean a query retrieves
        means[name] = sum(row[name] for row in values.values())
    return means, values
