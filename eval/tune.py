"""``rag-eval tune``: search a space of systems on dev queries, evaluate the dev Pareto front once on held-back
test queries, and recommend one system with the evidence.

1. The judged dataset's queries split into dev and test by a hash of each query id (:mod:`.split`).
2. The space (a shipped default, or a TOML file) lists candidates: single tokenizers, hybrids of two and
   three, uniform field weights, query processing, fusions of two singles.
3. Successive halving within the budget: when the space is larger than the budget, up to three times the
   budget (the single tokenizers always, the rest drawn with a fixed seed) run on a quarter of the dev
   queries, and the best ``budget`` of them (the singles always) run on all of them. Only dev judgements
   are read until step 5.
4. The dev Pareto front over (quality up, p95 latency down, index size down) among the candidates that
   meet the constraints; the recommendation is the best by dev quality. Among candidates whose dev quality
   ties (within ``QUALITY_TIE``), p95 latency counts only when it is clearly slower than the fastest tied
   candidate's (``LATENCY_RATIO`` times and ``LATENCY_MARGIN_MS`` more: sub-millisecond p95s of a few dev
   queries vary from run to run); of the rest, the smallest index wins, then the first name. So the same
   inputs give the same recommendation.
5. The front and every single tokenizer run once on the test queries (or on another dataset, ``eval_on``);
   each front member is tested against the best single tokenizer on test (paired randomization test,
   Holm-corrected over the front).
6. With fewer than ``FEW_QUERIES`` judged queries on either side (the number below which ``compare`` warns),
   the report and the printed recommendation carry a warning with the difference such a test can detect.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path
from typing import Any

from ..errors import RagEvalError
from ..outputs import inside, only_names, publish_folder
from ..processing import QueryProcessing
from ..textio import read_text
from ..tokenize_pool import remembering_tokens
from ..tokenizers import get_tokenizer, written_spec
from ..tokenizers.hybrid import MAX_WEIGHT, valid_weight
from .agreement import ALPHA, FEW_QUERIES, POWER, detectable_difference, test_reach
from .compare import compare, environment
from .engines import DEFAULT_ENGINE, get_engine, written_engine
from .formats import load_dataset
from .fusion import Fusion
from .pareto import front
from .records import Dataset
from .runner import System, latency_summary
from .split import DEFAULT_BUDGET, DEFAULT_METRIC, DEV_FRACTION, SALT, split_ids, subset
from .stats import holm, randomization_test

SCHEMA = "rag-eval/tune/1"
#: Share of the dev queries the first round of successive halving runs on.
FIRST_ROUND_SHARE = 0.25
SEED = 20261130
#: What a part of the queries needs to rank anything, in messages: without a relevant document every metric is 0.
WITH_RELEVANT = "judged query with a relevant document"
MAX_SPACE_BYTES = 100_000
#: Most candidates a space may hold: a 100 kB file of weights and processing specs multiplies to millions,
#: which enumerating alone would take hours (only ``3 * budget`` of them ever run).
MAX_CANDIDATES = 100_000
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
#: Tied candidates the recommendation names before it says how many more there are.
TIED_NAMED = 3

#: ``progress(phase, done, total)``.
TuneProgress = Callable[[str, float, int], None]


@dataclass(frozen=True)
class Candidate:
    """One point of the space: a system, or a fusion of member systems."""

    name: str
    system: System | None = None
    fusion: Fusion | None = None
    members: tuple[System, ...] = ()

    @property
    def single(self) -> bool:
        """A plain tokenizer without processing, ranked by the default engine: the baselines the recommendation
        is tested against."""
        return (
            self.system is not None
            and not self.system.query
            and self.system.engine in ("", DEFAULT_ENGINE)
            and "+" not in self.system.tokenizer
            and ("^" not in self.system.tokenizer)
        )


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


@dataclass
class TuneResult:
    """Everything ``tune`` measured and decided; ``report`` is what tune.json holds."""

    report: dict[str, Any]
    output: Path
    recommendation: Candidate
    paragraph: str
    trials: list[Trial] = field(default_factory=list)


def load_space(path: Path | None) -> dict[str, Any]:
    """The search space: a TOML file, or the shipped default (``eval/spaces/default.toml``)."""
    text = (
        read_text(path, RagEvalError, max_bytes=MAX_SPACE_BYTES)
        if path is not None
        else (files("rag_eval.eval") / "spaces" / "default.toml").read_text(encoding="utf-8")
    )
    where = str(path) if path is not None else "the default space"
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise RagEvalError(f"{where}: invalid TOML: {exc}") from None
    known = {"tokenizers", "hybrid_sizes", "weights", "processing", "fusion", "engines"}
    unknown = set(data) - known
    if unknown:
        raise RagEvalError(f"{where}: unknown keys {', '.join(sorted(unknown))}; expected {', '.join(sorted(known))}")
    for key, kind in (
        ("tokenizers", str),
        ("hybrid_sizes", int),
        ("weights", (int, float)),
        ("processing", str),
        ("fusion", str),
        ("engines", str),
    ):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, kind) and not isinstance(v, bool) for v in value):
            raise RagEvalError(f"{where}: {key} must be a list of {getattr(kind, '__name__', 'numbers')}")
    if not data.get("tokenizers"):
        raise RagEvalError(f"{where}: tokenizers must list at least one tokenizer spec")
    # A hybrid has 2 fields or more, and at most as many as there are tokenizers to combine.
    for size in data.get("hybrid_sizes", []):
        if not 2 <= size <= max(2, len(data["tokenizers"])):
            raise RagEvalError(
                f"{where}: hybrid_sizes must be whole numbers from 2 to the number of tokenizers "
                f"({len(data['tokenizers'])}), not {size}"
            )
    for weight in data.get("weights", []):
        if not valid_weight(weight):
            low, high = 1 / MAX_WEIGHT, MAX_WEIGHT
            raise RagEvalError(f"{where}: weights must be numbers from {low:g} to {high:g}, not {weight}")
    for key in ("tokenizers", "hybrid_sizes", "weights", "processing", "fusion", "engines"):
        if key in data:
            data[key] = list(dict.fromkeys(data[key]))  # a value listed twice is one candidate, not two
    for spec in data.get("engines", []):
        try:
            written_engine(spec)
        except RagEvalError as exc:
            raise RagEvalError(f"{where}: engines: {exc}", hint=exc.hint) from None
    return data


def candidates(space: dict[str, Any]) -> list[Candidate]:
    """Every candidate of a space, the available single tokenizers first; unavailable tokenizers are left out."""
    tokenizers = []
    canonical: set[str] = set()
    for spec in space["tokenizers"]:
        tokenizer = get_tokenizer(spec)
        # Two spellings of one tokenizer (bigram, bigram:t2s=false) are one candidate, as a value listed twice is.
        if tokenizer.availability() is None and tokenizer.system not in canonical:
            canonical.add(tokenizer.system)
            tokenizers.append(spec)
    processing = list(
        dict.fromkeys(QueryProcessing.parse(p).written if p else "" for p in space.get("processing", [""]))
    ) or [""]
    # Each system under each engine that ranks it (an engine for one field skips hybrids); the default engine if none.
    engines = [written_engine(spec) for spec in space.get("engines", [])] or [DEFAULT_ENGINE]
    storable = [
        spec
        for spec in tokenizers
        if get_tokenizer(spec).whitespace_free_tokens and len(get_tokenizer(spec).fields) == 1
    ]
    weights = list(dict.fromkeys(f"{weight:g}" for weight in space.get("weights", [1])))
    # Counted before any is made: the product of the lists, an upper bound of what the loops below enumerate.
    hybrids = sum(math.comb(len(storable), size) for size in space.get("hybrid_sizes", []) if size >= 0)
    fusions = len(space.get("fusion", [])) * math.comb(len(tokenizers), 2)
    count = (len(tokenizers) + hybrids * len(weights)) * len(processing) * len(engines) + fusions
    if count > MAX_CANDIDATES:
        raise RagEvalError(
            f"the search space holds {count} candidates, more than {MAX_CANDIDATES}",
            hint="list fewer tokenizers, hybrid_sizes, weights, processing or engines (tune runs 3x --budget of them)",
        )
    found: list[Candidate] = []
    seen: set[str] = set()

    def add(system: System) -> None:
        fields = len(get_tokenizer(system.tokenizer).fields)
        for spec in engines:
            engine = get_engine(spec)
            if (engine.one_field and fields != 1) or engine.availability() is not None:
                continue
            suffix = f" | engine={spec}" if spec != DEFAULT_ENGINE else ""
            name = system.tokenizer + (f" | {system.query}" if system.query else "") + suffix
            # Weights that print alike (1 and 1.0000001 both as ^1) make one system: one candidate, not an error.
            if name not in seen:
                seen.add(name)
                found.append(Candidate(name, replace(system, engine=spec)))

    for spec in tokenizers:
        for query in processing:
            add(System(spec, "", "", query))
    # A hybrid listed as a tokenizer is a candidate of its own, not a field: its fields would repeat (``storable``).
    for size in space.get("hybrid_sizes", []):
        for combination in itertools.combinations(storable, size):
            # A weight as a hybrid spec writes it: weights that print alike (1 and 1.0000001) are one system.
            for written in weights:
                suffix = f"^{written}" if written != "1" else ""
                hybrid = "+".join(spec + suffix for spec in combination)
                for query in processing:
                    add(System(hybrid, "", "", query))
    for method in space.get("fusion", []):
        for pair in itertools.combinations(tokenizers, 2):
            members = tuple(System(spec, "", "") for spec in pair)
            fusion = Fusion(method, tuple(pair))
            found.append(Candidate(fusion.spec(), None, fusion, members))
    return found


def _draw(pool: list[Candidate], count: int) -> list[Candidate]:
    """The single tokenizers, then others drawn with a fixed seed, ``count`` in all (fewer if the pool is)."""
    singles = [c for c in pool if c.single]
    others = [c for c in pool if not c.single]
    random.Random(SEED).shuffle(others)
    return (singles + others)[: max(count, len(singles))]


def _evaluate(
    dataset: Dataset, chosen: list[Candidate], metric: str, progress: TuneProgress | None, round_number: int
) -> dict[str, dict[str, Any]]:
    """Run the candidates (fusions with their members) on ``dataset``; each one's report row by candidate name."""
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
    total = len(systems) + len(fusions)
    callback = None
    if progress is not None:
        seen: list[str] = []

        def callback(system: str, phase: str, done: int, of: int) -> None:
            if system not in seen:
                seen.append(system)
            progress(f"round {round_number}: {system[:50]} {phase}", len(seen) - 1 + done / max(of, 1), total)

    report, _runs = compare(
        dataset, list(systems.values()), metrics=[metric], fusions=fusions or None, progress=callback
    )
    rows = {row["name"]: row for row in report["systems"]}
    fused = {
        (row["fusion"]["method"], tuple(row["fusion"]["members"])): row["name"]
        for row in report["systems"]
        if row.get("fusion")
    }
    found = {}
    for candidate in chosen:
        if candidate.fusion is not None:
            key = (candidate.fusion.method, tuple(_row_name(dataset, m) for m in candidate.members))
            name = fused.get(key, candidate.fusion.spec())
        else:
            name = _row_name(dataset, candidate.system)
        row = rows.get(name)
        if row is None:  # pragma: no cover - compare names every system and fusion it was given
            raise RagEvalError(f"tune: no result for {candidate.name!r} (looked for {name!r})")
        found[candidate.name] = {**row, "_per_query": report["per_query"].get(name, {})}
    return found


