"""Which pooled passage to judge next, and whether the judgments so far already decide the best system.

A *pool* is the union of each system's top ``depth`` documents per query. A person grades pooled
(query, document) pairs one at a time; the ``Selector`` orders them so each grade helps most to decide which
system has the highest mean nDCG@10 (trec_eval's definition: gain = grade, discount 1 / log2(1 + rank),
ideal ranking from the grades of the pool, means over queries with at least one positive grade).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import RagEvalError
from ...files.textio import shown
from .settle import Completions, PoolModel, query_uncertainty

#: system name -> query id -> document ids in rank order (best first)
Runs = Mapping[str, Mapping[str, Sequence[str]]]

#: ``naive``: every system's rank-1 passage for every query, then rank 2, ...; ``decisive``: the passage whose
#: grade is expected to tell most about which system wins (see eval/judging/settle.py).
METHODS: tuple[str, ...] = ("naive", "decisive")
DEFAULT_METHOD = "decisive"
#: The orders whose pick is the model's decision; the others (the naive baseline) pick the best system on the
#: judged passages alone, unjudged ones counted as not relevant.
DECIDING: frozenset[str] = frozenset({"decisive"})
#: Monte Carlo completions of the pool behind every decision (reports/judging.md measured with this many).
DEFAULT_SAMPLES = 200
#: The grade an unjudged passage may at most receive when ``certain`` is worked out (unless a larger one
#: was recorded): the handbook's and the public sets' scale is 0..2.
MAX_GRADE = 2


#: Below this win probability the model's leader is no better a pick than the best system on the judged
#: passages alone (unjudged = not relevant), which the leader then is; set on cmrc2018_dev_trial_sent
#: (reports/judging.md). Settled decisions (confidence >= target) always name the model's leader. Below it (and
#: unsettled) the page names no leader: it says it is too early to tell.
PICK_SURE = 0.6
#: Why it is too early to tell, in words.
TOO_EARLY = f"no system comes out best in {PICK_SURE:.0%} of the model's guesses at the unjudged passages yet"

#: Answered queries come after the unanswered ones while the model expects fewer than this many more relevant
#: passages per answered query (public sets: about 0.02; the handbook: about 2); see ``Selector.next``.
FEW_MORE = 0.5

#: Grades in a row the confidence must stay at the target (same leader) before the decision is settled;
#: set on the handbook (reports/judging.md).
STREAK = 10


@dataclass
class _Action:
    """One grade recorded or forgotten: the pair, its grade before, and the lead a decision saw after it."""

    index: int
    previous: float
    lead: tuple[int, float] | None = None


class SelectionError(RagEvalError, ValueError):
    """Runs, options or a grade the selector cannot use."""


@dataclass(frozen=True)
class Decision:
    """Which system leads after the grades so far, by how much, and whether grading may stop."""

    leader: str
    runner_up: str | None
    margin: float
    confidence: float
    settled: bool
    certain: bool
    judged: int
    pooled: int
    #: Each system's expected mean nDCG@10 over the pooled questions once every pooled passage is judged: what
    #: ``compare --qrels`` will report then (a question with no relevant passage counts, as 0); ``margin`` is
    #: the leader's over the runner-up's.
    scores: dict[str, float]

    @property
    def percent(self) -> int:
        """The confidence as the whole percentage every view shows, rounded here once (100 only when certain)."""
        if self.certain:
            return 100
        return min(99, max(0, math.floor(self.confidence * 100 + 0.5)))

    @property
    def too_early(self) -> bool:
        """Whether the grades so far name no leader: there are none, or no system comes out best in
        ``PICK_SURE`` of the model's completions (and the decision is neither settled nor certain)."""
        return self.judged == 0 or not (self.certain or self.settled or self.confidence >= PICK_SURE)

    def bars(self) -> list[tuple[str, float]]:
        """Each system's score in the order the page draws its bars: best first by the score as shown (three
        decimals), the leader first among equals, then by name."""
        return sorted(self.scores.items(), key=lambda item: (-_shown(item[1]), item[0] != self.leader, item[0]))

    @property
    def on_top(self) -> bool:
        """Whether the leader is the first bar (when it is not, :meth:`lead` says why it leads all the same)."""
        bars = self.bars()
        return not bars or bars[0][0] == self.leader

    def lead(self) -> str:
        """The leader and how it stands against the bars, in words (the page and :meth:`line` say it the same
        way); the difference is that of the scores as the bars show them."""
        bars = self.bars()
        if len(bars) < 2:
            return f"{self.leader}, the only system"
        if bars[0][0] == self.leader:
            other, score = bars[1]
            gap = _shown(self.scores[self.leader]) - _shown(score)
            return f"{self.leader}, " + (f"{gap:.3f} nDCG@10 ahead of {other}" if gap > 0 else f"level with {other}")
        # The leader is the system most often best over the model's completions of the unjudged passages (or, in
        # a close race, the best on the judged ones); the bars show each system's average over the completions.
        top, score = bars[0]
        gap = _shown(score) - _shown(self.scores[self.leader])
        return (
            f"{self.leader}, best in {self.percent}% of the model's guesses at the unjudged passages, though {top} "
            f"has the higher average estimate (by {gap:.3f} nDCG@10)"
        )

    def line(self) -> str:
        """The decision in plain words, for a page or a log."""
        judged = f"{self.judged} of {self.pooled} judged"
        if self.judged == 0:
            # the model's leader before any grade is the systems' prior, not something a grade showed
            return f"no grades yet: too early to tell which system is best; {judged}"
        if self.too_early:
            return f"too early to tell which system is best ({TOO_EARLY}); {judged}"
        if self.certain:
            return f"winner {self.lead()}; settled for certain (no remaining grade can change the winner); {judged}"
        state = "settled" if self.settled else "not settled"
        return f"leader {self.lead()}; {state} ({self.percent}% sure); {judged}"


