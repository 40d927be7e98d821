"""``rag-eval tune A B C ...``: one system chosen for collections like these, and how it would do on one it never saw.

1. Each collection's judged queries split into dev and held-back exactly as a tune of it alone splits them
   (:mod:`..datasets.split`, the same salt and dev fraction).
2. The candidates of the space run on the dev parts, successive halving as for one collection
   (:mod:`.search`): the first round on a quarter of every collection's dev queries, the best ``budget`` (the
   single tokenizers always) on the rest of them.
3. The objective, chosen by option, is computed from each collection's dev quality *relative to that
   collection's best single tokenizer* on the same queries: ``mean`` (the mean over collections of the gain
   over it, the default) or ``worst`` (the smallest gain). A system that is best on one collection and poor on
   another does not win on the strength of the one; a collection whose figures are all near 1 weighs no less.
   Latency and size constraints hold on every collection (the largest p95 and index). The pick and the dev
   front follow :func:`.search.pick` and the front rule of one collection, over the objective.
4. The pick, its front and every single tokenizer run once on each collection's held-back queries: per
   collection the gain over its best single tokenizer there and the paired randomization p, Holm-corrected
   over the collections.
5. Leave one collection out: for each collection in turn, steps 2-3 run on the *other* collections' dev parts
   alone and their pick runs on the left-out collection's held-back queries, against that collection's best single
   tokenizer there (Holm over the folds). That table answers how the choice does on a collection it never saw,
   which is the question a user with a new collection asks; it is printed with the recommendation.

Every (collection, part, candidate) is evaluated once (:class:`Memo`): the folds share the first round's draw
and most finalists, so leaving each collection out costs far less than tuning again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import RagEvalError
from ...files.outputs import publish_folder, refuse_inside_source
from ...index.tokenize_pool import remembering_tokens
from ..compare.latency import DEFAULT_REPEAT
from ..compare.provenance import environment
from ..datasets.formats import load_dataset
from ..datasets.records import Dataset
from ..datasets.shipped import read_from
from ..datasets.split import DEFAULT_BUDGET, DEFAULT_METRIC, DEV_FRACTION, SALT, split_ids, subset
from ..datasets.split_record import PART, tuned_split
from ..metrics.significance import holm, randomization_test
from .output import COLLECTIONS_SCHEMA as SCHEMA
from .output import tune_owned
from .report import code_cell, recommendation_toml
from .search import (
    FIRST_ROUND_SHARE,
    TIE_RULE,
    WITH_RELEVANT,
    Measured,
    Trial,
    TuneProgress,
    _draw,
    _evaluate,
    _front_after,
    _merged,
    _relevant,
    pick,
)
from .space import Candidate, check_limits, checked_pool, load_space

#: How the collections' gains over their best single tokenizer make one figure.
OBJECTIVES: dict[str, Callable[[list[float]], float]] = {
    "mean": lambda gains: float(np.mean(gains)),
    "worst": lambda gains: float(min(gains)),
}
DEFAULT_OBJECTIVE = "mean"
#: The leave-one-collection-out target: the pick from the others is "as good as" the left-out collection's best
#: single tokenizer when it is at most this much below it.
AS_GOOD = 0.005
ALPHA = 0.05


@dataclass(frozen=True)
class Collection:
    """One collection and its parts: dev, the first round's quarter of dev and the rest (None when either lacks a
    judged query with a relevant document: then dev runs whole), and the held-back queries."""

    data: Dataset
    dev_ids: list[str]
    test_ids: list[str]
    dev: Dataset
    test: Dataset
    first: Dataset | None
    rest: Dataset | None

    @property
    def id(self) -> str:
        return self.data.id


def _collection(ref: str, dev_fraction: float) -> Collection:
    """A dataset split as ``tune`` splits it alone; refused when a part it needs has no judged relevant query."""
    data = load_dataset(ref)
    if not _relevant(data):
        raise RagEvalError(
            f"{ref}: {data.id} has no {WITH_RELEVANT}", hint="every collection tune chooses on needs judgments"
        )
    dev_ids, test_ids = split_ids(list(data.queries), dev_fraction)
    dev, test = subset(data, dev_ids, "dev"), subset(data, test_ids, PART)
    for part, hint in ((dev, "raise --split"), (test, "lower --split")):
        if not _relevant(part):
            raise RagEvalError(f"{data.id}[{part.id.rsplit('[', 1)[-1].rstrip(']')}]: no {WITH_RELEVANT}", hint=hint)
    first_ids, rest_ids = split_ids(list(dev.queries), FIRST_ROUND_SHARE, salt=SALT + "/round1")
    first, rest = subset(dev, first_ids, "round1"), subset(dev, rest_ids, "round2")
    usable = _relevant(first) and _relevant(rest)
    return Collection(data, dev_ids, test_ids, dev, test, first if usable else None, rest if usable else None)


class Memo:
    """Each (collection, part, candidate) run once, whichever fold asks for it."""

    def __init__(self, metric: str, progress: TuneProgress | None, repeat: int) -> None:
        self.metric, self.progress, self.repeat = metric, progress, repeat
        self.rows: dict[tuple[str, str, str], Measured] = {}

    def rows_for(
        self, collection: Collection, part: str, dataset: Dataset, chosen: list[Candidate]
    ) -> dict[str, Measured]:
        missing = [c for c in chosen if (collection.id, part, c.name) not in self.rows]
        if missing:
            step = {"round1": 1, "round2": 2, "dev": 2}.get(part, 3)
            found = _evaluate(dataset, missing, self.metric, self._progress(collection, part), step, self.repeat)
            for candidate in missing:
                self.rows[(collection.id, part, candidate.name)] = found[candidate.name]
        return {c.name: self.rows[(collection.id, part, c.name)] for c in chosen}

    def _progress(self, collection: Collection, part: str) -> TuneProgress | None:
        if self.progress is None:
            return None
        progress = self.progress
        return lambda phase, done, total: progress(
            f"{collection.id[:24]} {part}: {phase.split(': ', 1)[-1]}", done, total
        )


@dataclass
class Choice:
    """What the dev parts of some collections decided: the trials, the front (best first), the ties and each
    finalist's dev quality per collection."""

    collections: list[str]
    trials: list[Trial]
    front: list[Trial]
    tied: list[Trial]
    dev_quality: dict[str, dict[str, float]] = field(default_factory=dict)
    best_single: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Constraints:
    max_p95_ms: float | None = None
    max_index_mb: float | None = None

    def allow(self, trial: Trial) -> bool:
        return (self.max_p95_ms is None or (trial.p95_ms is not None and trial.p95_ms <= self.max_p95_ms)) and (
            self.max_index_mb is None or (trial.index_mb is not None and trial.index_mb <= self.max_index_mb)
        )


