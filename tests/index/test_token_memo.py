"""Tokens remembered across builds of one corpus (tune): the same indexes, each chunk tokenized once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from rag_eval.eval.datasets.shipped import export_shipped
from rag_eval.index import tokenize_pool
from rag_eval.index.tokenize_pool import TokenMemo, remembering_tokens
from rag_eval.index.writer import build
from rag_eval.tokenizers import get_tokenizer


def contents(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        rows = []
        for table in tables:
            if table == "meta":
                continue
            rows += sorted(((table, *row) for row in db.execute(f'SELECT * FROM "{table}"')), key=repr)
        return rows


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_shipped("handbook", tmp_path_factory.mktemp("hb") / "hb") / "corpus"


def test_remembered_tokens_build_the_same_indexes_and_tokenize_each_chunk_once(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs = ["bigram", "unigram", "unigram+bigram", "unigram^2+bigram^2"]
    for spec in specs:
        build(corpus, tmp_path / f"plain-{spec}.sqlite", builder="sections", tokenizer=spec)
    calls: list[tuple[str, int]] = []
    real = tokenize_pool._tokenize_chunks

    def counting(tokenizer, items, **kwargs):  # type: ignore[no-untyped-def]
        calls.append((tokenizer.system, len(items)))
        return real(tokenizer, items, **kwargs)

    monkeypatch.setattr(tokenize_pool, "_tokenize_chunks", counting)
    with remembering_tokens() as memo:
        for spec in specs:
            build(corpus, tmp_path / f"memo-{spec}.sqlite", builder="sections", tokenizer=spec)
    for spec in specs:
        assert contents(tmp_path / f"memo-{spec}.sqlite") == contents(tmp_path / f"plain-{spec}.sqlite"), spec
    tokenized: dict[str, int] = {}
    for system, count in calls:
        tokenized[system] = tokenized.get(system, 0) + count
    with sqlite3.connect(tmp_path / "plain-bigram.sqlite") as db:
        chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
    # the single builds keep offsets, which hybrids do not need: four builds, each chunk tokenized once
    assert chunks > 100
    assert tokenized == {get_tokenizer("bigram").system: chunks, get_tokenizer("unigram").system: chunks}
    assert memo.hits > 0


def test_a_memo_entry_without_offsets_does_not_serve_a_build_that_needs_them() -> None:
    memo = TokenMemo()
    memo.put("s", ("", "text"), ("", "t e x t", None))
    assert memo.get("s", ("", "text"), keep_offsets=False) == ("", "t e x t", None)
    assert memo.get("s", ("", "text"), keep_offsets=True) is None
    memo.put("s", ("", "more"), ("", "m", b"\x00"))
    assert memo.get("s", ("", "more"), keep_offsets=False) == ("", "m", None)


def test_the_memo_stops_remembering_past_its_size() -> None:
    memo = TokenMemo(max_chars=5)
    memo.put("s", ("", "abc"), ("", "a b c", None))
    memo.put("s", ("", "defg"), ("", "d e f g", None))
    assert memo.get("s", ("", "abc"), keep_offsets=False) is not None
    assert memo.get("s", ("", "defg"), keep_offsets=False) is None


def test_no_memo_outside_the_block(corpus: Path, tmp_path: Path) -> None:
    with remembering_tokens():
        pass
    assert tokenize_pool._memo is None
