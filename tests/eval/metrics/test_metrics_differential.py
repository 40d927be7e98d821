"""Differential test: every measure rag-eval offers equals trec_eval's value on random runs and qrels.

The reference is trec_eval's own code through pytrec_eval, called with trec_eval's measure names, one measure per
evaluator (never batched, so no measure can borrow another's settings), plus ir-measures' pytrec_eval provider one
measure at a time. trec_eval's rules that pytrec_eval does not apply are written out here, from trec_eval's source:
  * ``-c``: a judged query the run lacks is scored on trec_eval.c's stand-in ranking (one unjudged document
    ``ceci_nest_pas_un_docno``, score 1) and its num_ret is then set to 0: num_q counts it, num_rel counts its
    relevant documents, every measure of what was retrieved is 0;
  * ``-M k`` for RR@k: recip_rank over each query's first k documents, ranked by score descending and equal scores
    by document id descending, compared as bytes (form_res_rels.c ``comp_sim_docno``);
  * nDCG's gains: a grade the gains do not list keeps its grade as gain (gain_init.c ``setup_gains``);
  * the ``all`` row: the mean over the queries, the sum for num_q, num_rel, num_ret and num_rel_ret.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import ir_measures
import pytest
import pytrec_eval
from helpers.trec_eval import (
    SPECS,
    TOLERANCE,
    Case,
    Qrels,
    Run,
    _trec_measure,
    _trec_order,
    cases,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_eval.eval.datasets.records import Qrel
from rag_eval.eval.metrics.measures import MetricError, RankedDoc, canonical_metric, evaluate, parse_metric
from rag_eval.eval.metrics.run_files import evaluate_files

#: trec_eval's summary of these is the sum over the queries (m_num_q.c, m_num_rel.c, m_num_ret.c, m_num_rel_ret.c).
SUMMED = {"NumQ", "NumRel", "NumRet"}


def test_the_measures_compared_are_every_measure_rag_eval_offers() -> None:
    offered = {m.NAME for m in ir_measures.pytrec_eval.SUPPORTED_MEASURES}
    assert offered == {parse_metric(spec).NAME for spec in SPECS}
    assert [canonical_metric(spec) for spec in SPECS] == SPECS  # so values are keyed by these names
    with pytest.raises(MetricError, match="trec_eval does not compute Judged"):
        parse_metric("Judged@10")  # ir-measures' own measure, not trec_eval's: refused, nothing to compare


# --- the reference: trec_eval's definitions ------------------------------------------------------------------


def reference(spec: str, qrels: Qrels, run: Run, queries: list[str]) -> dict[str, float]:
    """Each query's trec_eval value of ``spec`` (trec_eval -c over ``queries``)."""
    measure = parse_metric(spec)
    trec, key, rel, judged = _trec_measure(measure)
    gains = measure.params.get("gains")
    if gains:
        qrels = {q: {d: gains.get(g, g) for d, g in docs.items()} for q, docs in qrels.items()}
    ran = {q: run.get(q, {"ceci_nest_pas_un_docno": 1.0}) for q in queries}  # trec_eval -c
    if measure.NAME == "RR" and "cutoff" in measure.params:  # trec_eval -M cutoff
        ran = {q: {d: docs[d] for d in _trec_order(docs)[: measure["cutoff"]]} for q, docs in ran.items()}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {trec}, relevance_level=rel, judged_docs_only_flag=judged)
    found = evaluator.evaluate(ran)
    # trec_eval's 0/0 (IPrec under -J for a query with nothing relevant or judged retrieved) counts 0 in rag-eval
    values = {q: 0.0 if math.isnan(found[q][key]) else found[q][key] for q in queries}
    return values | {q: 0.0 for q in queries if q not in run and key == "num_ret"}  # trec_eval -c resets num_ret


# --- random runs and qrels -------------------------------------------------------------------------------------