def choose(
    chosen_on: list[Collection],
    pool: list[Candidate],
    *,
    budget: int,
    objective: str,
    memo: Memo,
    constraints: Constraints = Constraints(),
) -> Choice:
    """Steps 2 and 3 on ``chosen_on``'s dev parts only."""
    metric = memo.metric
    trials: list[Trial] = []
    if len(pool) > budget and all(c.first is not None for c in chosen_on):
        wide = _draw(pool, 3 * budget)
        early = {c.id: memo.rows_for(c, "round1", c.first, wide) for c in chosen_on if c.first is not None}
        scores, _best = _objective(early, wide, metric, objective)
        trials += [_trial(c, early, scores[c.name], 1, chosen_on) for c in wide]
        keep = {c.name for c in wide if c.single}
        for candidate in sorted(wide, key=lambda c: -scores[c.name]):
            if len(keep) >= budget:
                break
            keep.add(candidate.name)
        finalists = [c for c in wide if c.name in keep]
        rows = {}
        for c in chosen_on:
            assert c.rest is not None
            rest = memo.rows_for(c, "round2", c.rest, finalists)
            rows[c.id] = {f.name: _merged(early[c.id][f.name], rest[f.name], c.dev.judged(), metric) for f in finalists}
    else:
        finalists = _draw(pool, budget)
        rows = {c.id: memo.rows_for(c, "dev", c.dev, finalists) for c in chosen_on}
    scores, best = _objective(rows, finalists, metric, objective)
    final = [_trial(c, rows, scores[c.name], 2, chosen_on) for c in finalists]
    for trial in final:
        trial.feasible = constraints.allow(trial)
    feasible = [t for t in final if t.feasible and t.p95_ms is not None and t.index_mb is not None]
    if not feasible:
        raise RagEvalError(
            "no candidate meets the constraints on every collection's dev queries",
            hint="relax --max-p95-ms or --max-index-mb",
        )
    top, tied = pick(feasible)
    quality = {c.id: {f.name: float(rows[c.id][f.name].row.metrics[metric]) for f in finalists} for c in chosen_on}
    return Choice(
        [c.id for c in chosen_on], trials + final, [top, *_front_after(top, tied, feasible)], tied, quality, best
    )