def _relevant(dataset: Dataset) -> bool:
    """Whether some query has a relevant document: without one every metric is 0 and compare refuses."""
    return any(grade > 0 for q in dataset.queries for grade in dataset.qrels.get(q, {}).values())


def _merged(first: dict[str, Any], second: dict[str, Any], judged: list[str], metric: str) -> dict[str, Any]:
    """One candidate's row on two disjoint parts of the queries as if run on both at once: ``metric`` the
    mean over ``judged`` of the per-query values (a judged query with no result counts 0, as in
    metrics.evaluate), the search latency summarised from both parts' samples, the same index."""
    per_query = {**first["_per_query"], **second["_per_query"]}
    quality = sum(per_query.get(q, {}).get(metric, 0.0) for q in judged) / len(judged)
    samples = [
        value / 1000 for row in (first, second) for value in ((row.get("latency_samples_ms") or {}).get("search") or [])
    ]
    latency = {"search": latency_summary(samples)} if samples and second.get("latency_ms") else None
    return {**second, "metrics": {metric: quality}, "latency_ms": latency, "_per_query": per_query}


def _row_name(dataset: Dataset, system: System | None) -> str:
    """The name compare gives ``system`` on ``dataset`` (its builder and mode defaults filled in)."""
    assert system is not None
    builder = system.builder or dataset.meta.get("builder") or "passages"
    mode = system.mode or dataset.meta.get("mode") or "or"
    query = QueryProcessing.parse(system.query).written if system.query else ""
    engine = written_engine(system.engine or DEFAULT_ENGINE)
    return System(written_spec(system.tokenizer), builder, mode, query, engine).name


