"""A whole JSON file (a lines manifest, a gate baseline, a judging request) that gives one key twice in an
object is one error naming the key: Python's reader kept the last value silently, so a manifest entry with
"expires" written twice used whichever came last (left by the lines and compat audit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_eval.errors import CorpusError
from rag_eval.files.textio import parse_json, parse_json_line
from rag_eval.index.writer import build


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',
        '[{"doc_id": "a", "expires": null, "expires": "2020-01-01"}]',
        '{"outer": {"inner": [{"k": 1, "k": 1}]}}',
        '{"中": 1, "中": 1}',
    ],
)
def test_a_key_given_twice_is_one_error_naming_it(text: str) -> None:
    with pytest.raises(CorpusError, match="appears twice in one object"):
        parse_json(text, "m.json", CorpusError)


def test_the_same_key_in_different_objects_is_fine() -> None:
    assert parse_json('[{"a": 1}, {"a": 2}, {"b": {"a": 3}}]', "m.json", CorpusError) == [
        {"a": 1},
        {"a": 2},
        {"b": {"a": 3}},
    ]


def test_json_lines_records_are_left_to_the_plain_parser() -> None:
    """A corpus's millions of records are parsed without the per-object check (its cost), as before."""
    assert parse_json_line('{"_id": "p1", "_id": "p2"}', "corpus.jsonl", 1, CorpusError) == {"_id": "p2"}


def test_a_lines_manifest_with_a_key_twice_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("导出文件保留三十天\n", encoding="utf-8")
    (corpus / "manifest.json").write_text(
        '[{"doc_id": "a", "revision": "r1", "status": "current", "expires": null, '
        '"expires": "2020-01-01", "path": "a.txt"}]',
        encoding="utf-8",
    )
    with pytest.raises(CorpusError, match="the key 'expires' appears twice"):
        build(corpus, tmp_path / "ev.sqlite", builder="lines", tokenizer="bigram")
    assert not (tmp_path / "ev.sqlite").exists()
