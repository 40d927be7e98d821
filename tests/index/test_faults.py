"""Faults and concurrency: a killed build, a full disk, an unwritable path, readers during rebuilds."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import make_docs

from rag_eval.errors import IndexFileError
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.searching import search


def answers(path: Path, queries=("导出 文件", "备份", "ＦＡＱ", "资料库")) -> list:
    """Several queries' results read in one transaction, so they come from one snapshot."""
    with Index.open(path) as index:
        index.db.execute("BEGIN")
        try:
            return [[(h.chunk.key, h.score, h.snippet) for h in search(index, q, limit=10).hits] for q in queries]
        finally:
            index.db.execute("COMMIT")


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path]:
    docs = make_docs(tmp_path / "docs")
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="jieba")
    return docs, path


def test_sigkill_mid_transaction_keeps_the_previous_index(built, tmp_path: Path) -> None:
    docs, path = built
    before = answers(path)
    (docs / "notes.md").write_text("# 新的笔记\n\n导出以后要检查文件。\n", encoding="utf-8")
    # Killed inside the build's transaction, once its chunk rows are inserted and before the commit.
    code = (
        "import os, signal, sys; from rag_eval.index.writer import build; build(sys.argv[1], sys.argv[2], "
        "builder='sections', tokenizer='bigram', on_insert=lambda rows: os.kill(os.getpid(), signal.SIGKILL))"
    )
    result = subprocess.run([sys.executable, "-c", code, str(docs), str(path)], capture_output=True, text=True)
    assert result.returncode == -signal.SIGKILL
    assert answers(path) == before
    with Index.open(path) as index:
        assert index.tokenizer.name == "jieba" and index.count() == 15
    build(docs, path, builder="sections", tokenizer="bigram")  # and the next build works
    assert answers(path) != before


def test_full_disk_is_a_clear_error_and_keeps_the_index(built, tmp_path: Path) -> None:
    docs, path = built
    before = answers(path)
    (docs / "big.md").write_text("# 大文件\n\n" + "导出文件保留三十天。" * 2000, encoding="utf-8")
    db = sqlite3.connect(path, isolation_level=None)
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages + 2}")
    with pytest.raises(
        IndexFileError, match=r"writing the index failed \(database or disk is full\); the previous index is unchanged"
    ):
        build(docs, path, builder="sections", tokenizer="jieba", db=db)
    db.close()
    assert answers(path) == before


def test_unwritable_index_path(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "docs")
    (tmp_path / "file").write_text("not a folder", encoding="utf-8")
    with pytest.raises(IndexFileError, match=r"cannot create the index file"):
        build(docs, tmp_path / "file" / "index.sqlite", builder="sections", tokenizer="bigram")


def test_readers_see_the_old_or_the_new_snapshot(built, tmp_path: Path) -> None:
    docs, path = built
    old = answers(path)
    (docs / "guide" / "export.md").write_text("# 导出指南\n\n全新的导出说明：文件保留九十天。\n", encoding="utf-8")
    other = tmp_path / "other.sqlite"
    build(docs, other, builder="sections", tokenizer="jieba")
    new = answers(other)
    assert new != old
    seen: list = []
    errors: list = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                seen.append(answers(path))
        except Exception as exc:  # any error fails the test below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        for number in range(6):
            if number % 2 == 0:
                build(docs, path, builder="sections", tokenizer="jieba")
            else:
                (docs / "guide" / "export.md").write_text(make_docs_text(), encoding="utf-8")
                build(docs, path, builder="sections", tokenizer="jieba")
                (docs / "guide" / "export.md").write_text(
                    "# 导出指南\n\n全新的导出说明：文件保留九十天。\n", encoding="utf-8"
                )
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors
    assert len(seen) > 3
    assert all(snapshot in (old, new) for snapshot in seen)


def make_docs_text() -> str:
    from helpers import DOCS

    return DOCS["guide/export.md"]
