"""Ranking a query with the impact postings: the query's postings keys, and :func:`ranked`, which sums
``idf * impact`` in FTS5's order (every row scored with numpy, or MaxScore / intersection pruning where it
pays), bit for bit FTS5's bm25 ranking. Postings come from :mod:`rag_eval.engines.impact.read`.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from .arrays import _buffer, _clean, _clear, _distinct, _intersected, _kth, _lookup, _nonzero, _top, _zeros
from .read import Parameters, Postings, _best_rows_of, _postings_of
from .write import field_key

if TYPE_CHECKING:
    import numpy as np

    from ...index.store import Index
    from ...search.query import CompiledQuery

#: ``accept(ids)``: which of these chunk ids pass the search's filters.
Accept = Callable[[list[int]], set[int]]


def query_keys(compiled: CompiledQuery) -> tuple[str, ...]:
    """The postings keys of a query's terms in expression order (FTS5 sums its phrases in that order): a
    one-field query's terms, or the terms of every field in the expression under their field's key."""
    return tuple(key for group in _key_groups(compiled) for key in group)


def _key_groups(compiled: CompiledQuery) -> list[tuple[str, ...]]:
    """The postings keys of each field in the expression (one group for a one-field query)."""
    if not compiled.fields:
        return [compiled.terms]
    return [tuple(field_key(number, term) for term in compiled.fields[number]) for number in compiled.matching]


def _key_weights(compiled: CompiledQuery) -> dict[str, float] | None:
    """A weighted query's (pseudo-relevance feedback's) weight of each postings key; None for an unweighted one."""
    if compiled.weighted is None:
        return None
    numbers = list(compiled.matching) if compiled.fields else [0]
    weights = compiled.weighted.weights
    return {
        key: weight
        for group, number in zip(_key_groups(compiled), numbers, strict=True)
        for key, weight in zip(group, weights[number], strict=True)
    }


#: Whether :func:`ranked` prunes by default; None: an ``or`` query whose longest list holds at least
#: :data:`PRUNE_SHARE` of its postings and at least :data:`PRUNE_MIN_POSTINGS` is pruned. MaxScore skips such a
#: list (a frequent term's) at a cost per query (bounds, binary searches, exact scores) that only a long list
#: repays: at 10x cmrc2018_dev_trial_sent (135k rows) it paid for jieba and pkuseg questions led by 的's
#: 71k-posting list and never for unigram's flatter ones; on drcd_dev replicated 30x (30k rows) no list was
#: long enough for it to pay (reports/latency.md, "Pruning where it pays").
PRUNE: bool | None = None
PRUNE_SHARE = 0.6
PRUNE_MIN_POSTINGS = 40_000


def _pays(present: dict[str, Postings]) -> bool:
    """Whether MaxScore is expected to beat scoring every row (see :data:`PRUNE`)."""
    lengths = [len(found.ids) for found in present.values()]
    longest = max(lengths)
    return len(lengths) > 1 and longest >= PRUNE_MIN_POSTINGS and longest >= PRUNE_SHARE * sum(lengths)


def ranked(
    index: Index,
    compiled: CompiledQuery,
    limit: int,
    accept: Accept | None = None,
    *,
    prune: bool | None = None,
    parameters: Parameters = None,
) -> list[tuple[int, float]]:
    """The top ``limit`` (chunk id, bm25 score) of ``compiled`` (see :func:`fallback_reason`), in FTS5's
    order: score ascending, ties by id; ``accept`` filters (called on candidates in rank order).
    ``prune`` (default :data:`PRUNE`: where it pays) skips rows that provably cannot make the top (MaxScore for
    ``or``, intersection by lookups for ``and``; see :class:`_Scorer`); the result is the same either way, bit
    for bit. ``parameters``: bm25's k1 and b when not FTS5's (impacts and peaks computed from the stored tf)."""
    groups = _key_groups(compiled)
    keys = tuple(key for group in groups for key in group)  # query_keys(compiled)
    postings = {key: _postings_of(index, key, parameters) for key in dict.fromkeys(keys)}
    present = {key: found for key, found in postings.items() if found is not None}
    hybrid_and = compiled.mode == "and" and len(groups) > 1
    if not present or (compiled.mode == "and" and not hybrid_and and len(present) < len(postings)):
        return []
    # Reading the postings above left the index holding the cache that has them (see _postings_of).
    scorer = _Scorer(
        keys, present, conjunctive=compiled.mode == "and", best=index.postings.best_rows, weights=_key_weights(compiled)
    )
    chosen = PRUNE if prune is None else prune
    if chosen is None:
        chosen = compiled.mode != "and" and _pays(present)
    if hybrid_and:
        scorer.groups = [group for group in groups if all(key in present for key in group)]
        top_of = scorer.any_group
    elif not chosen:
        top_of = scorer.everything
    elif compiled.mode == "and":
        top_of = scorer.intersection
    else:
        top_of = scorer.maxscore
    if accept is None:
        return top_of(limit)[0]
    hits: list[tuple[int, float]] = []
    seen = 0
    wanted = limit
    while True:
        top, exhausted = top_of(wanted)
        fresh = top[seen:]
        passed = accept([chunk_id for chunk_id, _ in fresh]) if fresh else set()
        hits += [(chunk_id, score) for chunk_id, score in fresh if chunk_id in passed]
        if len(hits) >= limit or exhausted:
            return hits[:limit]
        seen, wanted = len(top), wanted * 4


#: Relative slack on score bounds: far above the rounding of a sum of a few dozen terms, far below any gap
#: that decides a ranking.
_SLACK = 1e-9
#: Below this many postings in all, scoring every row ranks every matching row without a cut (the cut's
#: pool costs more than it saves; at 10x unigram the cut took engine p95 from 1.78 to 1.08 ms).
CUT_MIN_POSTINGS = 20_000
#: The cut before ranking is taken from the rows of the rarest lists, up to this many postings.
POOL_POSTINGS = 2000

#: MaxScore raises its threshold (a sort of the best rows so far) before summing a list of at least this many
#: postings, a quarter of those summed, and an eighth of the rows: a shorter list costs less to sum than the
#: bound (tried at 10x: 1,000 to 8,000 postings and shares from a quarter to none measured alike, within noise).
CHECK_POSTINGS = 4000
CHECK_SHARE = 4
CHECK_FRACTION = 8
#: MaxScore takes its candidates by sorting the summed lists' rows while fewer than the rows / this, else by
#: testing every row of the dense sums (4, 16 and 64 measured alike at 10x, within noise).
DISTINCT_COST = 16
#: A binary search per candidate costs about this many postings scattered (numpy, measured 10 to 15).
LOOKUP_COST = 10

Ranking = tuple[list[tuple[int, float]], bool]


class _Scorer:
    """One query over its terms' postings. Each method returns the top ``k`` and whether that is every match.

    Exact scores are always summed term by term in the query's order (repeats included), as FTS5 does, so a
    row's score is bit-identical whichever method found it; bounds use any order, with ``_SLACK``. A weighted
    query (``weights``: each key's weight, keys distinct) sums ``weight * idf * impact`` instead, the same way.
    """

    def __init__(
        self,
        terms: tuple[str, ...],
        present: dict[str, Postings],
        *,
        conjunctive: bool,
        best: Callable[[str, Postings], np.ndarray] | None = None,
        weights: dict[str, float] | None = None,
    ) -> None:
        self.terms = [term for term in terms if term in present]
        self.weights = weights
        self.present = present
        self.best = best or (lambda _term, found: _best_rows_of(found))
        self.conjunctive = conjunctive
        self.size = 1 + max(int(found.ids[-1]) for found in present.values())
        self._all: tuple[np.ndarray, np.ndarray] | None = None
        self._scores: np.ndarray | None = None
        self._known: tuple[np.ndarray, np.ndarray] | None = None
        #: A hybrid's ``and``: each field's keys, for the fields whose every term some row holds.
        self.groups: list[tuple[str, ...]] = []

    def everything(self, k: int) -> Ranking:
        """Every matching row scored (numpy scatter per term), then ranked above a cut where one is known."""
        import numpy as np

        if self._all is None or not self.conjunctive:
            scores = self._dense()
        if not self.conjunctive:
            cut = self._cut(scores, k)
            if cut > 0:
                candidates = _nonzero(scores, cut)
                values = np.negative(scores[candidates])
                top = _top(candidates, values, k)
                return top, len(top) < k
        if self._all is None:
            if self.conjunctive:
                matched = _buffer("matched", self.size, "i4")
                matched.fill(0)
                for ids, _, _ in self.present.values():
                    matched[ids] += 1
                candidates = np.flatnonzero(matched == len(self.present))
            else:
                candidates = _nonzero(scores, 0.0)  # every idf and impact is positive
            values = np.take(scores, candidates, out=_buffer("ranked", len(candidates)))
            self._all = candidates, np.negative(values, out=values)
        candidates, values = self._all
        top = _top(candidates, values, k)
        return top, len(top) == len(candidates)

    def _dense(self) -> np.ndarray:
        """Every row's score (0 where no term is), summed once per query."""
        import numpy as np

        if self._scores is None:
            scores = self._scores = _zeros("scores", self.size)
            for term in self.terms:  # FTS5 sums phrase by phrase in expression order
                ids, values, _ = self.present[term]
                # ids are unique: scores[ids] += values, several times faster
                np.add.at(scores, ids, self._weighted(term, values))
        return self._scores

    def _cut(self, scores: np.ndarray, k: int) -> float:
        """The ``k``-th best exact score among the rows of the rarest lists (so at most the ``k``-th best of
        all), when those rows are few against all the postings; else 0. Ranking only rows at or above it
        keeps every row of the top and every row tied with its last."""

        total = sum(len(found.ids) for found in self.present.values())
        if total < CUT_MIN_POSTINGS:
            return 0.0
        lists = []
        taken = 0
        for found in sorted(self.present.values(), key=lambda found: len(found.ids)):
            lists.append(found.ids)
            taken += len(found.ids)
            if taken >= max(POOL_POSTINGS, 4 * k):
                break
        if taken * 4 > total:
            return 0.0
        return _kth(scores, _distinct(lists), k)

    def exact(self, candidates: np.ndarray) -> np.ndarray:
        """The scores (positive) of ``candidates`` (ascending), term by term in query order; rows scored by
        the previous call are not scored again."""
        import numpy as np

        known = self._known
        if known is not None and len(known[0]):
            positions = known[0].searchsorted(candidates)
            hit = known[0].take(positions, mode="clip") == candidates
            scores = np.empty(len(candidates))
            scores[hit] = known[1][positions[hit]]
            scores[~hit] = self._exact(candidates[~hit])
        else:
            scores = self._exact(candidates)
        self._known = candidates, scores
        return scores

    def _exact(self, candidates: np.ndarray) -> np.ndarray:
        import numpy as np

        scores = np.zeros(len(candidates))
        for term in self.terms:
            ids, values, _ = self.present[term]
            positions = ids.searchsorted(candidates)
            # A miss adds +0.0, which leaves a sum of positive terms bit for bit as it was.
            found = self._weighted(term, values.take(positions, mode="clip"))
            scores += np.where(ids.take(positions, mode="clip") == candidates, found, 0.0)
        return scores

    def intersection(self, k: int) -> Ranking:
        """``and``: the shortest list's rows looked up in the others, then scored; no row is scanned twice."""
        if self._all is None:
            candidates = _intersected([found.ids for found in self.present.values()])
            self._all = candidates, -self.exact(candidates)
        return self.everything(k)

    def any_group(self, k: int) -> Ranking:
        """A hybrid's ``and``: the rows where some field holds all its terms (a union of intersections). FTS5
        counts a field's terms only in the rows that field matches (it clears the positions of a conjunction
        that failed), so a row's score sums, in expression order, the terms of the fields it matches."""
        import numpy as np

        if self._all is None:
            matched = [_intersected([self.present[key].ids for key in dict.fromkeys(group)]) for group in self.groups]
            nonempty = [rows for rows in matched if len(rows)]
            candidates = _distinct(nonempty) if nonempty else np.zeros(0, dtype=np.int64)
            scores = np.zeros(len(candidates))
            for group, rows in zip(self.groups, matched, strict=True):
                if not len(rows):
                    continue
                inside = _lookup(rows, candidates)[1]
                within = candidates[inside]
                sums = scores[inside]
                for key in group:  # repeats included, as FTS5 sums every phrase
                    ids, values, _ = self.present[key]
                    sums += values[ids.searchsorted(within)]  # every row of ``within`` holds every key
                scores[inside] = sums
            self._all = candidates, np.negative(scores)
        candidates, values = self._all
        top = _top(candidates, values, k)
        return top, len(top) == len(candidates)

    def maxscore(self, k: int) -> Ranking:
        """``or`` with MaxScore's bounds: rows only in lists whose largest contributions together stay below
        the ``k``-th best score cannot make the top.

        1. Lists are summed into a dense array most valuable term first (``idf * peak`` times the term's
           repeats: rare terms, short lists). After each, ``theta`` (at most the true ``k``-th best score) is
           the ``k``-th best sum so far among the rows the summed terms add most to (:func:`_best_rows_of`,
           kept per term): a sum of some of a row's contributions is at most its score.
        2. Summing stops when the terms left, whose maxima together stay below ``theta``, are non-essential: a
           row in none of the summed lists scores below ``theta``, and their lists are never scanned.
        3. Candidates are the summed lists' rows whose sum plus the non-essential maxima can reach ``theta``;
           the non-essential terms, most valuable first, add their contributions (binary search when the rows
           left are few against the list, else a dense array), and rows whose bound falls below are dropped.
        4. The rows whose (unordered) sum can still be among the ``k`` best are scored exactly and ranked.
        """
        # Over 60 lines: the four steps share the dense array ``partial``, the lists summed into it (cleared in the
        # ``finally`` whatever happens) and ``theta``; apart, each would take and hand back most of that state.
        import numpy as np

        present = self.present
        if len(present) < 2:
            return self.everything(k)
        repeats = collections.Counter(self.terms)
        factor = {term: float(repeats[term]) for term in present}
        if self.weights is not None:  # a weighted query's keys are distinct: each counts its weight times
            factor = {term: self.weights[term] for term in present}
        most = {term: factor[term] * found.most for term, found in present.items()}
        order = sorted(present, key=most.__getitem__, reverse=True)
        left = list(itertools.accumulate([most[term] for term in reversed(order)], initial=0.0))[::-1]
        partial = _clean("partial", self.size)
        summed: list[np.ndarray] = []
        try:
            theta = 0.0
            spent = 0
            best: list[np.ndarray] = []
            while len(summed) < len(order) and left[len(summed)] * (1 + _SLACK) >= theta:
                term = order[len(summed)]
                summed.append(present[term].ids)  # before it is added to: cleared whatever happens
                self._scatter(partial, term, factor[term])
                spent += len(summed[-1])
                best.append(self.best(term, present[term]))
                following = len(present[order[len(summed)]].ids) if len(summed) < len(order) else 0
                # ``theta`` is worth raising only before a list longer than those summed (short lists cost
                # less to sum than the bound), and when no list is left, for the candidates' cut.
                if following >= max(CHECK_POSTINGS, spent // CHECK_SHARE, self.size // CHECK_FRACTION) or not following:
                    theta = max(theta, _kth(partial, _distinct(best), k))
            first = len(summed)
            cut = theta * (1 - _SLACK) - left[first]
            if spent * DISTINCT_COST < self.size:
                candidates = _distinct(summed)
                candidates = candidates[partial[candidates] >= cut]
            else:
                candidates = _nonzero(partial, cut)
            # The non-essential terms add to the candidates only (binary search), or, when the candidates are
            # many against a list, the list is summed like the others: either way into ``partial``.
            for position, term in enumerate(order[first:], first):
                if position > first:
                    keep = (partial[candidates] + left[position]) * (1 + _SLACK) >= theta
                    candidates = candidates[keep]
                ids, values, _ = present[term]
                if len(candidates) * LOOKUP_COST < len(ids):
                    positions, hit = _lookup(ids, candidates)
                    partial[candidates[hit]] += factor[term] * values[positions[hit]]  # candidates are distinct
                else:
                    summed.append(ids)
                    self._scatter(partial, term, factor[term])
            upper = partial[candidates]
        finally:
            _clear(partial, summed)
        if len(candidates) > k:
            # ``upper`` is now each row's score summed in another order: within rounding of the exact one.
            kth = float(np.partition(upper, len(upper) - k)[len(upper) - k])
            candidates = candidates[upper * (1 + _SLACK) >= max(theta, kth * (1 - _SLACK))]
        top = _top(candidates, -self.exact(candidates), k)
        return top, len(top) < k

    def _weighted(self, term: str, values: np.ndarray) -> np.ndarray:
        """A term's contributions times its weight in a weighted query (as they are, in an unweighted one)."""
        return values if self.weights is None else self.weights[term] * values

    def _scatter(self, partial: np.ndarray, term: str, factor: float) -> None:
        import numpy as np

        ids, values, _ = self.present[term]
        np.add.at(partial, ids, values if factor == 1.0 else factor * values)
