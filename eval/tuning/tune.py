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
   each front member is tested against the best single tokenizer on test (paired randomization test; the
   recommendation's, fixed on dev, is one planned test decided on its own p, the p compare gives; the front's
   are also Holm-corrected together). recommendation.toml records the split (:mod:`.split_record`), so that
   compare evaluates these held-back queries again.
6. With fewer than ``FEW_QUERIES`` judged queries on either side (the number below which ``compare`` warns),
   the report and the printed recommendation carry a warning with the difference such a test can detect.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
from .output import SCHEMA, tune_owned
from .report import TIED_NAMED as TIED_NAMED
from .report import (
    _paragraph,
    dev_chart,
    few_queries_warning,
    held_out_evidence,
    recommendation_toml,
    render_tune,
    trial_json,
)
from .search import FIRST_ROUND_SHARE as FIRST_ROUND_SHARE
from .search import LATENCY_MARGIN_MS as LATENCY_MARGIN_MS
from .search import LATENCY_RATIO as LATENCY_RATIO
from .search import QUALITY_TIE as QUALITY_TIE
from .search import SEED as SEED
from .search import (
    TIE_RULE,
    WITH_RELEVANT,
    Trial,
    TuneProgress,
    _evaluate,
    _relevant,
    search_space,
)
from .search import Search as Search
from .search import clearly_slower as clearly_slower
from .search import pick as pick
from .space import MAX_CANDIDATES as MAX_CANDIDATES
from .space import MAX_SPACE_BYTES as MAX_SPACE_BYTES
from .space import Candidate, candidates, check_limits, checked_pool, load_space


@dataclass
class TuneResult:
    """Everything ``tune`` measured and decided; ``report`` is what tune.json holds."""

    report: dict[str, Any]
    output: Path
    recommendation: Candidate
    paragraph: str
    trials: list[Trial] = field(default_factory=list)


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
    repeat: int = DEFAULT_REPEAT,
) -> TuneResult:
    """Tune on dev queries, evaluate once on held-back ones, recommend (see the module's docstring)."""
    from ..metrics.measures import quality_metric

    # Compare keys every row by the canonical spelling (ndcg@10 is nDCG@10, P(rel=1)@5 is P@5): so must tune.
    # Tune ranks by it, higher better: a count (NumRet) would recommend the system that retrieves the most.
    metric = quality_metric(metric, "tune")
    check_limits(budget, max_p95_ms, max_index_mb)
    # report.md inside a dataset folder would be read as part of a Markdown corpus there the next time.
    read = [read_from(source) for source in (dataset_ref, eval_on) if source is not None]
    refuse_inside_source(output, read, what="tune folder")
    space = load_space(space_file)
    pool = checked_pool(space, space_file)
    started, started_in = time.perf_counter(), environment()
    with publish_folder(output, owned=tune_owned, what="tune folder") as staging, remembering_tokens():
        parts = _parts(dataset_ref, dev_fraction, eval_on)
        found = search_space(
            parts.dev,
            pool,
            budget=budget,
            metric=metric,
            max_p95_ms=max_p95_ms,
            max_index_mb=max_index_mb,
            progress=progress,
            repeat=repeat,
        )
        held = _held_back(parts, found, metric, progress, repeat)
        report = {
            "schema": SCHEMA,
            "environment": started_in,
            "dataset": {"id": parts.data.id, "checksum": parts.data.checksum()},
            "evaluated_on": held.dataset.id,
            "left_out_dev_queries": len(parts.asked_again),
            "split": _split_json(parts, dev_fraction),
            "metric": metric,
            "space": space,
            "space_size": len(pool),
            "budget": budget,
            "constraints": {"max_p95_ms": max_p95_ms, "max_index_mb": max_index_mb},
            **_decision_json(found, held),
            "seconds": round(time.perf_counter() - started, 1),
            "phase_seconds": {**found.seconds, "test": held.seconds},
        }
        _write_tune(staging, report, found, parts, dev_fraction)
    return TuneResult(report, Path(output), found.front[0].candidate, held.paragraph, found.trials)


def run_tune(
    datasets: list[str],
    *,
    output: str | Path,
    eval_on: str | None = None,
    objective: str | None = None,
    leave_one_out: bool = True,
    **options: Any,
) -> TuneResult:
    """``rag-eval tune DATASET...``: :func:`tune` for one dataset, :func:`.collections.tune_collections` for several
    (``objective`` and ``leave_one_out`` apply only there, ``eval_on`` only to one)."""
    from .collections import DEFAULT_OBJECTIVE, tune_collections

    if len(datasets) == 1:
        if objective is not None or not leave_one_out:
            given = "--objective" if objective is not None else "--no-leave-one-out"
            raise RagEvalError(f"{given} applies to tuning across several collections; one dataset was given")
        return tune(datasets[0], output=output, eval_on=eval_on, **options)
    if eval_on is not None:
        raise RagEvalError(
            "--eval-on applies to one dataset; across collections each one's held-back queries are the evidence, "
            "and leaving each collection out in turn tests on data the choice never saw",
            hint="leave out --eval-on, or add that dataset as one more collection",
        )
    found = tune_collections(
        datasets, output=output, objective=objective or DEFAULT_OBJECTIVE, leave_one_out=leave_one_out, **options
    )
    return TuneResult(found.report, found.output, found.recommendation, found.paragraph)


