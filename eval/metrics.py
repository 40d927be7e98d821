"""Retrieval metrics with trec_eval's definitions (pytrec_eval through ir-measures), named as ir-measures names them."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import RagEvalError
from .records import MAX_RELEVANCE, Qrel

#: Reported by default: the harness's headline metrics.
DEFAULT_METRICS = ("nDCG@10", "R@10", "R@100", "RR@10", "P@1", "MAP@100")
#: Names people use that ir-measures spells differently.
ALIASES = {"MAP": "AP", "MRR": "RR", "Recall": "R", "Precision": "P"}
#: Largest rank cutoff accepted (``P@k``, ``R@k``, ...). TREC runs go 1,000 deep; pytrec_eval keeps the
#: cutoff in a C int, and a negative or overflowing one aborts the whole process.
MAX_CUTOFF = 10_000
#: Longest metric name accepted; ir-measures parses names with Python's own parser.
MAX_NAME_CHARS = 200
#: Largest ``beta`` of SetF accepted.
MAX_BETA = 100.0


class MetricError(RagEvalError, ValueError):
    """A metric name that cannot be parsed, or one trec_eval cannot compute with the parameters given."""


class EvaluationError(RagEvalError, ValueError):
    """Qrels or a run that cannot be scored: invalid grades, scores or ids, or no judged query."""


@dataclass(frozen=True)
class RankedDoc:
    """One line of a run: query, document, rank (1-based) and a strictly decreasing score."""

    query_id: str
    doc_id: str
    rank: int
    score: float


def ranked_ids(run: Iterable[RankedDoc]) -> dict[str, list[str]]:
    """A run as query id -> document ids in rank order (queries in the order they first appear)."""
    by_query: dict[str, list[RankedDoc]] = {}
    for doc in run:
        by_query.setdefault(doc.query_id, []).append(doc)
    return {query: [doc.doc_id for doc in sorted(docs, key=lambda d: d.rank)] for query, docs in by_query.items()}


def _ir_measures() -> Any:
    try:
        import ir_measures
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise RagEvalError("metrics need ir-measures", hint="pip install 'ir-measures>=0.3'") from exc
    return ir_measures


def parse_metric(name: str) -> Any:
    """An ir-measures measure from a name such as ``nDCG@10``, ``R@100``, ``MRR@10`` or ``MAP@100``.

    Every parameter is checked here, before any value reaches pytrec_eval: a measure trec_eval does
    not compute, an unknown or mistyped parameter, a cutoff outside 1..MAX_CUTOFF or a ``rel``
    outside 1..MAX_RELEVANCE is a MetricError.
    """
    if not isinstance(name, str) or not name.strip():
        raise MetricError(f"invalid metric name {name!r}; examples: {', '.join(DEFAULT_METRICS)}")
    if len(name) > MAX_NAME_CHARS:
        raise MetricError(f"metric name of {len(name)} characters is over the limit of {MAX_NAME_CHARS}")
    ir_measures = _ir_measures()
    head, at, tail = name.partition("@")
    canonical = ALIASES.get(head, head) + at + tail
    try:
        with warnings.catch_warnings():
            # ir-measures reads the name with ast; newer Pythons deprecate the node types it uses.
            warnings.simplefilter("ignore", DeprecationWarning)
            measure = ir_measures.parse_measure(canonical)
    except (ValueError, NameError, SyntaxError, TypeError, AttributeError, RecursionError, MemoryError) as exc:
        raise MetricError(f"unknown metric {name!r} ({exc}); examples: {', '.join(DEFAULT_METRICS)}") from None
    _check_params(name, measure)
    if not _computable(measure):
        supported = ", ".join(sorted({m.NAME for m in ir_measures.pytrec_eval.SUPPORTED_MEASURES}))
        raise MetricError(
            f"metric {name!r}: trec_eval does not compute {measure.NAME} with these parameters; "
            f"rag-eval reports trec_eval's definitions only (measures: {supported})"
        )
    return measure


def _check_params(name: str, measure: Any) -> None:
    supported = measure.SUPPORTED_PARAMS
    for key, value in measure.params.items():
        if key not in supported:
            raise MetricError(
                f"metric {name!r}: {measure.NAME} has no parameter {key!r} "
                f"(parameters: {', '.join(sorted(supported)) or 'none'})"
            )
        if key == "cutoff":
            _check_int(name, "cutoff", value, 1, MAX_CUTOFF)
        elif key == "rel":
            _check_int(name, "rel", value, 1, MAX_RELEVANCE)
        elif key == "gains":
            _check_gains(name, value)
        elif key == "recall":
            if not _is_number(value) or not 0 <= value <= 1 or round(value, 2) != value:
                raise MetricError(
                    f"metric {name!r}: recall must be a number from 0 to 1 with at most two decimals, not {value!r}"
                )
        elif key == "beta":
            if not _is_number(value) or not 0 < value <= MAX_BETA:
                raise MetricError(
                    f"metric {name!r}: beta must be a number above 0 and at most {MAX_BETA:g}, not {value!r}"
                )
        elif supported[key].dtype is bool or supported[key].dtype is str:
            if type(value) is not supported[key].dtype:
                raise MetricError(f"metric {name!r}: {key} must be a {supported[key].dtype.__name__}, not {value!r}")
        choices = getattr(supported[key], "choices", None)
        if isinstance(choices, (list, tuple)) and value not in choices:
            raise MetricError(f"metric {name!r}: {key} must be one of {', '.join(map(str, choices))}, not {value!r}")
    for key, info in supported.items():
        if info.required and key not in measure.params:
            raise MetricError(
                f"metric {name!r}: {measure.NAME} needs {key} (e.g. {measure.NAME}@10)"
                if key == getattr(measure, "AT_PARAM", "cutoff")
                else f"metric {name!r}: {measure.NAME} needs the parameter {key}"
            )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_int(name: str, key: str, value: Any, low: int, high: int) -> None:
    if type(value) is not int or not low <= value <= high:
        raise MetricError(f"metric {name!r}: {key} must be a whole number from {low} to {high}, not {value!r}")


def _check_gains(name: str, gains: Any) -> None:
    if not isinstance(gains, dict) or not gains:
        raise MetricError(f"metric {name!r}: gains must be a mapping of grades to gains, e.g. gains={{0:0,1:1,2:3}}")
    for grade, gain in gains.items():
        _check_int(name, "a gains grade", grade, 0, MAX_RELEVANCE)
        _check_int(name, "a gain", gain, 0, MAX_RELEVANCE)


def _computable(measure: Any) -> bool:
    provider = _ir_measures().pytrec_eval
    if measure.NAME == "RR" and "cutoff" in measure.params:
        # trec_eval's recip_rank has no cutoff: RR@k is recip_rank over each query's top k (trec_eval -M k).
        if measure["judged_only"]:
            return False
        measure = _without_cutoff(measure)
    try:
        return bool(provider.supports(measure))
    except AssertionError:  # ir-measures validates with assert
        return False


def _without_cutoff(measure: Any) -> Any:
    params = {k: v for k, v in measure.params.items() if k != "cutoff"}
    return type(measure)(**params)


def check_qrels(qrels: Iterable[Qrel]) -> dict[str, dict[str, int]]:
    """Qrels as ``{query: {doc: grade}}``, refusing grades outside 0..MAX_RELEVANCE, non-integer grades,
    invalid ids and one pair judged twice with different grades."""
    out: dict[str, dict[str, int]] = {}
    checked: set[str] = set()
    for qrel in qrels:
        try:
            query_id, doc_id, grade = qrel
        except (TypeError, ValueError):
            raise EvaluationError(f"qrels: {qrel!r} is not a (query, document, grade) record") from None
        _check_id(query_id, "query id", checked)
        _check_id(doc_id, "document id", checked)
        if type(grade) is not int or not 0 <= grade <= MAX_RELEVANCE:
            raise EvaluationError(
                f"qrels: query {query_id!r}, document {doc_id!r}: grade {grade!r} is not a whole "
                f"number from 0 to {MAX_RELEVANCE}"
            )
        docs = out.setdefault(query_id, {})
        if docs.get(doc_id, grade) != grade:
            raise EvaluationError(
                f"qrels: query {query_id!r}, document {doc_id!r} is judged twice ({docs[doc_id]} and {grade})"
            )
        docs[doc_id] = grade
    return out


def check_run(run: Iterable[RankedDoc], queries: set[str] | None = None) -> dict[str, dict[str, float]]:
    """A run as ``{query: {doc: score}}`` (only ``queries`` when given), refusing scores that are not
    finite numbers, invalid ids and a document returned twice for one query (as trec_eval does)."""
    out: dict[str, dict[str, float]] = {}
    checked: set[str] = set()
    for doc in run:
        try:
            query_id, doc_id, score = doc.query_id, doc.doc_id, doc.score
        except AttributeError:
            raise EvaluationError(f"run: {doc!r} is not a RankedDoc (query, document, rank, score)") from None
        _check_id(query_id, "query id", checked)
        _check_id(doc_id, "document id", checked)
        if not isinstance(score, (int, float)) or isinstance(score, bool) or not _finite(score):
            raise EvaluationError(
                f"run: query {query_id!r}, document {doc_id!r}: score {score!r} is not a finite number"
            )
        if queries is not None and query_id not in queries:
            continue
        docs = out.setdefault(query_id, {})
        if doc_id in docs:
            raise EvaluationError(f"run: query {query_id!r} returns document {doc_id!r} twice")
        docs[doc_id] = float(score)
    return out


def _finite(score: int | float) -> bool:
    try:
        return math.isfinite(score)
    except OverflowError:  # an int too large for a float
        return False


def _check_id(value: Any, what: str, checked: set[str]) -> None:
    if value in checked:  # each distinct id is checked once: runs repeat them many times
        return
    # pytrec_eval hands ids to C: a NUL truncates them and a lone surrogate crashes the process.
    if not isinstance(value, str) or not value or "\x00" in value:
        raise EvaluationError(f"invalid {what} {value!r}: ids are non-empty text without NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise EvaluationError(f"invalid {what} {value!r}: not valid Unicode (a lone surrogate)") from None
    checked.add(value)


def judged_queries(qrels: Mapping[str, Mapping[str, int]]) -> list[str]:
    """Queries with at least one positive grade, sorted: the queries every mean is taken over."""
    return sorted(q for q, docs in qrels.items() if any(grade > 0 for grade in docs.values()))


def evaluate(
    qrels: Iterable[Qrel], run: Iterable[RankedDoc], metrics: Iterable[str] = DEFAULT_METRICS
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Mean and per-query values of each metric over every judged query.

    A judged query with no results counts as zero (as ``trec_eval -c``). Only queries with at least one
    positive judgement are judged; the run may contain other queries (they are ignored). Qrels with no
    judged query, grades outside 0..MAX_RELEVANCE and scores that are not finite are EvaluationErrors.
    """
    ir_measures = _ir_measures()
    names = list(dict.fromkeys(metrics))
    if not names:
        raise MetricError("no metrics to compute")
    measures = {name: parse_metric(name) for name in names}
    qrel_dict = check_qrels(qrels)
    judged = judged_queries(qrel_dict)
    if not judged:
        raise EvaluationError(
            "no judged query: no qrel has a positive grade, so every metric would be 0",
            hint="check the qrels file: grades 1 and above mark relevant documents",
        )
    run_dict = check_run(run, set(judged))
    per_query: dict[str, dict[str, float]] = {q: {name: 0.0 for name in names} for q in judged}
    # Names that parse to one measure (``MRR@10`` and ``RR@10``) each get its values.
    by_measure: dict[Any, list[str]] = {}
    for name, measure in measures.items():
        by_measure.setdefault(measure, []).append(name)
    plain = [m for m in by_measure if not (m.NAME == "RR" and "cutoff" in m.params)]
    batches: list[tuple[list[Any], dict[str, dict[str, float]], dict[Any, Any]]] = []
    if plain:
        batches.append((plain, run_dict, {m: m for m in plain}))
    for cutoff in sorted({m["cutoff"] for m in by_measure if m not in plain}):
        cut = [m for m in by_measure if m not in plain and m["cutoff"] == cutoff]
        uncut = {_without_cutoff(m): m for m in cut}
        batches.append((list(uncut), _top(run_dict, cutoff), uncut))
    provider = ir_measures.pytrec_eval
    for measures_batch, docs, origin in batches:
        for value in provider.evaluator(measures_batch, qrel_dict).iter_calc(docs):
            if value.query_id in per_query:
                for name in by_measure[origin[value.measure]]:
                    per_query[value.query_id][name] = float(value.value)
    means = {name: sum(per_query[q][name] for q in judged) / len(judged) for name in names}
    return means, per_query


def _top(run: dict[str, dict[str, float]], depth: int) -> dict[str, dict[str, float]]:
    """Each query's first ``depth`` documents in trec_eval's order: score descending, ties by document id
    descending (trec_eval's ``-M depth``)."""
    return {
        query: dict(sorted(docs.items(), key=lambda item: (item[1], item[0]), reverse=True)[:depth])
        for query, docs in run.items()
    }
