"""Property tests over random Unicode: only the documented error, offsets in range and ordered."""

from __future__ import annotations

import pytest
from helpers import ALL_SPECS, tokenizer_for
from hypothesis import given
from hypothesis import strategies as st

from rag_eval.errors import InvalidTextError
from rag_eval.tokenizers import normalise

SOME_UNICODE = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
WITH_SURROGATES = st.text(st.characters(), max_size=30)
CJK_HEAVY = st.text(
    st.sampled_from(list("导出文件保留三十天資料庫備份會ＡＢＣ１２３ﬁ㍻ßé\u0301 ，。.-+#_😀〇𠮷ひ한")), max_size=40
)


@pytest.mark.parametrize("spec", ALL_SPECS)
@given(text=st.one_of(SOME_UNICODE, WITH_SURROGATES, CJK_HEAVY))
@pytest.mark.fuzz
def test_tokenize_raises_only_invalid_text_and_offsets_are_ordered(spec: str, text: str) -> None:
    tokenizer = tokenizer_for(spec)
    try:
        tokens = tokenizer.tokenize(text)
    except InvalidTextError:
        assert any(0xD800 <= ord(c) < 0xE000 for c in text)
        return
    assert not any(0xD800 <= ord(c) < 0xE000 for c in text)
    previous = (0, 0)
    for token in tokens:
        assert 0 <= token.start < token.end <= len(text)
        assert (token.start, token.end) >= previous
        previous = (token.start, token.end)
        assert token.text and not any(c.isspace() for c in token.text) or tokenizer.native
        if not tokenizer.native:
            assert normalise(text[token.start : token.end]) == token.text


@given(text=st.one_of(SOME_UNICODE, CJK_HEAVY))
@pytest.mark.fuzz
def test_normalise_is_nfkc_casefold_per_unit(text: str) -> None:
    import unicodedata

    import regex

    units = regex.findall(r".\p{M}*", text, flags=regex.DOTALL)
    expected = "".join(unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", u).casefold()) for u in units)
    assert normalise(text) == expected