def _trial(candidate: Candidate, row: dict[str, Any], metric: str, round_number: int, queries: int) -> Trial:
    search = (row.get("latency_ms") or {}).get("search") or {}
    size = (row.get("build") or {}).get("index_bytes")
    return Trial(
        candidate,
        round_number,
        queries,
        float(row["metrics"][metric]),
        search.get("p95"),
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
) -> Search:
    """Run the space on the dev queries only (it is given nothing else) and find the front, best first."""
    from .metrics import canonical_metric

    metric = canonical_metric(metric)  # the spelling compare keys its rows by
    if not _relevant(dev):
        raise RagEvalError(f"{dev.id}: no {WITH_RELEVANT} falls in the dev part", hint="raise --split")
    trials: list[Trial] = []
    seconds: dict[str, float] = {}
    finalists = _draw(pool, budget)
    earlier: dict[str, dict[str, Any]] = {}
    remaining = dev
    first_ids, rest_ids = split_ids(list(dev.queries), FIRST_ROUND_SHARE, salt=SALT + "/round1")
    first = subset(dev, first_ids, "round1")
    # Successive halving: a wider field on a quarter of dev, the best on all of it. A quarter without a judged
    # query could rank nothing: then the budget's draw runs on all of dev in one round.
    if len(pool) > budget and _relevant(first):
        wide = _draw(pool, 3 * budget)
        clock = time.perf_counter()
        rows = _evaluate(first, wide, metric, progress, 1)
        seconds["round 1"] = round(time.perf_counter() - clock, 1)
        scored = [_trial(c, rows[c.name], metric, 1, len(first.queries)) for c in wide]
        trials += scored
        keep = {c.name for c in wide if c.single}
        for trial in sorted(scored, key=lambda t: -t.quality):
            if len(keep) >= budget:
                break
            keep.add(trial.candidate.name)
        finalists = [c for c in wide if c.name in keep]
        rest = subset(dev, rest_ids, "round2")
        if _relevant(rest):  # the finalists' first-quarter results are kept: they run on the other queries only
            earlier, remaining = rows, rest
    clock = time.perf_counter()
    rows = _evaluate(remaining, finalists, metric, progress, 2)
    seconds["round 2"] = round(time.perf_counter() - clock, 1)
    if earlier:
        rows = {c.name: _merged(earlier[c.name], rows[c.name], dev.judged(), metric) for c in finalists}
    final = [_trial(c, rows[c.name], metric, 2, len(dev.queries)) for c in finalists]
    trials += final
    for trial in final:
        trial.feasible = (max_p95_ms is None or (trial.p95_ms is not None and trial.p95_ms <= max_p95_ms)) and (
            max_index_mb is None or (trial.index_mb is not None and trial.index_mb <= max_index_mb)
        )
    feasible = [t for t in final if t.feasible and t.p95_ms is not None and t.index_mb is not None]
    if not feasible:
        raise RagEvalError(
            "no candidate meets the constraints on the dev queries", hint="relax --max-p95-ms or --max-index-mb"
        )
    points = [(t.quality, t.p95_ms or 0.0, t.index_mb or 0.0) for t in feasible]
    chosen, tied = pick(feasible)
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
    return Search(trials, [chosen, *on_front], seconds, tied)