def score_text(score: float) -> str:
    """A score as every view shows it: three decimals."""
    return f"{score:.3f}"


def _shown(score: float) -> float:
    return float(score_text(score))


def discount(rank: int) -> float:
    """trec_eval's nDCG discount of a 1-based rank."""
    return 1.0 / math.log2(1 + rank)


class Selector:
    """Orders pooled passages for judging and tells which system leads (see the module docstring)."""

    def __init__(
        self,
        runs: Runs,
        *,
        depth: int = 10,
        method: str = DEFAULT_METHOD,
        target: float = 0.95,
        seed: int = 0,
        samples: int = DEFAULT_SAMPLES,
    ) -> None:
        _check_options(method, depth, target, samples, seed)
        self.method = method
        self.depth = depth
        self.target = float(target)
        self.seed = seed
        self._systems, self._queries, ranked = _check_runs(runs, depth)
        self._pool, pairs, ranks = _pooled_pairs(self._systems, self._queries, ranked)
        self._pairs = pairs
        self._index = {pair: i for i, pair in enumerate(pairs)}
        query_number = {q: n for n, q in enumerate(self._queries)}
        self._qidx = np.array([query_number[q] for q, _ in pairs], dtype=np.int64)
        self._ranks = np.array(ranks, dtype=np.int64).reshape(len(pairs), len(self._systems))
        with np.errstate(divide="ignore"):
            # nDCG@10: a passage pooled deeper than rank 10 counts for no system
            inside = (self._ranks > 0) & (self._ranks <= _CUT)
            self._disc = np.where(inside, 1.0 / np.log2(1.0 + np.maximum(self._ranks, 1)), 0.0)
        self._grades = np.full(len(pairs), np.nan)
        self._judged: dict[str, dict[str, int]] = {}
        # the naive order: every system's rank-1 passage for every query, then rank 2, ...
        best = np.where(self._ranks > 0, self._ranks, depth + 1)
        first_system = np.argmin(best, axis=1)
        self._naive = np.lexsort((first_system, self._qidx, best.min(axis=1)))
        self._history: list[_Action] = []
        self._pooled_questions = sum(1 for docs in self._pool.values() if docs)  # questions with a passage to grade
        self._model = PoolModel(self._disc, self._qidx, len(self._queries), samples, seed)
        self._cache: Completions | None = None

    # -- state ------------------------------------------------------------------------------------------------

    @property
    def systems(self) -> list[str]:
        """The systems compared, sorted by name."""
        return list(self._systems)

    @property
    def pool(self) -> dict[str, list[str]]:
        """Each query's pooled documents, best-ranked first."""
        return {q: list(docs) for q, docs in self._pool.items()}

    @property
    def judged(self) -> dict[str, dict[str, int]]:
        """The grades recorded so far, by query and document."""
        return {q: dict(docs) for q, docs in self._judged.items() if docs}

    def _pair(self, query_id: str, doc_id: str) -> int:
        index = self._index.get((query_id, doc_id))
        if index is None:
            raise SelectionError(f"query {query_id!r}, document {doc_id!r} is not in the pool")
        return index

    def record(self, query_id: str, doc_id: str, grade: int) -> None:
        """Record a grade (0, 1, 2, ...); recording a pair again replaces its grade."""
        if type(grade) is not int or grade < 0:
            raise SelectionError(f"grade must be a whole number of at least 0, not {grade!r}")
        index = self._pair(query_id, doc_id)
        self._history.append(_Action(index, float(self._grades[index])))
        self._grades[index] = grade
        self._judged.setdefault(query_id, {})[doc_id] = grade
        self._changed()

    def forget(self, query_id: str, doc_id: str) -> None:
        """Undo one grade."""
        index = self._pair(query_id, doc_id)
        if math.isnan(self._grades[index]):
            raise SelectionError(f"query {query_id!r}, document {doc_id!r} has no grade to forget")
        if self._history and self._history[-1].index == index and math.isnan(self._history[-1].previous):
            self._history.pop()  # undoing the last grade returns to the state before it, streak included
        else:
            self._history.append(_Action(index, float(self._grades[index])))
        self._grades[index] = np.nan
        del self._judged[query_id][doc_id]
        if not self._judged[query_id]:
            del self._judged[query_id]
        self._changed()

    def _changed(self) -> None:
        self._cache = None

    def completions(self) -> Completions:
        """Monte Carlo completions of the pool given the grades so far (cached until a grade changes)."""
        if self._cache is None:
            self._cache = self._model.completions(self._grades)
        return self._cache

    # -- choosing -----------------------------------------------------------------------------------------------

    def next(self, exclude: Collection[tuple[str, str]] = ()) -> tuple[str, str] | None:
        """The most useful unjudged pooled (query, document), or None when all are judged or excluded."""
        open_ = np.isnan(self._grades)
        for pair in exclude:
            if pair in self._index:
                open_[self._index[pair]] = False
        if not open_.any():
            return None
        if self.method == "naive":
            index = next(int(i) for i in self._naive if open_[i])
            return self._pairs[index]
        sampled = self.completions()
        leader = int(np.argmax(sampled.winners.mean(axis=1)))
        uncertainty = query_uncertainty(sampled, leader)[self._qidx]
        if not (uncertainty[open_] > 0).any():  # nothing left to decide: the naive order
            return self._pairs[next(int(i) for i in self._naive if open_[i])]
        # Open pairs that can move a race; in queries with no relevant passage judged yet first, while the
        # grades so far say answered queries hold few more relevant passages. Where a query's first
        # relevant passage lies then decides most of its nDCG@10 (on the public sets, with one relevant
        # passage per query, all of it): without this rule a third of the first 100 grades on
        # cmrc2018_dev_trial_sent went to queries already answered. Where answered queries hold more (the
        # handbook: 3.6 relevant sections per question) their second looks count as much, and the model
        # must keep learning how many there are or its confidence runs ahead of it (reports/judging.md).
        likely = self._likely(sampled)
        candidates = open_ & (uncertainty > 0)
        unanswered = candidates & ~self._queries_answered()[self._qidx]
        more = self.more_expected()
        if unanswered.any() and more is not None and more < FEW_MORE:
            candidates = unanswered
        # the query whose grades can move the close races most, and in it the passage most likely relevant
        spread = np.abs(self._disc - self._disc[:, [leader]]).max(axis=1)
        query = self._qidx[int(np.argmax(np.where(candidates, uncertainty, -1.0)))]
        value = np.where(candidates & (self._qidx == query), likely + 1e-3 * spread, -np.inf)
        return self._pairs[int(np.argmax(value))]

    def _likely(self, sampled: Completions) -> np.ndarray:
        """Per pair, the share of completions in which it is relevant (0 for a judged pair)."""
        likely = np.zeros(len(self._pairs))
        likely[sampled.rows] = (sampled.grades > 0).mean(axis=1)
        return likely

    def _queries_answered(self) -> np.ndarray:
        """Per query, whether a passage of it has been judged relevant."""
        known = np.nan_to_num(self._grades, nan=0.0) > 0
        return np.bincount(self._qidx, weights=known, minlength=len(self._queries)) > 0

    def more_expected(self) -> float | None:
        """How many more relevant passages the model expects in an answered query's unjudged ones, on
        average over the answered queries; None before any query is answered."""
        answered = self._queries_answered()
        if not answered.any():
            return None
        open_ = np.isnan(self._grades) & answered[self._qidx]
        return float(self._likely(self.completions())[open_].sum()) / int(answered.sum())

    def judged_scores(self) -> dict[str, float]:
        """Mean nDCG@10 per system with every unjudged passage counted as not relevant (trec_eval's view)."""
        grades = np.nan_to_num(self._grades, nan=0.0)
        scores = _mean_ndcg(self._disc, self._qidx, len(self._queries), grades[:, None])[:, 0]
        return {s: float(scores[n]) for n, s in enumerate(self._systems)}

    # -- deciding -----------------------------------------------------------------------------------------------

    def decision(self) -> Decision:
        """The leader and how sure the grades so far make it."""
        sampled = self.completions()
        scores = sampled.scores.mean(axis=1)
        wins = sampled.winners.mean(axis=1)
        # the leader is the system most likely to win; the runner-up the best of the others by estimate
        order = sorted(range(len(self._systems)), key=lambda s: (-wins[s], -scores[s], self._systems[s]))
        leader = order[0]
        certain = self._certain(leader)
        if not certain and wins[leader] < PICK_SURE:
            # a close race: the judged passages alone picked the winner more often than the model's leader
            # (cmrc2018_dev_trial_sent, reports/judging.md); the first system by name on a tie
            flat = self.judged_scores()
            leader = max(range(len(self._systems)), key=lambda s: (flat[self._systems[s]], -s))
        others = sorted((s for s in order if s != leader), key=lambda s: (-scores[s], -wins[s], self._systems[s]))
        runner = others[0] if others else None
        confidence = 1.0 if certain else float(wins[leader])
        # Shown as compare will average: each completion's mean over its questions with a relevant passage,
        # rescaled to one over every pooled question (the ranking and the decision above are unchanged).
        shown = (sampled.scores * (sampled.relevant / max(1, self._pooled_questions))).mean(axis=1)
        judged = int(np.count_nonzero(~np.isnan(self._grades)))
        if self._history:
            self._history[-1].lead = (leader, confidence)
        # The first moment a confidence crosses the target overstates it (it is the highest of many noisy
        # looks), so "settled" needs the target held with the same leader over the last STREAK grades seen
        # by a decision, and at least as many grades as queries (reports/judging.md).
        streak = 0
        for action in reversed(self._history):
            if action.lead is None:
                continue
            if action.lead[0] != leader or action.lead[1] < self.target:
                break
            streak += 1
        held = streak >= STREAK and judged >= self._pooled_questions
        return Decision(
            leader=self._systems[leader],
            runner_up=None if runner is None else self._systems[runner],
            margin=0.0 if runner is None else float(shown[leader] - shown[runner]),
            confidence=confidence,
            settled=certain or held,
            certain=certain,
            judged=judged,
            pooled=len(self._pairs),
            scores={s: float(shown[n]) for n, s in enumerate(self._systems)},
        )

    def _certain(self, leader: int) -> bool:
        """Whether the leader stays a winner whatever grades (up to the largest seen) the unjudged pairs get."""
        open_ = np.isnan(self._grades)
        if not open_.any():
            return True
        top = max(MAX_GRADE, int(np.nanmax(self._grades)) if (~open_).any() else 0)
        known = np.nan_to_num(self._grades, nan=0.0)
        n_queries = len(self._queries)
        idcg_low = _idcg(self._qidx, n_queries, known[:, None])[:, 0]
        idcg_high = _idcg(self._qidx, n_queries, np.where(open_, float(top), known)[:, None])[:, 0]
        for other in range(len(self._systems)):
            if other == leader:
                continue
            delta = self._disc[:, leader] - self._disc[:, other]
            base = np.bincount(self._qidx, weights=delta * known, minlength=n_queries)
            worst = base + top * np.bincount(
                self._qidx, weights=np.where(open_, np.minimum(delta, 0.0), 0.0), minlength=n_queries
            )
            can_be_relevant = np.bincount(self._qidx, weights=open_ & (delta < 0), minlength=n_queries) > 0
            floor = np.maximum(idcg_low, np.where(can_be_relevant, 1.0, 0.0))
            with np.errstate(divide="ignore", invalid="ignore"):
                low = np.where(
                    worst >= 0,
                    np.where(idcg_high > 0, worst / idcg_high, 0.0),
                    np.maximum(worst / np.where(floor > 0, floor, 1.0), -1.0),
                )
            if low.sum() < -1e-12:
                return False
        return True


