"""t2s converts each character to where OpenCC's conversion settles, so converting twice changes nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from rag_eval.errors import IndexFileError
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.tokenizers import get_tokenizer, normalise
from rag_eval.tokenizers.normalise import _settled, t2s_table


def test_converting_a_converted_character_changes_nothing() -> None:
    table = t2s_table()
    assert table  # OpenCC is a declared dependency
    moved = {chr(code): dst for code, dst in table.items() if normalise(dst, t2s=True) != dst}
    assert moved == {}


def test_a_chain_of_conversions_ends_in_one_character() -> None:
    # OpenCC converts 薴 to 苧 and 苧 to 苎: all three are one term.
    assert {normalise(char, t2s=True) for char in "薴苧苎"} == {"苎"}
    terms = [get_tokenizer("bigram:t2s=true").terms(text) for text in ("薴麻", "苧麻", "苎麻")]
    assert terms[0] == terms[1] == terms[2]


def test_a_cycle_settles_on_its_smallest_character() -> None:
    table = {ord("b"): "c", ord("c"): "b", ord("a"): "b"}
    assert _settled(table, "b") == _settled(table, "c") == "b"
    assert _settled({ord("x"): "y"}, "y") == "y"


def test_an_index_converted_by_the_earlier_table_asks_to_be_rebuilt(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 苎麻\n\n薴麻的纤维。\n", encoding="utf-8")
    path = tmp_path / "index.sqlite"
    build(docs, path, builder="sections", tokenizer="bigram:t2s=true")
    with Index.open(path) as index:
        assert json.loads(index.meta["tokenizer_fingerprint"])["t2s"] == "settled"
    db = sqlite3.connect(path)
    with db:
        fingerprint = json.loads(db.execute("SELECT value FROM meta WHERE key = 'tokenizer_fingerprint'").fetchone()[0])
        del fingerprint["t2s"]  # as an index built before the table settled its chains
        db.execute("UPDATE meta SET value = ? WHERE key = 'tokenizer_fingerprint'", (json.dumps(fingerprint),))
    db.close()
    with pytest.raises(IndexFileError, match=r"tokenizer changed since this index was built \(t2s: built with None"):
        Index.open(path)


def test_without_t2s_the_fingerprint_has_no_table() -> None:
    assert "t2s" not in get_tokenizer("bigram").fingerprint()
