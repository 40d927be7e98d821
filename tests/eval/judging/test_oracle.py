"""Judging with an oracle (rag_eval.eval.judging.oracle): replay, winners, the sampling study, the shipped handbook."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rag_eval.errors import RagEvalError
from rag_eval.eval.compare.runner import System
from rag_eval.eval.compare.timing import run_system
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.eval.datasets.records import Qrel
from rag_eval.eval.judging.oracle import per_query_ndcg, read_runs, replay, sampling_study, summarise, winners
from rag_eval.eval.judging.selection import Selector
from rag_eval.eval.metrics.measures import evaluate

RUNS = {
    "a": {"q1": ["x", "y", "n1"], "q2": ["z", "n2"]},
    "b": {"q1": ["y", "x", "n3"], "q2": ["n2", "z"]},
    "c": {"q1": ["n1", "n3"], "q2": ["n4"]},
}
QRELS = {"q1": {"x": 2, "y": 1, "outside": 1}, "q2": {"z": 1}, "q3": {"w": 0}}


def test_per_query_ndcg_is_trec_evals_with_unjudged_as_not_relevant() -> None:
    values = per_query_ndcg(RUNS, QRELS)
    d2, d3 = 1 / math.log2(3), 1 / math.log2(4)
    ideal = 2 + d2 + d3  # x (2), y (1) and the passage no system returned (1)
    assert values["a"] == pytest.approx({"q1": (2 + d2) / ideal, "q2": 1.0})
    assert values["b"] == pytest.approx({"q1": (1 + 2 * d2) / ideal, "q2": d2})
    assert values["c"] == pytest.approx({"q1": 0.0, "q2": 0.0})  # q3 has no positive grade: not a judged query
    assert winners(values, ["q1", "q2"]) == {"a"}
    assert winners({"a": {"q": 0.5}, "b": {"q": 0.5}}, ["q"]) == {"a", "b"}  # exact ties: either is right


def test_replay_reads_grades_from_the_qrels_and_absent_pairs_are_zero() -> None:
    result = replay(RUNS, QRELS, method="naive", budget=20, samples=50)
    assert result.winners == {"a"}
    assert len(result.steps) == 7  # the whole pool (x, y, n1, n3; z, n2, n4), then nothing is left
    last = result.steps[-1]
    assert last.pick == last.judged_pick == "a" and last.certain and last.settled


def test_the_study_samples_judged_queries_with_a_seed_and_summarises() -> None:
    study = sampling_study(RUNS, QRELS, samples=3, sample_queries=2, budget=4, until_settled=4, mc_samples=50)
    again = sampling_study(RUNS, QRELS, samples=3, sample_queries=2, budget=4, until_settled=4, mc_samples=50)
    assert study == again and study["judged_queries"] == 2
    summary = summarise(study, checkpoints=(2, 4))
    for method, figures in summary.items():
        assert figures["samples"] == 3 and len(figures["curve"]) == 4
        assert figures["correct"]["4"] == figures["curve"][3]
        assert 0 <= figures["correct_judged_pick"]["2"] <= 1, method
    with pytest.raises(RagEvalError, match="fewer than"):
        sampling_study(RUNS, QRELS, samples=1, sample_queries=3)
    with pytest.raises(RagEvalError, match="unknown judging order"):
        sampling_study(RUNS, QRELS, samples=1, sample_queries=1, methods=["bogus"])


def test_read_runs_names_systems_by_file_without_their_shared_suffix(tmp_path: Path) -> None:
    for name in ("bigram_sections_or", "unigram_sections_or"):
        (tmp_path / f"{name}.run").write_text("q1 Q0 d2 1 2.0 t\nq1 Q0 d1 2 3.0 t\n", encoding="utf-8")
    runs = read_runs(sorted(tmp_path.glob("*.run")))
    assert runs == {"bigram": {"q1": ["d1", "d2"]}, "unigram": {"q1": ["d1", "d2"]}}  # score order, as trec_eval


@pytest.fixture(scope="module")
def handbook_runs() -> tuple[dict[str, dict[str, list[str]]], dict[str, dict[str, int]]]:
    """Two cheap strategies' runs on the shipped handbook, and its qrels."""
    data = load_dataset("handbook")
    runs: dict[str, dict[str, list[str]]] = {}
    for name in ("bigram", "unigram"):
        ranked: dict[str, list[str]] = {}
        for doc in run_system(data, System(name, "", ""), depth=10).run:
            ranked.setdefault(doc.query_id, []).append(doc.doc_id)
        runs[name] = ranked
    return runs, data.qrels


def test_on_the_handbook_nDCG_matches_trec_eval_and_a_fully_judged_pool_gives_the_exact_scores(
    handbook_runs: tuple[dict[str, dict[str, list[str]]], dict[str, dict[str, int]]],
) -> None:
    runs, qrels = handbook_runs
    qrel_list = [Qrel(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
    mine = per_query_ndcg(runs, qrels)
    for system, ranked in runs.items():
        from rag_eval.eval.metrics.measures import RankedDoc

        run = [RankedDoc(q, d, r, -float(r)) for q, docs in ranked.items() for r, d in enumerate(docs, start=1)]
        means, per_query = evaluate(qrel_list, run, ["nDCG@10"])
        assert sum(mine[system].values()) / len(mine[system]) == pytest.approx(means["nDCG@10"], abs=1e-9)
        assert mine[system] == pytest.approx({q: v["nDCG@10"] for q, v in per_query.items()}, abs=1e-9)

    # judge a sample of queries' whole pool: the selector's scores are then the pool's exact mean nDCG@10
    queries = sorted(q for q, d in qrels.items() if any(g > 0 for g in d.values()))[:12]
    small = {s: {q: r[q] for q in queries if q in r} for s, r in runs.items()}
    selector = Selector(small, samples=50)
    for query, docs in selector.pool.items():
        for doc in docs:
            selector.record(query, doc, qrels[query].get(doc, 0))
    pooled = {q: {d: g for d, g in qrels[q].items() if d in selector.pool[q]} for q in queries}
    judged = [q for q in queries if any(g > 0 for g in pooled[q].values())]
    exact = per_query_ndcg(small, pooled)
    decision = selector.decision()
    assert decision.certain and decision.judged == decision.pooled
    for system in small:
        assert decision.scores[system] == pytest.approx(sum(exact[system][q] for q in judged) / len(judged))


def test_on_the_handbook_the_decisive_order_replays_and_reports_every_step(
    handbook_runs: tuple[dict[str, dict[str, list[str]]], dict[str, dict[str, int]]],
) -> None:
    runs, qrels = handbook_runs
    queries = sorted(q for q, d in qrels.items() if any(g > 0 for g in d.values()))[:20]
    result = replay(runs, qrels, queries=queries, budget=15, samples=100)
    assert [s.judged for s in result.steps] == list(range(1, 16))
    assert all(s.pick in runs and 0 <= s.confidence <= 1 for s in result.steps)
    assert result.winners <= set(runs)
