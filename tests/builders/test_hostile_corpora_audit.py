"""Hostile corpora against the builders, search, read and index list: values FTS5 would store or print otherwise
than the source holds them, and source layouts the code read wrongly."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
import regex
from click.testing import CliRunner
from helpers import invoke, one_error, tokenizer_for
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.builders.sections import split_markdown, split_oversized
from rag_eval.cli import cli
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.read import read

MANIFEST = '[{"doc_id": "a", "revision": "r1", "status": "current", "expires": null, "path": "%s"}]'


def lines_corpus(folder: Path, text: str, name: str = "a.txt") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    (folder / "manifest.json").write_text(MANIFEST % name, encoding="utf-8")
    return folder


def sections_corpus(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.md").write_text(text, encoding="utf-8")
    return folder


def passages_corpus(folder: Path, text: str, title: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"_id": "d1", "title": "", "text": "导出文件保留三十天"}, {"_id": "d2", "title": title, "text": text}]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return folder / "corpus.jsonl"


NUL_CORPORA = {
    "lines": (lambda folder, text: lines_corpus(folder, f"导出文件\n{text}\n"), "a.txt: a NUL character at line 2"),
    "sections": (
        lambda folder, text: sections_corpus(folder, f"# 导出\n\n导出文件\n{text}\n"),
        "a.md: a NUL character at line 4",
    ),
    "passages": (lambda folder, text: passages_corpus(folder, text), "corpus.jsonl:2: the text holds a NUL"),
    "passages-title": (
        lambda folder, text: passages_corpus(folder, "备份策略", title=text),
        "corpus.jsonl:2: the title holds a NUL",
    ),
}


def test_fts5_ends_text_at_nul_in_snippets_and_trigram() -> None:
    """Why a NUL is refused: FTS5's snippet() drops what follows a NUL up to the next token, and its trigram
    tokenizer indexes nothing after one (if SQLite ever stops doing either, this fails and the refusal can go)."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    db.execute("CREATE VIRTUAL TABLE g USING fts5(x, tokenize='trigram')")
    db.execute("INSERT INTO t VALUES ('aa' || char(0) || 'bb cc')")
    db.execute("INSERT INTO g VALUES ('aa' || char(0) || 'bbb')")
    assert db.execute("SELECT snippet(t, 0, '[', ']', '…', 8) FROM t WHERE t MATCH 'cc'").fetchone()[0] == "aa[cc]"
    assert db.execute("SELECT count(*) FROM g WHERE g MATCH 'bbb'").fetchone()[0] == 0


@pytest.mark.parametrize("builder", sorted(NUL_CORPORA))
@pytest.mark.parametrize("tokenizer", ["unicode61", "trigram", "bigram"])
def test_a_nul_in_corpus_text_is_one_error_and_the_previous_index_stays(
    tmp_path: Path, builder: str, tokenizer: str
) -> None:
    """Regression: a NUL in a source text was indexed; a lines index under unicode61 then quoted 'aa\\0bb cc' as
    'aa[cc]' (FTS5's snippet), and trigram made everything after the NUL unsearchable."""
    make, message = NUL_CORPORA[builder]
    source = make(tmp_path / "src", "备份策略 export")
    index = tmp_path / "index.sqlite"
    build(source, index, builder=builder.split("-")[0], tokenizer=tokenizer)
    before = hashlib.sha256(index.read_bytes()).hexdigest()
    make(tmp_path / "src", "备份\x00策略 export")
    line = one_error(invoke("index", "build", str(source), "-t", tokenizer, "-o", str(index)))
    assert message in line and "NUL" in line, line
    assert hashlib.sha256(index.read_bytes()).hexdigest() == before
    new = tmp_path / "new.sqlite"
    one_error(invoke("index", "build", str(source), "-t", tokenizer, "-o", str(new)))
    assert not new.exists()


