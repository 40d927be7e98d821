"""Terms that document-frequency pruning removed from a query match nothing, and snippets no longer mark them: the
top hit's snippet read 【导出数据】 for a query whose 导出 and 数据 were pruned."""

from __future__ import annotations

import re
from pathlib import Path

from helpers import REPO

from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.searching import search

DATASETS = REPO / "datasets"


def _marked(snippets: list[str]) -> set[str]:
    return {marked for snippet in snippets for marked in re.findall(r"【(.+?)】", snippet)}


def test_snippets_mark_only_the_terms_that_were_searched(tmp_path: Path) -> None:
    path = tmp_path / "handbook.sqlite"
    build(DATASETS / "handbook" / "docs", path, builder="sections", tokenizer="bigram")
    with Index.open(path) as index:
        plain = search(index, "怎么导出数据", limit=5)
        pruned = search(index, "怎么导出数据", limit=5, processing="max_df=0.05", explain=True)
    assert set(pruned.explain["processing"]["pruned"]) == {"导出", "数据"}
    assert "导出数据" in _marked([hit.snippet for hit in plain.hits])
    marked = _marked([hit.snippet for hit in pruned.hits])
    assert marked and not any(term in word for word in marked for term in ("导出", "数据"))
    assert marked <= {"出数", "怎么", "么导"}