def _mean_discount(ranks: list[int]) -> float:
    return sum(discount(r) for r in ranks if 0 < r <= _CUT) / len(ranks)


def _best(ranks: list[int]) -> int:
    return min((r for r in ranks if r > 0), default=0)


def _check_runs(runs: Runs, depth: int) -> tuple[list[str], list[str], dict[str, dict[str, list[str]]]]:
    """Systems and queries sorted, and each system's top ``depth`` per query, refusing malformed runs."""
    if not isinstance(runs, Mapping) or not runs:
        raise SelectionError("no runs to pool: give at least one system's ranked documents")
    ranked: dict[str, dict[str, list[str]]] = {}
    queries: set[str] = set()
    for system, by_query in runs.items():
        if not isinstance(system, str) or not system:
            raise SelectionError(f"invalid system name {system!r}")
        if not isinstance(by_query, Mapping):
            raise SelectionError(f"system {system!r}: expected a mapping of query ids to ranked document ids")
        ranked[system] = {}
        for query, docs in by_query.items():
            if not isinstance(query, str) or not query:
                raise SelectionError(f"system {system!r}: invalid query id {query!r}")
            if isinstance(docs, str) or not isinstance(docs, Sequence):
                raise SelectionError(f"system {system!r}, query {query!r}: expected a list of document ids")
            top = list(docs[:depth])
            for doc in top:
                if not isinstance(doc, str) or not doc:
                    raise SelectionError(f"system {system!r}, query {query!r}: invalid document id {doc!r}")
            if len(set(top)) != len(top):
                raise SelectionError(f"system {system!r}, query {query!r}: a document is ranked twice")
            ranked[system][query] = top
            queries.add(query)
    if not queries:
        raise SelectionError("no runs to pool: no system returned any query")
    return sorted(ranked), sorted(queries), ranked


