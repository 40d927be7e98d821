"""FTS5's ``unicode61`` tokenizer: native in the index, mirrored in Python for offsets and listings."""

from __future__ import annotations

import sqlite3
from typing import ClassVar

from ..spec import Option, OptionSet
from .base import Token, Tokenizer
from .fts5_rules import check_fts5, unicode61_rules


class Unicode61Tokenizer(Tokenizer):
    """FTS5 unicode61 on the raw text: runs of letters, digits and private-use characters, case-folded.

    It has no notion of Chinese words: a whole run of Han characters between punctuation is one token,
    so 导出文件保留三十天 is a single term and a query for 导出 does not find it. The Python mirror uses the
    character tables of the linked SQLite (see ``fts5_rules``), so its terms equal what ``fts5vocab``
    reports.
    """

    name = "unicode61"
    summary = "FTS5's native unicode61 (whole Han runs are single tokens: the no-segmentation baseline)"
    native: ClassVar[bool] = True
    option_set = OptionSet(
        (
            Option(
                "remove_diacritics",
                "0: keep, 1: remove from single-diacritic letters, 2: remove all (FTS5 values)",
                1,
                int,
                ("0", "1", "2"),
            ),
        )
    )

    @property
    def fts5_clause(self) -> str:
        """The ``tokenize=`` argument of the FTS5 table."""
        return f"unicode61 remove_diacritics {self.options['remove_diacritics']}"

    def phrase_highlight(self, phrase: str, terms: tuple[str, ...]) -> str:
        """The phrase's own folded tokens, as FTS5 matches them."""
        return " ".join(terms)

    def fingerprint(self) -> dict[str, str]:
        return {"sqlite": sqlite3.sqlite_version}

    def _load(self) -> None:
        check_fts5("unicode61")
        self._rules = unicode61_rules(self.options["remove_diacritics"])

    def _tokenize(self, text: str) -> list[Token]:
        fold = self._rules.fold
        tokens = []
        for match in self._rules.token_chars.finditer(text):
            folded = match.group().translate(fold)
            if folded:  # a run of diacritics alone folds to nothing and FTS5 skips it
                tokens.append(Token(folded, match.start(), match.end()))
        return tokens
