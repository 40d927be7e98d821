"""A one-field index's impact postings counted from its terms as they are tokenized (impact.TermCounts):
the same table, byte for byte, as the pass over FTS5's instances, or that pass when the counts may differ."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import regex
from conftest import tokenizer_for
from test_impact import assert_same, fts5_top, impact_top

from rag_eval import impact, tokenize_pool, writer
from rag_eval.query import compile_query
from rag_eval.search import search
from rag_eval.store import Index
from rag_eval.tokenizers import TOKENIZERS, Token, Tokenizer, get_tokenizer
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
    """Builds from here on read FTS5's instances (no counting)."""
    monkeypatch.setattr(writer, "COUNT_BYTES", -1)


class CasedWords(Tokenizer):
    """A plug-in that keeps ASCII capitals (FTS5's whitespace clause folds them: the counts must too)."""

    name = "counted-cased-words"

    def _tokenize(self, text: str) -> list[Token]:
        return [Token(m.group(), m.start(), m.end()) for m in regex.finditer(r"[^\s，。]+", text)]


@pytest.fixture
def cased() -> Iterator[str]:
    TOKENIZERS.register(CasedWords)
    yield CasedWords.name
    TOKENIZERS.unregister(CasedWords.name)


@pytest.mark.parametrize("spec", ["bigram", "unigram", "jieba", "cased"])
@pytest.mark.parametrize("title_weight", [None, 3.0])
def test_counted_postings_are_the_instance_pass_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cased: str, spec: str, title_weight: float | None
) -> None:
    strategy: str | Tokenizer = cased if spec == "cased" else tokenizer_for(spec)
    source = write_corpus(tmp_path / "corpus.jsonl")
    builder = "passages" if title_weight is None else f"passages:title_weight={title_weight}"
    monkeypatch.setattr(impact, "_BATCH_INSTANCES", 7)  # many batches, each its own blocks: they must match
    counted = build(source, tmp_path / "counted.sqlite", builder=builder, tokenizer=strategy, engine="impact")
    assert counted.extra["postings_from"] == "counted terms" and counted.extra["count_seconds"] >= 0.0
    instance_pass(monkeypatch)
    read = build(source, tmp_path / "read.sqlite", builder=builder, tokenizer=strategy, engine="impact")
    assert read.extra["postings_from"] == "FTS5 instances"
    assert len(blocks_of(tmp_path / "read.sqlite")) > 5
    assert blocks_of(tmp_path / "counted.sqlite") == blocks_of(tmp_path / "read.sqlite")
    assert_exact(tmp_path / "counted.sqlite")


def assert_exact(path: Path, queries: tuple[str, ...] = QUERIES) -> None:
    """The impact engine ranks as FTS5 for every query it answers (a term with capitals falls back)."""
    answered = 0
    with Index.open(path) as index:
        for text in queries:
            if impact.fallback_reason(index, compile_query(index.tokenizer, text, "or")) is None:
                assert_same(fts5_top(index, text, "or", 100), impact_top(index, text, "or", 100))
                answered += 1
    assert answered >= 2


def test_a_sync_counts_the_tokens_it_reuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for n in range(4):
        (folder / f"doc{n}.md").write_text(f"# 标题{n}\n\n导出文件保留{n}天，备份的设置。\n", encoding="utf-8")
    path = tmp_path / "index.sqlite"
    build(folder, path, builder="sections", tokenizer="bigram", engine="impact")
    (folder / "doc2.md").write_text("# 新的\n\n导出备份的新说明。\n", encoding="utf-8")
    tokenized: list[int] = []
    real = writer.tokenize_chunks

    def counting(tokenizer: Tokenizer, items: list[tuple[str, str]], **options: Any) -> Any:
        tokenized.append(len(items))
        return real(tokenizer, items, **options)

    monkeypatch.setattr(writer, "tokenize_chunks", counting)
    synced = build(folder, path, builder="sections", tokenizer="bigram", engine="impact")
    assert tokenized == [1] and synced.chunks == 4  # three sections' tokens reused from the index
    assert synced.extra["postings_from"] == "counted terms"
    instance_pass(monkeypatch)
    build(folder, tmp_path / "fresh.sqlite", builder="sections", tokenizer="bigram", engine="impact")
    assert blocks_of(path) == blocks_of(tmp_path / "fresh.sqlite")


