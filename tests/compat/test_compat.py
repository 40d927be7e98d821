"""The seeds' API (rag_eval.compat: connect, sync, retrieve, search_tool, verify_source and DocIndex): it still takes
what seeds 000 and 001 pass, and refuses a wrong argument type, a None where a value is due, a closed or foreign
connection with one error."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from make_corpus import make

from rag_eval.compat import DocIndex, connect, expression, retrieve, search_tool, sync, verify_source
from rag_eval.errors import CorpusError, IndexFileError, QueryError, ReadError, SpecError

TODAY = "2026-10-07"


@pytest.fixture
def seeded(tmp_path: Path):
    root = tmp_path / "corpus"
    make(root)
    db = connect(tmp_path / "index.sqlite")
    sync(db, root)
    yield db, root
    db.close()


@pytest.mark.parametrize("call", ["retrieve", "search_tool"])
def test_seed_searches_refuse_a_missing_as_of_date(seeded, call: str) -> None:
    """Bug: as_of=None searched without the status and expiry filter and returned the archived handbook-v1."""
    db, _ = seeded
    hits = (lambda as_of: retrieve(db, "7 天", as_of=as_of)) if call == "retrieve" else None
    if hits is None:
        hits = lambda as_of: search_tool(db, "7 天", as_of=as_of)["hits"]  # noqa: E731
    with pytest.raises(QueryError, match="as-of date None: use YYYY-MM-DD"):
        hits(None)
    assert hits(TODAY) == []  # the one line with '7 天' is archived


@pytest.mark.parametrize("limit", [None, True, 0, 21, 1.0, "3"])
def test_retrieve_takes_only_an_int_limit_from_1_to_20(seeded, limit) -> None:
    """Bug: limit=None was taken as the default where seed 000 refuses anything but an int from 1 to 20."""
    db, _ = seeded
    with pytest.raises(QueryError, match="limit must be an integer from 1 to 20"):
        retrieve(db, "导出", as_of=TODAY, limit=limit)


@pytest.mark.parametrize("value", [None, 1, b"index.sqlite", ["index.sqlite"]])
def test_connect_and_docindex_refuse_a_path_that_is_not_a_path(tmp_path: Path, monkeypatch, value) -> None:
    """Bug: connect(None) created a file named 'None' (or '1', "b'index.sqlite'") in the working directory."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(IndexFileError, match="must be a str or os.PathLike"):
        connect(value)
    with pytest.raises(IndexFileError, match="db_path must be a str or os.PathLike"):
        DocIndex(tmp_path, value)
    with pytest.raises(CorpusError, match="docs_root must be a str or os.PathLike"):
        DocIndex(value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["folder", "missing folder", "text file"])
def test_connect_to_what_cannot_be_an_index_is_one_error(tmp_path: Path, kind: str) -> None:
    target = {"folder": tmp_path, "missing folder": tmp_path / "no" / "i.sqlite", "text file": tmp_path / "a.txt"}[kind]
    (tmp_path / "a.txt").write_text("导出 文件 保留 30 天\n" * 200, encoding="utf-8")
    with pytest.raises(IndexFileError, match="cannot open the index|refusing to open it as an index"):
        connect(target)
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "导出 文件 保留 30 天\n" * 200


@pytest.mark.parametrize("folder", [None, 1, b"corpus"])
def test_sync_refuses_a_folder_that_is_not_a_path(seeded, folder) -> None:
    db, _ = seeded
    with pytest.raises(CorpusError, match="corpus folder must be a str or os.PathLike"):
        sync(db, folder)
    assert len(retrieve(db, "导出 保留", as_of=TODAY)) == 2


