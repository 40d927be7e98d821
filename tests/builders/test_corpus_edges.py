"""Awkward corpora: binary, empty and broken files give one clear error naming the file, or are indexed
as documented, and a failed build leaves the previous index answering identically."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from helpers import invoke, make_docs, one_error
from helpers.corpora import lines_corpus, passages_corpus, sections_corpus

from rag_eval.errors import CorpusError
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.searching import search


def results(path: Path) -> list:
    with Index.open(path) as index:
        return [(h.chunk.key, h.score) for h in search(index, "导出 文件 备份", limit=20).hits]


@pytest.fixture
def docs_index(tmp_path: Path) -> tuple[Path, Path]:
    docs = make_docs(tmp_path / "docs")
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    return docs, path


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("binary.md", bytes(range(256)), r"binary.md: not valid UTF-8 at byte 128"),
        ("latin1.md", "café".encode("latin-1"), r"latin1.md: not valid UTF-8 at byte 3"),
        ("sub/truncated.md", "导出".encode()[:-1], r"sub/truncated.md: not valid UTF-8 at byte 3"),
    ],
)
def test_bad_markdown_names_the_file_and_keeps_the_index(docs_index, name: str, content: bytes, message: str) -> None:
    docs, path = docs_index
    before = results(path)
    (docs / name).parent.mkdir(parents=True, exist_ok=True)
    (docs / name).write_bytes(content)
    with pytest.raises(CorpusError, match=message):
        build(docs, path, builder="sections", tokenizer="bigram")
    assert results(path) == before


def test_empty_and_whitespace_files_are_indexed_as_nothing(docs_index) -> None:
    docs, path = docs_index
    (docs / "empty.md").write_bytes(b"")
    (docs / "blank.md").write_text("\n \n\t\n", encoding="utf-8")
    report = build(docs, path, builder="sections", tokenizer="bigram")
    assert report.files == 6 and report.chunks == 15


def test_broken_headings_are_text(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "odd.md").write_text(
        "#没有空格不是标题\n####### 七级不是标题\n # 缩进一格是标题\n#\n\n空标题下的正文\n", encoding="utf-8"
    )
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    with Index.open(path) as index:
        anchors = [row[0] for row in index.db.execute("SELECT anchor FROM chunks ORDER BY id")]
    assert anchors == ["_preamble", "缩进一格是标题", "section"]


def test_huge_file_is_refused_by_size_before_reading(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    with open(docs / "huge.md", "wb") as handle:
        handle.truncate(6_000_000)  # sparse: refused by its size, never read
    with pytest.raises(CorpusError, match=r"huge.md: 6000000 bytes is over the limit of 5000000 \(option max_bytes\)"):
        build(docs, tmp_path / "index.sqlite", builder="sections", tokenizer="bigram")


def test_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "docs")
    (tmp_path / "secret.md").write_text("# 机密\n", encoding="utf-8")
    (docs / "link.md").symlink_to(tmp_path / "secret.md")
    with pytest.raises(CorpusError, match=r"link.md: resolves outside the corpus root"):
        build(docs, tmp_path / "index.sqlite", builder="sections", tokenizer="bigram")


def test_symlink_inside_the_root_is_indexed(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "docs")
    (docs / "alias.md").symlink_to(docs / "notes.md")
    report = build(docs, tmp_path / "index.sqlite", builder="sections", tokenizer="bigram")
    assert report.files == 5


def test_lines_manifest_with_non_string_fields(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "a.txt").write_text("一行\n", encoding="utf-8")
    (root / "manifest.json").write_text(
        json.dumps([{"doc_id": 7, "revision": "r1", "status": "current", "path": "a.txt"}]), encoding="utf-8"
    )
    with pytest.raises(CorpusError, match=r"manifest.json entry 1: invalid doc_id 7"):
        build(root, tmp_path / "index.sqlite", builder="lines", tokenizer="bigram")


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
