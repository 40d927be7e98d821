"""FTS5's ``trigram`` tokenizer: every run of three characters, native in the index."""

from __future__ import annotations

import sqlite3
from typing import ClassVar

from ..spec import Option, OptionSet, parse_bool
from .base import QueryTerms, Token, Tokenizer
from .fts5_rules import check_fts5, trigram_rules
from .normalise import normalise


class TrigramTokenizer(Tokenizer):
    """FTS5 trigram on the raw text: each three consecutive characters (spaces and punctuation included).

    Terms under 3 characters match nothing: a query such as 导出 or 天 finds no row with trigram
    (SQLite 3.40; later versions fall back to a scan for LIKE/GLOB, not for MATCH). Text stops at a NUL
    character, as FTS5's trigram tokenizer does.
    """

    name = "trigram"
    summary = "FTS5's native trigram (every 3 characters; terms under 3 characters match nothing)"
    native: ClassVar[bool] = True
    overlapping_tokens: ClassVar[bool] = True
    whitespace_free_tokens: ClassVar[bool] = False
    option_set = OptionSet((Option("case_sensitive", "fold case (false, FTS5's default) or not", False, parse_bool),))

    @property
    def fts5_clause(self) -> str:
        """The ``tokenize=`` argument of the FTS5 table."""
        return f"trigram case_sensitive {int(self.options['case_sensitive'])}"

    def query_terms(self, text: str) -> QueryTerms:
        """The trigrams of each whitespace-separated word (none across the space between words); a word
        under 3 characters has none and is dropped, which makes an ``and`` query unsatisfiable."""
        per_word = [(word, self.terms(word)) for word in text.split()]
        terms = tuple(dict.fromkeys(gram for _, grams in per_word for gram in grams))
        highlight = tuple(normalise(word) for word, grams in per_word if grams)
        return QueryTerms(terms, highlight, tuple(word for word, grams in per_word if not grams))

    def fingerprint(self) -> dict[str, str]:
        return {"sqlite": sqlite3.sqlite_version}

    def _load(self) -> None:
        check_fts5("trigram")
        self._fold = trigram_rules(int(self.options["case_sensitive"])).fold

    def _tokenize(self, text: str) -> list[Token]:
        text = text.split("\x00", 1)[0]
        folded = text.translate(self._fold)
        return [Token(folded[i : i + 3], i, i + 3) for i in range(len(text) - 2)]
