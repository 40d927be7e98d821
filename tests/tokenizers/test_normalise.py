"""Shared normalisation: NFKC, case folding, t2s, offsets back into the original text."""

from __future__ import annotations

import unicodedata

import pytest
import regex
from helpers import tokenizer_for
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.errors import InvalidTextError
from rag_eval.tokenizers import get_tokenizer, normalise, normalise_with_offsets
from rag_eval.tokenizers.normalise import _SCAN_LIMITS, _fold_char


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ﬁle", "file"),  # ligature expands
        ("㍻元年", "平成元年"),  # square era name expands
        ("e\u0301te\u0301", "été"),  # combining marks compose
        ("Straße", "strasse"),  # ß case-folds to ss
        ("ＡＢＣ１２３，！", "abc123,!"),  # full-width to half-width
        ("ΣΑΣ", "σασ"),  # case folding, not lower(): no final-sigma context
        ("　", " "),  # ideographic space
    ],
)
def test_normalise(text: str, expected: str) -> None:
    assert normalise(text) == expected


@pytest.mark.parametrize("spec", ["bigram", "unigram", "jieba", "pkuseg:model=mini"])
@pytest.mark.parametrize("text", ["ﬁle", "㍻元年", "e\u0301te\u0301 cafe\u0301", "Straße", "ＡＢＣ１２３ Ｗｉ－Ｆｉ"])
def test_token_offsets_slice_original_text(spec: str, text: str) -> None:
    tokens = tokenizer_for(spec).tokenize(text)
    assert tokens
    for token in tokens:
        assert normalise(text[token.start : token.end]) == token.text


def test_offsets_widen_over_expanding_character() -> None:
    # 平成 comes from one character, ㍻: a bigram starting inside it widens to the whole character.
    tokens = tokenizer_for("bigram").tokenize("㍻元年")
    assert [(t.text, t.start, t.end) for t in tokens] == [("平成", 0, 1), ("平成元", 0, 2), ("元年", 1, 3)]


def test_span_mapping_past_expansions() -> None:
    mapped = normalise_with_offsets("ﬁx ßz")
    assert mapped.text == "fix ssz"
    assert mapped.span(4, 7) == (4, 7, 3, 5)
    assert mapped.span(0, 1) == (0, 2, 0, 1)


def test_t2s_is_per_character() -> None:
    # OpenCC's phrase table keeps 乾隆 but converts 乾 alone; per character, both become 干.
    assert normalise("乾隆 頭髮", t2s=True) == "干隆 头发"
    assert normalise("乾", t2s=True) == "干"


@pytest.mark.parametrize("spec", ["bigram", "jieba", "unicode61", "trigram", "pkuseg:model=mini", "unigram"])
def test_lone_surrogate_is_rag_eval_error(spec: str) -> None:
    with pytest.raises(InvalidTextError, match=r"lone surrogate U\+D800 at character 2"):
        get_tokenizer(spec).tokenize("ab\ud800cd")


def test_characters_outside_the_scanned_ranges_never_change() -> None:
    """Guards the scan limits: every code point past them normalises to itself."""
    scanned = [range(low, high) for low, high in _SCAN_LIMITS]
    for code in range(0x110000):
        if 0xD800 <= code < 0xE000 or any(code in r for r in scanned):
            continue
        char = chr(code)
        assert _fold_char(char) == char, hex(code)


def test_normalise_matches_whole_string_nfkc_casefold_on_ordinary_text() -> None:
    text = "用户可在设置页导出 CSV 文件（最多 500 MB），Ｐｙｔｈｏｎ 3.11 与 iPhone15 均支持。Café naïve"
    expected = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    assert normalise(text) == expected


@pytest.mark.parametrize("spec", ["bigram", "unigram", "jieba", "pkuseg:model=mini"])
@settings(max_examples=120, deadline=None)
@given(text=st.lists(st.sampled_from(list("导出文件ab ，\x01\x1b\x7f\u0308\u0301\u20dd")), max_size=24).map("".join))
def test_a_control_character_before_a_combining_mark_is_no_contract_break(spec: str, text: str) -> None:
    """Normalisation puts a control character and the combining mark after it in one unit, and a token widened
    back over that unit held the control character: pkuseg refused '导出 a\\x1b\\u0308b 文件' as a plug-in's
    broken contract, though the text is fine. Such a token is now dropped, as one widened over a space is."""
    tokenizer = tokenizer_for(spec)
    tokens = tokenizer.tokenize(text)
    assert all(token.text and not regex.search(r"[\s\x00-\x1f\x7f]", token.text) for token in tokens)
    assert tokenizer.terms(text) == [token.text for token in tokens]