def tune(
    dataset_ref: str,
    *,
    output: str | Path,
    space_file: Path | None = None,
    budget: int = DEFAULT_BUDGET,
    max_p95_ms: float | None = None,
    max_index_mb: float | None = None,
    dev_fraction: float = DEV_FRACTION,
    eval_on: str | None = None,
    metric: str = DEFAULT_METRIC,
    progress: TuneProgress | None = None,
) -> TuneResult:
    """Tune on dev queries, evaluate once on held-back ones, recommend (see the module's docstring)."""
    from .metrics import canonical_metric

    # Compare keys every row by the canonical spelling (ndcg@10 is nDCG@10, P(rel=1)@5 is P@5): so must tune.
    metric = canonical_metric(metric)
    if budget < 1:
        raise RagEvalError(f"--budget must be at least 1, not {budget}")
    for value, name in ((max_p95_ms, "--max-p95-ms"), (max_index_mb, "--max-index-mb")):
        if value is not None and not (value > 0 and math.isfinite(value)):  # tune.json is strict JSON
            raise RagEvalError(f"{name} must be a finite number above 0, not {value}")
    folder = Path(os.path.abspath(output))
    for source in (dataset_ref, eval_on):
        if source is not None and inside(folder, source):
            raise RagEvalError(
                f"{output}: the tune folder cannot go inside the dataset {source}: its report.md would be read "
                "as part of a Markdown corpus there the next time",
                hint="write it beside the dataset, e.g. -o out/tune",
            )
    space = load_space(space_file)
    pool = candidates(space)
    if not any(candidate.single for candidate in pool):
        # Step 5 tests the recommendation against the best plain single tokenizer: without one it has no baseline.
        where = str(space_file) if space_file is not None else "the default space"
        raise RagEvalError(
            f"{where}: no single tokenizer without query processing under the default engine, which the "
            "recommendation is tested against",
            hint='list a tokenizer that is not a hybrid, with "" in processing (and the default engine in engines)',
        )
    started, started_in = time.perf_counter(), environment()
    with publish_folder(output, owned=tune_owned, what="tune folder") as staging, remembering_tokens():
        data = load_dataset(dataset_ref)
        dev_ids, test_ids = split_ids(list(data.queries), dev_fraction)
        dev = subset(data, dev_ids, "dev")
        if not _relevant(dev):
            raise RagEvalError(f"{dev.id}: no {WITH_RELEVANT} falls in the dev part", hint="raise --split")
        if eval_on is None and not _relevant(subset(data, test_ids, "test")):
            # Checked before the search, not after it: whether there is a held-back part at all, nothing it holds.
            raise RagEvalError(f"{data.id}[test]: no {WITH_RELEVANT} falls in the test part", hint="lower --split")
        other = load_dataset(eval_on) if eval_on else None
        asked_again: list[str] = []
        unseen: Dataset | None = None
        if other is not None:
            # Before the search, only which of its questions the dev part asks too, and whether any judged one is
            # left: those are left out, so that the figures come from questions the choice never saw.
            asked_again = reused_dev_queries(dev, other)
            left_out = set(asked_again)
            unseen = subset(other, [q for q in other.queries if q not in left_out], "unseen") if left_out else other
            if not _relevant(unseen):
                raise RagEvalError(
                    f"{eval_on}: every {WITH_RELEVANT} of {other.id} asks a dev query tune chooses on again "
                    f"({len(asked_again)} of them, e.g. {asked_again[0]!r}), so none of it is unseen"
                    if asked_again
                    else f"{eval_on}: {other.id} has no {WITH_RELEVANT}",
                    hint="leave out --eval-on to test on the held-back part, or give a set with other questions",
                )
        found = search_space(
            dev, pool, budget=budget, metric=metric, max_p95_ms=max_p95_ms, max_index_mb=max_index_mb, progress=progress
        )
        trials, on_front = found.trials, found.front
        best = on_front[0]
        # Held back until now: the test part (or another dataset) and its judgements.
        held = subset(data, test_ids, "test") if unseen is None else unseen
        singles = [t for t in trials if t.candidate.single and t.round == 2]
        evaluated = list({t.candidate.name: t.candidate for t in on_front + singles}.values())
        clock = time.perf_counter()
        test_rows = _evaluate(held, evaluated, metric, progress, 3)
        phases = {**found.seconds, "test": round(time.perf_counter() - clock, 1)}
        test_report = _test_evidence(held, test_rows, on_front, singles, metric)
        queries = "held-back queries" if eval_on is None else f"queries of {held.id}"
        paragraph = _paragraph(best, test_report, metric, on_front, queries, found.tied)
        warning = few_queries_warning(len(dev.judged()), test_report, metric, queries)
        if other is not None and asked_again:
            note = (
                f"{len(asked_again)} of the {len(other.queries)} queries of {other.id} ask a dev query tune chose on "
                f"again (the same text, e.g. {asked_again[0]}): they were left out, and the figures come from its "
                f"other {len(held.queries)}"
            )
            warning = f"{note}; {warning}" if warning else note
        report = {
            "schema": SCHEMA,
            "environment": started_in,
            "dataset": {"id": data.id, "checksum": data.checksum()},
            "evaluated_on": held.id,
            "left_out_dev_queries": len(asked_again),
            "split": {
                "salt": SALT,
                "dev_fraction": dev_fraction,
                "dev_queries": len(dev_ids),
                "test_queries": len(test_ids),
                "rule": "sha256(salt, NUL, query id) < dev fraction: dev",
            },
            "metric": metric,
            "space": space,
            "space_size": len(pool),
            "budget": budget,
            "constraints": {"max_p95_ms": max_p95_ms, "max_index_mb": max_index_mb},
            "trials": [_trial_json(t) for t in trials],
            "front": [t.candidate.name for t in on_front],
            "recommendation": best.candidate.name,
            "tied_on_dev": [t.candidate.name for t in found.tied],
            "tie_rule": TIE_RULE,
            "test": test_report,
            "paragraph": paragraph,
            "warning": warning,
            "seconds": round(time.perf_counter() - started, 1),
            "phase_seconds": phases,
        }
        chart = _dev_chart(trials, metric)
        if chart is not None:
            (staging / "pareto.svg").write_text(chart.svg, encoding="utf-8")
            report["chart"] = {"file": "pareto.svg", "note": chart.note}
        (staging / "tune.json").write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        (staging / "recommendation.toml").write_text(recommendation_toml(best.candidate, paragraph), encoding="utf-8")
        (staging / "report.md").write_text(render_tune(report), encoding="utf-8")
    return TuneResult(report, Path(output), best.candidate, paragraph, trials)


