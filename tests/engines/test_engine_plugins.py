"""Engines are declared plug-ins: an engine registered like a third-party one (no other file changed) is a choice
of search and index build, writes and drops its postings at build time, ranks what search asks, hands what it
cannot answer to its declared fallback, and is checked by index verify. Bug: "engine" was a hard-coded tuple
(fts5, impact) and search, the build and verify chose their behaviour by comparing those names."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import make_docs

from rag_eval.cli import cli
from rag_eval.engines.base import ENGINES, Ranked, get_engine, search_engine_names
from rag_eval.engines.fts5 import Fts5Engine
from rag_eval.errors import QueryError
from rag_eval.index.integrity import Damage, check_index
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.searching import search, warm
from rag_eval.search.sql import Filters

CALLS: list[str] = []


class ReversedEngine(Fts5Engine):
    """FTS5's hits in reverse order: a ranking no built-in engine gives, so a test sees who ranked."""

    name = "reversed"
    summary = "FTS5's hits, worst first (a test engine)"
    build_engine = "reversed"
    fallback = "fts5"
    tables = ("reversed_postings",)
    one_statement = False

    def rank(self, index: Index, compiled: Any, limit: int, filters: Filters, keys_only: bool) -> Ranked:
        CALLS.append("rank")
        hits, _generation = super().rank(index, compiled, 10**6, filters, keys_only)
        ordered = list(reversed(hits))[:limit]
        return Ranked([hit._replace(rank=rank) for rank, hit in enumerate(ordered, 1)], index.generation)

    def fallback_reason(self, index: Index, compiled: Any) -> str | None:
        return "phrases are FTS5's" if compiled.mode == "phrase" else None

    def prepare(self, index: Index) -> bool:
        CALLS.append("prepare")
        return True

    def write_postings(self, db: sqlite3.Connection, tokenizer: Any, weights: list[float]) -> int:
        CALLS.append("write")
        db.execute("CREATE TABLE reversed_postings (n INTEGER)")
        db.execute("INSERT INTO reversed_postings VALUES (1)")
        return 1

    def check_postings(self, index: Index) -> list[Damage]:
        CALLS.append("check")
        found = index.db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'reversed_postings'").fetchone()
        if not found[0]:
            return []
        rows = index.db.execute("SELECT count(*) FROM reversed_postings").fetchone()[0]
        return [] if rows == 1 else [Damage("reversed_postings", f"{rows} rows, not 1")]


class PeerEngine(Fts5Engine):
    """A peer: ranks only in compare, over an fts5 build."""

    name = "peer-only"
    build_engine = "fts5"
    peer = True


@pytest.fixture
def registered() -> Iterator[None]:
    CALLS.clear()
    ENGINES.register(ReversedEngine)
    ENGINES.register(PeerEngine)
    try:
        yield
    finally:
        ENGINES.unregister(ReversedEngine.name)
        ENGINES.unregister(PeerEngine.name)


def test_a_registered_engine_is_offered_by_search_and_build_but_a_peer_is_not(registered: None) -> None:
    assert search_engine_names() == ["fts5", "impact", "reversed"]
    for command in (["search"], ["index", "build"]):
        shown = CliRunner().invoke(cli, [*command, "--help"]).output
        assert "reversed" in shown and "peer-only" not in shown, command
    assert get_engine("peer-only").peer


def test_the_build_writes_and_drops_an_engines_postings(registered: None, tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "docs")
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram", engine="reversed")
    with Index.open(path) as index:
        assert index.meta["engine"] == "reversed" and CALLS == ["write"]
    build(docs, path, builder="sections", tokenizer="bigram", engine="fts5")
    tables = {row[0] for row in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")}
    assert "reversed_postings" not in tables  # a build drops every engine's postings before its own


def test_search_asks_the_recorded_engine_and_its_fallback(registered: None, tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "docs")
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram", engine="reversed")
    with Index.open(path) as index:
        reference = search(index, "导出", engine="fts5", snippets=False).hits
        answered = search(index, "导出", snippets=False, explain=True)
        assert [hit.id for hit in answered.hits] == [hit.id for hit in reversed(reference)]
        assert answered.explain["engine"] == "reversed" and "engine_fallback" not in answered.explain
        phrase = search(index, "导出", mode="phrase", snippets=False, explain=True)
        assert phrase.explain["engine"] == "fts5" and phrase.explain["engine_fallback"] == "phrases are FTS5's"
        assert warm(index) and CALLS.count("prepare") == 1
        with pytest.raises(QueryError, match=r"unknown engine 'peer-only'; choose from: fts5, impact, reversed"):
            search(index, "导出", engine="peer-only")


def test_index_verify_asks_the_engine_to_check_its_postings(registered: None, tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "docs")
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram", engine="reversed")
    with Index.open(path) as index:
        assert check_index(index) == [] and "check" in CALLS
    db = sqlite3.connect(path)
    db.execute("INSERT INTO reversed_postings VALUES (2)")
    db.commit()
    db.close()
    with Index.open(path) as index:
        assert check_index(index) == [Damage("reversed_postings", "2 rows, not 1")]
    result = CliRunner().invoke(cli, ["index", "verify", str(path)])
    assert result.exit_code == 1 and "damaged\treversed_postings\t2 rows, not 1" in result.output
