"""Query processing as part of a system: question and function words removed, frequent terms pruned, the
number of terms capped. Named by a spec like any other part of a system:
``query:stopwords=zh,max_df=0.3,top_terms=24`` (the ``query:`` prefix is optional).

- ``stopwords=zh``: the question is segmented with jieba (precise mode) and every word on the shipped list
  (``toolkit/data/question-words-zh.txt``: 什么, 哪里, 如何, 怎么, 吗, 呢, 是, 的, ... in simplified and
  traditional forms) is removed; a space stands where each was, so no term spans a removed word. The
  system's own tokenizer then tokenizes what is left.
- ``max_df=F``: terms found in more than ``F`` of the index's chunks are dropped (FTS5 itself gives terms
  in more than half of them an IDF of 1e-6). Document frequency counts chunks holding the term in any
  column. If every term would go, the rarest is kept.
- ``top_terms=N``: at most ``N`` terms per field are kept, the rarest first.

Phrase queries are exact and are never processed.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib.resources import files
from typing import Any

from ..errors import SpecError
from ..files.textio import shown
from ..spec import Configurable, Option, OptionSet, SystemSpec, format_value, real, whole

#: ``document_frequency(term)``: in how many chunks of the index ``term`` occurs.
DocumentFrequency = Callable[[str], int]


#: ``max_df``: a fraction of the chunks, above 0 and at most 1; ``top_terms``: a whole number, 0 for no cap.
_fraction = real(0.0, 1.0, above=True)
_count = whole(0, 10_000, why="0 keeps every term")


class QueryProcessing(Configurable):
    """What is done to a query's text and terms before it is matched."""

    name = "query"
    option_set = OptionSet(
        (
            Option(
                "stopwords", "remove Chinese question and function words (jieba-segmented)", "none", str, ("none", "zh")
            ),
            Option("max_df", "drop terms in more than this fraction of the chunks (1: keep all)", 1.0, _fraction),
            Option("top_terms", "keep at most this many terms per field, the rarest first (0: all)", 0, _count),
        )
    )

    @classmethod
    def parse(cls, text: str) -> QueryProcessing:
        """From ``query:key=value,...`` or just ``key=value,...``; empty or ``none`` means no processing."""
        text = text.strip()
        if not text or text == "none":
            return cls()
        spec = SystemSpec.parse(text if text.startswith("query") else f"query:{text}")
        if spec.name != cls.name:
            raise SpecError(f"invalid query processing {shown(text)}: expected query:key=value,...")
        return cls(**dict(spec.options))

    @property
    def written(self) -> str:
        """The short form names show: ``query:`` and the options that differ from the defaults, sorted
        (``query:stopwords=zh``); empty when nothing is done. It parses back to the same processing."""
        defaults = QueryProcessing().options
        parts = [
            f"{key}={format_value(value)}" for key, value in sorted(self.options.items()) if value != defaults[key]
        ]
        return self.name + ":" + ",".join(parts) if parts else ""

    @property
    def active(self) -> bool:
        """Whether anything is done at all (the default is nothing)."""
        return self.system != QueryProcessing().system

    @property
    def needs_frequencies(self) -> bool:
        return self.options["max_df"] < 1 or self.options["top_terms"] > 0

    def strip(self, text: str) -> tuple[str, tuple[str, ...]]:
        """The text with the listed words replaced by spaces, and the words removed."""
        if self.options["stopwords"] == "none":
            return text, ()
        from ..tokenizers import get_tokenizer

        words = question_words()
        characters = list(text)
        removed: list[str] = []
        for token in get_tokenizer("jieba:mode=precise").tokenize(text):
            if token.text in words:
                removed.append(token.text)
                characters[token.start : token.end] = " " * (token.end - token.start)
        return "".join(characters), tuple(removed)

    def prune(
        self, fields: list[tuple[str, ...]], document_frequency: DocumentFrequency, chunks: int
    ) -> tuple[list[tuple[str, ...]], dict[str, int]]:
        """Each field's terms after the ``max_df`` and ``top_terms`` rules; and every term's frequency."""
        frequencies = {term: document_frequency(term) for terms in fields for term in terms}
        limit = self.options["max_df"] * chunks
        cap = self.options["top_terms"]
        pruned = []
        for terms in fields:
            kept = [term for term in terms if frequencies[term] <= limit]
            if terms and not kept:  # never empty a field: keep its rarest term
                kept = [min(terms, key=lambda term: (frequencies[term], terms.index(term)))]
            if cap and len(kept) > cap:
                rarest = set(sorted(kept, key=lambda term: (frequencies[term], kept.index(term)))[:cap])
                kept = [term for term in kept if term in rarest]
            pruned.append(tuple(kept))
        return pruned, frequencies

    def describe(self) -> dict[str, Any]:
        """The options, for ``--explain`` and reports."""
        return dict(self.options)


@cache
def question_words() -> frozenset[str]:
    """The shipped list of question and function words (simplified and traditional)."""
    text = (files("rag_eval") / "data" / "question-words-zh.txt").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))
