"""--explain says what FTS5 read: a native tokenizer's query is not rag-eval's normalised text."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_eval.eval.datasets.shipped import corpus_dir
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.searching import search


@pytest.mark.parametrize(("spec", "native"), [("unicode61", True), ("trigram", True), ("bigram", False)])
def test_explain_shows_normalised_text_only_where_it_was_used(tmp_path: Path, spec: str, native: bool) -> None:
    path = tmp_path / "h.sqlite"
    build(corpus_dir("handbook"), path, builder="sections", tokenizer=spec)
    with Index.open(path) as index:
        info = search(index, "ＡＰＩ 导出文件", explain=True, snippets=False).explain
    if native:
        assert info["normalised"] is None and "as typed" in info["native"]
    else:
        assert info["normalised"] == "api 导出文件" and "native" not in info
