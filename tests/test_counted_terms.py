"""A one-field index's impact postings from the terms its build counted (rag_eval.counted): the pool's workers
count each batch, a thread makes the blocks while SQLite builds FTS5's index, and the result is the pass over
FTS5's instances byte for byte, or that pass whenever the counts may differ from what FTS5 holds."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import regex
from conftest import tokenizer_for
from hypothesis import given, settings
from hypothesis import strategies as st
from test_impact import assert_same, fts5_top, impact_top

from rag_eval import counted, impact, tokenize_pool, writer
from rag_eval.query import compile_query
from rag_eval.store import Index
from rag_eval.tokenizers import TOKENIZERS, Token, Tokenizer
from rag_eval.writer import build

WORDS = ["导出", "备份", "文件", "保留", "的", "Wi-Fi", "设置", "三十天"]
QUERIES = ("导出备份", "的 文件", "wi-fi 设置", "设置的设置 保留保留保留", "Wi-Fi")


def write_corpus(path: Path, lines: int = 60, extra: str = "") -> Path:
    rows = [
        {
            "_id": f"p{n}",
            "title": WORDS[n % 8] * (n % 3),
            "text": " ".join(WORDS[(n * k) % 8] for k in range(n % 11 + 1)) + extra,
        }
        for n in range(lines)
    ]
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def blocks_of(path: Path) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT * FROM impact_blocks ORDER BY first").fetchall()
    finally:
        db.close()


def instance_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Builds from here on read FTS5's instances (nothing counted)."""
    monkeypatch.setattr(writer, "COUNT_BYTES", -1)


def assert_exact(path: Path, queries: tuple[str, ...] = QUERIES) -> None:
    """The impact engine ranks as FTS5 for every query it answers."""
    answered = 0
    with Index.open(path) as index:
        for text in queries:
            if impact.fallback_reason(index, compile_query(index.tokenizer, text, "or")) is None:
                assert_same(fts5_top(index, text, "or", 100), impact_top(index, text, "or", 100))
                answered += 1
    assert answered >= 2


class CasedWords(Tokenizer):
    """A plug-in that keeps ASCII capitals (FTS5's whitespace clause folds them: the counts must too)."""

    name = "counted-cased-words"

    def _tokenize(self, text: str) -> list[Token]:
        return [Token(m.group(), m.start(), m.end()) for m in regex.finditer(r"[^\s，。]+", text)]


@pytest.fixture
def cased() -> Any:
    TOKENIZERS.register(CasedWords)
    yield CasedWords.name
    TOKENIZERS.unregister(CasedWords.name)


def postings_threads() -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name == "rag-eval postings"]


@pytest.mark.parametrize("spec", ["bigram", "unigram", "jieba", "cased"])
@pytest.mark.parametrize("title_weight", [None, 3.0])
def test_counted_postings_are_the_instance_pass_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cased: str, spec: str, title_weight: float | None
) -> None:
    strategy: str | Tokenizer = cased if spec == "cased" else tokenizer_for(spec)
    source = write_corpus(tmp_path / "corpus.jsonl")
    builder = "passages" if title_weight is None else f"passages:title_weight={title_weight}"
    monkeypatch.setattr(impact, "_BATCH_INSTANCES", 7)  # many batches, each its own blocks: they must match
    made = build(source, tmp_path / "counted.sqlite", builder=builder, tokenizer=strategy, engine="impact")
    assert made.extra["postings_from"] == "counted terms"
    instance_pass(monkeypatch)
    read = build(source, tmp_path / "read.sqlite", builder=builder, tokenizer=strategy, engine="impact")
    assert read.extra["postings_from"] == "FTS5 instances"
    assert len(blocks_of(tmp_path / "read.sqlite")) > 5
    assert blocks_of(tmp_path / "counted.sqlite") == blocks_of(tmp_path / "read.sqlite")
    assert_exact(tmp_path / "counted.sqlite")
    assert postings_threads() == []