@pytest.mark.parametrize("tokenizer", [1, b"bigram", ["bigram"]])
def test_every_seed_call_that_takes_a_tokenizer_refuses_one_that_is_not_a_spec(seeded, tmp_path: Path, tokenizer):
    db, root = seeded
    calls = [
        lambda: expression("导出", tokenizer),
        lambda: sync(db, root, tokenizer=tokenizer),
        lambda: connect(tmp_path / "other.sqlite", tokenizer),
        lambda: DocIndex(tmp_path, tokenizer=tokenizer),
    ]
    for call in calls:
        with pytest.raises(SpecError, match="tokenizer must be a spec string"):
            call()
    with pytest.raises(SpecError, match="not NoneType"):
        expression("导出", None)
    assert len(retrieve(db, "导出 保留", as_of=TODAY)) == 2


def seed_call(call: str, db: Any, folder: Path) -> object:
    """One of seed 000's calls that take a connection, on ``db`` (and ``folder`` for sync)."""
    if call == "retrieve":
        return retrieve(db, "导出", as_of=TODAY)
    if call == "search_tool":
        return search_tool(db, "导出", as_of=TODAY)
    return sync(db, folder)


@pytest.mark.parametrize("db", [None, "index.sqlite", 3])
@pytest.mark.parametrize("call", ["retrieve", "search_tool", "sync"])
def test_seed_calls_refuse_what_is_not_a_connection(tmp_path: Path, db, call: str) -> None:
    with pytest.raises(IndexFileError, match="db must be a connection"):
        seed_call(call, db, tmp_path)


@pytest.mark.parametrize("call", ["retrieve", "search_tool", "sync"])
def test_seed_calls_on_a_closed_connection_are_one_error(tmp_path: Path, call: str) -> None:
    root = tmp_path / "corpus"
    make(root)
    db = connect(tmp_path / "index.sqlite")
    db.close()
    with pytest.raises(IndexFileError, match="closed"):
        seed_call(call, db, root)


@pytest.mark.parametrize(("path", "anchor"), [(None, None), (3, None), ("a.md", 5), ("a.md", b"x")])
def test_docindex_read_refuses_a_path_or_anchor_that_is_not_text(tmp_path: Path, path, anchor) -> None:
    """Bug: read(None) looked for a file named 'None'; read('a.md', 5) for the section '5'."""
    (tmp_path / "a.md").write_text("# 导出\n\n导出文件\n", encoding="utf-8")
    docs = DocIndex(tmp_path)
    docs.build()
    with pytest.raises(ReadError, match="must be a string"):
        docs.read(path, anchor)
    assert docs.read("a.md", "导出") == "# 导出\n\n导出文件"
    docs.close()


def test_seed_calls_still_take_what_the_seeds_pass(seeded, tmp_path: Path) -> None:
    db, root = seeded
    assert sync(db, str(root)) == 12  # a str folder, as seed 000's main() passes
    assert expression("导出 保留") == '"导出" AND "保留"'
    hits = retrieve(db, "导出 保留", as_of=TODAY)
    assert {hit["doc_id"] for hit in hits} == {"handbook", "meeting"}
    assert all(verify_source(str(root), hit) for hit in hits)
    assert search_tool(db, "发票", as_of=TODAY)["hits"] == []
    plain = sqlite3.connect(tmp_path / "plain.sqlite")  # a plain sqlite3 connection still syncs
    assert sync(plain, root) == 12
    plain.close()


def test_a_tampered_source_never_verifies(seeded, tmp_path: Path) -> None:
    db, root = seeded
    hit = retrieve(db, "30 天", as_of=TODAY)[0]
    original = (root / hit["path"]).read_bytes()
    (tmp_path / "copy.txt").write_bytes(original)
    (root / hit["path"]).unlink()
    os.symlink(tmp_path / "copy.txt", root / hit["path"])  # the same bytes, but from outside the root
    assert verify_source(root, hit) is False
    (root / hit["path"]).unlink()
    os.mkfifo(root / hit["path"])  # a FIFO is never opened for reading (it would block)
    assert verify_source(root, hit) is False
    (root / hit["path"]).unlink()
    (root / hit["path"]).write_bytes(original)
    assert verify_source(root, hit) is True
    for tampered in (
        {**hit, "line": True},
        {**hit, "text": hit["text"] + " "},
        {**hit, "sha256": hit["sha256"].upper()},
    ):
        assert verify_source(root, tampered) is False
