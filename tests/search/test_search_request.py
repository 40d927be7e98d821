"""A search request is one value: the library, the evidence result, batch search and the MCP server pass a
``SearchRequest`` instead of a dozen copied keyword arguments (``path_prefix`` and its siblings were re-declared
in 11 signatures). The keyword API builds the same request, so both give the same answer and the same errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import make_docs

from rag_eval.errors import QueryError, RagEvalError
from rag_eval.index.processing import QueryProcessing
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.evidence import evidence
from rag_eval.search.request import SearchRequest
from rag_eval.search.searching import search
from rag_eval.search.sql import Filters
from rag_eval.serve import served


@pytest.fixture(scope="module")
def index_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("request")
    path = root / "docs.sqlite"
    build(make_docs(root / "docs"), path, builder="sections", tokenizer="bigram")
    return path


KEYWORDS: list[dict[str, Any]] = [
    {},
    {"mode": "and", "limit": 2},
    {"category": "data", "explain": True},
    {"path_prefix": "data/", "engine": "fts5", "snippets": False},
    {"as_of": "2026-01-01", "processing": "stopwords=zh", "deep": True, "limit": 50},
    {"keys_only": True, "snippets": False, "engine": "impact"},
]


@pytest.mark.parametrize("keywords", KEYWORDS, ids=[",".join(k) or "defaults" for k in KEYWORDS])
def test_a_request_answers_as_its_keywords_do(index_file: Path, keywords: dict[str, Any]) -> None:
    with Index.open(index_file) as index:
        by_keywords = search(index, "导出 数据", **keywords)
        by_request = search(index, SearchRequest.of("导出 数据", **keywords))
    assert by_request.hits == by_keywords.hits and by_request.explain == by_keywords.explain
    assert by_request.query == by_keywords.query


BAD: list[dict[str, Any]] = [
    {"as_of": "2026-13-01"},
    {"category": 5},
    {"path_prefix": "a\x00b"},
    {"processing": 3},
    {"processing": "max_df=2"},
    {"engine": "warp"},
    {"keys_only": True},
]


@pytest.mark.parametrize("keywords", BAD, ids=[next(iter(k)) + "=" + repr(next(iter(k.values()))) for k in BAD])
def test_a_request_refuses_what_the_keywords_refuse_with_the_same_message(
    index_file: Path, keywords: dict[str, Any]
) -> None:
    with pytest.raises(RagEvalError) as made:
        SearchRequest.of("导出", **keywords)
    with Index.open(index_file) as index, pytest.raises(RagEvalError) as searched:
        search(index, "导出", **keywords)
    assert str(made.value) == str(searched.value) and type(made.value) is type(searched.value)


def test_a_request_and_keywords_together_are_refused(index_file: Path) -> None:
    with Index.open(index_file) as index, pytest.raises(QueryError, match="a SearchRequest or the search's keywords"):
        search(index, SearchRequest("导出"), limit=3)


def test_asking_another_query_keeps_the_rest_of_the_request() -> None:
    request = SearchRequest.of("导出", mode="or", limit=7, category="data", processing="stopwords=zh", engine="fts5")
    again = request.asking("备份")
    assert again.query == "备份" and request.query == "导出"
    assert (again.mode, again.limit, again.filters, again.engine) == ("or", 7, Filters(category="data"), "fts5")
    assert isinstance(again.processing, QueryProcessing) and again.processing.system == request.processing.system


def test_the_evidence_of_a_request_is_that_of_its_keywords(index_file: Path) -> None:
    with Index.open(index_file) as index:
        request = SearchRequest("导出", limit=3, filters=Filters(as_of="2026-01-01", category="data"))
        assert evidence(index, request) == evidence(index, "导出", as_of="2026-01-01", limit=3, category="data")


def test_the_mcp_search_passes_one_request_with_the_hosts_date(
    index_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[Any] = []
    real = served.evidence

    def recorded(index: Index, request: Any) -> dict[str, Any]:
        asked.append(request)
        return real(index, request)

    monkeypatch.setattr(served, "evidence", recorded)
    indexes = served.IndexSet([index_file], as_of="2026-01-01")
    try:
        found = indexes.search("导出", mode="or", limit=2, path_prefix="data/")
    finally:
        indexes.close()
    assert asked == [SearchRequest("导出", mode="or", limit=2, filters=Filters("2026-01-01", None, "data/"))]
    assert found["as_of"] == "2026-01-01" and len(found["hits"]) <= 2
