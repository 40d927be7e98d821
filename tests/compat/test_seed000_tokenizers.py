"""Seed 000's behaviours on seed 000's own six documents, for every tokenizer.

EXPECTED states, per tokenizer, what each scenario returns where it differs from unicode61 (the
seed's tokenizer). No assertion is relaxed to let a tokenizer pass: the table says what each one does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import ALL_SPECS
from make_corpus import make

from rag_eval.compat import connect, retrieve, search_tool, sync, verify_source

TODAY = "2026-10-07"
SEGMENTING = {"docs": {"handbook", "meeting", "compact"}, "daochu_finds_compact": True}
BASE = {
    # '导出 保留' (AND): the two conflicting current documents.
    "daochu_baoliu": {"handbook", "meeting"},
    # Does '导出' alone find the unsegmented line 导出文件保留三十天?
    "daochu_finds_compact": False,
    # '60 天' a day before the notice expires.
    "sixty_days_before_expiry": 1,
    # '"导出" 保留': quotes are data.
    "quoted": 2,
    # The query used to find handbook's line 2 in the update scenario, and its mode.
    "update_query": ("30 天", "and"),
}
EXPECTED = {
    "unicode61": {},
    "trigram": {  # every query word here is under 3 characters: trigram matches nothing
        "daochu_baoliu": set(),
        "sixty_days_before_expiry": 0,
        "quoted": 0,
        "update_query": ("保留 30 天", "phrase"),
    },
    "jieba": {"daochu_baoliu": SEGMENTING["docs"], "daochu_finds_compact": True, "quoted": 3},
    "rjieba": {"daochu_baoliu": SEGMENTING["docs"], "daochu_finds_compact": True, "quoted": 3},
    "pkuseg": {"daochu_baoliu": SEGMENTING["docs"], "daochu_finds_compact": True, "quoted": 3},
    "bigram": {"daochu_baoliu": SEGMENTING["docs"], "daochu_finds_compact": True, "quoted": 3},
    "unigram": {"daochu_baoliu": SEGMENTING["docs"], "daochu_finds_compact": True, "quoted": 3},
}


def expected(spec: str, key: str):
    return EXPECTED[spec.split(":")[0]].get(key, BASE[key])


@pytest.fixture(params=ALL_SPECS)
def seeded(request, tmp_path: Path):
    root = tmp_path / "corpus"
    make(root)
    db = connect(tmp_path / "index.sqlite", request.param)
    sync(db, root)
    yield request.param, db, root
    db.close()


def test_conflicting_documents(seeded) -> None:
    spec, db, root = seeded
    hits = retrieve(db, "导出 保留", as_of=TODAY)
    assert {h["doc_id"] for h in hits} == expected(spec, "daochu_baoliu")
    assert all(verify_source(root, h) for h in hits)
    assert all("[导" in h["snippet"] for h in hits)


def test_archived_and_expired_excluded(seeded) -> None:
    spec, db, _ = seeded
    assert retrieve(db, "7 天", as_of=TODAY) == []
    assert retrieve(db, "60 天", as_of=TODAY) == []
    assert len(retrieve(db, "60 天", as_of="2026-10-06")) == expected(spec, "sixty_days_before_expiry")


@pytest.mark.parametrize("query", ["", " ", '"', "***", "发票", "输出 保存", "导出 OR 薄荷"])
def test_empty_unrelated_synonym_and_operators(seeded, query: str) -> None:
    _, db, _ = seeded
    assert retrieve(db, query, as_of=TODAY) == []


def test_compact_line(seeded) -> None:
    spec, db, _ = seeded
    assert [h["doc_id"] for h in retrieve(db, "导出文件保留三十天", as_of=TODAY)] == ["compact"]
    found = "compact" in {h["doc_id"] for h in retrieve(db, "导出", as_of=TODAY)}
    assert found is expected(spec, "daochu_finds_compact")


@pytest.mark.parametrize(
    "query",
    [
        "导出 OR 薄荷",
        "x'; DROP TABLE chunks; --",
        "NEAR(",
        "导出 : (",
        '" OR "',
        '"导出',
        "导出*",
        "^导出",
        "text:导出",
    ],
)
def test_operators_are_data(seeded, query: str) -> None:
    spec, db, _ = seeded
    retrieve(db, query, as_of=TODAY)  # must not raise a SQL or MATCH syntax error
    assert len(retrieve(db, '"导出" 保留', as_of=TODAY)) == expected(spec, "quoted")
    assert db.execute("SELECT count(*) FROM chunks").fetchone()[0] == 12


def test_rename_keeps_ids_and_update_detects_stale(seeded) -> None:
    spec, db, root = seeded
    query, mode = expected(spec, "update_query")
    from rag_eval.compat import _index
    from rag_eval.search.searching import search

    def ids() -> set[str]:
        return {h.chunk.key for h in search(_index(db), query, mode=mode, as_of=TODAY).hits}

    before = ids()
    assert len(before) == 1
    manifest = root / "manifest.json"
    items = json.loads(manifest.read_text(encoding="utf-8"))
    (root / "handbook.txt").rename(root / "renamed.txt")
    items[1]["path"] = "renamed.txt"
    manifest.write_text(json.dumps(items), encoding="utf-8")
    sync(db, root)
    assert ids() == before
    old = search(_index(db), query, mode=mode, as_of=TODAY).hits[0].as_dict()
    path = root / "renamed.txt"
    path.write_text(path.read_text(encoding="utf-8").replace("30", "45"), encoding="utf-8")
    assert not verify_source(root, old)
    assert ids() == before  # an unsynchronised index keeps its snapshot
    sync(db, root)
    assert ids() == set()


def test_tool_result(seeded) -> None:
    _, db, _ = seeded
    result = search_tool(db, "发票", as_of=TODAY)
    assert result["hits"] == [] and result["action_authority"] is False and "answer" not in result