def test_stored_tokens_fts5_splits_fall_back_to_the_instance_pass(tmp_path: Path) -> None:
    """An index written before words were cut at control characters holds a token FTS5 splits in two; a sync
    that reuses it must not count it as one term: FTS5's row counts differ, so the instance pass is read."""
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


@pytest.mark.parametrize(
    ("builder", "spec", "settings"),
    [
        ("passages:title_weight=0.3", "bigram", {}),  # added instance by instance in FTS5's order
        ("passages", "unigram+bigram", {}),  # a hybrid's postings are per field
        ("passages", "unicode61", {}),  # FTS5 tokenizes a native strategy itself
        ("passages", "bigram", {"COUNT_BYTES": 100}),  # a source too large to count in memory
        ("passages", "bigram", {"COUNT_TERMS": 3}),  # a vocabulary past the limit
        ("passages", "bigram", {"COUNT_INSTANCES": 10}),
    ],
)
def test_what_is_not_counted_reads_fts5s_instances(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, builder: str, spec: str, settings: dict[str, int]
) -> None:
    for name, value in settings.items():
        monkeypatch.setattr(writer if name == "COUNT_BYTES" else impact, name, value)
    source = write_corpus(tmp_path / "corpus.jsonl")
    report = build(source, tmp_path / "index.sqlite", builder=builder, tokenizer=spec, engine="impact")
    assert report.extra["postings_from"] == "FTS5 instances"
    assert_exact(tmp_path / "index.sqlite")
    fts5_only = build(source, tmp_path / "fts5.sqlite", builder=builder, tokenizer=spec, engine="fts5")
    assert fts5_only.extra["postings_from"] == "none"


@pytest.mark.parametrize("spec", ["cased", "unicode61"])
def test_a_term_fts5_cuts_short_gets_no_postings_and_its_queries_go_to_fts5(
    tmp_path: Path, cased: str, spec: str
) -> None:
    """FTS5 keeps 32,768 bytes of a token (FTS5_MAX_TOKEN_SIZE), cut even inside a character: an impact build
    of such a term failed ("Could not decode to UTF-8"), and a query for it would have missed the shorter term
    FTS5 holds. unicode61 indexes a run of Han characters as one token, so one long unpunctuated line does it."""
    long_word = "长" * 11_000  # 33,000 bytes in UTF-8
    source = write_corpus(tmp_path / "corpus.jsonl", lines=8, extra=f" {long_word}")
    strategy = cased if spec == "cased" else spec
    report = build(source, tmp_path / "index.sqlite", builder="passages", tokenizer=strategy, engine="impact")
    assert report.extra["postings_from"] == "FTS5 instances"
    with Index.open(tmp_path / "index.sqlite") as index:
        compiled = compile_query(index.tokenizer, long_word, "or")
        assert "keeps only the first 32,768 bytes" in (impact.fallback_reason(index, compiled) or "")
        found = search(index, long_word, limit=20, deep=True, snippets=False, engine="impact", explain=True)
        assert found.explain["engine"] == "fts5" and len(found.hits) == 8
    assert_exact(tmp_path / "index.sqlite", ("导出 设置", "备份 文件", "的"))


