"""Retrieval metrics through ir-measures (trec_eval's definitions via pytrec_eval), named as ir-measures names them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ..errors import RagEvalError
from .records import Qrel

#: Reported by default: the harness's headline metrics.
DEFAULT_METRICS = ("nDCG@10", "R@10", "R@100", "RR@10", "P@1", "MAP@100")
#: Names people use that ir-measures spells differently.
ALIASES = {"MAP": "AP", "MRR": "RR", "Recall": "R", "Precision": "P"}


class MetricError(RagEvalError, ValueError):
    """A metric name ir-measures cannot parse."""


@dataclass(frozen=True)
class RankedDoc:
    """One line of a run: query, document, rank (1-based) and a strictly decreasing score."""

    query_id: str
    doc_id: str
    rank: int
    score: float


def _ir_measures() -> Any:
    try:
        import ir_measures
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise RagEvalError("metrics need ir-measures", hint="pip install 'ir-measures>=0.3'") from exc
    return ir_measures


def parse_metric(name: str) -> Any:
    """An ir-measures measure from a name such as ``nDCG@10``, ``R@100``, ``MRR@10`` or ``MAP@100``."""
    ir_measures = _ir_measures()
    head, at, tail = name.partition("@")
    canonical = ALIASES.get(head, head) + at + tail
    try:
        return ir_measures.parse_measure(canonical)
    except (ValueError, NameError, SyntaxError, TypeError, AttributeError) as exc:
        raise MetricError(f"unknown metric {name!r} ({exc}); examples: {', '.join(DEFAULT_METRICS)}") from None


def evaluate(
    qrels: Iterable[Qrel], run: Iterable[RankedDoc], metrics: Iterable[str] = DEFAULT_METRICS
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Mean and per-query values of each metric over every judged query.

    A judged query with no results counts as zero (as ``trec_eval -c``). Only queries with at least one
    positive judgement are judged; the run may contain other queries (they are ignored).
    """
    ir_measures = _ir_measures()
    names = list(dict.fromkeys(metrics))
    measures = {name: parse_metric(name) for name in names}
    qrel_list = [ir_measures.Qrel(q.query_id, q.doc_id, q.relevance) for q in qrels]
    judged = sorted({q.query_id for q in qrel_list if q.relevance > 0})
    judged_set = set(judged)
    docs = [ir_measures.ScoredDoc(d.query_id, d.doc_id, d.score) for d in run if d.query_id in judged_set]
    per_query: dict[str, dict[str, float]] = {q: {name: 0.0 for name in names} for q in judged}
    by_measure = {str(m): name for name, m in measures.items()}
    for value in ir_measures.iter_calc(list(measures.values()), qrel_list, docs):
        if value.query_id in per_query:
            per_query[value.query_id][by_measure[str(value.measure)]] = float(value.value)
    means = {name: (sum(per_query[q][name] for q in judged) / len(judged) if judged else 0.0) for name in names}
    return means, per_query
