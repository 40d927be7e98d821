"""The Python mirrors of FTS5's unicode61 and trigram give exactly the terms fts5vocab reports."""

from __future__ import annotations

import pytest
from helpers import tokenizer_for
from helpers.fts5 import fts5_terms
from hypothesis import given
from hypothesis import strategies as st

SAMPLES = [
    "用户可在设置页导出 CSV 文件（最多 500 MB），Python 3.11 与 iPhone15 均支持。",
    "ＡＢＣ１２３，Ｗｉ－Ｆｉ ÀÉÎÕÜ àéîõü Ǆ ǅ ǆ Straße ΣΑΣ Ωmega Дом",
    "e\u0301t\u00e9 a\u0308\u0301 \u0301\u0301 x\u0301y ﬁle ㍻元年 〇𠮷野家 ひらがな 한국어 😀👍🏽 C++ C# _x_",
    "tab\tnew\nline\r\nnul\x00after zero\u200bwidth soft\u00adhyphen private\ue000use",
    "資料庫備份會保留三十天 導出",
]


NATIVE = [
    "unicode61",
    "unicode61:remove_diacritics=0",
    "unicode61:remove_diacritics=2",
    "trigram",
    "trigram:case_sensitive=true",
]


@pytest.mark.parametrize("spec", NATIVE)
@pytest.mark.parametrize("text", SAMPLES)
def test_terms_equal_fts5vocab(spec: str, text: str) -> None:
    tokenizer = tokenizer_for(spec)
    assert tokenizer.terms(text) == fts5_terms(tokenizer.fts5_clause, text)


@pytest.mark.parametrize("spec", NATIVE)
@given(text=st.text(st.characters(blacklist_categories=("Cs",)), max_size=40))
@pytest.mark.fuzz
def test_terms_equal_fts5vocab_on_random_text(spec: str, text: str) -> None:
    tokenizer = tokenizer_for(spec)
    assert tokenizer.terms(text) == fts5_terms(tokenizer.fts5_clause, text)


def test_unicode61_token_offsets_cover_the_raw_run() -> None:
    tokens = tokenizer_for("unicode61").tokenize("导出文件保留三十天，Ｗｉ")
    assert [(t.text, t.start, t.end) for t in tokens] == [("导出文件保留三十天", 0, 9), ("ｗｉ", 10, 12)]