def test_a_failure_while_computing_fails_the_build_and_leaves_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = write_corpus(tmp_path / "corpus.jsonl", lines=12)
    path = tmp_path / "index.sqlite"
    build(source, path, builder="passages", tokenizer="bigram", engine="impact")
    before = blocks_of(path)

    def broken(**fields: Any) -> None:
        raise MemoryError("no room for the postings")

    monkeypatch.setattr(impact, "_Counted", broken)
    source.write_text(source.read_text(encoding="utf-8").replace("导出", "备份"), encoding="utf-8")
    with pytest.raises(MemoryError, match="no room"):
        build(source, path, builder="passages", tokenizer="bigram", engine="impact")
    assert blocks_of(path) == before
    assert [thread.name for thread in threading.enumerate() if thread.name == "rag-eval postings"] == []


def test_a_failed_build_leaves_no_postings_thread_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next build forks its tokenizer's workers only while one thread runs: a thread left by a failed build
    would make every later build in the process start its workers afresh (jieba 0.5 s, pkuseg 5 s each)."""
    source = write_corpus(tmp_path / "corpus.jsonl", lines=12)

    def rebuild_fails(db: sqlite3.Connection, *args: Any) -> int:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(writer, "write_impacts", rebuild_fails)
    with pytest.raises(Exception, match="disk I/O error"):
        build(source, tmp_path / "index.sqlite", builder="passages", tokenizer="bigram", engine="impact")
    assert threading.active_count() == 1
    assert not (tmp_path / "index.sqlite").exists()


def test_every_position_is_handed_over_once_in_order_with_a_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tokenize_pool.WORKERS_ENV, "2")
    monkeypatch.setattr(tokenize_pool, "POOL_MIN_CHARS", 10)
    monkeypatch.setattr(tokenize_pool, "BATCH", 7)
    tokenizer = get_tokenizer("jieba")
    items = [("标题", f"第{n}段导出文件保留三十天。") for n in range(40)]
    handed: list[tuple[int, Any]] = []

    def on_results(positions: Any, tokens: Any) -> None:
        handed.extend(zip(positions, tokens, strict=True))

    results, report = tokenize_pool.tokenize_chunks(tokenizer, items, keep_offsets=False, on_results=on_results)
    assert report.workers == 2
    assert [position for position, _ in handed] == list(range(40))
    assert [tokens for _, tokens in handed] == results


def test_remembered_tokens_are_handed_over_too() -> None:
    tokenizer = get_tokenizer("bigram")
    items = [("", f"导出文件{n}") for n in range(6)]
    with tokenize_pool.remembering_tokens():
        first, _ = tokenize_pool.tokenize_chunks(tokenizer, items[:3], keep_offsets=False)
        handed: dict[int, Any] = {}

        def on_results(positions: Any, tokens: Any) -> None:
            for position, found in zip(positions, tokens, strict=True):
                assert position not in handed
                handed[position] = found

        results, _ = tokenize_pool.tokenize_chunks(tokenizer, items, keep_offsets=False, on_results=on_results)
    assert results[:3] == first
    assert [handed[position] for position in range(6)] == results


def test_bm25s_reads_a_term_fts5_cut_inside_a_character(tmp_path: Path) -> None:
    """bm25s reads FTS5's instances too: the cut term, not valid UTF-8, is a term of its own (named by its
    bytes) instead of an error, and every row keeps FTS5's number of tokens."""
    pytest.importorskip("bm25s")
    from rag_eval.eval.bm25s_system import index_tokens

    source = write_corpus(tmp_path / "corpus.jsonl", lines=4, extra=" " + "长" * 11_000)
    build(source, tmp_path / "index.sqlite", builder="passages", tokenizer="unicode61", engine="fts5")
    with Index.open(tmp_path / "index.sqlite") as index:
        rows, documents, vocabulary = index_tokens(index)
        sizes = dict(index.db.execute("SELECT id, sz FROM search_docsize").fetchall())
    cut = [name for name in vocabulary if name.startswith("\0")]
    assert len(cut) == 1 and len(bytes.fromhex(cut[0][1:])) == impact.FTS5_TOKEN_BYTES
    for rowid, document in zip(rows, documents, strict=True):
        assert len(document) == sum(impact._varints(sizes[rowid]))
        assert vocabulary[cut[0]] in document
