"""The dev search of ``rag-eval tune``: the candidates run on the dev queries by successive halving, the dev
Pareto front and the recommendation picked from it (steps 3 and 4 of :mod:`.tune`)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from ...engines.base import DEFAULT_ENGINE, written_engine
from ...errors import RagEvalError
from ...index.processing import QueryProcessing
from ...measure import latency_summary
from ...tokenizers import written_spec
from ..compare.compare import SystemProgress, compare
from ..compare.fusion import Fusion
from ..compare.latency import DEFAULT_REPEAT
from ..compare.runner import System
from ..datasets.formats import dataset_builder
from ..datasets.records import Dataset
from ..datasets.split import DEFAULT_BUDGET, DEFAULT_METRIC, SALT, split_ids, subset
from ..reporting.model import LatencySummary, RowLatency, SystemResult
from ..reporting.pareto import front
from .space import Candidate

#: Share of the dev queries the first round of successive halving runs on.
FIRST_ROUND_SHARE = 0.25
SEED = 20261130
#: What a part of the queries needs to rank anything, in messages: without a relevant document every metric is 0.
WITH_RELEVANT = "judged query with a relevant document"
#: Dev qualities this close are a tie: a merged mean sums the queries in another order and differs in the last bits.
QUALITY_TIE = 1e-9
#: Among tied candidates, a p95 counts as slower than another only when it is more than this many times it and
#: more than LATENCY_MARGIN_MS above it; anything closer is timing noise (identical runs differ by 40% or more
#: on small dev sets).
LATENCY_RATIO = 1.5
LATENCY_MARGIN_MS = 1.0
#: How a dev-quality tie is broken, as the report and the recommendation state it.
TIE_RULE = (
    f"the smallest index, then the first name, leaving out any whose p95 is over {LATENCY_RATIO:g} times and over "
    f"{LATENCY_MARGIN_MS:g} ms above the fastest's"
)

#: ``progress(phase, done, total)``.
TuneProgress = Callable[[str, float, int], None]


@dataclass
class Trial:
    """What one candidate scored on the dev queries of one round."""

    candidate: Candidate
    round: int
    queries: int
    quality: float
    p95_ms: float | None
    index_mb: float | None
    feasible: bool = True


def _draw(pool: list[Candidate], count: int) -> list[Candidate]:
    """The single tokenizers, then others drawn with a fixed seed, ``count`` in all (fewer if the pool is)."""
    singles = [c for c in pool if c.single]
    others = [c for c in pool if not c.single]
    random.Random(SEED).shuffle(others)
    return (singles + others)[: max(count, len(singles))]


@dataclass(frozen=True)
class Measured:
    """A candidate's row of a comparison (a fusion's: the fused system's) and its per-query values."""

    row: SystemResult
    per_query: Mapping[str, Mapping[str, float]]


def _evaluate(
    dataset: Dataset,
    chosen: list[Candidate],
    metric: str,
    progress: TuneProgress | None,
    round_number: int,
    repeat: int = DEFAULT_REPEAT,
) -> dict[str, Measured]:
    """Run the candidates (fusions with their members) on ``dataset``, each question ``repeat`` times for its
    latency (compare's rule); each one's row by candidate name."""
    systems, fusions = _compared(dataset, chosen)
    report, _runs = compare(
        dataset,
        list(systems.values()),
        metrics=[metric],
        fusions=fusions or None,
        progress=_round_progress(progress, round_number, len(systems) + len(fusions)),
        repeat=repeat,
    )
    fused = {(row.fusion.method, row.fusion.members): row.name for row in report.systems if row.fusion is not None}
    per_query = report.per_query or {}
    found = {}
    for candidate in chosen:
        if candidate.fusion is not None:
            key = (candidate.fusion.method, tuple(_row_name(dataset, m) for m in candidate.members))
            name = fused.get(key, candidate.fusion.spec())
        else:
            name = _row_name(dataset, candidate.system)
        row = report.row(name)
        if row is None:  # pragma: no cover - compare names every system and fusion it was given
            raise RagEvalError(f"tune: no result for {candidate.name!r} (looked for {name!r})")
        found[candidate.name] = Measured(row, per_query.get(name, {}))
    return found


def _compared(dataset: Dataset, chosen: list[Candidate]) -> tuple[dict[str, System], list[Fusion]]:
    """The systems to compare (each fusion's members too, once) and the fusions, their members by full name."""
    systems: dict[str, System] = {}
    fusions: list[Fusion] = []
    for candidate in chosen:
        for system in (candidate.system, *candidate.members):
            if system is not None:
                systems.setdefault(system.name, system)
        if candidate.fusion is not None:
            # members by full name: a member's tokenizer may also be compared with query processing
            full = tuple(_row_name(dataset, member) for member in candidate.members)
            fusions.append(replace(candidate.fusion, members=full))
    return systems, fusions


