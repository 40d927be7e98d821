"""Hostile input, third audit: TREC topics files with odd tags, huge topics files, indexes whose postings
name chunks their chunks table lost. Each case ends in the right queries or one error line, never a
traceback or a silently wrong run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import make_docs

from rag_eval.cli import cli
from rag_eval.files import questions
from rag_eval.index.writer import build
from rag_eval.search.batch import read_topics_file

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


LOST_CHUNKS = {
    "a matching chunk row deleted": (
        "DELETE FROM chunks WHERE id = (SELECT min(id) FROM chunks WHERE text LIKE '%导出%')"
    ),
    "every chunk row deleted": "DELETE FROM chunks",
    "chunk ids renumbered": "UPDATE chunks SET id = id + 100000",
}

SEARCHES = {
    "search": ["search", "{index}", "导出"],
    "search --json": ["search", "{index}", "导出", "--json"],
    "search --explain --mode and": ["search", "{index}", "导出", "--explain", "--mode", "and"],
    "search --engine impact --mode or": ["search", "{index}", "导出", "--engine", "impact", "--mode", "or"],
    "batch search": ["search", "{index}", "--queries", "{queries}", "--run", "{run}"],
}


@pytest.fixture(scope="module")
def impact_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("impact")
    path = folder / "docs.sqlite"
    build(make_docs(folder / "docs"), path, builder="sections", tokenizer="bigram", engine="impact")
    return path


@pytest.mark.parametrize("search", sorted(SEARCHES))
@pytest.mark.parametrize("damage", sorted(LOST_CHUNKS))
def test_postings_naming_a_lost_chunk_are_a_damaged_index(
    impact_index: Path, tmp_path: Path, damage: str, search: str
) -> None:
    """Bug: impact postings naming a chunk the chunks table lost (a damaged page, tampering) raised KeyError."""
    index = tmp_path / "docs.sqlite"
    index.write_bytes(impact_index.read_bytes())
    db = sqlite3.connect(index)
    db.execute(LOST_CHUNKS[damage])
    db.commit()
    db.close()
    queries = tmp_path / "questions.txt"
    queries.write_text("导出\n备份\n", encoding="utf-8")
    run = tmp_path / "out.run"
    args = [a.format(index=index, queries=queries, run=run) for a in SEARCHES[search]]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, (result.output, repr(result.exception))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "damaged index" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not run.exists()
