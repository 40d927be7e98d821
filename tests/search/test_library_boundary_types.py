"""The library's entry points refuse arguments of the wrong type with one RagEvalError before touching any
file (left by the lines and compat audit): writer.build(None, ...) raised TypeError, tokenizer=3 an
AttributeError; compat.connect on someone else's SQLite database switched it to WAL (a lasting change to its
header) before a later sync refused it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from rag_eval import compat
from rag_eval.errors import IndexFileError, SpecError
from rag_eval.index.writer import build


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# 导出\n\n导出文件保留三十天。\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize("value", [None, 3, b"docs", ["docs"]])
def test_build_refuses_a_source_or_index_path_that_is_not_a_path(
    docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: object
) -> None:
    monkeypatch.chdir(tmp_path)
    before = sorted(path.name for path in tmp_path.iterdir())
    with pytest.raises(IndexFileError, match="source must be a str or os.PathLike"):
        build(value, tmp_path / "kb.sqlite", builder="sections", tokenizer="bigram")  # type: ignore[arg-type]
    with pytest.raises(IndexFileError, match="index path must be a str or os.PathLike"):
        build(docs, value, builder="sections", tokenizer="bigram")  # type: ignore[arg-type]
    assert sorted(path.name for path in tmp_path.iterdir()) == before


@pytest.mark.parametrize("value", [3, b"bigram", ["bigram"], 1.5])
def test_build_refuses_a_builder_or_tokenizer_that_is_not_a_spec(docs: Path, tmp_path: Path, value: object) -> None:
    with pytest.raises(SpecError, match="tokenizer must be a spec string"):
        build(docs, tmp_path / "kb.sqlite", builder="sections", tokenizer=value)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="builder must be a spec string"):
        build(docs, tmp_path / "kb.sqlite", builder=value, tokenizer="bigram")  # type: ignore[arg-type]
    assert not (tmp_path / "kb.sqlite").exists()


def test_compat_connect_leaves_someone_elses_database_untouched(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs.db"
    db = sqlite3.connect(theirs)
    db.execute("CREATE TABLE notes (body TEXT)")
    db.execute("INSERT INTO notes VALUES ('keep me')")
    db.commit()
    db.close()
    before = theirs.read_bytes()
    with pytest.raises(IndexFileError, match="refusing to open it as an index"):
        compat.connect(theirs)
    assert theirs.read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["theirs.db"]


def test_compat_connect_still_opens_new_and_own_indexes(docs: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "lines"
    manifest.mkdir()
    (manifest / "a.txt").write_text("导出文件保留三十天\n", encoding="utf-8")
    (manifest / "manifest.json").write_text(
        '[{"doc_id": "a", "revision": "r1", "status": "current", "expires": null, "path": "a.txt"}]', encoding="utf-8"
    )
    db = compat.connect(tmp_path / "ev.sqlite", "bigram")
    assert compat.sync(db, manifest) == 1
    db.close()
    again = compat.connect(tmp_path / "ev.sqlite")
    assert compat.retrieve(again, "导出", as_of="2026-01-01")
    again.close()
