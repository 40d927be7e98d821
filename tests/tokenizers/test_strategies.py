"""Golden tokens per strategy, offsets that slice back, and the point of the project: 导出 in a compact line."""

from __future__ import annotations

import pytest
from helpers import ALL_SPECS, tokenizer_for

from rag_eval.tokenizers import get_tokenizer, normalise

MIXED = "用户可在设置页导出 CSV 文件（最多 500 MB），Python 3.11 与 iPhone15 均支持。頭髮乾燥😀"
FULL_WIDTH = "ＡＢＣ１２３，Ｗｉ－Ｆｉ"
TRADITIONAL = "資料庫備份會保留三十天"

# Expected terms, decided per strategy and checked by hand. jieba and pkuseg goldens hold for the
# versions pinned in constraints.txt.
GOLDEN = {
    "unicode61": {
        MIXED: [
            "用户可在设置页导出",
            "csv",
            "文件",
            "最多",
            "500",
            "mb",
            "python",
            "3",
            "11",
            "与",
            "iphone15",
            "均支持",
            "頭髮乾燥",
        ],
        FULL_WIDTH: ["ａｂｃ１２３", "ｗｉ", "ｆｉ"],
        TRADITIONAL: ["資料庫備份會保留三十天"],
    },
    "trigram": {
        FULL_WIDTH: [
            "ａｂｃ",
            "ｂｃ１",
            "ｃ１２",
            "１２３",
            "２３，",
            "３，ｗ",
            "，ｗｉ",
            "ｗｉ－",
            "ｉ－ｆ",
            "－ｆｉ",
        ],
        TRADITIONAL: ["資料庫", "料庫備", "庫備份", "備份會", "份會保", "會保留", "保留三", "留三十", "三十天"],
    },
    "jieba": {
        MIXED: [
            "用户",
            "可",
            "在",
            "设置",
            "页",
            "导出",
            "csv",
            "文件",
            "最",
            "多",
            "500",
            "mb",
            "python",
            "3.11",
            "与",
            "iphone15",
            "均",
            "支持",
            "頭",
            "髮",
            "乾燥",
        ],
        FULL_WIDTH: ["abc123", "wi", "fi"],
        TRADITIONAL: ["資料", "庫備", "份會", "保留", "三十", "三十天", "十天"],
    },
    "jieba:mode=precise": {TRADITIONAL: ["資料", "庫備", "份會", "保留", "三十天"]},
    "pkuseg:model=mini": {
        MIXED: [
            "用户",
            "可在",
            "设置",
            "页",
            "导出",
            "cs",
            "v",
            "文件",
            "最多",
            "500",
            "mb",
            "python",
            "3.11",
            "与",
            "iphone15",
            "均",
            "支持",
            "頭髮",
            "乾燥",
        ],
        TRADITIONAL: ["資料", "庫備", "份會", "保留", "三十", "天"],
    },
    "bigram": {
        MIXED: [
            "用户",
            "户可",
            "可在",
            "在设",
            "设置",
            "置页",
            "页导",
            "导出",
            "csv",
            "文件",
            "最多",
            "500",
            "mb",
            "python",
            "3.11",
            "与",
            "iphone15",
            "均支",
            "支持",
            "頭髮",
            "髮乾",
            "乾燥",
        ],
        FULL_WIDTH: ["abc123", "wi-fi"],
        TRADITIONAL: ["資料", "料庫", "庫備", "備份", "份會", "會保", "保留", "留三", "三十", "十天"],
    },
    "bigram:t2s=true": {TRADITIONAL: ["资料", "料库", "库备", "备份", "份会", "会保", "保留", "留三", "三十", "十天"]},
    "unigram": {
        MIXED: [
            "用",
            "户",
            "可",
            "在",
            "设",
            "置",
            "页",
            "导",
            "出",
            "csv",
            "文",
            "件",
            "最",
            "多",
            "500",
            "mb",
            "python",
            "3.11",
            "与",
            "iphone15",
            "均",
            "支",
            "持",
            "頭",
            "髮",
            "乾",
            "燥",
        ],
        TRADITIONAL: ["資", "料", "庫", "備", "份", "會", "保", "留", "三", "十", "天"],
    },
}

CASES = [(spec, text, terms) for spec, table in GOLDEN.items() for text, terms in table.items()]


