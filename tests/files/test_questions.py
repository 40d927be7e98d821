"""Questions files in every format (one per line, queries.jsonl, TREC topics, .tsv), read alike by compare, judge
and batch search (rag_eval.files.questions): the same question and id checks, the same ids, safe error messages,
TREC topics' tags, blocks and XML references, and large topics files read in one pass."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import make_docs
from helpers.cli import _one_safe_error, _safe

from rag_eval.cli import cli
from rag_eval.errors import DatasetError
from rag_eval.eval.datasets.records import Query
from rag_eval.eval.datasets.sources import question_id, read_questions
from rag_eval.files import questions
from rag_eval.files.questions import MAX_QUESTION_CHARS
from rag_eval.index.writer import build
from rag_eval.search.batch import read_topics_file


def _lines(questions: list[tuple[str, str]]) -> str:
    return "".join(f"{text}\n" for _, text in questions)


def _jsonl(questions: list[tuple[str, str]]) -> str:
    # ensure_ascii: a control character arrives JSON-escaped (\u001b), as the audit's file had it
    return "".join(json.dumps({"_id": qid, "text": text}) + "\n" for qid, text in questions)


def _sgml(questions: list[tuple[str, str]]) -> str:
    return "".join(f"<top>\n<num> Number: {qid}\n<title> {text}\n<desc> x\n</top>\n" for qid, text in questions)


def _tsv(questions: list[tuple[str, str]]) -> str:
    return "".join(f"{qid}\t{text}\n" for qid, text in questions)


#: Every format a questions file may have: ``(file name, writer)``; the bad question is always the second.
FORMATS: dict[str, tuple[str, Callable[[list[tuple[str, str]]], str]]] = {
    "lines": ("questions.txt", _lines),
    "jsonl": ("queries.jsonl", _jsonl),
    "topics": ("topics.txt", _sgml),
    "tsv": ("topics.tsv", _tsv),
}
#: The line of the second question in each format (SGML topics name the line of their <top>).
SECOND_LINE = {"lines": 2, "jsonl": 2, "topics": 6, "tsv": 2}
#: Every reader of questions files: compare's and judge's, and batch search's.
READERS = {"compare/judge": read_questions, "batch search": read_topics_file}

#: Questions that no questions file may hold, whatever its format.
BAD_QUESTIONS = {
    "escape sequence": ("导出\x1b[31m文件", "control character (U+001B)"),
    "bell": ("导出\x07文件", "control character (U+0007)"),
    "delete": ("导出\x7f文件", "control character (U+007F)"),
    "C1 CSI": ("导出\x9b31m文件", "control character (U+009B)"),
    "vertical tab": ("导出\x0b文件", "control character (U+000B)"),
    "file separator": ("导出\x1c文件", "control character (U+001C)"),
    "over the limit": ("问" * (MAX_QUESTION_CHARS + 1), f"is {MAX_QUESTION_CHARS + 1} characters, over"),
}
#: A carriage return inside a line: SGML titles may run over lines, so there it is a line break.
LINE_BOUND = {"carriage return": ("导出\r文件", "control character (U+000D)")}


def _write(tmp_path: Path, fmt: str, questions: list[tuple[str, str]]) -> Path:
    name, writer = FORMATS[fmt]
    path = tmp_path / name
    path.write_bytes(writer(questions).encode("utf-8"))
    return path


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("case", sorted(BAD_QUESTIONS) + sorted(LINE_BOUND))
def test_every_format_refuses_what_a_text_file_refuses(tmp_path: Path, reader: str, fmt: str, case: str) -> None:
    """Bug: queries.jsonl, TREC topics and .tsv skipped the length and control-character checks of a text file."""
    if fmt == "topics" and case in LINE_BOUND:
        pytest.skip("a line break inside an SGML title joins its lines")
    question, problem = {**BAD_QUESTIONS, **LINE_BOUND}[case]
    path = _write(tmp_path, fmt, [("1", "备份"), ("2", question)])
    with pytest.raises(DatasetError) as raised:
        READERS[reader](path)
    message = str(raised.value)
    assert message.startswith(f"{path}:{SECOND_LINE[fmt]}: "), message
    assert problem in message
    _safe(message)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_the_longest_question_is_read_in_every_format(tmp_path: Path, fmt: str) -> None:
    longest = "问" * MAX_QUESTION_CHARS
    path = _write(tmp_path, fmt, [("1", "备份"), ("2", longest)])
    assert [query.text for query in read_questions(path).values()] == ["备份", longest]


@pytest.mark.parametrize(
    ("fmt", "content"),
    [
        ("jsonl", '{"_id": "1", "text": "   "}\n'),
        ("jsonl", '{"_id": "1", "text": "\\u3000\\t"}\n'),
        ("topics", "<top><num>1</num><title>&#x20;&#32;</title></top>\n"),
    ],
    ids=["jsonl spaces", "jsonl ideographic space", "topic of references to spaces"],
)
def test_a_blank_question_is_refused(tmp_path: Path, fmt: str, content: str) -> None:
    """Bug: a blank question in queries.jsonl was searched: an empty run, and 'zero hits 1.000' in compare."""
    path = tmp_path / FORMATS[fmt][0]
    path.write_text(content, encoding="utf-8")
    for reader in READERS.values():
        with pytest.raises(DatasetError, match=r":1: (the question is blank|topic without <num> or <title>)"):
            reader(path)


def test_a_line_break_inside_a_jsonl_question_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "queries.jsonl"
    path.write_text('{"_id": "1", "text": "导出\\n文件"}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"queries.jsonl:1: the question contains a control character \(U\+000A\)"):
        read_questions(path)


def test_a_control_character_in_a_jsonl_kind_is_refused(tmp_path: Path) -> None:
    """A question's kind is a label of compare's reports, as its text is."""
    path = tmp_path / "queries.jsonl"
    path.write_text('{"_id": "1", "text": "导出", "kind": "a\\u001bb"}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"queries.jsonl:1: kind 'a\\x1bb' contains a control character"):
        read_questions(path)


def test_a_tab_stays_a_question_s_own_in_every_format_that_can_hold_it(tmp_path: Path) -> None:
    for fmt in ("lines", "jsonl"):
        path = _write(tmp_path, fmt, [("1", "导出\t文件")])
        assert [query.text for query in read_questions(path).values()] == ["导出\t文件"]


#: Query ids that a TREC run cannot carry: ``(jsonl _id / topic number / tsv id)``.
BAD_IDS = {
    "escape": "1\x1b",
    "delete": "q\x7f1",
    "C1 control": "q\x9b1",
    "space": "q 1",
    "ideographic space": "q\u30001",
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("fmt", ["jsonl", "topics", "tsv"])
@pytest.mark.parametrize("case", sorted(BAD_IDS))
def test_every_query_id_must_fit_a_trec_column(tmp_path: Path, reader: str, fmt: str, case: str) -> None:
    """Bug: batch search checked ids for whitespace only; '1<ESC>' from topics or .tsv was written into the run."""
    path = _write(tmp_path, fmt, [("1", "备份"), (BAD_IDS[case], "导出")])
    with pytest.raises(DatasetError, match="cannot be written to a TREC run|contains a control character") as raised:
        READERS[reader](path)
    assert re.match(rf"{re.escape(str(path))}:{SECOND_LINE[fmt]}: (question id|_id) ", str(raised.value)), raised.value
    _safe(str(raised.value))


QUESTIONS = [("301", "数据 导出"), ("302", "备份 时间"), ("303", "权限")]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_compare_judge_and_batch_read_every_format_alike(tmp_path: Path, fmt: str) -> None:
    """Bug: compare and judge read TREC topics and .tsv files as one question per line (<top> was a question)."""
    path = _write(tmp_path, fmt, QUESTIONS)
    expected = {
        (question_id(text) if fmt == "lines" else qid): Query(question_id(text) if fmt == "lines" else qid, text)
        for qid, text in QUESTIONS
    }
    assert read_questions(path) == read_topics_file(path) == expected


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("topics.tsv", "1\t导出\n1\t文件\n", ":2: duplicate topic '1'"),
        ("topics.txt", "<top><num>1</num><title>导出</title></top>\n<top><num>1</num><title>x</title></top>\n", ":2: "),
        ("topics.txt", "<top>\n<num> 1\n</top>\n", ":1: topic without <num> or <title>"),
    ],
    ids=["tsv duplicate id", "topics duplicate number", "topic without title"],
)
def test_compare_refuses_a_bad_topics_file_as_batch_search_does(
    tmp_path: Path, name: str, content: str, problem: str
) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    for reader in READERS.values():
        with pytest.raises(DatasetError, match=re.escape(problem)):
            reader(path)


# -- TREC topics: references, comments, CDATA ---------------------------------------------------------------

DECODED = {
    "&amp;": "&",
    "&lt;x&gt;": "<x>",
    "&quot;a&quot;": '"a"',
    "&apos;": "'",
    "&#23548;": "导",
    "&#x5BFC;": "导",
    "&#x5bfc;": "导",
    "&#0023548;": "导",
    "AT&T": "AT&T",  # SGML topics have lone ampersands
    "a & b": "a & b",
    "&amp;lt;": "&lt;",  # decoded once
}


@pytest.mark.parametrize("reference", sorted(DECODED))
def test_xml_references_in_a_topic_are_decoded(tmp_path: Path, reference: str) -> None:
    """Bug: '&amp;' and '&#x5BFC;' were searched as they stand: 'amp' and 'x5BFC' became query terms."""
    path = tmp_path / "topics.txt"
    path.write_text(f"<top>\n<num> 1\n<title> 导出 {reference} 文件\n</top>\n", encoding="utf-8")
    for reader in READERS.values():
        assert reader(path) == {"1": Query("1", f"导出 {DECODED[reference]} 文件")}


def test_a_topic_number_is_decoded_too(tmp_path: Path) -> None:
    path = tmp_path / "topics.txt"
    path.write_text("<top><num>&#x33;01</num><title>导出</title></top>\n", encoding="utf-8")
    assert list(read_questions(path)) == ["301"]


REFUSED_REFERENCES = {
    "unknown entity": ("&foo;", "unknown entity '&foo;'"),
    "entity names are case-sensitive": ("&AMP;", "unknown entity '&AMP;'"),
    "NUL": ("&#0;", "'&#0;' names no Unicode character"),
    "surrogate": ("&#xD800;", "'&#xD800;' names no Unicode character"),
    "past Unicode": ("&#x110000;", "'&#x110000;' names no Unicode character"),
    "thousands of digits": ("&#" + "9" * 5000 + ";", "names no Unicode character"),
    "no digits": ("&#;", "'&#;' names no Unicode character"),
    "not hexadecimal": ("&#xZZ;", "'&#xZZ;' names no Unicode character"),
    "escape by reference": ("&#x1b;", "control character (U+001B)"),
    "C1 control by reference": ("&#x85;", "control character (U+0085)"),
}


@pytest.mark.parametrize("case", sorted(REFUSED_REFERENCES))
def test_a_bad_reference_in_a_topic_is_one_error_naming_the_line(tmp_path: Path, case: str) -> None:
    reference, problem = REFUSED_REFERENCES[case]
    path = tmp_path / "topics.txt"
    second = f"<top><num>2</num><title>a {reference} b</title></top>\n"
    path.write_text(f"<top><num>1</num><title>导出</title></top>\n\n{second}", encoding="utf-8")
    for reader in READERS.values():
        with pytest.raises(DatasetError) as raised:
            reader(path)
        assert str(raised.value).startswith(f"{path}:3: "), raised.value
        assert problem in str(raised.value)
        _safe(str(raised.value))


def test_no_entity_is_expanded_from_a_dtd(tmp_path: Path) -> None:
    """XXE: a DOCTYPE declaring an external entity is refused, and nothing of the file it names is read."""
    path = tmp_path / "topics.txt"
    secret = tmp_path / "secret.txt"
    secret.write_text("机密内容", encoding="utf-8")
    path.write_text(
        f'<?xml version="1.0"?>\n<!DOCTYPE t [<!ENTITY xxe SYSTEM "file://{secret}">]>\n'
        "<topics><top><num>1</num><title>&xxe;</title></top></topics>\n",
        encoding="utf-8",
    )
    for reader in READERS.values():
        with pytest.raises(DatasetError, match=r"topics.txt:2: '<!DOCTYPE") as raised:
            reader(path)
        assert "机密" not in str(raised.value)


@pytest.mark.parametrize(
    "content",
    [
        "<top><num>1</num><title><![CDATA[导出]]></title></top>\n",
        "<![CDATA[<top><num>1</num><title>导出</title></top>]]>\n",
        '<!ENTITY x "导出">\n<top><num>1</num><title>&x;</title></top>\n',
    ],
    ids=["CDATA in a title", "a topic inside CDATA", "an entity declaration"],
)
def test_cdata_and_declarations_are_refused(tmp_path: Path, content: str) -> None:
    """Bug: '<![CDATA[导出]]>' was the query text, markup and all."""
    path = tmp_path / "topics.txt"
    path.write_text(content, encoding="utf-8")
    for reader in READERS.values():
        with pytest.raises(DatasetError, match=r"topics.txt:1: '<!.* is not read"):
            reader(path)


def test_a_topic_inside_a_comment_is_not_read(tmp_path: Path) -> None:
    """Bug: a topic commented out with <!-- --> was read as a real one."""
    path = tmp_path / "topics.txt"
    path.write_text(
        "<!-- an old topic:\n<top><num>9</num><title>旧</title></top>\n-->\n"
        "<top><num>1</num><title>导出<!-- no -->文件</title></top>\n",
        encoding="utf-8",
    )
    for reader in READERS.values():
        assert reader(path) == {"1": Query("1", "导出文件")}


def test_a_line_after_a_comment_keeps_its_number(tmp_path: Path) -> None:
    path = tmp_path / "topics.txt"
    path.write_text("<!--\n\n\n-->\n<top><num>1</num><title>a &foo; b</title></top>\n", encoding="utf-8")
    for reader in READERS.values():
        with pytest.raises(DatasetError, match=r"topics.txt:5: unknown entity '&foo;'"):
            reader(path)


def test_an_unclosed_comment_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "topics.txt"
    path.write_text("<top><num>1</num><title>导出</title></top>\n<!-- <top><num>2</num>\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"topics.txt:2: '<!--' comment without its '-->'"):
        read_questions(path)


# -- the command line: one safe error line, nothing written ------------------------------------------------


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("query-inputs-4")
    docs = make_docs(folder / "docs")
    index = folder / "docs.sqlite"
    build(docs, index, builder="sections", tokenizer="bigram")
    return docs, index


@pytest.mark.parametrize("command", ["search", "compare", "judge"])
@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("case", ["escape sequence", "C1 CSI", "over the limit", "bad id"])
def test_every_command_refuses_a_bad_questions_file_in_one_safe_line(
    small: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, fmt: str, case: str
) -> None:
    """Bug: compare wrote a raw ESC from queries.jsonl into report.md and report.html; the error for a text
    file printed the raw character itself (a CR sent the cursor back over the message)."""
    if case == "bad id" and fmt == "lines":
        pytest.skip("a text file's ids are hashes")
    docs, index = small
    question, problem = BAD_QUESTIONS[case] if case != "bad id" else ("导出", "'2\\x1b'")
    qid = "2\x1b" if case == "bad id" else "2"
    path = _write(tmp_path, fmt, [("1", "备份"), (qid, question)])
    out = tmp_path / "out"

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the pool was built before the questions were refused")

    monkeypatch.setattr("rag_eval.eval.judging.judge.build_pool", refuse)
    args = {
        "search": ["search", str(index), "--queries", str(path), "--run", str(out)],
        "compare": ["compare", str(docs), "--queries", str(path), "-t", "bigram", "-o", str(out)],
        "judge": ["judge", str(docs), "--queries", str(path), "-t", "bigram", "-o", str(out)],
    }[command]
    line = _one_safe_error(CliRunner().invoke(cli, args))
    assert line.startswith(f"error: {path}:{SECOND_LINE[fmt]}: ") and problem in line, line
    assert not out.exists()


def test_compare_reads_trec_topics_by_their_numbers(small: tuple[Path, Path], tmp_path: Path) -> None:
    """Bug: compare --queries on a TREC topics file searched '<top>', '<num> Number: 301', ... as questions."""
    docs, _ = small
    path = _write(tmp_path, "topics", QUESTIONS)
    out = tmp_path / "o"
    result = CliRunner().invoke(cli, ["compare", str(docs), "--queries", str(path), "-t", "bigram", "-o", str(out)])
    assert result.exit_code == 0, result.output + result.stderr
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["dataset"]["stats"]["queries"] == len(QUESTIONS)
    run = next((out / "runs").iterdir()).read_text(encoding="utf-8")
    ran = {line.split()[0] for line in run.splitlines()}
    assert "301" in ran and ran <= {"301", "302", "303"}, ran


@pytest.mark.parametrize("char", ["\x1b", "\r", "\n", "\x85"])
def test_a_beir_folders_query_with_a_control_character_is_one_error(tmp_path: Path, char: str) -> None:
    """``compare DIR`` on a BEIR folder checked its queries for NUL and surrogates only: an ESC reached report.md."""
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "title": "", "text": "导出文件的方法"}\n', encoding="utf-8")
    (folder / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": f"导出{char}文件"}, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["compare", str(folder), "-t", "bigram", "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert f"control character (U+{ord(char):04X})" in result.stderr, result.stderr
    assert char not in result.stderr.replace("\n", "") or char == "\n"
    assert not (tmp_path / "out").exists()


#: Topic files whose one reading is {"7": "导出 文件", "8": "备份"}: TREC's SGML in the shapes found in the wild.
SAME_TOPICS = {
    "plain": "<top>\n<num> Number: 7\n<title> 导出 文件\n</top>\n<top>\n<num> 8\n<title> Topic: 备份\n</top>\n",
    "closing tags": "<top><num>7</num><title>导出 文件</title></top>\n<top><num> 8 </num><title> 备份 </title></top>\n",
    "upper-case tags": "<TOP>\n<NUM> 7\n<TITLE> 导出 文件\n</TOP>\n<TOP>\n<NUM> 8\n<TITLE> 备份\n</TOP>\n",
    "mixed-case tags": "<Top>\n<Num> Number: 7\n<Title> 导出 文件\n</Top>\n<top>\n<num>8\n<title>备份\n</top>\n",
    "unread fields after the title": (
        "<top>\n<num> 7\n<title> 导出 文件\n<smry> 备份 摘要\n<con> 概念\n</top>\n"
        "<top>\n<num> 8\n<title> 备份\n<E-title> backup\n<fac> x\n</top>\n"
    ),
    "unread fields before the number": (
        "<top>\n<head> Tipster\n<num> 7\n<dom> 领域 删除\n<title> 导出 文件\n</top>\n"
        "<top>\n<C-title> 删除\n<num> 8\n<title> 备份\n<desc> 说明\n</top>\n"
    ),
    "one line per topic": "<top> <num> 7 <title> 导出 文件 <desc> 说明 </top><top> <num> 8 <title> 备份 </top>",
    "CRLF and a BOM": (
        "\ufeff<top>\r\n<num> 7\r\n<title> 导出 文件\r\n</top>\r\n<top>\r\n<num> 8\r\n<title> 备份\r\n</top>\r\n"
    ),
    "no line breaks, no closing fields": "<top><num>7<title>导出 文件</top>\n<top>\n<num>8\n<title>备份\n</top>\n",
}


#: Topic files that must be refused, not read with a topic dropped, merged or overwritten.
BAD_TOPICS = {
    "last block unclosed": ("<top>\n<num> 7\n<title> 导出\n</top>\n<top>\n<num> 8\n<title> 备份\n", ":5: "),
    "block opened inside a block": ("<top>\n<num> 7\n<title> 导出\n<top>\n<num> 8\n<title> 备份\n</top>\n", ":4: "),
    "closing tag without its block": ("<top>\n<num> 7\n<title> 导出\n</top>\n</top>\n", ":5: "),
    "two titles": ("<top>\n<num> 7\n<title> 导出\n<title> 备份\n</top>\n", ":1: "),
    "two numbers": ("<top>\n<num> 7\n<num> 8\n<title> 导出\n</top>\n", ":1: "),
    "upper-case block unclosed": ("<TOP>\n<NUM> 7\n<TITLE> 导出\n", ":1: "),
    "a block without tags": ("<top>\n<num> 7\n<title> 导出\n</top>\n<top>\n</top>\n", ":5: "),
}


@pytest.mark.parametrize("case", sorted(SAME_TOPICS))
def test_trec_topic_tags_in_any_case_and_any_field_read_only_num_and_title(tmp_path: Path, case: str) -> None:
    """Bug: upper-case tags made the file one question per line, closing tags and unknown fields joined the query."""
    path = tmp_path / "topics.txt"
    path.write_text(SAME_TOPICS[case], encoding="utf-8", newline="")
    queries = read_topics_file(path)
    assert {qid: query.text for qid, query in queries.items()} == {"7": "导出 文件", "8": "备份"}


@pytest.mark.parametrize("case", sorted(BAD_TOPICS))
def test_malformed_trec_blocks_are_one_error_naming_the_line(tmp_path: Path, case: str) -> None:
    """Bug: an unclosed or nested <top>, or a repeated field, silently dropped or replaced a topic."""
    text, where = BAD_TOPICS[case]
    index = tmp_path / "docs.sqlite"
    build(make_docs(tmp_path / "docs"), index, builder="sections", tokenizer="bigram")
    topics = tmp_path / "topics.txt"
    topics.write_text(text, encoding="utf-8")
    run = tmp_path / "out.run"
    result = CliRunner().invoke(cli, ["search", str(index), "--queries", str(topics), "--run", str(run)])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: ") and where in result.stderr.splitlines()[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not run.exists()


class _CountingText(str):
    """A text that tallies how many characters ``count`` scans, to tell a linear read from a quadratic one."""

    scanned = 0

    def count(self, sub: str, start: int | None = None, end: int | None = None) -> int:  # type: ignore[override]
        start = 0 if start is None else start
        end = len(self) if end is None else end
        _CountingText.scanned += max(0, end - start)
        return super().count(sub, start, end)


def test_a_large_topics_file_is_read_in_one_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bug: each topic's line number was counted from the start of the file: 150,000 topics took minutes."""
    topics = 3000
    text = "".join(f"<top>\n<num> {i}\n<title> 导出 {i}\n</top>\n" for i in range(topics))
    path = tmp_path / "topics.txt"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setattr(questions, "read_text", lambda *args, **kwargs: _CountingText(text))
    _CountingText.scanned = 0
    assert len(questions.read_topics(path)) == topics
    assert _CountingText.scanned <= 2 * len(text)
