"""Metrics equal trec_eval's definitions: hand-computed cases and ir-measures names."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import pytrec_eval
from helpers import metric_cli_args
from helpers.trec_eval import COUNTS, QUALITY, SPECS

from rag_eval.errors import RagEvalError
from rag_eval.eval.datasets.records import MAX_RELEVANCE, Qrel
from rag_eval.eval.metrics import measures as metrics
from rag_eval.eval.metrics.measures import PLACEHOLDER_DOC, MetricError, RankedDoc, evaluate, parse_metric, ranked_ids


def run(*docs: tuple[str, str]) -> list[RankedDoc]:
    ranked: dict[str, int] = {}
    out = []
    for query_id, doc_id in docs:
        ranked[query_id] = ranked.get(query_id, 0) + 1
        out.append(RankedDoc(query_id, doc_id, ranked[query_id], 100.0 - ranked[query_id]))
    return out


QRELS = [Qrel("q1", "d1", 2), Qrel("q1", "d2", 1), Qrel("q1", "d9", 0), Qrel("q2", "d3", 1), Qrel("q3", "d4", 1)]


def test_hand_computed_values() -> None:
    means, per_query = evaluate(
        QRELS,
        run(("q1", "d2"), ("q1", "d1"), ("q2", "d5"), ("q2", "d3")),
        ["nDCG@10", "RR@10", "P@1", "R@1", "MAP@100"],
    )
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


def test_queries_judged_all_zero_are_averaged_as_zero() -> None:
    means, per_query = evaluate([Qrel("q1", "d1", 1), Qrel("q2", "d2", 0)], run(("q1", "d1"), ("q2", "d2")), ["P@1"])
    assert set(per_query) == {"q1", "q2"} and per_query["q2"]["P@1"] == 0.0 and means["P@1"] == 0.5


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("nDCG@10", "nDCG@10"),
        ("MRR@10", "RR@10"),
        ("MAP@100", "AP@100"),
        ("R@100", "R@100"),
        ("P@1", "P@1"),
        ("Recall@5", "R@5"),
    ],
)
def test_metric_names(name: str, canonical: str) -> None:
    assert str(parse_metric(name)) == canonical


def test_unknown_metric() -> None:
    with pytest.raises(MetricError, match="unknown metric 'nope@3'"):
        parse_metric("nope@3")


# --- every metric parameter is checked before it reaches pytrec_eval ----------------------------------------


BAD_METRICS = {
    "P@0": "cutoff must be a whole number from 1 to 10000",  # pytrec_eval aborts the process on it
    "nDCG@-1": "cutoff must be a whole number from 1 to 10000",
    "R@1e9": "cutoff must be a whole number",
    "R@100000000": "cutoff must be a whole number from 1 to 10000",
    "P@1.5": "cutoff must be a whole number",
    "P@True": "cutoff must be a whole number",
    "P@x": "cutoff must be a whole number",
    "RR(rel=-1)": "rel must be a whole number from 1 to 100",
    "RR(rel=0)@10": "rel must be a whole number from 1 to 100",
    "RR(rel=1000)": "rel must be a whole number from 1 to 100",
    "P(foo=1)@5": "P has no parameter 'foo'",
    "P(judged_only=1)@5": "judged_only must be a bool",
    "nDCG(gains={1:1e300})@5": "a gain must be a whole number",
    "IPrec@2.0": "recall must be a number from 0 to 1",
    "SetF(beta=1000.0)": "beta must be a number above 0",
    "P": "P needs cutoff",
    "nope@3": "unknown metric 'nope@3'",
    "ERR@20": "trec_eval does not compute ERR",  # only gdeval would, outside trec_eval
    "Judged@10": "trec_eval does not compute Judged",
    "NumRel(rel=2)": "trec_eval does not compute NumRel with these parameters",
    "P@10;import os": "unknown metric",
    "(" * 300 + "P": "over the limit",
}


@pytest.mark.parametrize("name", sorted(BAD_METRICS))
def test_invalid_metrics_are_refused_before_pytrec_eval(name: str) -> None:
    with pytest.raises(MetricError, match=re.escape(BAD_METRICS[name])):
        parse_metric(name)


@pytest.mark.parametrize(
    "name",
    ["P@0", "nDCG@-1", "R@1e9", "RR(rel=-1)", "P@x", "nope@3", "P(foo=1)@5", "ERR@20", "IPrec@2.0", "P(rel=0)@1"],
)
@pytest.mark.parametrize("command", ["compare", "evaluate"])
def test_invalid_metrics_end_in_one_error_line_through_the_cli(command: str, name: str, tmp_path: Path) -> None:
    """Run as a process: an invalid parameter reaching pytrec_eval kills the process with SIGABRT."""
    args = metric_cli_args(command, tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "rag_eval", *args, "--metric", name], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, (done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert lines[0].startswith("error: ") and f"{name!r}" in lines[0], done.stderr
    assert all(line.startswith("hint: ") for line in lines[1:]) and done.stdout == ""
    assert not (tmp_path / "out").exists()


def test_valid_parameters_are_computed() -> None:
    means, _ = evaluate(
        QRELS,
        run(("q1", "d2"), ("q1", "d1"), ("q2", "d5"), ("q2", "d3")),
        [
            "RR(rel=2)@10",
            "P(rel=2)@2",
            "nDCG(gains={0:0,1:1,2:3})@10",
            "SetF(beta=2.0)",
            "IPrec@0.5",
            "Success@1",
            "AP",
        ],
    )
    assert means["RR(rel=2)@10"] == pytest.approx(0.5 / 3)  # only q1's d1 has grade 2, at rank 2
    assert means["P(rel=2)@2"] == pytest.approx(0.5 / 3)
    assert means["Success@1"] == pytest.approx(1 / 3)


# --- evaluate() refuses what it cannot score ----------------------------------------------------------------


@pytest.mark.parametrize("grade", [-1, MAX_RELEVANCE + 1, 2**32, 2**63, 1.5, 1.0, True, "1", None])
def test_grades_outside_the_documented_bound_are_refused(grade: object) -> None:
    with pytest.raises(RagEvalError, match="grade"):
        evaluate([Qrel("q1", "d1", grade), Qrel("q1", "d2", 1)], run(("q1", "d1")), ["P@1"])  # type: ignore[arg-type]


def test_grades_at_the_bound_are_scored() -> None:
    means, _ = evaluate([Qrel("q1", "d1", MAX_RELEVANCE), Qrel("q1", "d2", 0)], run(("q1", "d1")), ["nDCG@10", "P@1"])
    assert means == {"nDCG@10": 1.0, "P@1": 1.0}


@pytest.mark.parametrize("score", [math.nan, math.inf, -math.inf, float("1e999"), 10**400, "1.0", True, None])
def test_scores_that_are_not_finite_numbers_are_refused(score: object) -> None:
    docs = [RankedDoc("q1", "d1", 1, score), RankedDoc("q1", "d2", 2, 1.0)]  # type: ignore[arg-type]
    with pytest.raises(RagEvalError, match="not a finite number"):
        evaluate(QRELS, docs, ["P@1"])


@pytest.mark.parametrize("doc_id", ["", "d\x00x", "d\ud800", 7, None])
def test_ids_pytrec_eval_cannot_take_are_refused(doc_id: object) -> None:
    with pytest.raises(RagEvalError, match="invalid document id"):
        evaluate(QRELS, [RankedDoc("q1", doc_id, 1, 1.0)], ["P@1"])  # type: ignore[arg-type]
    with pytest.raises(RagEvalError, match="invalid document id"):
        evaluate([*QRELS, Qrel("q1", doc_id, 1)], run(("q1", "d1")), ["P@1"])  # type: ignore[arg-type]


def test_a_document_returned_twice_or_judged_twice_differently_is_refused() -> None:
    with pytest.raises(RagEvalError, match="returns document 'd1' twice"):
        evaluate(QRELS, [RankedDoc("q1", "d1", 1, 2.0), RankedDoc("q1", "d1", 2, 1.0)], ["P@1"])
    with pytest.raises(RagEvalError, match="judged twice"):
        evaluate([*QRELS, Qrel("q1", "d1", 0)], run(("q1", "d1")), ["P@1"])


@pytest.mark.parametrize("qrels", [[], [Qrel("q1", "d1", 0), Qrel("q2", "d2", 0)]])
def test_qrels_without_a_relevant_document_are_refused(qrels: list[Qrel]) -> None:
    with pytest.raises(RagEvalError, match="no relevant document"):
        evaluate(qrels, run(("q1", "d1")), ["P@1"])


def test_names_of_one_measure_each_get_its_values() -> None:
    means, _ = evaluate(
        QRELS, run(("q1", "d2"), ("q2", "d3")), ["MRR@10", "RR@10", "Precision@1", "P@1", "R@1", "Recall@1"]
    )
    assert means["MRR@10"] == means["RR@10"] == pytest.approx(2 / 3)
    assert means["Precision@1"] == means["P@1"] == pytest.approx(2 / 3)
    assert means["Recall@1"] == means["R@1"] > 0


def test_reciprocal_rank_at_k_breaks_ties_as_trec_eval_does() -> None:
    """trec_eval orders equal scores by document id, descending; RR@k is its recip_rank over the top k."""

    qrels = [Qrel("q1", "a", 1), Qrel("q1", "b", 0), Qrel("q2", "m", 1)]
    tied = [
        RankedDoc("q1", "a", 1, 1.0),
        RankedDoc("q1", "b", 2, 1.0),
        RankedDoc("q2", "x", 1, 3.0),
        RankedDoc("q2", "m", 2, 2.0),
        RankedDoc("q2", "z", 3, 2.0),
    ]
    reference = pytrec_eval.RelevanceEvaluator({"q1": {"a": 1, "b": 0}, "q2": {"m": 1}}, {"recip_rank"}).evaluate(
        {"q1": {"a": 1.0, "b": 1.0}, "q2": {"x": 3.0, "m": 2.0, "z": 2.0}}
    )
    _, per_query = evaluate(qrels, tied, ["RR@10", "RR@1", "RR@2", "RR"])
    for query in ("q1", "q2"):
        assert per_query[query]["RR@10"] == per_query[query]["RR"] == pytest.approx(reference[query]["recip_rank"])
    assert per_query["q1"]["RR@10"] == 0.5 and per_query["q1"]["RR@1"] == 0.0  # b ranks before a
    assert per_query["q2"]["RR@2"] == 0.0 and per_query["q2"]["RR@10"] == pytest.approx(1 / 3)  # z before m


def test_ranked_ids_orders_each_query_by_rank_whatever_the_line_order() -> None:
    run = [RankedDoc("q2", "b", 2, 0.5), RankedDoc("q1", "x", 1, 3.0), RankedDoc("q2", "a", 1, 0.9)]
    assert ranked_ids(run) == {"q2": ["a", "b"], "q1": ["x"]}
    assert ranked_ids([]) == {}


def test_qrels_naming_the_placeholder_document_do_not_score_a_missing_query() -> None:
    """A query the run lacks is scored on a stand-in document no judgment of it names, even when the qrels name
    trec_eval's own placeholder id."""
    qrels = [Qrel("q1", "d1", 1), Qrel("q2", PLACEHOLDER_DOC, 1)]
    _means, per_query = evaluate(qrels, [RankedDoc("q1", "d1", 1, 1.0)], ["P@1", "nDCG@10", "NumRel"])
    assert per_query["q2"] == {"P@1": 0.0, "nDCG@10": 0.0, "NumRel": 1.0}


@pytest.mark.parametrize("spec", SPECS)
def test_every_measure_of_a_query_missing_from_the_run(spec: str) -> None:
    """Hand-computed, trec_eval -c: the missing q2 is one query (NumQ), has its 2 relevant documents (NumRel, from
    the qrels; with rel=2, one), and retrieved nothing, so every other measure is 0."""
    qrels = [Qrel("q1", "a", 1), Qrel("q2", "b", 1), Qrel("q2", "c", 2), Qrel("q2", "d", 0)]
    _, per_query = evaluate(qrels, [RankedDoc("q1", "a", 1, 1.0)], [spec])
    measure = parse_metric(spec)
    expected = {"NumQ": 1.0, "NumRel": 2.0}.get(measure.NAME, 0.0)
    assert per_query["q2"][spec] == expected


# --- 2. counts are not quality ---------------------------------------------------------------------------------


def test_counts_are_the_measures_trec_eval_totals_and_the_rest_lie_in_0_to_1() -> None:
    assert COUNTS and QUALITY
    assert not any(metrics.is_quality(spec) for spec in COUNTS) and all(metrics.is_quality(spec) for spec in QUALITY)
