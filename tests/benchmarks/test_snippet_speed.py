"""Snippet cost on long passages (issue #10): linear in the text, one region when the terms occur early.

The long passage is the shipped bench-zh text repeated to a fixed length, so every run times the same
text. Issue #10's target: a search whose hits include a 10 MB passage under 50 ms (recorded in
``extra_info``; the SQL statement that reads the passage is timed on its own by ``snippets=False``).
Run with: pytest tests/benchmarks/test_snippet_speed.py -o addopts="" --benchmark-only
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import tokenizer_for
from helpers.benchtext import bench_text

from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.query import compile_query
from rag_eval.search.searching import search
from rag_eval.search.snippets import token_snippet, window_snippet

TEN_MB = 10_000_000
TARGET_MS = 50


def queries() -> dict[str, str]:
    """A short query, and a whole paragraph of the text (125 bigrams, far more occurrences to weigh)."""
    return {"short": "数据备份", "paragraph": bench_text()[12]}


def long_text(characters: int) -> str:
    """The benchmark text, paragraphs joined by blank lines, repeated and cut to ``characters``."""
    prose = "\n\n".join(bench_text())
    return (prose * (characters // len(prose) + 1))[:characters]


def highlight_terms(query: str) -> tuple[str, ...]:
    """The terms ``search`` highlights for ``query`` on a bigram index."""
    return compile_query(tokenizer_for("bigram"), query, "or").highlight


@pytest.fixture(scope="module")
def huge_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A passages/bigram index of one 10 MB passage and five ordinary ones."""
    folder = tmp_path_factory.mktemp("snippet-corpus")
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as out:
        out.write(json.dumps({"_id": "huge", "title": "", "text": long_text(TEN_MB)}, ensure_ascii=False) + "\n")
        for number, paragraph in enumerate(bench_text()[:5]):
            out.write(json.dumps({"_id": f"p{number}", "title": "", "text": paragraph}, ensure_ascii=False) + "\n")
    path = folder / "index.sqlite"
    build(folder, path, builder="passages", tokenizer="bigram")
    return path


@pytest.mark.parametrize("snippets", [True, False], ids=["with-snippets", "sql-only"])
@pytest.mark.parametrize("kind", ["short", "paragraph"])
def test_search_with_a_10_mb_passage(benchmark, huge_index: Path, kind: str, snippets: bool) -> None:
    benchmark.group = f"snippet:search-10MB-{kind}"
    query = queries()[kind]
    with Index.open(huge_index) as index:
        search(index, query, snippets=snippets)  # warm-up: page cache and prepared statements
        result = benchmark.pedantic(search, args=(index, query), kwargs={"snippets": snippets}, rounds=5, iterations=1)
    median_ms = benchmark.stats.stats.median * 1e3
    benchmark.extra_info.update(
        {
            "passage_chars": TEN_MB,
            "query": query,
            "hits": len(result.hits),
            "median_ms": round(median_ms, 2),
            "target_ms": TARGET_MS,
        }
    )
    huge = next(hit for hit in result.hits if hit.chunk.key == "huge")
    assert ("【" in huge.snippet) is snippets


@pytest.mark.parametrize("characters", [20_000, 40_000, 80_000, TEN_MB])
@pytest.mark.parametrize("kind", ["short", "paragraph"])
def test_window_snippet(benchmark, kind: str, characters: int) -> None:
    """The sections and passages builders' snippet on one long text, terms throughout it."""
    benchmark.group = f"snippet:window-{kind}"
    text, terms = long_text(characters), highlight_terms(queries()[kind])
    snippet = benchmark.pedantic(window_snippet, args=(text, terms), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update({"characters": characters, "terms": len(terms), "target_ms": TARGET_MS})
    assert "【" in snippet


def test_window_snippet_with_the_term_only_at_the_end(benchmark) -> None:
    """The worst case: the term's only occurrence ends the 10 MB text, so every region is read once (linear)."""
    benchmark.group = "snippet:window-worst"
    rare = "龘龘"  # not in bench-zh
    text = long_text(TEN_MB - len(rare)) + rare
    assert text.index(rare) == TEN_MB - len(rare)
    snippet = benchmark.pedantic(window_snippet, args=(text, (rare,)), rounds=3, iterations=1)
    benchmark.extra_info.update({"characters": len(text)})
    assert snippet.endswith("【龘龘】")


@pytest.mark.parametrize("characters", [20_000, 40_000, 80_000, 640_000])
def test_token_snippet(benchmark, characters: int) -> None:
    """The lines builder's snippet: an 18-token window slid over every token of one long line."""
    benchmark.group = "snippet:token"
    text = long_text(characters).replace("\n", " ")
    tokens = tokenizer_for("bigram").tokenize(text)
    terms = set(highlight_terms(queries()["short"]))
    snippet = benchmark.pedantic(token_snippet, args=(text, tokens, terms), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update({"characters": characters, "tokens": len(tokens)})
    assert "[" in snippet
