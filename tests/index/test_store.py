"""The index store: exact FTS5 terms, atomic and incremental builds, locks, tokenizer checks, ranking."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from helpers import ALL_SPECS, tokenizer_for

from rag_eval.errors import CorpusError, IndexFileError, MissingSourceError
from rag_eval.index.store import Index, RagEvalWarning, build_lock
from rag_eval.index.writer import build
from rag_eval.search.searching import search


def stored_terms(path: Path, rowid: int) -> tuple[list[str], list[str]]:
    db = sqlite3.connect(path)
    try:
        db.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, 'search', 'instance')")
        rows = db.execute("SELECT col, term FROM temp.v WHERE doc = ? ORDER BY col, offset", (rowid,)).fetchall()
    finally:
        db.close()
    title = [t for c, t in rows if c == "fts_title"]
    body = [t for c, t in rows if c != "fts_title"]
    return title, body


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_fts5vocab_terms_equal_python_tokens(spec: str, docs: Path, tmp_path: Path) -> None:
    extra = docs / "symbols.md"
    extra.write_text(
        "# C++ 与 C#\n\nPython 3.11、Wi-Fi 6、iPhone15 和 ＡＢＣ１２３；价格 1,200 元（含税）。Straße ﬁle ㍻\n",
        encoding="utf-8",
    )
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer=spec)
    tokenizer = tokenizer_for(spec)
    with Index.open(path) as index:
        rows = index.db.execute("SELECT id, title, text FROM chunks ORDER BY id").fetchall()
    assert len(rows) == 16
    for row in rows:
        title, body = stored_terms(path, row["id"])
        assert title == tokenizer.terms(row["title"]), row["title"]
        assert body == tokenizer.terms(row["text"]), row["text"][:40]


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_phrase_search_for_a_chunks_own_text_returns_it_first(spec: str, docs: Path, tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer=spec)
    with Index.open(path) as index:
        rows = index.db.execute("SELECT id, text FROM chunks ORDER BY id").fetchall()
        texts = [r["text"] for r in rows]
        checked = 0
        for row in rows:
            if sum(row["text"] in other for other in texts) > 1 or len(row["text"]) < 3:
                continue  # contained in another chunk: that chunk matches the phrase too
            hits = search(index, row["text"], mode="phrase", deep=True, limit=5).hits
            assert hits and hits[0].id == row["id"], row["text"][:40]
            checked += 1
    assert checked >= 10


def test_incremental_sync_retokenizes_only_changed_files(docs: Path, tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    first = build(docs, path, builder="sections", tokenizer="jieba")
    assert (first.files, first.files_tokenized, first.chunks_tokenized) == (4, 4, 15)
    again = build(docs, path, builder="sections", tokenizer="jieba")
    assert (again.files_tokenized, again.chunks_tokenized) == (0, 0)
    (docs / "notes.md").write_text("改过的笔记：导入前请确认权限。\n", encoding="utf-8")
    synced = build(docs, path, builder="sections", tokenizer="jieba")
    assert (synced.files_tokenized, synced.chunks_tokenized) == (1, 1)
    fresh = tmp_path / "fresh.sqlite"
    build(docs, fresh, builder="sections", tokenizer="jieba")
    with Index.open(path) as a, Index.open(fresh) as b:
        dump = "SELECT id, key, fts_body FROM chunks ORDER BY id"
        assert a.db.execute(dump).fetchall() == b.db.execute(dump).fetchall()
        assert [h.chunk.key for h in search(a, "导入").hits] == ["notes.md#_root"]
        assert search(a, "导入").hits[0].score == search(b, "导入").hits[0].score
    changed_spec = build(docs, path, builder="sections", tokenizer="jieba:mode=precise")
    assert changed_spec.chunks_tokenized == 15


def _snapshot(path: Path) -> list:
    with Index.open(path) as index:
        return [(h.chunk.key, h.score, h.snippet) for h in search(index, "导出 文件", limit=10).hits] + [
            dict(index.meta)
        ]


def test_failed_build_leaves_the_previous_index(docs: Path, tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    before = _snapshot(path)
    (docs / "bad.md").write_bytes(b"# ok\n\xff\xfe broken")
    with pytest.raises(CorpusError, match=r"bad.md: not valid UTF-8 at byte 5"):
        build(docs, path, builder="sections", tokenizer="bigram")
    assert _snapshot(path) == before


def test_error_during_the_write_rolls_back(docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    before = _snapshot(path)
    import rag_eval.index.writer as store

    def explode(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(store, "fts_schema", explode)
    with pytest.raises(RuntimeError, match="disk on fire"):
        build(docs, path, builder="sections", tokenizer="unigram")
    monkeypatch.undo()
    assert _snapshot(path) == before


def test_failed_new_index_leaves_no_file(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_bytes(b"\xff")
    with pytest.raises(CorpusError):
        build(tmp_path / "docs", tmp_path / "new.sqlite", builder="sections", tokenizer="bigram")
    assert list(tmp_path.iterdir()) == [tmp_path / "docs"]


def test_second_builder_is_refused(docs: Path, tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram")
    with build_lock(str(path)):
        with pytest.raises(IndexFileError, match="another build is running on this index"):
            build(docs, path, builder="sections", tokenizer="bigram")
        with Index.open(path) as index:  # readers are not blocked
            assert search(index, "导出").hits


def test_wal_mode_and_meta(docs: Path, tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections:max_chars=1500", tokenizer="jieba:mode=precise")
    with Index.open(path) as index:
        assert index.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert index.meta["builder"] == "sections:max_bytes=5000000,max_chars=1500,title_weight=1.0"
        assert index.meta["tokenizer"] == "jieba:hmm=true,mode=precise,t2s=false"
        assert len(index.meta["corpus_sha256"]) == 64
        assert json.loads(index.meta["query_defaults"])["mode"] == "or"


def test_changed_model_is_an_error_and_version_drift_a_warning(tmp_path: Path, docs: Path) -> None:
    words = tmp_path / "words.txt"
    words.write_text("导出指南 100 n\n", encoding="utf-8")
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer=f"jieba:userdict={words}")
    words.write_text("导出指南 5 n\n", encoding="utf-8")
    with pytest.raises(
        IndexFileError, match=r"the tokenizer changed since this index was built \(userdict: built with sha256:"
    ):
        Index.open(path)
    words.write_text("导出指南 100 n\n", encoding="utf-8")
    db = sqlite3.connect(path)
    with db:
        fingerprint = json.loads(db.execute("SELECT value FROM meta WHERE key = 'tokenizer_fingerprint'").fetchone()[0])
        fingerprint["jieba"] = "0.41.0"
        db.execute("UPDATE meta SET value = ? WHERE key = 'tokenizer_fingerprint'", (json.dumps(fingerprint),))
    db.close()
    with pytest.warns(RagEvalWarning, match=r"library versions changed since the build \(jieba 0.41.0 -> 0.42.1\)"):
        Index.open(path).close()


def test_ties_are_broken_by_chunk_id(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"_id": f"p{i}", "title": "", "text": "同样的文本"}, ensure_ascii=False) + "\n"
            for i in (3, 1, 2)
        ),
        encoding="utf-8",
    )
    path = tmp_path / "index.sqlite"
    build(corpus, path, builder="passages", tokenizer="bigram")
    with Index.open(path) as index:
        hits = search(index, "文本").hits
    assert [h.chunk.key for h in hits] == ["p3", "p1", "p2"]
    assert [h.id for h in hits] == [1, 2, 3] and len({h.score for h in hits}) == 1


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ('{"_id": "a", "text": "x"}\n{"_id": "a", "text": "y"}\n', r"corpus.jsonl:2: duplicate _id 'a'"),
        ('{"_id": "a", "text": "x"}\nnot json\n', r"corpus.jsonl:2: invalid JSON at column 1"),
        ('{"text": "x"}\n', r"corpus.jsonl:1: _id, title and text must be strings"),
        ('{"_id": 3, "text": "x"}\n', r"corpus.jsonl:1: _id, title and text must be strings"),
    ],
)
def test_passages_errors_name_file_and_line(tmp_path: Path, lines: str, message: str) -> None:
    (tmp_path / "corpus.jsonl").write_text(lines, encoding="utf-8")
    with pytest.raises(CorpusError, match=message):
        build(tmp_path, tmp_path / "index.sqlite", builder="passages", tokenizer="bigram")


def test_passages_index_titles(tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl").write_text(
        json.dumps({"_id": "d1", "title": "数据导出", "text": "正文没有那个词。"}, ensure_ascii=False)
        + "\n"
        + json.dumps({"_id": "d2", "title": "其他", "text": "正文也不相关。"}, ensure_ascii=False)
        + "\n",
        encoding="utf-8",
    )
    build(tmp_path, tmp_path / "index.sqlite", builder="passages:title_weight=2", tokenizer="jieba")
    with Index.open(tmp_path / "index.sqlite") as index:
        assert [h.chunk.key for h in search(index, "导出").hits] == ["d1"]
        assert index.defaults.title_weight == 2.0


def test_missing_source_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(MissingSourceError):
        build(tmp_path / "nope", tmp_path / "index.sqlite", builder="sections", tokenizer="bigram")
    with pytest.raises(FileNotFoundError):
        build(tmp_path / "nope", tmp_path / "index.sqlite", builder="sections", tokenizer="bigram")


def test_open_errors(tmp_path: Path) -> None:
    with pytest.raises(IndexFileError, match="no such index"):
        Index.open(tmp_path / "missing.sqlite")
    (tmp_path / "junk.sqlite").write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(IndexFileError, match="not a rag-eval index"):
        Index.open(tmp_path / "junk.sqlite")
    sqlite3.connect(tmp_path / "empty.sqlite").execute("CREATE TABLE t(x)").connection.close()
    with pytest.raises(IndexFileError, match=r"not a rag-eval index \(no meta table\)"):
        Index.open(tmp_path / "empty.sqlite")


def test_opening_with_another_tokenizer_is_an_error(docs: Path, tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="jieba")
    Index.open(path, tokenizer="jieba:mode=search").close()  # the same options, spelled out
    with pytest.raises(
        IndexFileError, match=r"built with tokenizer jieba:hmm=true,mode=search,t2s=false, not bigram:t2s=false"
    ):
        Index.open(path, tokenizer="bigram")
    with pytest.raises(IndexFileError, match=r"not jieba:hmm=true,mode=precise,t2s=false"):
        Index.open(path, tokenizer="jieba:mode=precise")


def test_compat_connection_with_another_tokenizer(tmp_path: Path) -> None:
    from make_corpus import make

    from rag_eval.compat import connect, retrieve, sync

    make(tmp_path / "corpus")
    db = connect(tmp_path / "index.sqlite")
    sync(db, tmp_path / "corpus")
    db.close()
    other = connect(tmp_path / "index.sqlite", "bigram")
    with pytest.raises(IndexFileError, match="built with tokenizer unicode61"):
        retrieve(other, "导出", as_of="2026-10-07")
    sync(other, tmp_path / "corpus")  # an explicit tokenizer rebuilds with it
    assert "compact" in {h["doc_id"] for h in retrieve(other, "导出", as_of="2026-10-07")}
    other.close()


@pytest.mark.parametrize("spec", ["jieba", "pkuseg:model=mini"])
def test_process_pool_gives_the_same_index(
    spec: str, docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rag_eval.index.tokenize_pool as pool

    serial = build(docs, tmp_path / "serial.sqlite", builder="sections", tokenizer=spec)
    monkeypatch.setattr(pool, "POOL_MIN_CHARS", 0)
    monkeypatch.setattr(pool, "BATCH", 3)
    monkeypatch.setenv("RAG_EVAL_WORKERS", "2")
    pooled = build(docs, tmp_path / "pooled.sqlite", builder="sections", tokenizer=spec)
    assert serial.extra["workers"] == 1 and pooled.extra["workers"] == 2
    assert len(pooled.extra["worker_load_seconds"]) >= 1
    dump = "SELECT id, key, fts_title, fts_body, offsets FROM chunks ORDER BY id"
    with Index.open(tmp_path / "serial.sqlite") as a, Index.open(tmp_path / "pooled.sqlite") as b:
        assert a.db.execute(dump).fetchall() == b.db.execute(dump).fetchall()


def test_spawned_workers_load_the_model_themselves(docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import rag_eval.index.tokenize_pool as pool

    monkeypatch.setattr(pool, "POOL_MIN_CHARS", 0)
    monkeypatch.setenv("RAG_EVAL_WORKERS", "2")
    monkeypatch.setattr(threading, "active_count", lambda: 2)  # as if a progress thread ran: no fork
    report = build(docs, tmp_path / "spawned.sqlite", builder="sections", tokenizer="jieba")
    assert report.extra["start_method"] == "spawn"
    assert all(seconds > 0 for seconds in report.extra["worker_load_seconds"])
