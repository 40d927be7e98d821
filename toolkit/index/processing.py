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
- ``prf=rm3`` or ``prf=bo1``: pseudo-relevance feedback (:mod:`rag_eval.search.feedback` computes it). The
  processed query is ranked once; its top ``fb_docs`` chunks are the feedback documents; the query is expanded
  into a *weighted* bag of terms and ranked again over the whole index (with the same filters), each term's
  bm25 contribution multiplied by its weight. Only an engine that declares ``weighted_terms`` ranks it (the
  impact engine; FTS5's ``bm25()`` statement cannot weight a term). ``or`` queries only (``and`` is refused).

  *Candidates* are the system's own tokens: the feedback chunks' tokens exactly as FTS5 indexed them (a Python
  strategy's stored space-joined tokens, title and body; a native strategy's title and text through its
  tokenizer's Python mirror), so unigram expands with characters, jieba with words and a hybrid each field
  with that field's tokens, each field expanded on its own (its own query, candidates and statistics).
  *Collection statistics* are FTS5's: ``N`` the number of chunks, a term's document frequency ``df`` (chunks
  holding it in any of the field's columns) and collection frequency ``F`` (its occurrences in them), read from
  ``fts5vocab`` (per column for a hybrid's field). The original query is the processed query's terms (each
  once, as rag-eval queries them).

  - ``rm3`` (Anserini's ``Rm3Reranker``; defaults ``fb_docs=10``, ``fb_terms=10``, ``original_weight=0.5``):
    a feedback chunk's vector is its terms' counts, without terms in more than 10% of the chunks, pruned to
    its ``fb_terms`` most frequent (ties by term); ``RM1(t) = sum_d s_d * c(t, d) / |d|`` with ``s_d`` the
    chunk's first-pass bm25 score (positive, unnormalised, as Anserini) and ``|d|`` the pruned vector's L1
    norm; the top ``fb_terms`` of RM1 are kept and L1-normalised; the expanded query is
    ``original_weight * q(t) + (1 - original_weight) * RM1(t)`` with ``q`` the original query L1-normalised
    (``1/n`` per term).
  - ``bo1`` (Terrier's ``QueryExpansion`` with ``Bo1`` and ``DFRBagExpansionTerms``; defaults ``fb_docs=3``,
    ``fb_terms=10``): ``tf_x`` is a term's count over the feedback chunks, ``Pn = F / N``,
    ``w(t) = tf_x * log2((1 + Pn) / Pn) + log2(1 + Pn)``; with two or more feedback chunks a term found in
    fewer than 2 of them gets 0 unless it is a query term; weights are divided by Terrier's parameter-free
    normaliser (``w`` of the best term as if its ``F`` were its ``tf_x``); the ``max(fb_terms, query terms)``
    best (ties by term; weight 0 left out) are added to the query: a query term weighs 1 plus its expansion
    weight, a new term its expansion weight.

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
#: Pseudo-relevance feedback: its methods, and each one's defaults (fb_docs, fb_terms, original_weight) as the
#: toolkit that defines it sets them (Anserini's RM3, Terrier's Bo1).
FEEDBACK_DEFAULTS: dict[str, tuple[int, int, float | None]] = {"rm3": (10, 10, 0.5), "bo1": (3, 10, None)}
_feedback_docs = whole(1, 1000, why="feedback needs at least one document")
_feedback_terms = whole(1, 1000, why="feedback adds at least one term")
_original_weight = real(0.0, 1.0, why="the original query's share of the interpolation")


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
            Option(
                "prf",
                "pseudo-relevance feedback: rm3 (Anserini's) or bo1 (Terrier's); none by default",
                None,
                str,
                tuple(FEEDBACK_DEFAULTS),
            ),
            Option("fb_docs", "feedback documents (rm3: 10, bo1: 3)", None, _feedback_docs),
            Option("fb_terms", "expansion terms kept (10)", None, _feedback_terms),
            Option(
                "original_weight", "rm3: the original query's weight in the interpolation (0.5)", None, _original_weight
            ),
        )
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        method = self.options["prf"]
        given = [key for key in ("fb_docs", "fb_terms", "original_weight") if self.options[key] is not None]
        if method is None and given:
            raise SpecError(
                f"query processing option {given[0]!r} tunes pseudo-relevance feedback, which is off",
                hint="add prf=rm3 or prf=bo1",
            )
        if method is not None and self.options["original_weight"] is not None and FEEDBACK_DEFAULTS[method][2] is None:
            raise SpecError(
                f"query processing option 'original_weight' is rm3's; prf={method} adds its terms to the query",
                hint="leave original_weight out, or use prf=rm3",
            )
        if method is not None:  # a method's own default, written out, is the same system: one name, one cache key
            for key, default in zip(("fb_docs", "fb_terms", "original_weight"), FEEDBACK_DEFAULTS[method], strict=True):
                if self.options[key] is not None and self.options[key] == default:
                    self.options[key] = None

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
    def feedback(self) -> str | None:
        """The pseudo-relevance feedback method (``rm3``, ``bo1``), or None."""
        return self.options["prf"]

    @property
    def feedback_settings(self) -> tuple[int, int, float]:
        """(feedback documents, expansion terms, original query weight) with the method's defaults filled in
        (the weight is rm3's; 1.0 for bo1, which keeps the query terms at weight 1)."""
        method = self.options["prf"]
        if method is None:
            raise ValueError("no pseudo-relevance feedback")
        docs, terms, weight = FEEDBACK_DEFAULTS[method]
        given = self.options
        return (
            given["fb_docs"] or docs,
            given["fb_terms"] or terms,
            given["original_weight"]
            if given["original_weight"] is not None
            else (weight if weight is not None else 1.0),
        )

    @property
    def weighted(self) -> bool:
        """Whether its queries are weighted bags of terms (feedback): only an engine declaring
        ``weighted_terms`` ranks them."""
        return self.options["prf"] is not None

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