def _check_options(method: str, depth: int, target: float, samples: int, seed: int) -> None:
    """The selector's options, refused with the range each must be in."""
    if method not in METHODS:
        raise SelectionError(f"unknown judging order {shown(method)}; choose from: {', '.join(METHODS)}")
    if type(depth) is not int or depth < 1:
        raise SelectionError(f"depth must be a whole number of at least 1, not {depth!r}")
    if not isinstance(target, (int, float)) or not 0 < target <= 1:
        raise SelectionError(f"target confidence must be above 0 and at most 1, not {target!r}")
    if type(samples) is not int or not 10 <= samples <= 100_000:
        raise SelectionError(f"samples must be a whole number from 10 to 100000, not {samples!r}")
    if type(seed) is not int or seed < 0:
        raise SelectionError(f"seed must be a whole number of at least 0, not {seed!r}")


def _pooled_pairs(
    systems: list[str], queries: list[str], ranked: dict[str, dict[str, list[str]]]
) -> tuple[dict[str, list[str]], list[tuple[str, str]], list[list[int]]]:
    """Each query's pooled documents best-first; every pooled (query, document) pair in that order; and per
    pair, its rank in each system (0 = not in its top depth)."""
    pool: dict[str, list[str]] = {}
    pairs: list[tuple[str, str]] = []
    ranks: list[list[int]] = []
    for query in queries:
        lists = [ranked[s].get(query, []) for s in systems]
        order: dict[str, list[int]] = {}
        # the lists are cut at depth already: a depth far beyond them costs nothing
        for rank in range(max((len(docs) for docs in lists), default=0)):
            for s, docs in enumerate(lists):
                if rank < len(docs):
                    order.setdefault(docs[rank], [0] * len(systems))[s] = rank + 1
        # best-first: by mean nDCG discount over the systems, then best rank, then first seen
        docs_first = sorted(order, key=lambda d: (-_mean_discount(order[d]), _best(order[d])))
        pool[query] = docs_first
        for doc in docs_first:
            pairs.append((query, doc))
            ranks.append(order[doc])
    return pool, pairs, ranks


