"""The impact postings' blocks: how consecutive terms are grouped (a search per block instead of a step per
term) and the row sizes read from FTS5's docsize records (one byte per column under 128 tokens)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
from helpers.engines import assert_same, fts5_top, impact_top
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.engines import impact
from rag_eval.engines.impact import write as impact_write
from rag_eval.index.store import Index
from rag_eval.index.writer import build


def reference_blocks(ends: list[int]) -> list[tuple[int, int]]:
    """(first, last) term of each block, one term at a time: up to BLOCK_TERMS terms, a block ending with the
    term that brings its postings to BLOCK_POSTINGS."""
    starts = [0, *ends[:-1]]
    blocks = []
    first = 0
    while first < len(ends):
        last = first
        while last < len(ends) and last - first < impact.BLOCK_TERMS:
            last += 1
            if ends[last - 1] - starts[first] >= impact.BLOCK_POSTINGS:
                break
        blocks.append((first, last))
        first = last
    return blocks


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(1, 4), st.integers(1, 700)), min_size=1, max_size=400))
def test_blocks_group_terms_as_one_at_a_time_would(postings: list[int]) -> None:
    ends = np.cumsum(postings).tolist()
    terms = [f"t{number:05d}" for number in range(len(postings))]
    db = sqlite3.connect(":memory:")
    db.execute(impact_write._SCHEMA)
    rowids = np.concatenate([np.arange(1, count + 1) for count in postings])
    blocks = impact_write._Blocks(db, np.ones(1 + int(rowids.max())), 1.0)
    assert blocks.write(terms, rowids, np.ones(len(rowids)), ends) == len(terms)
    stored = db.execute("SELECT first, terms, bounds, rowids FROM impact_blocks ORDER BY first").fetchall()
    expected = reference_blocks(ends)
    assert [(row[0], json.loads(row[1])) for row in stored] == [
        (terms[first], terms[first:last]) for first, last in expected
    ]
    for (first, last), row in zip(expected, stored, strict=True):
        low = ends[first - 1] if first else 0
        assert np.frombuffer(row[2], "<i8").tolist() == [0, *(end - low for end in ends[first:last])]
        assert np.frombuffer(row[3], "<i8").tolist() == rowids[low : ends[last - 1]].tolist()


def test_rows_of_128_tokens_or_more_have_their_size_read_exactly(tmp_path: Path) -> None:
    """A column of 128 tokens or more takes a multi-byte varint in FTS5's docsize record: the fast path for
    one-byte sizes must not read it as bytes summed."""
    rows = [
        {
            "_id": f"p{n}",
            "title": "导出" * (n % 3),
            "text": " ".join(["导出", "备份", "文件"][n % 3] for _ in range(n * 40)),
        }
        for n in range(1, 9)
    ]
    source = tmp_path / "corpus.jsonl"
    source.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    build(source, tmp_path / "index.sqlite", builder="passages", tokenizer="unigram", engine="impact")
    with Index.open(tmp_path / "index.sqlite") as index:
        blobs = [blob for (blob,) in index.db.execute("SELECT sz FROM search_docsize")]
        assert any(not blob.isascii() for blob in blobs) and any(blob.isascii() for blob in blobs)
        for text in ("导出", "备份 文件", "导"):
            assert_same(fts5_top(index, text, "or", 20), impact_top(index, text, "or", 20))