def _round_progress(progress: TuneProgress | None, round_number: int, total: int) -> SystemProgress | None:
    """compare's progress as a round's: each system in turn, its share of the round done."""
    if progress is None:
        return None
    seen: list[str] = []

    def callback(system: str, phase: str, done: int, of: int) -> None:
        if system not in seen:
            seen.append(system)
        progress(f"round {round_number}: {system[:50]} {phase}", len(seen) - 1 + done / max(of, 1), total)

    return callback


def _relevant(dataset: Dataset) -> bool:
    """Whether some query has a relevant document: without one every metric is 0 and compare refuses."""
    return any(grade > 0 for q in dataset.queries for grade in dataset.qrels.get(q, {}).values())


def _merged(first: Measured, second: Measured, judged: list[str], metric: str) -> Measured:
    """One candidate's row on two disjoint parts of the queries as if run on both at once: ``metric`` the
    mean over ``judged`` of the per-query values (a judged query with no result counts 0, as in
    metrics.evaluate), the search latency summarised from both parts' samples, the same index."""
    per_query = {**first.per_query, **second.per_query}
    quality = sum(per_query.get(q, {}).get(metric, 0.0) for q in judged) / len(judged)
    samples = [value / 1000 for part in (first, second) for value in _samples(part.row)]
    costs = second.row.costs
    if costs is not None:
        search = LatencySummary.from_json(latency_summary(samples)) if samples and second.row.timed else None
        costs = replace(costs, latency=None if search is None else RowLatency(search=search))
    return Measured(replace(second.row, metrics={metric: quality}, costs=costs), per_query)


def _samples(row: SystemResult) -> tuple[float, ...]:
    return () if row.costs is None else row.costs.search_samples_ms or ()


def _row_name(dataset: Dataset, system: System | None) -> str:
    """The name compare gives ``system`` on ``dataset`` (its builder and mode defaults filled in)."""
    assert system is not None
    builder = system.builder or dataset_builder(dataset)
    mode = system.mode or dataset.meta.get("mode") or "or"
    query = QueryProcessing.parse(system.query).written if system.query else ""
    engine = written_engine(system.engine or DEFAULT_ENGINE)
    return System(written_spec(system.tokenizer), builder, mode, query, engine).name


def _trial(candidate: Candidate, measured: Measured, metric: str, round_number: int, queries: int) -> Trial:
    row = measured.row
    size = row.index_bytes
    return Trial(
        candidate,
        round_number,
        queries,
        float(row.metrics[metric]),
        None if row.search is None else row.search.p95,
        None if size is None else round(size / 1e6, 3),
    )


@dataclass
class Search:
    """What the dev queries decided: every trial, and the Pareto front, best first."""

    trials: list[Trial]
    front: list[Trial]
    #: Wall time of each round, index builds included.
    seconds: dict[str, float] = field(default_factory=dict)
    #: The other feasible candidates whose dev quality ties the recommendation's (``front[0]``).
    tied: list[Trial] = field(default_factory=list)


def clearly_slower(p95_ms: float, than_ms: float) -> bool:
    """Whether a p95 latency is above another by more than timing noise (see ``LATENCY_RATIO``)."""
    return p95_ms > than_ms * LATENCY_RATIO and p95_ms - than_ms > LATENCY_MARGIN_MS


def pick(feasible: list[Trial]) -> tuple[Trial, list[Trial]]:
    """The recommendation and the candidates tied with it: the best dev quality; among ties, the smallest index
    of those not clearly slower than the fastest tied one, then the first name (no timing noise decides)."""
    best = max(t.quality for t in feasible)
    tied = [t for t in feasible if t.quality >= best - QUALITY_TIE]
    fastest = min(t.p95_ms or 0.0 for t in tied)
    eligible = [t for t in tied if not clearly_slower(t.p95_ms or 0.0, fastest)]
    chosen = min(eligible, key=lambda t: (t.index_mb or 0.0, t.candidate.name))
    return chosen, [t for t in tied if t is not chosen]