def _objective(
    rows: dict[str, dict[str, Measured]], candidates: list[Candidate], metric: str, objective: str
) -> tuple[dict[str, float], dict[str, str]]:
    """Each candidate's objective from its gains over each collection's best single tokenizer; and those singles."""
    best: dict[str, str] = {}
    gains: dict[str, list[float]] = {c.name: [] for c in candidates}
    singles = [c for c in candidates if c.single]
    for collection, found in rows.items():
        quality = {name: float(measured.row.metrics[metric]) for name, measured in found.items()}
        best[collection] = max(singles, key=lambda c: (quality[c.name], c.name)).name
        for candidate in candidates:
            gains[candidate.name].append(quality[candidate.name] - quality[best[collection]])
    combine = OBJECTIVES[objective]
    return {name: combine(values) for name, values in gains.items()}, best


def _trial(
    candidate: Candidate, rows: dict[str, dict[str, Measured]], score: float, round_number: int, on: list[Collection]
) -> Trial:
    """One candidate's trial over the collections: the objective, the largest p95 and the largest index."""
    measured = [rows[c.id][candidate.name].row for c in on]
    p95s = [row.search.p95 for row in measured if row.search is not None and row.search.p95 is not None]
    sizes = [row.index_bytes for row in measured if row.index_bytes is not None]
    return Trial(
        candidate,
        round_number,
        sum(len((c.first if round_number == 1 and c.first is not None else c.dev).queries) for c in on),
        score,
        max(p95s) if len(p95s) == len(measured) else None,
        round(max(sizes) / 1e6, 3) if len(sizes) == len(measured) else None,
    )


@dataclass(frozen=True)
class HeldOut:
    """One system against a collection's best single tokenizer on that collection's held-back queries."""

    collection: str
    candidate: str
    judged: int
    quality: float
    best_single: str
    best_single_quality: float
    delta: float
    p: float
    p_holm: float = 1.0

    def json(self, metric: str) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "candidate": self.candidate,
            "judged_queries": self.judged,
            metric: round(self.quality, 4),
            "best_single": self.best_single,
            "best_single_quality": round(self.best_single_quality, 4),
            "delta": round(self.delta, 4),
            "p": round(self.p, 5),
            "p_holm": round(self.p_holm, 5),
            "as_good": self.delta >= -AS_GOOD,
            "significantly_better": self.p_holm < ALPHA and self.delta > 0,
        }


