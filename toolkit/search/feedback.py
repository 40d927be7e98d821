"""Pseudo-relevance feedback: a query expanded from the chunks its first ranking put on top (``query:prf=rm3``,
``query:prf=bo1``), as a weighted bag of terms an engine that declares ``weighted_terms`` ranks.

How terms are weighted, which tokens are candidates and which collection statistics are used is documented where
the option is declared, in :mod:`rag_eval.index.processing`. Here: :func:`rm3` and :func:`bo1` compute the weights
from plain counts (tested on hand-computed examples), and :func:`expand` reads what they need from an index (the
feedback chunks' tokens as FTS5 indexed them, and FTS5's own vocabulary) and returns the expanded query.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..index.columns import all_field_columns, field_columns
from .query import CompiledQuery, Weighted, quote, weighted_query

if TYPE_CHECKING:
    from ..index.processing import QueryProcessing
    from ..index.store import Index
    from ..records import Hit

#: RM3 leaves out of a feedback chunk's vector a term found in more than this share of the chunks (Anserini's
#: rule for every collection but tweets: its stand-in for a stopword list).
COMMON_SHARE = 0.1
#: Bo1: with at least this many feedback chunks, a term in fewer of them is not added (Terrier's
#: ``expansion.mindocuments``), unless it is a query term.
MIN_DOCUMENTS = 2

#: Where FTS5's ascii tokenizer (a Python strategy's column) splits: whitespace and control characters.
_SEPARATORS = re.compile(r"[\x00-\x20\x7f]+")


def _by_weight(item: tuple[str, float]) -> tuple[float, str]:
    """Largest weight first, ties by term (the toolkits leave ties to their hash maps)."""
    return -item[1], item[0]


def rm3(
    original: Sequence[str],
    documents: Sequence[tuple[float, Mapping[str, int]]],
    common: Callable[[str], bool],
    terms: int,
    original_weight: float,
) -> dict[str, float]:
    """RM3 as Anserini's ``Rm3Reranker`` computes it: the expanded query's weights, original terms first.

    ``original``: the query's distinct terms; ``documents``: each feedback chunk's first-pass score (positive) and
    term counts; ``common(term)``: whether the term is in more than :data:`COMMON_SHARE` of the chunks."""
    vectors = []
    for score, counts in documents:
        kept: dict[str, int] = {}
        for term, count in sorted(counts.items(), key=_by_weight):
            if len(kept) == terms:
                break
            if not common(term):
                kept[term] = count
        vectors.append((score, kept, sum(kept.values())))
    relevance: dict[str, float] = {}
    for score, kept, norm in vectors:
        if norm <= 0:  # nothing left of the chunk (Anserini skips a vector whose norm is 0)
            continue
        for term, count in kept.items():
            relevance[term] = relevance.get(term, 0.0) + count / norm * score
    top = sorted(relevance.items(), key=_by_weight)[:terms]
    total = sum(weight for _, weight in top)
    model = {term: weight / total for term, weight in top} if total > 0 else {}
    query = {term: 1 / len(original) for term in original}
    expanded = {
        term: original_weight * query.get(term, 0.0) + (1 - original_weight) * model.get(term, 0.0)
        for term in dict.fromkeys([*query, *model])
    }
    return {term: weight for term, weight in expanded.items() if weight > 0}


def bo1(
    original: Sequence[str],
    documents: Sequence[Mapping[str, int]],
    collection_frequency: Callable[[str], int],
    chunks: int,
    terms: int,
) -> dict[str, float]:
    """Bo1 as Terrier's ``QueryExpansion`` forms the expanded query: each query term at weight 1 plus its expansion
    weight, each added term its expansion weight (original terms first, then the added ones, best first).

    ``documents``: each feedback chunk's term counts; ``collection_frequency(term)``: the term's occurrences in
    the index (``F``); ``chunks``: ``N``."""
    within: Counter[str] = Counter()
    holding: Counter[str] = Counter()
    for counts in documents:
        within.update(counts)
        holding.update(counts.keys())
    least = MIN_DOCUMENTS if len(documents) >= MIN_DOCUMENTS else 0
    weights: dict[str, float] = {}
    for term, tf in within.items():
        frequency = collection_frequency(term)
        if frequency <= 0 or (holding[term] < least and term not in original):
            continue  # not in the index, or in too few feedback chunks: weight 0, never added
        share = frequency / chunks
        weights[term] = tf * math.log2((1 + share) / share) + math.log2(1 + share)
    expanded = dict.fromkeys(original, 1.0)
    if not weights:
        return expanded
    best = min(weights.items(), key=_by_weight)[0]
    top = within[best] / chunks  # parameter-free normaliser: the best term's weight were its F its tf_x
    normaliser = within[best] * math.log2((1 + top) / top) + math.log2(1 + top)
    for term, weight in sorted(weights.items(), key=_by_weight)[: max(terms, len(original))]:
        if weight > 0:
            expanded[term] = expanded.get(term, 0.0) + weight / normaliser
    return expanded


def expand(index: Index, compiled: CompiledQuery, first: Sequence[Hit], processing: QueryProcessing) -> CompiledQuery:
    """``compiled`` expanded by ``processing``'s feedback from ``first`` (its first ranking, best first), each field
    of a hybrid on its own; called inside the search's read transaction."""
    method = processing.feedback
    if method is None:
        raise ValueError("no pseudo-relevance feedback")
    documents, terms, original_weight = processing.feedback_settings
    chosen = list(first[:documents])
    counts = _field_counts(index, [hit.id for hit in chosen])
    statistics = _Statistics(index)
    groups = compiled.fields or (compiled.terms,)
    fields = []
    for number, original in enumerate(groups):
        if method == "rm3":
            scored = [(-hit.score, counts[hit.id][number]) for hit in chosen]  # FTS5's bm25 is negated
            common = functools.partial(statistics.common, number)
            fields.append(rm3(original, scored, common, terms, original_weight))
        else:
            docs = [counts[hit.id][number] for hit in chosen]
            frequency = functools.partial(statistics.collection_frequency, number)
            fields.append(bo1(original, docs, frequency, index.chunks, terms))
    return weighted_query(compiled, fields, Weighted(method, tuple(hit.id for hit in chosen), ()))