def _dev_chart(trials: list[Trial], metric: str) -> Any:
    """The dev candidates of the last round: quality against p95, marker area by index size, the front drawn."""
    from . import charts

    rows: list[dict[str, Any]] = [
        {
            "name": t.candidate.name,
            "metrics": {metric: t.quality},
            "latency_ms": {"search": {"p95": t.p95_ms}},
            "build": {"index_bytes": None if t.index_mb is None else t.index_mb * 1e6},
        }
        for t in trials
        if t.round == 2 and t.p95_ms is not None
    ]
    if not rows:
        return None
    labels = {str(row["name"]): str(row["name"]) for row in rows}
    return charts.quality_latency(rows, labels, metric)


def _trial_json(trial: Trial) -> dict[str, Any]:
    return {
        "candidate": trial.candidate.name,
        "round": trial.round,
        "queries": trial.queries,
        "quality": round(trial.quality, 4),
        "p95_ms": trial.p95_ms,
        "index_mb": trial.index_mb,
        "feasible": trial.feasible,
    }


def _test_evidence(
    held: Dataset, rows: dict[str, dict[str, Any]], on_front: list[Trial], singles: list[Trial], metric: str
) -> dict[str, Any]:
    """Each front member against the best single tokenizer on the held-back queries."""
    judged = sorted(held.judged())

    def values(name: str) -> list[float]:
        per_query = rows[name].get("_per_query") or {}
        return [per_query.get(q, {}).get(metric, 0.0) for q in judged]

    best_single = max(singles, key=lambda t: rows[t.candidate.name]["metrics"][metric])
    base = values(best_single.candidate.name)
    # The pair the detectable difference is measured on: the recommendation and the best single tokenizer, or,
    # when the recommendation is that tokenizer, the next best single one.
    rivals = sorted(
        (t for t in singles if t.candidate.name != on_front[0].candidate.name),
        key=lambda t: -rows[t.candidate.name]["metrics"][metric],
    )
    pair = (on_front[0].candidate.name, rivals[0].candidate.name) if rivals else None
    detectable = None
    if pair is not None:
        first, second = values(pair[0]), values(pair[1])
        detectable = detectable_difference([a - b for a, b in zip(first, second, strict=True)])
    members = [t for t in on_front if t.candidate.name != best_single.candidate.name]
    p_values = [randomization_test(values(t.candidate.name), base) for t in members]
    adjusted = holm(p_values)
    out = []
    for trial, p, p_holm in zip(members, p_values, adjusted, strict=True):
        row = rows[trial.candidate.name]
        out.append(
            {
                "candidate": trial.candidate.name,
                metric: row["metrics"][metric],
                "delta": round(row["metrics"][metric] - rows[best_single.candidate.name]["metrics"][metric], 4),
                "p": round(p, 5),
                "p_holm": round(p_holm, 5),
                "p95_ms": (row.get("latency_ms") or {}).get("search", {}).get("p95"),
                "index_mb": round(((row.get("build") or {}).get("index_bytes") or 0) / 1e6, 3),
            }
        )
    single_rows = {t.candidate.name: rows[t.candidate.name]["metrics"][metric] for t in singles}
    return {
        "judged_queries": len(judged),
        "best_single": best_single.candidate.name,
        "best_single_quality": rows[best_single.candidate.name]["metrics"][metric],
        "singles": single_rows,
        "front": out,
        "detectable_difference": None
        if detectable is None or pair is None
        else {"between": list(pair), metric: round(detectable, 4), "alpha": ALPHA, "power": POWER},
    }


