"""What the MCP server tells an agent about a source that now leads outside the corpus root: the path it cited
and why, never the server's own absolute root (``verify``'s detail and ``read``'s error named it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import REPO

from rag_eval.errors import ReadError
from rag_eval.index.writer import build
from rag_eval.serve.served import IndexSet

DATASETS = REPO / "datasets"


def test_a_source_swapped_for_a_link_out_of_the_root_is_reported_without_the_root(tmp_path: Path) -> None:
    corpus = tmp_path / "private-corpus-root"
    shutil.copytree(DATASETS / "evidence-mini" / "corpus", corpus)
    index = tmp_path / "evidence.sqlite"
    build(corpus, index, builder="lines", tokenizer="bigram")
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("not part of the corpus\n", encoding="utf-8")
    served = IndexSet([index], as_of="2026-10-07", root=corpus)
    try:
        hit = served.search("退款")["hits"][0]
        source = corpus / hit["path"]
        source.unlink()
        source.symlink_to(outside)
        checked = served.verify(hit["key"])
        assert checked["status"] == "missing"
        assert checked["detail"] == f"{hit['path']}: resolves outside the corpus root"
        with pytest.raises(ReadError) as refused:
            served.read(hit["path"])
        assert str(tmp_path) not in str(refused.value) and "resolves outside the corpus root" in str(refused.value)
    finally:
        served.close()