def _field_counts(index: Index, ids: list[int]) -> dict[int, list[Counter[str]]]:
    """Each chunk's term counts per field, the tokens exactly as FTS5 indexed them (title and body together)."""
    tokenizer = index.tokenizer
    fields = len(tokenizer.fields)
    columns = ["fts_title", "text"] if tokenizer.native else all_field_columns(fields)
    found: dict[int, list[Counter[str]]] = {}
    for chunk_id in ids:
        row = index.db.execute(f"SELECT {', '.join(columns)} FROM chunks WHERE id = ?", (chunk_id,)).fetchone()
        values = [value or "" for value in row]
        if tokenizer.native:  # FTS5 tokenizes the raw text; the tokenizer's Python mirror gives its tokens
            found[chunk_id] = [Counter(term for value in values for term in tokenizer.terms(value))]
        else:  # a Python strategy's columns hold its tokens, space-joined: FTS5 splits them on whitespace
            found[chunk_id] = [
                Counter(
                    token
                    for value in values[2 * number : 2 * number + 2]
                    for token in _SEPARATORS.split(value)
                    if token
                )
                for number in range(fields)
            ]
    return found


class _Statistics:
    """FTS5's vocabulary of one index, per field: a term's document and collection frequency (cached per query)."""

    _ROW = "temp.rag_eval_feedback_row"
    _COL = "temp.rag_eval_feedback_col"

    def __init__(self, index: Index) -> None:
        self.index = index
        self.hybrid = len(index.tokenizer.fields) > 1
        table, kind = (self._COL, "col") if self.hybrid else (self._ROW, "row")
        index.db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5vocab(main, 'search', '{kind}')")
        self.table = table
        self.limit = COMMON_SHARE * index.chunks
        self._found: dict[tuple[int, str], tuple[int, int, int]] = {}

    def _of(self, field: int, term: str) -> tuple[int, int, int]:
        """(fewest, most) chunks holding ``term`` in the field, and its occurrences there (the vocabulary's)."""
        key = (field, term)
        found = self._found.get(key)
        if found is None:
            db = self.index.db
            if not self.hybrid:
                row = db.execute(f"SELECT doc, cnt FROM {self.table} WHERE term = ?", (term,)).fetchone()
                found = (row[0], row[0], row[1]) if row else (0, 0, 0)
            else:
                columns = field_columns(field)
                rows = [
                    (doc, cnt)
                    for col, doc, cnt in db.execute(f"SELECT col, doc, cnt FROM {self.table} WHERE term = ?", (term,))
                    if col in columns
                ]
                docs = [doc for doc, _ in rows]
                # A term in both of the field's columns may be in the same chunks: fewest is the larger count.
                found = (max(docs, default=0), sum(docs), sum(cnt for _, cnt in rows))
            self._found[key] = found
        return found

    def collection_frequency(self, field: int, term: str) -> int:
        """``F``: the term's occurrences in the field's columns of every chunk."""
        return self._of(field, term)[2]

    def common(self, field: int, term: str) -> bool:
        """Whether more than :data:`COMMON_SHARE` of the chunks hold ``term`` in the field (exact: a hybrid's field
        counts the chunks holding it in either column only when the vocabulary's bounds do not decide)."""
        fewest, most, _ = self._of(field, term)
        if fewest > self.limit or most <= self.limit:
            return fewest > self.limit
        expression = f"{{{' '.join(field_columns(field))}}} : {quote(term)}"
        held = self.index.db.execute("SELECT count(*) FROM search WHERE search MATCH ?", (expression,)).fetchone()[0]
        return bool(held > self.limit)