def reused_dev_queries(dev: Dataset, held: Dataset) -> list[str]:
    """The queries of ``held`` that ask a judged dev query again: the same text (runs of whitespace aside),
    whatever their ids (a copy of the tuned set, or one that numbers its questions anew)."""
    asked = {" ".join(dev.queries[q].text.split()) for q in dev.judged()}
    return [q for q, query in held.queries.items() if " ".join(query.text.split()) in asked]


def few_queries_warning(dev_judged: int, test: dict[str, Any], metric: str, queries: str) -> str | None:
    """A warning when the dev or the held-back judged queries number fewer than ``FEW_QUERIES``, the size below
    which ``compare`` warns too: with the difference the held-back test can detect at this size."""
    test_judged = test["judged_queries"]
    if dev_judged >= FEW_QUERIES and test_judged >= FEW_QUERIES:
        return None
    reach = ""
    found = test.get("detectable_difference")
    if found is not None:
        basis = f"from the spread of the per-query differences between {' and '.join(found['between'])}"
        reach = f"; the randomization test on them {test_reach(test_judged, found[metric], metric, basis)}"
    return (
        f"the recommendation rests on few judged queries: it was picked on {dev_judged} judged dev queries and "
        f"checked on {test_judged} judged {queries}{reach}; judge more questions (at least {FEW_QUERIES} on each "
        f"side) before trusting the choice"
    )


