"""A Python strategy's ``terms`` (what a build stores) equals the texts of its ``tokenize`` (what offsets,
snippets and every earlier build used), on any text: its fast path makes no Token but must give the same
terms, in the same order, whether normalising kept every offset or not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import regex
from helpers import tokenizer_for
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.index.offsets import decode, encode, encode_spans
from rag_eval.index.store import Index
from rag_eval.index.writer import build
from rag_eval.tokenizers import PythonTokenizer, Token, tokenizer_class

SPECS = ["bigram", "unigram", "jieba", "pkuseg:model=mini", "bigram:t2s=true", "rjieba"]
# Han, kana, Latin with case and full width, digits, punctuation, whitespace, and characters whose normal form
# has several characters (ﬁ, ㍻, ½) or a space (¨), which take the offset-mapping path.
ALPHABET = list("的是什么導出文件保留天备份数据ｱイAbÇ1２，。 \t\n-+#ﬁ㍻½¨𠮷〇") + ["Wi-Fi", "C++", "3.11"]
TEXTS = st.lists(st.sampled_from(ALPHABET), max_size=40).map("".join)


def _loaded(spec: str) -> PythonTokenizer:
    missing = tokenizer_class(spec.split(":")[0]).availability()
    if missing is not None:
        pytest.skip(missing)
    tokenizer = tokenizer_for(spec)
    assert isinstance(tokenizer, PythonTokenizer)
    return tokenizer


@pytest.mark.parametrize("spec", SPECS)
@settings(max_examples=150, deadline=None)
@given(text=TEXTS)
def test_terms_equal_the_texts_of_tokenize(spec: str, text: str) -> None:
    tokenizer = _loaded(spec)
    tokens = tokenizer.tokenize(text)
    assert tokenizer.terms(text) == [token.text for token in tokens]
    terms, spans = tokenizer.terms_and_spans(text)
    assert terms == [token.text for token in tokens] and spans == [(token.start, token.end) for token in tokens]
    assert encode_spans(spans) == encode(tokens)


@pytest.mark.parametrize("spec", ["bigram", "jieba"])
def test_identity_and_mapped_texts_both_agree(spec: str) -> None:
    tokenizer = _loaded(spec)
    for text in ("导出文件保留三十天，Wi-Fi 设置", "ﬁle 导出㍻ 文件", "Ｈｅｌｌｏ  世界 ，"):
        assert tokenizer.terms(text) == [token.text for token in tokenizer.tokenize(text)]
        assert tokenizer.terms(text)


class _Unordered(PythonTokenizer):
    """Spans out of order and unclean (the template sorts and filters them)."""

    name = "unordered-test"

    def _spans(self, text: str) -> Iterator[tuple[int, int]]:
        spans = [match.span() for match in regex.finditer(r"\S+", text)]
        yield from reversed(spans)
        yield from ((start, start + 1) for start, _ in spans)


class _OwnTokens(PythonTokenizer):
    """A subclass that makes its own tokens: ``terms`` must come from them."""

    name = "own-tokens-test"

    def _spans(self, text: str) -> Iterator[tuple[int, int]]:
        yield from ()

    def _tokenize(self, text: str) -> list[Token]:
        return [Token(word.upper(), 0, len(word)) for word in text.split()]


@settings(max_examples=100, deadline=None)
@given(text=TEXTS)
def test_unordered_and_unclean_spans_are_sorted_and_filtered_alike(text: str) -> None:
    tokenizer = _Unordered()
    tokens = tokenizer.tokenize(text)
    assert tokenizer.terms(text) == [token.text for token in tokens]
    assert tokenizer.terms_and_spans(text)[1] == [(token.start, token.end) for token in tokens]


def test_a_subclass_with_its_own_tokens_keeps_them() -> None:
    assert _OwnTokens().terms("ab cd") == ["AB", "CD"]
    assert _OwnTokens().terms_and_spans("ab cd") == (["AB", "CD"], [(0, 2), (0, 2)])


def test_a_lines_build_stores_the_offsets_tokenize_gives(tmp_path: Path) -> None:
    """What snippets read back: the stored offsets decode to tokenize's tokens, line by line."""
    root = tmp_path / "corpus"
    root.mkdir()
    lines = ["导出文件保留三十天，Wi-Fi 设置。", "ﬁle 导出㍻ 文件", "Ｈｅｌｌｏ  世界 ，iPhone15 与 C++"]
    (root / "a.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    manifest = [{"doc_id": "a", "revision": "r1", "status": "current", "expires": None, "path": "a.txt"}]
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    path = tmp_path / "index.sqlite"
    build(root, path, builder="lines", tokenizer="bigram")
    tokenizer = _loaded("bigram")
    with Index.open(path) as index:
        rows = index.db.execute("SELECT text, fts_body, offsets FROM chunks ORDER BY id").fetchall()
    assert [row[0] for row in rows] == lines
    for text, body, offsets in rows:
        assert decode(offsets, body.split()) == tokenizer.tokenize(text)