def test_a_crlf_markdown_file_has_the_sections_of_its_lf_twin() -> None:
    """Regression: in a CRLF file a heading's closing #s stayed in its title and heading path ('标题 #'), and no
    blank line was seen between paragraphs, so an oversized section was cut mid-paragraph."""
    lines = ["# 标题 #", "", "a" * 800, "", "b" * 800, "  ", "```", "# 代码", "```", "", "c" * 800, "## 二 ##", "x", ""]
    sections = {}
    for newline in ("\n", "\r\n"):
        sections[newline] = [
            (part.anchor, part.title, part.heading_path, part.text.replace("\r", ""))
            for section in split_markdown(newline.join(lines), "a")
            for part in split_oversized(section, 2000)
        ]
    assert sections["\r\n"] == sections["\n"]
    assert [(anchor, title, path) for anchor, title, path, _ in sections["\n"]] == [
        ("标题", "标题", "标题"),
        ("标题~2", "标题", "标题"),
        ("二", "二", "标题 > 二"),
    ]
    assert sections["\n"][1][3] == "c" * 800  # split at the blank line, not inside a paragraph


def test_a_crlf_section_text_ends_where_its_lf_twin_ends(tmp_path: Path) -> None:
    """A CRLF section read back ends at its last line, not at a stray carriage return."""
    sections_corpus(tmp_path / "docs", "# 导出\r\n\r\n导出文件保留三十天\r\n\r\n## 备份\r\n\r\n备份策略\r\n")
    build(tmp_path / "docs", tmp_path / "index.sqlite", builder="sections", tokenizer="bigram")
    with Index.open(tmp_path / "index.sqlite") as index:
        assert read(index, "a.md#导出") == "# 导出\r\n\r\n导出文件保留三十天"
        assert read(index, "a.md#备份") == "## 备份\r\n\r\n备份策略"


@pytest.mark.parametrize(
    ("builder", "make"),
    [
        ("passages", lambda folder: passages_corpus(folder, "备份策略", title="第一行\n第二行\t第二列\r\x85\u2028末")),
        ("sections", lambda folder: sections_corpus(folder, "# 标题\t第二列\n\n备份策略\n")),
    ],
)
def test_index_list_prints_one_line_of_three_columns_per_entry(tmp_path: Path, builder: str, make) -> None:
    """Regression: a passage title holding a line break (any JSON string may) or a heading holding a tab broke
    index list's one entry per line, three tab-separated columns."""
    source = make(tmp_path / "src")
    build(source, tmp_path / "index.sqlite", builder=builder, tokenizer="bigram")
    result = CliRunner().invoke(cli, ["index", "list", str(tmp_path / "index.sqlite")])
    assert result.exit_code == 0, result.output
    rows = result.output.splitlines()
    assert len(rows) == (2 if builder == "passages" else 1), rows
    assert all(len(row.split("\t")) == 3 for row in rows), rows


def test_read_takes_the_place_search_prints_for_a_line_in_a_file_named_with_a_hash(tmp_path: Path) -> None:
    """Regression: search printed 'a#b.txt:2' for a lines corpus file 'a#b.txt', and read refused it ('no section
    'a#b.txt:2''): the target split at its '#' and PATH:N was never tried."""
    source = lines_corpus(tmp_path / "src", "导出文件\n保留三十天\n", name="a#b.txt")
    build(source, tmp_path / "index.sqlite", builder="lines", tokenizer="bigram")
    found = CliRunner().invoke(cli, ["search", str(tmp_path / "index.sqlite"), "保留"])
    assert found.exit_code == 0 and found.output.split("\t")[2] == "a#b.txt:2", found.output
    result = CliRunner().invoke(cli, ["read", str(tmp_path / "index.sqlite"), "a#b.txt:2"])
    assert result.exit_code == 0 and result.output == "保留三十天\n", result.output