def test_a_pools_workers_count_their_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a pool, the workers count what they tokenize (the build's report says how long that took them); the
    probe's chunks, tokenized in this process, are counted by the thread: the blocks are the same either way."""
    monkeypatch.setenv(tokenize_pool.WORKERS_ENV, "2")
    monkeypatch.setattr(tokenize_pool, "POOL_MIN_CHARS", 10)
    monkeypatch.setattr(tokenize_pool, "BATCH", 7)
    monkeypatch.setattr(impact, "_BATCH_INSTANCES", 11)
    source = write_corpus(tmp_path / "corpus.jsonl", lines=90)
    jieba = tokenizer_for("jieba")
    made = build(source, tmp_path / "counted.sqlite", builder="passages", tokenizer=jieba, engine="impact")
    assert made.extra["workers"] == 2
    assert made.extra["postings_from"] == "counted terms"
    instance_pass(monkeypatch)
    build(source, tmp_path / "read.sqlite", builder="passages", tokenizer=jieba, engine="impact")
    assert blocks_of(tmp_path / "counted.sqlite") == blocks_of(tmp_path / "read.sqlite")


def test_pool_counts_cover_every_batch_at_its_position(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tokenize_pool.WORKERS_ENV, "2")
    monkeypatch.setattr(tokenize_pool, "POOL_MIN_CHARS", 10)
    monkeypatch.setattr(tokenize_pool, "BATCH", 7)
    items = [("标题", f"第{n}段导出文件保留三十天。") for n in range(40)]
    results, report = tokenize_pool.tokenize_chunks(tokenizer_for("jieba"), items, keep_offsets=False, count=True)
    assert report.workers == 2
    assert [position for position, _partial in report.counted] == list(range(0, 40, 7))
    for position, partial in report.counted:
        assert partial is not None
        expected = counted.count_terms([(title, body) for title, body, _ in results[position : position + 7]])
        assert partial == expected
    plain, report = tokenize_pool.tokenize_chunks(tokenizer_for("jieba"), items, keep_offsets=False)
    assert plain == results and report.counted == []


TERM = st.text(st.sampled_from("aZb导出Q设的x"), min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(TERM, max_size=4), st.lists(TERM, max_size=12)), min_size=1, max_size=6))
def test_count_terms_counts_each_chunk_and_column_as_fts5_folds_them(chunks: list[tuple[list[str], list[str]]]) -> None:
    partial = counted.count_terms([(" ".join(title), " ".join(body)) for title, body in chunks])
    assert partial is not None
    vocab = partial.vocab.split(" ") if partial.vocab else []
    term_of = dict(zip(partial.firsts, vocab, strict=True))
    slots = [slot for slot, size in enumerate(partial.sizes) for _ in range(size)]
    got = Counter((term_of[number], slot // 2, slot % 2) for number, slot in zip(partial.ids, slots, strict=True))
    expected = Counter(
        (term.lower(), chunk, column)
        for chunk, columns in enumerate(chunks)
        for column, terms in enumerate(columns)
        for term in terms
    )
    assert got == expected
    assert partial.sizes.tolist() == [len(terms) for title, body in chunks for terms in (title, body)]
    assert len(set(vocab)) == len(vocab)


@pytest.mark.parametrize("separator", ["\x01", "\x1f", "\x7f", "\t", "\n"])
def test_a_term_fts5_would_split_is_not_counted(separator: str) -> None:
    assert counted.count_terms([("", f"导出 备{separator}份")]) is None
    assert counted.count_terms([(f"导{separator}出", "备份")]) is None


def test_a_sync_counts_the_tokens_it_reuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for n in range(4):
        (folder / f"doc{n}.md").write_text(f"# 标题{n}\n\n导出文件保留{n}天，备份的设置。\n", encoding="utf-8")
    path = tmp_path / "index.sqlite"
    build(folder, path, builder="sections", tokenizer="bigram", engine="impact")
    (folder / "doc2.md").write_text("# 新的\n\n导出备份的新说明。\n", encoding="utf-8")
    synced = build(folder, path, builder="sections", tokenizer="bigram", engine="impact")
    assert synced.chunks_tokenized == 1 and synced.chunks == 4  # three sections' tokens reused from the index
    assert synced.extra["postings_from"] == "counted terms"
    instance_pass(monkeypatch)
    build(folder, tmp_path / "fresh.sqlite", builder="sections", tokenizer="bigram", engine="impact")
    assert blocks_of(path) == blocks_of(tmp_path / "fresh.sqlite")


def test_stored_tokens_fts5_splits_fall_back_to_the_instance_pass(tmp_path: Path) -> None:
    """An index whose stored terms hold a control character (written by another version, or damaged) has a
    token FTS5 splits in two; a sync that reuses it must not count it as one term."""
    source = write_corpus(tmp_path / "corpus.jsonl", lines=12)
    path = tmp_path / "index.sqlite"
    build(source, path, builder="passages", tokenizer="bigram", engine="impact")
    db = sqlite3.connect(path)
    db.execute("UPDATE chunks SET fts_body = fts_body || ' 导出\x01备份' WHERE id = 3")
    db.commit()
    db.close()
    synced = build(source, path, builder="passages", tokenizer="bigram", engine="impact")
    assert synced.chunks_tokenized == 0  # every chunk's stored tokens reused, the edited one too
    assert synced.extra["postings_from"] == "FTS5 instances"
    with Index.open(path) as index:
        for text in ("导出", "备份", "导出备份"):
            assert_same(fts5_top(index, text, "or", 20), impact_top(index, text, "or", 20))


def test_counts_that_differ_from_fts5s_rows_are_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check against FTS5's own row sizes: counts missing one term of one chunk are thrown away."""
    real = counted.count_terms

    def one_short(columns: Any) -> Any:
        columns = list(columns)
        title, body = columns[0]
        columns[0] = (title, " ".join(body.split(" ")[:-1]))
        return real(columns)

    monkeypatch.setattr(counted, "count_terms", one_short)
    source = write_corpus(tmp_path / "corpus.jsonl", lines=30)
    made = build(source, tmp_path / "index.sqlite", builder="passages", tokenizer="bigram", engine="impact")
    assert made.extra["postings_from"] == "FTS5 instances"
    monkeypatch.setattr(counted, "count_terms", real)
    instance_pass(monkeypatch)
    build(source, tmp_path / "read.sqlite", builder="passages", tokenizer="bigram", engine="impact")
    assert blocks_of(tmp_path / "index.sqlite") == blocks_of(tmp_path / "read.sqlite")


@pytest.mark.parametrize(
    ("builder", "spec", "count_bytes"),
    [
        ("passages:title_weight=0.3", "bigram", None),  # FTS5 adds such weights instance by instance
        ("passages", "unigram+bigram", None),  # a hybrid's postings are per field
        ("passages", "unicode61", None),  # FTS5 tokenizes a native strategy itself
        ("passages", "bigram", 100),  # a source too large to count in memory
    ],
)
def test_what_is_not_counted_reads_fts5s_instances(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, builder: str, spec: str, count_bytes: int | None
) -> None:
    if count_bytes is not None:
        monkeypatch.setattr(writer, "COUNT_BYTES", count_bytes)
    source = write_corpus(tmp_path / "corpus.jsonl")
    report = build(source, tmp_path / "index.sqlite", builder=builder, tokenizer=spec, engine="impact")
    assert report.extra["postings_from"] == "FTS5 instances"
    assert_exact(tmp_path / "index.sqlite")
    fts5_only = build(source, tmp_path / "fts5.sqlite", builder=builder, tokenizer=spec, engine="fts5")
    assert fts5_only.extra["postings_from"] == "none"
    assert postings_threads() == []


def test_a_term_fts5_cuts_short_is_left_to_the_instance_pass(tmp_path: Path, cased: str) -> None:
    long_word = "长" * 11_000  # 33,000 bytes in UTF-8: FTS5 keeps 32,768
    source = write_corpus(tmp_path / "corpus.jsonl", lines=8, extra=f" {long_word}")
    report = build(source, tmp_path / "index.sqlite", builder="passages", tokenizer=cased, engine="impact")
    assert report.extra["postings_from"] == "FTS5 instances"
    assert_exact(tmp_path / "index.sqlite", ("导出 设置", "备份 文件", "的"))


def test_a_failure_while_computing_fails_the_build_and_leaves_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = write_corpus(tmp_path / "corpus.jsonl", lines=12)
    path = tmp_path / "index.sqlite"
    build(source, path, builder="passages", tokenizer="bigram", engine="impact")
    before = blocks_of(path)

    def broken(*args: Any) -> None:
        raise MemoryError("no room for the postings")

    monkeypatch.setattr(counted, "Prepared", broken)
    source.write_text(source.read_text(encoding="utf-8").replace("导出", "备份"), encoding="utf-8")
    with pytest.raises(MemoryError, match="no room"):
        build(source, path, builder="passages", tokenizer="bigram", engine="impact")
    assert blocks_of(path) == before
    assert postings_threads() == []


def test_a_failed_build_leaves_no_postings_thread_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next build forks its tokenizer's workers only while one thread runs: a thread left by a failed build
    would make every later build in the process start its workers afresh (jieba 0.5 s, pkuseg 5 s each)."""
    source = write_corpus(tmp_path / "corpus.jsonl", lines=12)
    started = threading.Event()
    real = counted.TermCounts._compute

    def slow(self: counted.TermCounts, weights: list[float]) -> Any:
        started.set()
        return real(self, weights)

    def rebuild_fails(db: sqlite3.Connection, *args: Any) -> int:
        assert started.wait(10)
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(counted.TermCounts, "_compute", slow)
    monkeypatch.setattr(writer, "write_impacts", rebuild_fails)
    with pytest.raises(Exception, match="disk I/O error"):
        build(source, tmp_path / "index.sqlite", builder="passages", tokenizer="bigram", engine="impact")
    assert postings_threads() == []
    assert not (tmp_path / "index.sqlite").exists()