#: Cumulative discount of ranks 1..k for k = 0..MAX_CUT (the ideal DCG of k passages of gain 1).
_CUT = 10
_CUMULATIVE = np.concatenate([[0.0], np.cumsum([discount(r) for r in range(1, _CUT + 1)])])


def _idcg(qidx: np.ndarray, n_queries: int, grades: np.ndarray) -> np.ndarray:
    """Ideal DCG@10 per query (rows) and grade sample (columns) of grades shaped (pairs, samples)."""
    out = np.zeros((n_queries, grades.shape[1]))
    levels = np.unique(grades[grades > 0])
    previous = 0.0
    for level in levels:
        # gain = sum over levels of (level - previous level) times the ideal DCG of the passages at >= level
        counts = np.zeros((n_queries, grades.shape[1]))
        np.add.at(counts, qidx, (grades >= level).astype(float))
        out += (level - previous) * _CUMULATIVE[np.minimum(counts, _CUT).astype(int)]
        previous = level
    return out


def _mean_ndcg(disc: np.ndarray, qidx: np.ndarray, n_queries: int, grades: np.ndarray) -> np.ndarray:
    """Mean nDCG@10 per system (rows) and grade sample (columns) over queries with a positive grade."""
    dcg = np.zeros((n_queries, disc.shape[1], grades.shape[1]))
    np.add.at(dcg, qidx, disc[:, :, None] * grades[:, None, :])
    idcg = _idcg(qidx, n_queries, grades)
    valid = idcg > 0
    ndcg = np.where(valid[:, None, :], dcg / np.where(valid, idcg, 1.0)[:, None, :], 0.0)
    count = np.maximum(valid.sum(axis=0), 1)
    return ndcg.sum(axis=0) / count
