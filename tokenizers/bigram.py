"""Overlapping character bigrams over Han runs; other words whole (what Lucene's CJK analyzer does)."""

from __future__ import annotations

from .base import PythonTokenizer
from .cjk import HAN_OR_WORD


class BigramTokenizer(PythonTokenizer):
    """Han runs as overlapping bigrams (a lone Han character yields itself); other words whole.

    Decisions, each pinned by a golden test: ``3.11``, ``wi-fi``, ``c++``, ``c#`` and ``iphone15`` are
    single words; ``ＡＢＣ`` becomes ``abc`` through NFKC; ``〇`` and astral ideographs such as ``𠮷`` are
    Han; kana and Hangul runs are words like Latin ones; emoji, punctuation and symbols are dropped.
    """

    name = "bigram"
    summary = "overlapping Han character bigrams + whole Latin/digit words (the Lucene/Anserini CJK baseline)"
    clean_spans = True
    ordered_spans = True

    def _spans(self, text: str) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        for match in HAN_OR_WORD.finditer(text):
            start, end = match.span()
            if match.lastgroup == "word" or end - start == 1:
                spans.append((start, end))
            else:
                spans += zip(range(start, end - 1), range(start + 2, end + 1), strict=False)
        return spans