def held_out(collection: Collection, candidate: Candidate, singles: list[Candidate], memo: Memo) -> HeldOut:
    """``candidate`` on ``collection``'s held-back queries against its best single tokenizer there."""
    metric = memo.metric
    rows = memo.rows_for(collection, "test", collection.test, [candidate, *singles])
    judged = sorted(collection.test.judged())

    def values(name: str) -> list[float]:
        per_query = rows[name].per_query
        return [per_query.get(q, {}).get(metric, 0.0) for q in judged]

    best = max(singles, key=lambda c: (float(rows[c.name].row.metrics[metric]), c.name))
    mine, base = values(candidate.name), values(best.name)
    same = candidate.name == best.name
    return HeldOut(
        collection.id,
        candidate.name,
        len(judged),
        float(rows[candidate.name].row.metrics[metric]),
        best.name,
        float(rows[best.name].row.metrics[metric]),
        float(np.mean(mine) - np.mean(base)) if judged else 0.0,
        1.0 if same else randomization_test(mine, base),
    )


def _holm(found: list[HeldOut]) -> list[HeldOut]:
    adjusted = holm([h.p for h in found])
    return [replace(h, p_holm=p) for h, p in zip(found, adjusted, strict=True)]


@dataclass
class CollectionsResult:
    """What ``tune A B ...`` measured and decided; ``report`` is tune.json."""

    report: dict[str, Any]
    output: Path
    recommendation: Candidate
    paragraph: str


def tune_collections(
    refs: list[str],
    *,
    output: str | Path,
    space_file: Path | None = None,
    budget: int = DEFAULT_BUDGET,
    max_p95_ms: float | None = None,
    max_index_mb: float | None = None,
    dev_fraction: float = DEV_FRACTION,
    metric: str = DEFAULT_METRIC,
    objective: str = DEFAULT_OBJECTIVE,
    leave_one_out: bool = True,
    repeat: int = DEFAULT_REPEAT,
    progress: TuneProgress | None = None,
) -> CollectionsResult:
    """Choose one system on several collections' dev parts, test it on each one's held-back part, and leave each
    collection out in turn (see the module's docstring)."""
    from ..metrics.measures import quality_metric

    metric = quality_metric(metric, "tune")
    _check_arguments(refs, objective, budget, max_p95_ms, max_index_mb)
    refuse_inside_source(output, [read_from(ref) for ref in refs], what="tune folder")
    space = load_space(space_file)
    pool = checked_pool(space, space_file)
    singles = [c for c in pool if c.single]
    started, started_in = time.perf_counter(), environment()
    with publish_folder(output, owned=tune_owned, what="tune folder") as staging, remembering_tokens():
        collections = [_collection(ref, dev_fraction) for ref in refs]
        _distinct(refs, collections)
        memo = Memo(metric, progress, repeat)
        constraints = Constraints(max_p95_ms, max_index_mb)
        found = choose(collections, pool, budget=budget, objective=objective, memo=memo, constraints=constraints)
        recommendation = found.front[0].candidate
        evidence = _holm([held_out(c, recommendation, singles, memo) for c in collections])
        folds = _leave_each_out(collections, pool, budget, objective, memo, constraints) if leave_one_out else []
        report = _report_json(collections, found, evidence, folds, metric, objective)
        report.update(
            environment=started_in,
            split={
                "salt": SALT,
                "dev_fraction": dev_fraction,
                "rule": "sha256(salt, NUL, query id) < dev fraction: dev",
            },
            space=space,
            space_size=len(pool),
            budget=budget,
            repeat=repeat,
            constraints={"max_p95_ms": max_p95_ms, "max_index_mb": max_index_mb},
            seconds=round(time.perf_counter() - started, 1),
        )
        report["paragraph"] = paragraph(report)
        blocks = [tuned_split(c.data, c.dev_ids, c.test_ids, dev_fraction, SALT) for c in collections]
        files = {
            "tune.json": json.dumps(report, ensure_ascii=False, indent=2) + "\n",
            "report.md": render(report),
            "recommendation.toml": recommendation_toml(recommendation, report["paragraph"], blocks),
        }
        for name, text in files.items():  # the staging folder is published whole, or not at all
            (staging / name).write_text(text, encoding="utf-8")
    return CollectionsResult(report, Path(output), recommendation, report["paragraph"])


