"""Hypothesis fuzz of queries against every tokenizer and mode on a real index.

Never an SQL or MATCH syntax error: a query either returns hits or fails with the documented
QueryError / InvalidTextError. Profile ``ci`` (the default): derandomised, 200 examples per combination;
``HYPOTHESIS_PROFILE=long``: 10,000 per combination (run by hand: ``HYPOTHESIS_PROFILE=long pytest -m fuzz
tests/search/test_fuzz_queries.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ALL_SPECS, make_docs
from hypothesis import given
from hypothesis import strategies as st

from rag_eval.errors import InvalidTextError, QueryError
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.searching import search

pytestmark = pytest.mark.fuzz

FTS5_SYNTAX = [
    '"',
    "'",
    "*",
    "^",
    ":",
    "(",
    ")",
    "NEAR(",
    "NEAR/2",
    "AND",
    "OR",
    "NOT",
    "+",
    "-",
    "{",
    "}",
    "title:",
    "text:",
    "\x00",
    "\x01",
    "\n",
    "\t",
    "\ud800",
    "😀",
    "导出",
    "文件",
    "ＡＢＣ",
    "ß",
    "\u0301",
    " ",
    "%",
    "\\",
    ";",
]
QUERIES = st.one_of(
    st.text(st.characters(), max_size=80),
    st.lists(st.sampled_from(FTS5_SYNTAX), max_size=25).map("".join),
    st.lists(st.sampled_from(FTS5_SYNTAX), max_size=8).map(" ".join),
    st.tuples(st.sampled_from(FTS5_SYNTAX), st.integers(1, 10_000)).map(lambda pair: (pair[0] * pair[1])[:10_000]),
)
_INDEXES: dict[str, Path] = {}


def index_for(spec: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if spec not in _INDEXES:
        folder = tmp_path_factory.mktemp("fuzz")
        _INDEXES[spec] = folder / "index.sqlite"
        build(make_docs(folder / "docs"), _INDEXES[spec], builder="sections", tokenizer=spec)
    return _INDEXES[spec]


@pytest.mark.parametrize("mode", ["and", "or", "phrase"])
@pytest.mark.parametrize("spec", ALL_SPECS)
def test_queries_never_break_fts5(spec: str, mode: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    index = Index.open(index_for(spec, tmp_path_factory))

    @given(query=QUERIES)
    def check(query: str) -> None:
        try:
            hits = search(index, query, mode=mode, limit=5).hits
        except (QueryError, InvalidTextError) as exc:
            assert len(query) > 200 or "\x00" in query or any(0xD800 <= ord(c) < 0xE000 for c in query), exc
            return
        assert len(query) <= 200 and "\x00" not in query
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1))

    try:
        check()
    finally:
        index.close()