@pytest.mark.parametrize(("spec", "text", "expected"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_golden_terms(spec: str, text: str, expected: list[str]) -> None:
    assert tokenizer_for(spec).terms(text) == expected


def test_golden_terms_real_pkuseg_model(real_pkuseg_model) -> None:
    tokenizer = get_tokenizer(f"pkuseg:model={real_pkuseg_model}")
    assert tokenizer.terms(FULL_WIDTH) == ["abc123", "wi-fi"]
    assert tokenizer.terms("导出文件保留三十天") == ["导出", "文件", "保留", "三十", "天"]


@pytest.mark.parametrize("spec", ALL_SPECS)
@pytest.mark.parametrize("text", [MIXED, FULL_WIDTH, TRADITIONAL, "ﬁle ㍻元年 Straße e\u0301t\u00e9"])
def test_offsets_slice_back_to_the_token(spec: str, text: str) -> None:
    tokenizer = tokenizer_for(spec)
    tokens = tokenizer.tokenize(text)
    assert tokens, "every sample text has tokens"
    for token in tokens:
        assert 0 <= token.start < token.end <= len(text)
        source = text[token.start : token.end]
        if tokenizer.native:
            # Native strategies fold the raw text as FTS5 does: the slice alone gives the same token.
            assert tokenizer.tokenize(source) == [type(token)(token.text, 0, len(source))]
        else:
            assert normalise(source, t2s=bool(tokenizer.options.get("t2s"))) == token.text
    assert [(t.start, t.end) for t in tokens] == sorted((t.start, t.end) for t in tokens)


@pytest.mark.parametrize("spec", ALL_SPECS)
@pytest.mark.parametrize("text", ["", " ", "\t\n\u3000 ", "，。！？"])
def test_empty_whitespace_and_punctuation_only_give_no_tokens(spec: str, text: str) -> None:
    expected = [] if not spec.startswith("trigram") or len(text) < 3 else None
    terms = tokenizer_for(spec).terms(text)
    if expected is None:  # trigram indexes every 3 characters, punctuation and spaces included
        assert terms == [text[i : i + 3].casefold() for i in range(len(text) - 2)]
    else:
        assert terms == expected


@pytest.mark.parametrize("spec", ["jieba", "pkuseg:model=mini", "bigram"])
def test_compact_line_yields_daochu(spec: str) -> None:
    assert "导出" in tokenizer_for(spec).terms("导出文件保留三十天")


def test_compact_line_yields_daochu_with_real_pkuseg(real_pkuseg_model) -> None:
    assert "导出" in get_tokenizer(f"pkuseg:model={real_pkuseg_model}").terms("导出文件保留三十天")


def test_unicode61_keeps_compact_line_as_one_token() -> None:
    assert tokenizer_for("unicode61").terms("导出文件保留三十天") == ["导出文件保留三十天"]


def test_trigram_has_no_terms_under_three_characters() -> None:
    assert tokenizer_for("trigram").terms("导出") == []


# Bigram golden cases: the documented decisions for versions, programming languages, full-width
# forms, 〇, astral ideographs, kana, Hangul and emoji. Unigram shares the word rule.
BIGRAM_DECISIONS = [
    ("3.11", ["3.11"]),
    ("C++", ["c++"]),
    ("C#", ["c#"]),
    ("Wi-Fi", ["wi-fi"]),
    ("iPhone15", ["iphone15"]),
    ("ＡＢＣ", ["abc"]),
    ("〇", ["〇"]),
    ("二〇二五年", ["二〇", "〇二", "二五", "五年"]),
    ("𠮷野家", ["𠮷野", "野家"]),
    ("ひらがなカタカナ", ["ひらがなカタカナ"]),
    ("東京タワー", ["東京", "タワー"]),
    ("한국어 검색", ["한국어", "검색"]),
    ("😀👍🏽", []),
    ("中", ["中"]),
    ("v2.3.1-rc1", ["v2.3.1-rc1"]),
    ("1,200 元", ["1", "200", "元"]),
    ("a+b", ["a", "b"]),
    ("㍻元年", ["平成", "平成元", "元年"]),
]


@pytest.mark.parametrize(("text", "expected"), BIGRAM_DECISIONS, ids=[c[0] for c in BIGRAM_DECISIONS])
def test_bigram_decisions(text: str, expected: list[str]) -> None:
    assert tokenizer_for("bigram").terms(text) == expected


def test_unigram_splits_han_and_keeps_words() -> None:
    assert tokenizer_for("unigram").terms("𠮷野家 C++ 3.11") == ["𠮷", "野", "家", "c++", "3.11"]


def test_jieba_precise_mode_differs_from_search_mode() -> None:
    assert tokenizer_for("jieba").terms("三十天") == ["三十", "三十天", "十天"]
    assert tokenizer_for("jieba:mode=precise").terms("三十天") == ["三十天"]


def test_jieba_user_dictionary_changes_segmentation(tmp_path) -> None:
    words = tmp_path / "words.txt"
    words.write_text("云栈平台 100 n\n", encoding="utf-8")
    plain = tokenizer_for("jieba:mode=precise").terms("云栈平台")
    custom = get_tokenizer(f"jieba:mode=precise,userdict={words}")
    assert "云栈平台" not in plain
    assert custom.terms("云栈平台") == ["云栈平台"]
    assert "userdict=sha256:" in custom.spec