def _leave_each_out(
    collections: list[Collection],
    pool: list[Candidate],
    budget: int,
    objective: str,
    memo: Memo,
    constraints: Constraints,
) -> list[tuple[Choice, HeldOut]]:
    """Step 5: each collection left out in turn, the others' choice tested on its held-back queries (Holm over
    the folds)."""
    singles = [c for c in pool if c.single]
    folds = []
    for left in collections:
        others = [c for c in collections if c is not left]
        fold = choose(others, pool, budget=budget, objective=objective, memo=memo, constraints=constraints)
        folds.append((fold, held_out(left, fold.front[0].candidate, singles, memo)))
    adjusted = _holm([found for _fold, found in folds])
    return [(fold, found) for (fold, _), found in zip(folds, adjusted, strict=True)]


def _check_arguments(
    refs: list[str], objective: str, budget: int, max_p95_ms: float | None, max_index_mb: float | None
) -> None:
    if len(refs) < 2:
        raise RagEvalError(f"tuning across collections needs at least two datasets, not {len(refs)}")
    if objective not in OBJECTIVES:
        raise RagEvalError(f"unknown objective {objective!r}; choose from: {', '.join(OBJECTIVES)}")
    check_limits(budget, max_p95_ms, max_index_mb)


def _distinct(refs: list[str], collections: list[Collection]) -> None:
    """Refuse the same data given twice (it would count twice in the objective and leave itself in when left out)."""
    seen: dict[str, str] = {}
    for ref, collection in zip(refs, collections, strict=True):
        checksum = collection.data.checksum()
        if checksum in seen:
            raise RagEvalError(f"{ref}: the same data as {seen[checksum]}; give each collection once")
        seen[checksum] = ref
    ids = [c.id for c in collections]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise RagEvalError(f"two collections are named {twice[0]!r}; tune names each collection's rows by its id")


def _report_json(
    collections: list[Collection],
    found: Choice,
    evidence: list[HeldOut],
    folds: list[tuple[Choice, HeldOut]],
    metric: str,
    objective: str,
) -> dict[str, Any]:
    recommendation = found.front[0]
    return {
        "schema": SCHEMA,
        "metric": metric,
        "objective": objective,
        "collections": [
            {
                "id": c.id,
                "checksum": c.data.checksum(),
                "dev_queries": len(c.dev_ids),
                "test_queries": len(c.test_ids),
                "dev_best_single": found.best_single.get(c.id),
            }
            for c in collections
        ],
        "recommendation": recommendation.candidate.name,
        "objective_on_dev": round(recommendation.quality, 4),
        "dev_quality": {c: round(q[recommendation.candidate.name], 4) for c, q in found.dev_quality.items()},
        "front": [t.candidate.name for t in found.front],
        "tied_on_dev": [t.candidate.name for t in found.tied],
        "tie_rule": TIE_RULE,
        "trials": [
            {
                "candidate": t.candidate.name,
                "round": t.round,
                "queries": t.queries,
                "objective": round(t.quality, 4),
                "p95_ms": t.p95_ms,
                "index_mb": t.index_mb,
                "feasible": t.feasible,
                **(
                    {"dev_quality": {c: round(q[t.candidate.name], 4) for c, q in found.dev_quality.items()}}
                    if t.round == 2
                    else {}
                ),
            }
            for t in found.trials
        ],
        "held_back": [h.json(metric) for h in evidence],
        "leave_one_out": [
            {**h.json(metric), "chosen_on": fold.collections, "objective_on_dev": round(fold.front[0].quality, 4)}
            for fold, h in folds
        ],
    }


