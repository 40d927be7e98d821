"""Values whose repr fails (an integer of thousands of digits, a list nested thousands deep) or that pass
SQLite's integers reach the library's argument checks as one QueryError, not a ValueError, RecursionError
or OverflowError from building the message or the statement (left by the serve audit: its tools check first,
the library did not)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rag_eval.errors import QueryError
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.query import compile_query
from rag_eval.search.read import list_entries, read_entry
from rag_eval.search.searching import search
from rag_eval.serve.served import IndexSet


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


HOSTILE = [10**5000, -(10**5000), 2**63, nested(5000)]


@pytest.fixture(scope="module")
def index_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile-values")
    docs = folder / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 导出\n\n导出文件保留三十天。\n", encoding="utf-8")
    build(docs, folder / "kb.sqlite", builder="sections", tokenizer="bigram")
    return folder / "kb.sqlite"


@pytest.mark.parametrize("value", HOSTILE, ids=["huge", "huge-negative", "past-sqlite", "nested"])
def test_search_limits_and_modes(index_path: Path, value: object) -> None:
    with Index.open(index_path) as index:
        with pytest.raises(QueryError, match="limit must be an integer"):
            search(index, "导出", limit=value)  # type: ignore[arg-type]
        with pytest.raises(QueryError, match="unknown mode"):
            compile_query(index.tokenizer, "导出", value)  # type: ignore[arg-type]
    served = IndexSet([index_path])
    with pytest.raises(QueryError, match="limit must be an integer"):
        served.search("导出", limit=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", HOSTILE, ids=["huge", "huge-negative", "past-sqlite", "nested"])
def test_list_offsets_limits_and_read_sizes(index_path: Path, value: object) -> None:
    with Index.open(index_path) as index:
        with pytest.raises(QueryError, match="offset must be an integer"):
            list_entries(index, offset=value)  # type: ignore[arg-type]
        with pytest.raises(QueryError, match="limit must be an integer"):
            list_entries(index, limit=value)  # type: ignore[arg-type]
        with pytest.raises(QueryError, match="max_bytes must be an integer"):
            read_entry(index, "a.md", max_bytes=value)  # type: ignore[arg-type]