def search_space(
    dev: Dataset,
    pool: list[Candidate],
    *,
    budget: int = DEFAULT_BUDGET,
    metric: str = DEFAULT_METRIC,
    max_p95_ms: float | None = None,
    max_index_mb: float | None = None,
    progress: TuneProgress | None = None,
    repeat: int = DEFAULT_REPEAT,
) -> Search:
    """Run the space on the dev queries only (it is given nothing else) and find the front, best first."""
    from ..metrics.measures import quality_metric

    metric = quality_metric(metric, "tune")  # the spelling compare keys its rows by; higher must be better
    if not _relevant(dev):
        raise RagEvalError(f"{dev.id}: no {WITH_RELEVANT} falls in the dev part", hint="raise --split")
    first = _first_round(dev, pool, budget, metric, progress, repeat)
    clock = time.perf_counter()
    rows = _evaluate(first.remaining, first.finalists, metric, progress, 2, repeat)
    seconds = first.seconds | {"round 2": round(time.perf_counter() - clock, 1)}
    if first.earlier:
        rows = {c.name: _merged(first.earlier[c.name], rows[c.name], dev.judged(), metric) for c in first.finalists}
    final = [_trial(c, rows[c.name], metric, 2, len(dev.queries)) for c in first.finalists]
    for trial in final:
        trial.feasible = (max_p95_ms is None or (trial.p95_ms is not None and trial.p95_ms <= max_p95_ms)) and (
            max_index_mb is None or (trial.index_mb is not None and trial.index_mb <= max_index_mb)
        )
    feasible = [t for t in final if t.feasible and t.p95_ms is not None and t.index_mb is not None]
    if not feasible:
        raise RagEvalError(
            "no candidate meets the constraints on the dev queries", hint="relax --max-p95-ms or --max-index-mb"
        )
    chosen, tied = pick(feasible)
    return Search(first.trials + final, [chosen, *_front_after(chosen, tied, feasible)], seconds, tied)


@dataclass
class _FirstRound:
    """What successive halving's first round leaves: the finalists, their results on the queries it ran (none
    when it ran on every dev query), the queries left for the last round, its trials and time."""

    finalists: list[Candidate]
    earlier: dict[str, Measured]
    remaining: Dataset
    trials: list[Trial]
    seconds: dict[str, float]


def _first_round(
    dev: Dataset, pool: list[Candidate], budget: int, metric: str, progress: TuneProgress | None, repeat: int
) -> _FirstRound:
    """Successive halving: a wider field on a quarter of dev, the best ``budget`` of it (the singles always) kept.
    A quarter without a judged query could rank nothing: then the budget's draw runs on all of dev in one round."""
    first_ids, rest_ids = split_ids(list(dev.queries), FIRST_ROUND_SHARE, salt=SALT + "/round1")
    first = subset(dev, first_ids, "round1")
    if not (len(pool) > budget and _relevant(first)):
        return _FirstRound(_draw(pool, budget), {}, dev, [], {})
    wide = _draw(pool, 3 * budget)
    clock = time.perf_counter()
    rows = _evaluate(first, wide, metric, progress, 1, repeat)
    seconds = {"round 1": round(time.perf_counter() - clock, 1)}
    scored = [_trial(c, rows[c.name], metric, 1, len(first.queries)) for c in wide]
    keep = {c.name for c in wide if c.single}
    for trial in sorted(scored, key=lambda t: -t.quality):
        if len(keep) >= budget:
            break
        keep.add(trial.candidate.name)
    finalists = [c for c in wide if c.name in keep]
    rest = subset(dev, rest_ids, "round2")
    if _relevant(rest):  # the finalists' first-quarter results are kept: they run on the other queries only
        return _FirstRound(finalists, rows, rest, scored, seconds)
    return _FirstRound(finalists, {}, dev, scored, seconds)


def _front_after(chosen: Trial, tied: list[Trial], feasible: list[Trial]) -> list[Trial]:
    """The dev Pareto front (quality up, p95 and index size down) besides the pick, best first."""
    points = [(t.quality, t.p95_ms or 0.0, t.index_mb or 0.0) for t in feasible]
    tied_names = {t.candidate.name for t in tied}
    # A tied candidate no smaller and not clearly faster is no better than the pick: it leaves the front, which
    # the pick then heads (only such a candidate can dominate the pick, by noise).
    on_front = [
        t
        for t in (feasible[i] for i in front(points, (True, False, False)))
        if t is not chosen
        and not (
            t.candidate.name in tied_names
            and (t.index_mb or 0.0) >= (chosen.index_mb or 0.0)
            and not clearly_slower(chosen.p95_ms or 0.0, t.p95_ms or 0.0)
        )
    ]
    on_front.sort(key=lambda t: (-t.quality, t.p95_ms or 0.0, t.index_mb or 0.0, t.candidate.name))
    return on_front