@pytest.mark.parametrize("spec", ["bigram", "unigram", "jieba", "pkuseg:model=mini"])
@settings(max_examples=120, deadline=None)
@given(text=st.lists(st.sampled_from(list("导出文件ab ，\x01\x1b\x7f\u0308\u0301\u20dd")), max_size=24).map("".join))
def test_a_control_character_before_a_combining_mark_is_no_contract_break(spec: str, text: str) -> None:
    """Normalisation puts a control character and the combining mark after it in one unit, and a token widened
    back over that unit held the control character: pkuseg refused '导出 a\\x1b\\u0308b 文件' as a plug-in's
    broken contract, though the text is fine. Such a token is now dropped, as one widened over a space is."""
    tokenizer = tokenizer_for(spec)
    tokens = tokenizer.tokenize(text)
    assert all(token.text and not regex.search(r"[\s\x00-\x1f\x7f]", token.text) for token in tokens)
    assert tokenizer.terms(text) == [token.text for token in tokens]


@pytest.mark.parametrize("mode", ["or", "and", "phrase"])
def test_a_long_hit_of_a_native_strategy_gets_its_snippet_without_fts5s_quadratic_snippet(
    tmp_path: Path, mode: str
) -> None:
    """FTS5's snippet() takes time in the square of a row's matches (2 min 14 s for a 7-term query on a 0.96 MB
    line): a hit over FTS5_SNIPPET_CHARS gets its snippet from the strategy's mirror tokens, a short one FTS5's."""
    from rag_eval.search import searching as search_module

    words = ["导出", "备份", "文件", "保留"]
    long_line = " ".join(words[n % 4] for n in range(6_000))  # 17,999 characters
    folder = lines_corpus(tmp_path / "c", f"导出 备份 说明\n{long_line}\n")
    build(folder, tmp_path / "i.sqlite", builder="lines:max_bytes=10000000", tokenizer="unicode61")
    statements: list[str] = []
    with Index.open(tmp_path / "i.sqlite") as index:
        index.db.set_trace_callback(statements.append)
        found = search_module.search(index, "导出 备份", mode=mode, limit=10)
    by_line = {hit.chunk.line: hit.snippet for hit in found.hits}
    assert set(by_line) == {1, 2}
    assert len(by_line[2]) < 200 and "[导出]" in by_line[2] and "[备份]" in by_line[2]
    assert "[导出" in by_line[1]  # FTS5's own: a phrase is marked as one
    snippet_calls = [sql for sql in statements if "snippet(search" in sql]
    ids = {hit.chunk.line: hit.id for hit in found.hits}
    assert len(snippet_calls) == 1 and f"rowid IN ({ids[1]})" in snippet_calls[0]  # the short line's only


@pytest.mark.parametrize("spec", ["unicode61", "bigram"])
def test_search_output_cannot_drive_the_terminal(tmp_path: Path, spec: str) -> None:
    """A corpus's ESC sequences (and other control characters) reached the terminal raw in search's plain
    output; they are shown as their Unicode pictures, and each hit stays one line of four columns."""
    text = "导出文件 \x1b[2J\x1b]0;pwned\x07 备份\x7f数据\x9b31m"
    source = passages_corpus(tmp_path / "c", text, title="标题\x1b[1m")
    path = tmp_path / "i.sqlite"
    build(source, path, builder="passages", tokenizer=spec)
    result = CliRunner().invoke(cli, ["search", str(path), "导出 备份"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines and all(line.count("\t") == 3 for line in lines)
    assert not regex.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", result.output)
    assert "␛[2J" in result.output and "␇" in result.output
    listed = CliRunner().invoke(cli, ["index", "list", str(path)])
    assert listed.exit_code == 0 and not regex.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", listed.output)


def test_two_files_that_make_one_key_are_both_named(tmp_path: Path) -> None:
    """``a b.md`` and a file literally named ``a%20b.md`` make the same key; the error named only the key."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a b.md").write_text("# 导出\n\n导出文件\n", encoding="utf-8")
    (folder / "a%20b.md").write_text("# 导出\n\n备份文件\n", encoding="utf-8")
    error = one_error(
        invoke("index", "build", str(folder), "-b", "sections", "-t", "bigram", "-o", str(tmp_path / "i.sqlite"))
    )
    assert "duplicate chunk key 'a%20b.md#导出'" in error and "'a b.md'" in error and "'a%20b.md'" in error
    assert not (tmp_path / "i.sqlite").exists()