def _write(folder: Path, qrels: Qrels, run: Run) -> tuple[Path, Path]:
    qrels_file, run_file = folder / "qrels.txt", folder / "run.txt"
    qrels_file.write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items()), encoding="utf-8"
    )
    # the rank column is left in line order: trec_eval ignores it and ranks by score
    run_file.write_text(
        "".join(f"{q} Q0 {d} {n} {s!r} t\n" for q, docs in run.items() for n, (d, s) in enumerate(docs.items(), 1)),
        encoding="utf-8",
    )
    return run_file, qrels_file


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
@pytest.mark.fuzz
def test_every_measure_equals_trec_eval_per_query_and_in_the_all_row(case: Case) -> None:
    qrels, run, specs = case
    with tempfile.TemporaryDirectory() as folder:
        # all measures in one call, in a random order: as `rag-eval evaluate --metric ... --metric ...` computes them
        means, per_query = evaluate_files(*_write(Path(folder), qrels, run), specs)
    # rag-eval scores every query of the qrels, as trec_eval -c does (those judged all 0 too)
    judged = sorted(qrels)
    assert sorted(per_query) == judged
    for spec in specs:
        expected = reference(spec, qrels, run, judged)
        for query in judged:
            assert math.isclose(per_query[query][spec], expected[query], abs_tol=TOLERANCE), (spec, query)
        total = sum(expected.values())
        expected_all = total if parse_metric(spec).NAME in SUMMED else total / len(judged)
        assert math.isclose(means[spec], expected_all, abs_tol=TOLERANCE), (spec, "all")


