"""The impact engine's rankings against FTS5's, as the engine tests compare them."""

from __future__ import annotations

from typing import Any

from rag_eval.engines.fts5 import ranking_sql
from rag_eval.index.store import Index
from rag_eval.search.query import compile_query
from rag_eval.search.searching import search
from rag_eval.search.sql import filter_params


def fts5_top(index: Index, text: str, mode: str, limit: int, **filters: Any) -> list[tuple[int, float]]:
    """The plain FTS5 ranking statement (search's own), cut to ``limit``."""
    compiled = compile_query(index.tokenizer, text, mode)
    if compiled.expression is None:
        return []
    as_of, category, path_prefix = filters.get("as_of"), filters.get("category"), filters.get("path_prefix")
    sql = ranking_sql(index, as_of is not None, category is not None, path_prefix is not None)
    params = [compiled.expression, *filter_params(as_of, category, path_prefix), limit]
    return [(row[0], row[1]) for row in index.db.execute(f"{sql} LIMIT ?", params)]


def impact_top(index: Index, text: str, mode: str, limit: int, **filters: Any) -> list[tuple[int, float]]:
    result = search(
        index, text, mode=mode, limit=limit, deep=True, snippets=False, engine="impact", explain=True, **filters
    )
    assert result.explain["engine"] == "impact"
    return [(hit.id, hit.score) for hit in result.hits]


def assert_same(expected: list[tuple[int, float]], got: list[tuple[int, float]]) -> None:
    assert [i for i, _ in got] == [i for i, _ in expected]
    for (_, want), (_, score) in zip(expected, got, strict=True):
        assert abs(score - want) <= 1e-9 * abs(want)
