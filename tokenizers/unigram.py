"""One token per Han character; other words whole: the classic strong baseline for Chinese."""

from __future__ import annotations

from .base import PythonTokenizer
from .cjk import HAN_OR_WORD


class UnigramTokenizer(PythonTokenizer):
    """Every Han character is a token; words of other scripts follow bigram's rule."""

    name = "unigram"
    summary = "one token per Han character + whole Latin/digit words"
    clean_spans = True
    ordered_spans = True

    def _spans(self, text: str) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        for match in HAN_OR_WORD.finditer(text):
            start, end = match.span()
            if match.lastgroup == "word":
                spans.append((start, end))
            else:
                spans += zip(range(start, end), range(start + 1, end + 1), strict=False)
        return spans