@settings(max_examples=15, deadline=None)
@given(cases())
@pytest.mark.fuzz
def test_ir_measures_one_measure_at_a_time_agrees(case: Case) -> None:
    """ir-measures' pytrec_eval provider, called with one measure (RR@k aside: it has no cutoff there)."""
    qrels, run, specs = case
    judged = sorted(qrels)
    qrel_list = [Qrel(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
    docs = [RankedDoc(q, d, n, s) for q, ds in run.items() for n, (d, s) in enumerate(ds.items(), 1)]
    _, per_query = evaluate(qrel_list, docs, specs)
    provider = ir_measures.pytrec_eval
    for spec in specs:
        measure = parse_metric(spec)
        if not provider.supports(measure):
            continue
        found = {m.query_id: m.value for m in provider.iter_calc([measure], qrels, run)}
        for query in judged:
            if query in run:
                expected = 0.0 if math.isnan(found[query]) else found[query]  # trec_eval's 0/0 counts 0 (above)
                assert math.isclose(per_query[query][spec], expected, abs_tol=TOLERANCE), (spec, query)


# --- differences found, each failing before its fix -------------------------------------------------------------

QRELS = [Qrel("q1", "a", 1), Qrel("q1", "b", 2), Qrel("q1", "c", 0), Qrel("q2", "a", 1)]
RUN = [RankedDoc("q1", "a", 1, 3.0), RankedDoc("q1", "x", 2, 2.0), RankedDoc("q1", "b", 3, 1.0)]


def test_num_ret_is_not_counted_over_judged_documents_only_after_a_judged_only_measure() -> None:
    """Regression: NumRet after P(judged_only=True)@5 was 2 (the unjudged x dropped), trec_eval's num_ret is 3."""
    _, per_query = evaluate(QRELS, RUN, ["P(judged_only=True)@5", "NumRet"])
    assert per_query["q1"]["NumRet"] == 3.0


def test_ndcg_keeps_its_own_gains_beside_an_ndcg_with_other_gains() -> None:
    """Regression: with nDCG(gains={1:5})@10 first, nDCG@10 got its value and it got 0."""
    _, alone = evaluate(QRELS, RUN, ["nDCG@10"])
    _, with_gains = evaluate(QRELS, RUN, ["nDCG(gains={1:5})@10"])
    _, both = evaluate(QRELS, RUN, ["nDCG(gains={1:5})@10", "nDCG@10"])
    assert both["q1"]["nDCG@10"] == alone["q1"]["nDCG@10"]
    assert both["q1"]["nDCG(gains={1:5})@10"] == with_gains["q1"]["nDCG(gains={1:5})@10"] > 0


def test_num_q_counts_a_judged_query_without_results() -> None:
    """Regression: NumQ was 0 for q2 (no results), so its all row (1) disagreed with num_q (2); trec_eval -c
    counts every query of the qrels in num_q."""
    means, per_query = evaluate(QRELS, RUN, ["NumQ"])
    assert per_query["q2"]["NumQ"] == 1.0 and means["NumQ"] == 1.0  # the mean; evaluate_files totals it to 2


def test_rr_at_k_breaks_ties_as_trec_eval_not_as_ir_measures_default() -> None:
    """ir-measures computes RR@k with its msmarco provider, which ranks equal scores by document id ascending;
    trec_eval ranks them descending (b before a), so trec_eval's RR over the top 1 is 0."""
    qrels, run = {"q1": {"a": 1, "b": 0}}, {"q1": {"a": 1.0, "b": 1.0}}
    assert [m.value for m in ir_measures.iter_calc([ir_measures.parse_measure("RR@1")], qrels, run)] == [1.0]
    assert reference("RR@1", qrels, run, ["q1"]) == {"q1": 0.0}
    tied = [RankedDoc("q1", "a", 1, 1.0), RankedDoc("q1", "b", 2, 1.0)]
    _, per_query = evaluate([Qrel("q1", "a", 1), Qrel("q1", "b", 0)], tied, ["RR@1"])
    assert per_query["q1"]["RR@1"] == 0.0


def test_a_query_judged_without_a_relevant_document_is_averaged_as_trec_eval_does() -> None:
    """Regression: rag-eval averaged over queries with a relevant document only (P@1 1.0 here); trec_eval over
    every query of the qrels (its CHANGELOG, 4/5/06: queries with no relevant docs are not ignored)."""
    qrels = [Qrel("q1", "a", 1), Qrel("q2", "b", 0)]
    run = [RankedDoc("q1", "a", 1, 1.0), RankedDoc("q2", "b", 1, 1.0)]
    means, _ = evaluate(qrels, run, ["P@1"])
    found = pytrec_eval.RelevanceEvaluator({"q1": {"a": 1}, "q2": {"b": 0}}, {"P.1"}).evaluate(
        {"q1": {"a": 1.0}, "q2": {"b": 1.0}}
    )
    assert means["P@1"] == sum(v["P_1"] for v in found.values()) / len(found) == 0.5


def trec_eval_c(spec: str, qrels: dict, run: dict, queries: list[str]) -> dict[str, float]:
    """Each query's trec_eval -c value (trec_eval.c, 9.0.8): a judged query the run lacks is scored on
    ``bogus_ranking``, one unjudged document ``ceci_nest_pas_un_docno`` of score 1, and its num_ret is then set to
    0. One pytrec_eval evaluator per measure, with trec_eval's names; -M k for RR@k; gains applied to the grades."""
    measure = parse_metric(spec)
    trec, key, rel, judged = _trec_measure(measure)
    gains = measure.params.get("gains")
    if gains:
        qrels = {q: {d: gains.get(g, g) for d, g in docs.items()} for q, docs in qrels.items()}
    ranked = {q: (run[q] if q in run else {"ceci_nest_pas_un_docno": 1.0}) for q in queries}
    if measure.NAME == "RR" and "cutoff" in measure.params:
        ranked = {q: {d: docs[d] for d in _trec_order(docs)[: measure["cutoff"]]} for q, docs in ranked.items()}
    found = pytrec_eval.RelevanceEvaluator(qrels, {trec}, relevance_level=rel, judged_docs_only_flag=judged).evaluate(
        ranked
    )
    values = {q: 0.0 if math.isnan(found[q][key]) else found[q][key] for q in queries}
    if key == "num_ret":
        values |= {q: 0.0 for q in queries if q not in run}
    return values


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.data())
@pytest.mark.fuzz
def test_every_measure_equals_trec_eval_c_with_queries_missing_from_the_run(case, data) -> None:
    qrels, run_docs, specs = case
    judged = sorted(qrels)
    # Leave out of the run some judged queries (at least one, when the run keeps another).
    dropped = set(data.draw(st.lists(st.sampled_from(judged), unique=True, min_size=1)))
    kept = {q: docs for q, docs in run_docs.items() if q not in dropped}
    qrel_list = [Qrel(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
    docs = [RankedDoc(q, d, n, s) for q, ds in kept.items() for n, (d, s) in enumerate(ds.items(), 1)]
    means, per_query = evaluate(qrel_list, docs, specs)
    for spec in specs:
        expected = trec_eval_c(spec, qrels, kept, judged)
        for query in judged:
            assert math.isclose(per_query[query][spec], expected[query], abs_tol=TOLERANCE), (spec, query)
        assert math.isclose(means[spec], sum(expected.values()) / len(judged), abs_tol=TOLERANCE), spec
