"""Awkward corpora: binary, empty and broken files give one clear error naming the file, or are indexed
as documented, and a failed build leaves the previous index answering identically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import make_docs

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