def _paragraph(
    best: Trial,
    test: dict[str, Any],
    metric: str,
    on_front: list[Trial],
    queries: str = "held-back queries",
    tied: list[Trial] | None = None,
) -> str:
    """The recommendation in plain words: chosen on dev (how a tie was broken), judged on the held-back queries
    (or another set's)."""
    name = best.candidate.name
    chosen = "the best on dev"
    if tied:
        names = [t.candidate.name for t in tied]
        listed = ", ".join(names[:TIED_NAMED]) + (
            f" and {len(names) - TIED_NAMED} more" if len(names) > TIED_NAMED else ""
        )
        chosen += f" (tied with {listed} at {metric} {best.quality:.4f}; of tied candidates tune takes {TIE_RULE})"
    single = test["best_single"]
    found = next((item for item in test["front"] if item["candidate"] == name), None)
    cost = f"{best.p95_ms:.2f} ms p95 search latency and {best.index_mb:.1f} MB (dev)"
    if found is None:  # the recommendation is itself the best single tokenizer on the held-back queries
        evidence = (
            f"{chosen}, and the best single strategy on the {test['judged_queries']} {queries} "
            f"too ({metric} {test['best_single_quality']:.4f}), at {cost}"
        )
    else:
        significant = found["p_holm"] < 0.05
        verdict = (
            "significantly better than"
            if significant and found["delta"] > 0
            else "significantly worse than"
            if significant
            else "not significantly different from"
        )
        # Holm's correction runs over the tested front, whose size follows measured latency: say over how many, and
        # give the recommendation's own p, which does not move with it.
        tested = len(test["front"])
        corrected = (
            f"p = {found['p']:.4f}; {found['p_holm']:.4f} Holm-corrected over the {tested} front members tested"
            if tested > 1
            else f"p = {found['p_holm']:.4f}"
        )
        evidence = (
            f"{chosen}; on {test['judged_queries']} {queries} it is {verdict} the best single "
            f"strategy {single} ({found['delta']:+.4f} {metric}, {corrected}), at {cost}"
        )
    faster = sorted((t for t in on_front if (t.p95_ms or 0) < (best.p95_ms or 0)), key=lambda t: t.p95_ms or 0)
    alternative = (
        f"; if latency matters more, {faster[0].candidate.name} ({faster[0].p95_ms:.2f} ms p95, "
        f"{metric} {faster[0].quality:.4f} on dev)"
        if faster
        else ""
    )
    return f"Use {name}: {evidence}{alternative}."


