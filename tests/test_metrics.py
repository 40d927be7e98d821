"""Metrics equal trec_eval's definitions: hand-computed cases and ir-measures names."""

from __future__ import annotations

import math

import pytest

from rag_eval.eval.metrics import MetricError, RankedDoc, evaluate, parse_metric
from rag_eval.eval.records import Qrel


def run(*docs: tuple[str, str]) -> list[RankedDoc]:
    ranked: dict[str, int] = {}
    out = []
    for query_id, doc_id in docs:
        ranked[query_id] = ranked.get(query_id, 0) + 1
        out.append(RankedDoc(query_id, doc_id, ranked[query_id], 100.0 - ranked[query_id]))
    return out


QRELS = [Qrel("q1", "d1", 2), Qrel("q1", "d2", 1), Qrel("q1", "d9", 0), Qrel("q2", "d3", 1), Qrel("q3", "d4", 1)]


def test_hand_computed_values() -> None:
    means, per_query = evaluate(QRELS, run(("q1", "d2"), ("q1", "d1"), ("q2", "d5"), ("q2", "d3")),
                                ["nDCG@10", "RR@10", "P@1", "R@1", "MAP@100"])
    # q1 ranks d2 (rel 1) then d1 (rel 2). trec_eval's ndcg_cut uses the grade itself as the gain:
    # DCG = 1/log2(2) + 2/log2(3), ideal DCG = 2/log2(2) + 1/log2(3).
    dcg, idcg = 1 + 2 / math.log2(3), 2 + 1 / math.log2(3)
    assert per_query["q1"]["nDCG@10"] == pytest.approx(dcg / idcg)
    assert per_query["q1"]["RR@10"] == 1.0 and per_query["q2"]["RR@10"] == 0.5
    assert per_query["q1"]["P@1"] == 1.0 and per_query["q2"]["P@1"] == 0.0
    assert per_query["q1"]["R@1"] == 0.5
    assert per_query["q1"]["MAP@100"] == pytest.approx((1 / 1 + 2 / 2) / 2)
    assert per_query["q2"]["MAP@100"] == pytest.approx(0.5)
    # q3 has no results: it counts as zero in every mean (trec_eval -c).
    assert per_query["q3"] == {"nDCG@10": 0.0, "RR@10": 0.0, "P@1": 0.0, "R@1": 0.0, "MAP@100": 0.0}
    assert means["RR@10"] == pytest.approx((1 + 0.5 + 0) / 3)


def test_queries_without_positive_judgements_are_not_averaged() -> None:
    means, per_query = evaluate([Qrel("q1", "d1", 1), Qrel("q2", "d2", 0)], run(("q1", "d1"), ("q2", "d2")), ["P@1"])
    assert set(per_query) == {"q1"} and means["P@1"] == 1.0


@pytest.mark.parametrize(("name", "canonical"), [("nDCG@10", "nDCG@10"), ("MRR@10", "RR@10"), ("MAP@100", "AP@100"),
                                                  ("R@100", "R@100"), ("P@1", "P@1"), ("Recall@5", "R@5")])
def test_metric_names(name: str, canonical: str) -> None:
    assert str(parse_metric(name)) == canonical


def test_unknown_metric() -> None:
    with pytest.raises(MetricError, match="unknown metric 'nope@3'"):
        parse_metric("nope@3")