def _split_json(parts: _Parts, dev_fraction: float) -> dict[str, Any]:
    return {
        "salt": SALT,
        "dev_fraction": dev_fraction,
        "dev_queries": len(parts.dev_ids),
        "test_queries": len(parts.test_ids),
        "rule": "sha256(salt, NUL, query id) < dev fraction: dev",
    }


def _decision_json(found: Search, held: _HeldBack) -> dict[str, Any]:
    """tune.json's trials, front, recommendation, ties, held-back evidence, paragraph and warning."""
    return {
        "trials": [trial_json(t) for t in found.trials],
        "front": [t.candidate.name for t in found.front],
        "recommendation": found.front[0].candidate.name,
        "tied_on_dev": [t.candidate.name for t in found.tied],
        "tie_rule": TIE_RULE,
        "test": held.evidence,
        "paragraph": held.paragraph,
        "warning": held.warning,
    }


@dataclass(frozen=True)
class _Parts:
    """The data split for tuning: the dev part and the test ids, or another dataset's unseen questions."""

    data: Dataset
    dev_ids: list[str]
    test_ids: list[str]
    dev: Dataset
    #: ``--eval-on``'s dataset, the ids of its questions that ask a dev query again, and the rest.
    other: Dataset | None = None
    asked_again: list[str] = field(default_factory=list)
    unseen: Dataset | None = None


def _parts(dataset_ref: str, dev_fraction: float, eval_on: str | None) -> _Parts:
    """Split the data, and check before the search that each part it needs has a judged relevant document."""
    data = load_dataset(dataset_ref)
    dev_ids, test_ids = split_ids(list(data.queries), dev_fraction)
    dev = subset(data, dev_ids, "dev")
    if not _relevant(dev):
        raise RagEvalError(f"{dev.id}: no {WITH_RELEVANT} falls in the dev part", hint="raise --split")
    if eval_on is None and not _relevant(subset(data, test_ids, "test")):
        # Checked before the search, not after it: whether there is a held-back part at all, nothing it holds.
        raise RagEvalError(f"{data.id}[test]: no {WITH_RELEVANT} falls in the test part", hint="lower --split")
    if not eval_on:
        return _Parts(data, dev_ids, test_ids, dev)
    other = load_dataset(eval_on)
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
    return _Parts(data, dev_ids, test_ids, dev, other, asked_again, unseen)


@dataclass(frozen=True)
class _HeldBack:
    """What the held-back queries (or another set's) showed: the evidence, the paragraph, the warning, the time."""

    dataset: Dataset
    evidence: dict[str, Any]
    paragraph: str
    warning: str | None
    seconds: float


def _held_back(parts: _Parts, found: Search, metric: str, progress: TuneProgress | None, repeat: int) -> _HeldBack:
    """The front and every single tokenizer run once on the queries held back until now, and what they show."""
    trials, on_front = found.trials, found.front
    held = subset(parts.data, parts.test_ids, PART) if parts.unseen is None else parts.unseen  # as compare names it
    singles = [t for t in trials if t.candidate.single and t.round == 2]
    evaluated = list({t.candidate.name: t.candidate for t in on_front + singles}.values())
    clock = time.perf_counter()
    test_rows = _evaluate(held, evaluated, metric, progress, 3, repeat)
    seconds = round(time.perf_counter() - clock, 1)
    evidence = held_out_evidence(held, test_rows, on_front, singles, metric)
    queries = "held-back queries" if parts.other is None else f"queries of {held.id}"
    dev_counts = (len(parts.dev.queries), len(parts.dev.judged()))
    paragraph = _paragraph(on_front[0], evidence, metric, on_front, queries, found.tied, dev_counts)
    warning = few_queries_warning(len(parts.dev.judged()), evidence, metric, queries)
    if parts.other is not None and parts.asked_again:
        note = (
            f"{len(parts.asked_again)} of the {len(parts.other.queries)} queries of {parts.other.id} ask a dev query "
            f"tune chose on again (the same text, e.g. {parts.asked_again[0]}): they were left out, and the figures "
            f"come from its other {len(held.queries)}"
        )
        warning = f"{note}; {warning}" if warning else note
    return _HeldBack(held, evidence, paragraph, warning, seconds)


def _write_tune(staging: Path, report: dict[str, Any], found: Search, parts: _Parts, dev_fraction: float) -> None:
    """pareto.svg (when the dev candidates have latencies), tune.json, recommendation.toml and report.md."""
    chart = dev_chart(found.trials, report["metric"])
    if chart is not None:
        (staging / "pareto.svg").write_text(chart.svg, encoding="utf-8")
        report["chart"] = {"file": "pareto.svg", "note": chart.note}
    (staging / "tune.json").write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    # compare evaluates the rest by default
    chosen_on = tuned_split(parts.data, parts.dev_ids, parts.test_ids, dev_fraction, SALT)
    (staging / "recommendation.toml").write_text(
        recommendation_toml(found.front[0].candidate, report["paragraph"], chosen_on), encoding="utf-8"
    )
    (staging / "report.md").write_text(render_tune(report), encoding="utf-8")


def reused_dev_queries(dev: Dataset, held: Dataset) -> list[str]:
    """The queries of ``held`` that ask a judged dev query again: the same text (runs of whitespace aside),
    whatever their ids (a copy of the tuned set, or one that numbers its questions anew)."""
    asked = {" ".join(dev.queries[q].text.split()) for q in dev.judged()}
    return [q for q, query in held.queries.items() if " ".join(query.text.split()) in asked]


__all__ = ["Candidate", "DEFAULT_BUDGET", "TuneResult", "candidates", "load_space", "run_tune", "tune", "tune_owned"]
