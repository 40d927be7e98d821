"""rjieba (jieba-rs): a strategy of its own, because its tokens are not jieba's (reports/builds.md)."""

from __future__ import annotations

from pathlib import Path

from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.search.searching import search
from rag_eval.tokenizers import get_tokenizer

SENTENCE = "南京市长江大桥保留三十天"


def test_search_mode_adds_dictionary_sub_words() -> None:
    terms = get_tokenizer("rjieba").terms(SENTENCE)
    assert {"南京", "南京市", "长江", "长江大桥", "三十", "三十天"} <= set(terms)
    precise = get_tokenizer("rjieba:mode=precise").tokenize(SENTENCE)
    assert "".join(token.text for token in precise) == SENTENCE  # one cut, no overlap


def test_offsets_index_the_raw_text() -> None:
    text = "ＶＰＮ 账号保留三十天。"
    for token in get_tokenizer("rjieba").tokenize(text):
        assert token.text == text[token.start : token.end].replace("ＶＰＮ", "vpn")


def test_spec_records_the_library_version() -> None:
    assert "rjieba=0.2" in get_tokenizer("rjieba").spec
    assert get_tokenizer("rjieba").spec != get_tokenizer("jieba").spec


def test_tokens_differ_from_jieba_on_a_known_case() -> None:
    """Why rjieba is not an engine of jieba: jieba-rs keeps a number range whole, jieba splits it."""
    text = "2010-2011赛季"
    assert "2010-2011" in get_tokenizer("rjieba").terms(text)
    assert "2010-2011" not in get_tokenizer("jieba").terms(text)


def test_an_rjieba_index_answers_queries(tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl").write_text(
        '{"_id": "d1", "title": "", "text": "南京市长江大桥"}\n{"_id": "d2", "title": "", "text": "导出文件"}\n',
        encoding="utf-8",
    )
    build(tmp_path, tmp_path / "index.sqlite", builder="passages", tokenizer="rjieba")
    with Index.open(tmp_path / "index.sqlite") as index:
        assert [hit.chunk.key for hit in search(index, "长江大桥在哪里").hits] == ["d1"]