def recommendation_toml(candidate: Candidate, paragraph: str) -> str:
    """A --systems file that compare (and, for one system, index build --from) accepts."""
    lines = ["# Written by rag-eval tune. " + paragraph, ""]
    systems = [candidate.system] if candidate.system is not None else list(candidate.members)
    for system in systems:
        assert system is not None
        lines += ["[[system]]", f"tokenizer = {json.dumps(system.tokenizer, ensure_ascii=False)}"]
        if system.query:
            lines.append(f"query = {json.dumps(system.query)}")
        if system.engine not in ("", DEFAULT_ENGINE):
            lines.append(f"engine = {json.dumps(system.engine)}")
        lines.append("")
    if candidate.fusion is not None:
        lines += [
            "[[fusion]]",
            f"method = {json.dumps(candidate.fusion.method)}",
            "systems = [" + ", ".join(json.dumps(m, ensure_ascii=False) for m in candidate.fusion.members) + "]",
            "",
        ]
    return "\n".join(lines)


def tune_owned(path: Path) -> str | None:
    """None when ``path`` is a folder ``tune`` wrote (its tune.json has the tune schema), else why not."""
    written = {"tune.json", "recommendation.toml", "report.md", "pareto.svg"}
    found = only_names(path, lambda name: str(name) in written, what="tune output folder")
    if found is not None:
        return found
    try:
        data = json.loads((path / "tune.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "it has no tune.json that rag-eval wrote" if any(path.iterdir()) else None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return "its tune.json does not have rag-eval's tune schema"
    return None


def render_tune(report: dict[str, Any]) -> str:
    """report.md: the recommendation, the held-back evidence, the dev front and every trial."""
    metric = report["metric"]
    split = report["split"]
    out = [
        f"# rag-eval tune: {report['dataset']['id']}",
        "",
        report["paragraph"],
        "",
        *([f"Warning: {report['warning']}.", ""] if report.get("warning") else []),
        f"Dev and test: {split['dev_queries']} and {split['test_queries']} queries ({split['rule']}, salt "
        f"`{split['salt']}`, dev fraction {split['dev_fraction']}); evaluated on `{report['evaluated_on']}`. "
        f"Space: {report['space_size']} candidates, budget {report['budget']}; {report['seconds']} s.",
        "",
        f"## Held-back evidence ({report['test']['judged_queries']} judged queries)",
        "",
        f"Best single tokenizer: `{report['test']['best_single']}` ({metric} "
        f"{report['test']['best_single_quality']:.4f}).",
        "",
        f"| front member | {metric} | Δ vs best single | p (Holm) | p95 ms | index MB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for item in report["test"]["front"]:
        out.append(
            f"| `{item['candidate']}` | {item[metric]:.4f} | {item['delta']:+.4f} | {item['p_holm']:.4f} | "
            f"{item['p95_ms'] if item['p95_ms'] is not None else '-'} | {item['index_mb']} |"
        )
    if report.get("chart"):
        out += [
            "",
            "## Dev candidates",
            "",
            f"![{metric} against search p95 on the dev queries]({report['chart']['file']})",
            "",
            report["chart"]["note"] + " The chart's front is of two objectives; the recommendation's also counts "
            "index size.",
        ]
    out += [
        "",
        "## Dev trials",
        "",
        f"| candidate | round | queries | {metric} | p95 ms | index MB | on the front |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    on_front = set(report["front"])
    for trial in sorted(report["trials"], key=lambda t: (-t["round"], -t["quality"])):
        out.append(
            f"| `{trial['candidate']}` | {trial['round']} | {trial['queries']} | {trial['quality']:.4f} | "
            f"{trial['p95_ms']} | {trial['index_mb']} | "
            f"{'yes' if trial['candidate'] in on_front and trial['round'] == 2 else ''} |"
        )
    return "\n".join(out) + "\n"


__all__ = ["Candidate", "DEFAULT_BUDGET", "TuneResult", "candidates", "load_space", "tune"]
