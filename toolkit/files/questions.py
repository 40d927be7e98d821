"""Questions files: the questions ``search --queries``, ``compare --queries`` and ``judge --queries`` take, in any of
their formats (a text file of one question per line, queries.jsonl, TREC topics), each read by one reader and every
question and id checked alike; and the JSONL records and query texts every dataset file shares."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import DatasetError
from ..records import Query
from .textio import (
    control_character,
    display_name,
    fits_trec_column,
    iter_jsonl,
    iter_lines,
    open_regular,
    read_text,
    shown,
    split_lines,
)

_SURROGATE = re.compile("[\ud800-\udfff]")
#: Longest question a questions file (``--queries``) may hold, in characters.
MAX_QUESTION_CHARS = 2_000
#: Largest questions file read, in bytes (a few thousand questions take well under 1 MB).
MAX_QUESTIONS_BYTES = 10_000_000
#: How much of a questions file is read to recognise TREC's SGML topics (``<top>`` opens the first one).
_SNIFF_BYTES = 65_536


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


def jsonl_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each line of a JSONL file as a JSON object, with its line number; anything else is one DatasetError."""
    for number, record in iter_jsonl(path, DatasetError):
        if not isinstance(record, dict):
            raise DatasetError(f"{display_name(str(path))}:{number}: expected a JSON object")
        yield number, record


def string_field(record: dict[str, Any], key: str, where: str, *, required: bool = True) -> str:
    """A record's ``key`` as a string (non-empty when ``required``; else "" when absent or null)."""
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


def record_id(record: dict[str, Any], where: str) -> str:
    """A record's ``_id``: a non-empty string without control characters."""
    value = string_field(record, "_id", where)
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


def read_queries(path: Path, *, as_questions: bool = False) -> dict[str, Query]:
    """queries.jsonl: ``{"_id", "text"}`` plus an optional ``kind``; ``as_questions`` reads it as a questions file
    (``--queries``): every text a :func:`question_text`, every id a :func:`run_query_id`."""
    queries: dict[str, Query] = {}
    for number, record in jsonl_objects(path):
        where = f"{display_name(str(path))}:{number}"
        query_id, text, kind = (
            record_id(record, where),
            string_field(record, "text", where),
            string_field(record, "kind", where, required=False),
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


def question_id(text: str) -> str:
    """A question's id from its text (NFC, trimmed): editing or reordering the file keeps the other ids."""
    digest = hashlib.sha256(unicodedata.normalize("NFC", text.strip()).encode()).hexdigest()
    return f"q-{digest[:12]}"


def read_questions(path: str | Path) -> dict[str, Query]:
    """Questions from any questions file ``compare``, ``judge`` and ``search --queries`` take: queries.jsonl
    (``_id``, ``text``), TREC topics (``<top>`` blocks, or ``qid<TAB>text`` lines in a ``.tsv``) or a UTF-8 text
    file with one question per line, whose ids are :func:`question_id` of the text.

    Each format has one reader; this chooses it and reads every question alike (:func:`question_text`:
    not blank, no control character but a tab, at most ``MAX_QUESTION_CHARS`` characters) and every given id as a
    TREC run's column. In a text file blank lines are skipped; a repeated question or id, an empty file or
    any of those is an error naming the line.
    """
    path = Path(path)
    name = display_name(str(path))
    if path.suffix == ".jsonl":
        queries = read_queries(path, as_questions=True)
    elif _has_sgml_topics(path) or path.suffix == ".tsv":
        queries = read_topics(path)
        if not queries:
            raise DatasetError(f"{name}: no topics (<top> blocks, or 'query-id<TAB>text' lines)")
    else:
        queries = _read_question_lines(path, name)
    if not queries:
        raise DatasetError(f"{name}: no questions (one per line, or queries.jsonl records)")
    return queries


def _read_question_lines(path: Path, name: str) -> dict[str, Query]:
    """One question per line, its id a hash of its text."""
    queries: dict[str, Query] = {}
    first_line: dict[str, int] = {}
    for number, line in iter_lines(path, DatasetError, max_bytes=MAX_QUESTIONS_BYTES):
        text = line.strip()
        if not text:
            continue
        where = f"{name}:{number}"
        question_text(text, where)
        qid = question_id(text)
        if qid in first_line:
            raise DatasetError(f"{where}: the same question as line {first_line[qid]}", hint="remove repeats")
        first_line[qid] = number
        queries[qid] = Query(qid, text)
    return queries


def _has_sgml_topics(path: Path) -> bool:
    """True when the file's first 64 KiB open a ``<top>`` block; the size limit of questions files applies."""
    with open_regular(path, DatasetError, max_bytes=MAX_QUESTIONS_BYTES) as handle:
        return b"<top>" in handle.read(_SNIFF_BYTES).lower()


def read_topics(path: str | Path) -> dict[str, Query]:
    """TREC topics: SGML ``<top><num>…<title>…</top>`` blocks (the title is the query), or ``qid<TAB>text`` lines.

    Topics are queries to run: every title is a :func:`question_text` and every id a
    :func:`run_query_id`. In blocks, ``<!-- -->`` comments are skipped and the XML entities
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
