"""Verifying evidence against its sources (``verify_source``, ``index verify``, serve's verify tool): a file is read
under the build's limit, streamed where a passage's hash is checked, and a source grown past the limit is stale
without being read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_eval.errors import QueryError
from rag_eval.index.store import Index
from rag_eval.index.verify import VERIFY_MAX_BYTES, verify_chunk, verify_index, verify_source
from rag_eval.index.writer import build
from rag_eval.search.read import read_chunk
from rag_eval.search.searching import search

# -- 2. verify reads a bounded file -------------------------------------------------------------------------------


def _big_corpus(tmp_path: Path) -> tuple[Path, Path]:
    """A lines corpus whose one file is just over VERIFY_MAX_BYTES, built with a max_bytes that takes it."""
    root = tmp_path / "big"
    root.mkdir()
    body = "导出 文件 保留 三十 天\n" + "x" * (VERIFY_MAX_BYTES + 10) + "\n"
    (root / "big.txt").write_text(body, encoding="utf-8")
    manifest = [{"doc_id": "big", "revision": "r1", "status": "current", "expires": None, "path": "big.txt"}]
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    index = tmp_path / "big.sqlite"
    build(root, index, builder=f"lines:max_bytes={2 * VERIFY_MAX_BYTES}", tokenizer="unicode61")
    return root, index


def test_verify_source_does_not_read_a_file_over_its_limit(tmp_path: Path) -> None:
    """Bug: verify_source read a hit's file whole, whatever its size (a hostile or huge file at a hit's path)."""
    root, index = _big_corpus(tmp_path)
    with Index.open(index) as opened:
        hit = search(opened, "导出", as_of="2026-01-01").hits[0].as_dict()
    assert verify_source(root, hit) is False  # over the default limit: not read, so not verified
    assert verify_source(root, hit, max_bytes=2 * VERIFY_MAX_BYTES) is True  # the limit it was built with
    for bad in (0, -1, True, "1000", None):
        with pytest.raises(QueryError, match="max_bytes"):
            verify_source(root, hit, max_bytes=bad)  # type: ignore[arg-type]


def test_a_source_grown_past_the_builds_limit_is_stale_without_being_read(corpus: Path, tmp_path: Path) -> None:
    """serve's verify tool and index verify: a file larger than the build accepted cannot be what was indexed."""
    index = tmp_path / "small.sqlite"
    build(corpus, index, builder="lines:max_bytes=1000", tokenizer="unicode61")
    with (corpus / "handbook.txt").open("a", encoding="utf-8") as handle:
        handle.write("补充 " * 400 + "\n")
    with Index.open(index) as opened:
        chunk = read_chunk(opened, search(opened, "导出 保留", as_of="2026-01-01").hits[0].chunk.key)
        assert chunk is not None and chunk.path == "handbook.txt"
        status = verify_chunk(opened, chunk)
        files = {s.path: s for s in verify_index(opened)}
    for found in (status, files["handbook.txt"]):
        assert found.status == "stale"
        assert "over the limit of 1000" in found.detail and "lines:max_bytes=1000" in found.detail


def test_a_passage_chunk_is_checked_by_its_hash_streamed(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "p1", "title": "", "text": "导出文件保留三十天"}\n', encoding="utf-8")
    index = tmp_path / "p.sqlite"
    build(corpus, index, builder="passages:max_bytes=200", tokenizer="bigram")
    with Index.open(index) as opened:
        chunk = read_chunk(opened, "p1")
        assert chunk is not None and verify_chunk(opened, chunk).status == "ok"
        corpus.write_text(corpus.read_text(encoding="utf-8") + " " * 300, encoding="utf-8")
        oversized = verify_chunk(opened, chunk)
        corpus.write_text('{"_id": "p1", "title": "", "text": "导出文件保留六十天"}\n', encoding="utf-8")
        changed = verify_chunk(opened, chunk)
        corpus.unlink()
        gone = verify_chunk(opened, chunk)
    assert oversized.status == "stale" and "over the limit of 200" in oversized.detail
    assert (changed.status, changed.detail) == ("stale", "the file changed since the build")
    assert gone.status == "missing"
