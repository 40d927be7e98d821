"""Index files whose path holds characters a SQLite URI gives a meaning to (``?``, ``#``, ``%``, spaces): every
reader that opens the file by URI (read-only meta, the foreign-file check, the cache's in-use check) opens that file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from helpers import REPO
from helpers.compare_calls import compare

from rag_eval.eval.compare.runner import System
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.files.paths import sqlite_uri
from rag_eval.index.cached import clear_indexes
from rag_eval.index.meta import recorded_meta
from rag_eval.index.store import Index
from rag_eval.index.writer import build

DATASETS = REPO / "datasets"


@pytest.mark.parametrize("folder", ["a?b", "c#d", "e%20f", "g h", "%3F?#"])
def test_an_index_under_a_path_with_uri_characters_is_read_where_it_is(tmp_path: Path, folder: str) -> None:
    path = tmp_path / folder / "index.sqlite"
    path.parent.mkdir()
    build(DATASETS / "evidence-mini" / "corpus", path, builder="lines", tokenizer="bigram")
    assert recorded_meta(path)["builder"].startswith("lines")
    with Index.open(path) as index:
        assert index.meta["tokenizer"].startswith("bigram")
    build(DATASETS / "evidence-mini" / "corpus", path, builder="lines", tokenizer="bigram")  # over its own file
    db = sqlite3.connect(sqlite_uri(path, "mode=ro"), uri=True)
    try:
        assert db.execute("SELECT count(*) FROM chunks").fetchone()[0] > 0
    finally:
        db.close()
    made = {p.name for p in path.parent.iterdir()}
    assert made <= {"index.sqlite", "index.sqlite-wal", "index.sqlite-shm"}  # nothing under another name


def test_sqlite_uri_escapes_what_sqlite_reads() -> None:
    assert sqlite_uri("/x/a?b#c%d e", "mode=ro", "immutable=1") == "file:/x/a%3Fb%23c%25d%20e?mode=ro&immutable=1"
    assert sqlite_uri("/x/y") == "file:/x/y"


def test_cache_folder_with_uri_characters_keeps_an_index_open_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The open-elsewhere check built a ``file:`` URI without escaping: under such a folder it opened nothing."""
    cache = tmp_path / "c?a#c%20he d"
    monkeypatch.setenv("RAG_EVAL_CACHE", str(cache))
    report, _runs = compare(load_dataset("evidence-mini"), [System("bigram", "", "")])
    assert report["systems"][0]["tokens_per_passage"] > 0
    (index,) = sorted(cache.glob("indexes/*/*.sqlite"))
    reader = sqlite3.connect(index)  # a connection without rag-eval's lock, as another tool's
    try:
        reader.execute("SELECT count(*) FROM chunks").fetchone()
        assert clear_indexes().busy == 1 and index.exists()
    finally:
        reader.close()
    assert clear_indexes().removed == 1 and not index.exists()