def paragraph(report: dict[str, Any]) -> str:
    """The recommendation in plain words: what it was chosen on and by which objective, the held-back evidence per
    collection, and the leave-one-collection-out check."""
    metric, names = report["metric"], [c["id"] for c in report["collections"]]
    how = "mean" if report["objective"] == "mean" else "smallest"
    text = (
        f"Chosen on the dev queries of {len(names)} collections ({', '.join(names)}) by the {how} gain in {metric} "
        f"over each collection's best single tokenizer: {report['recommendation']} "
        f"({report['objective_on_dev']:+.4f} on dev)."
    )
    held = report["held_back"]
    better = sum(h["significantly_better"] for h in held)
    text += (
        f" On their held-back queries it is {'; '.join(_gain(h) for h in held)}: significantly better than the best "
        f"single tokenizer on {better} of {len(held)} (Holm over the collections)."
    )
    loco = report["leave_one_out"]
    if loco:
        as_good = sum(h["as_good"] for h in loco)
        wins = sum(h["significantly_better"] for h in loco)
        text += (
            f" On a collection it never saw (each left out in turn, chosen on the others): "
            f"{'; '.join(_gain(h) + ' with ' + h['candidate'] for h in loco)}; at least as good as the best single "
            f"tokenizer (within {AS_GOOD}) on {as_good} of {len(loco)}, significantly better on {wins} of {len(loco)}."
        )
    return text


def _gain(item: dict[str, Any]) -> str:
    return f"{item['collection']} {item['delta']:+.4f} (p {item['p_holm']:.4f})"


def render(report: dict[str, Any]) -> str:
    """report.md: the recommendation, the leave-one-collection-out table, the held-back evidence, the dev trials."""
    metric = report["metric"]
    out = [
        f"# rag-eval tune: {', '.join(c['id'] for c in report['collections'])}",
        "",
        report["paragraph"],
        "",
        f"Objective: the {report['objective']} over the collections of each one's dev {metric} minus its best single "
        f"tokenizer's. Space: {report['space_size']} candidates, budget {report['budget']}, each question timed "
        f"{report['repeat']} times; {report['seconds']} s.",
        "",
        "## On a collection it never saw (leave one collection out)",
        "",
        "Each collection in turn is left out: the others' dev queries choose a system, which then runs on the "
        "left-out collection's held-back queries against that collection's best single tokenizer there. p is the "
        "paired randomization test, Holm-corrected over the folds.",
        "",
        f"| left out | chosen on the others | its {metric} | best single there | Δ | p (Holm) | as good | better |",
        "|---|---|---:|---|---:|---:|---|---|",
    ]
    for h in report["leave_one_out"]:
        out.append(
            f"| {h['collection']} | {code_cell(h['candidate'])} | {h[metric]:.4f} | {code_cell(h['best_single'])} "
            f"{h['best_single_quality']:.4f} | {h['delta']:+.4f} | {h['p_holm']:.4f} | "
            f"{'yes' if h['as_good'] else 'no'} | {'yes' if h['significantly_better'] else 'no'} |"
        )
    if not report["leave_one_out"]:
        out.append("| (not run: --no-leave-one-out) | | | | | | | |")
    out += [
        "",
        "## The recommendation on each collection's held-back queries",
        "",
        f"| collection | judged queries | {metric} | best single there | Δ | p | p (Holm) |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for h in report["held_back"]:
        out.append(
            f"| {h['collection']} | {h['judged_queries']} | {h[metric]:.4f} | {code_cell(h['best_single'])} "
            f"{h['best_single_quality']:.4f} | {h['delta']:+.4f} | {h['p']:.4f} | {h['p_holm']:.4f} |"
        )
    collections = [c["id"] for c in report["collections"]]
    out += [
        "",
        "## Dev trials (the last round)",
        "",
        f"| candidate | objective | {' | '.join(collections)} | largest p95 ms | largest index MB | on the front |",
        "|---|---:|" + "---:|" * len(collections) + "---:|---:|---|",
    ]
    front = set(report["front"])
    for t in sorted((t for t in report["trials"] if t["round"] == 2), key=lambda t: -t["objective"]):
        cells = " | ".join(f"{t['dev_quality'][c]:.4f}" for c in collections)
        out.append(
            f"| {code_cell(t['candidate'])} | {t['objective']:+.4f} | {cells} | {t['p95_ms']} | {t['index_mb']} | "
            f"{'yes' if t['candidate'] in front else ''} |"
        )
    return "\n".join(out) + "\n"
