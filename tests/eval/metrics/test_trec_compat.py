"""Metrics equal trec_eval's on committed files.

tests/data/trec/expected.json was computed with pytrec_eval 0.5.11 (trec_eval's code) directly:
``RelevanceEvaluator(qrels, {ndcg_cut_10, recall_10, recip_rank, P_1, map_cut_100})`` on strict.run
(rag-eval's run for tied_bm25.tsv) and on the raw tied bm25 scores, where trec_eval breaks ties its own
way. q3 has no results; trec_eval -c counts it as zero.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from helpers import TESTS
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_eval.eval.datasets.records import Qrel
from rag_eval.eval.datasets.trec import read_run, read_trec_qrels
from rag_eval.eval.metrics.measures import evaluate
from rag_eval.files.runs import strict_run

DATA = TESTS / "data" / "trec"
NAMES = {"ndcg_cut_10": "nDCG@10", "recall_10": "R@10", "recip_rank": "RR", "P_1": "P@1", "map_cut_100": "MAP@100"}


def qrels() -> list[Qrel]:
    return [Qrel(q, d, r) for q, docs in read_trec_qrels(DATA / "qrels.txt").items() for d, r in docs.items()]


def tied_hits() -> dict[str, list[tuple[str, float]]]:
    hits: dict[str, list[tuple[str, float]]] = {}
    for line in (DATA / "tied_bm25.tsv").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            query, doc, bm25 = line.split("\t")
            hits.setdefault(query, []).append((doc, float(bm25)))
    return hits


def test_strict_run_file_is_what_rag_eval_writes() -> None:
    written = [doc for query, hits in tied_hits().items() for doc in strict_run(query, hits)]
    assert written == read_run(DATA / "strict.run")


def test_metrics_equal_pytrec_eval_on_the_committed_run() -> None:
    expected = json.loads((DATA / "expected.json").read_text(encoding="utf-8"))["strict"]
    means, per_query = evaluate(qrels(), read_run(DATA / "strict.run"), list(NAMES.values()))
    for query, values in expected.items():
        for trec_name, value in values.items():
            assert per_query[query][NAMES[trec_name]] == pytest.approx(value, abs=1e-12), (query, trec_name)
    assert per_query["q3"] == {name: 0.0 for name in NAMES.values()}
    for trec_name, name in NAMES.items():
        assert means[name] == pytest.approx(sum(expected[q][trec_name] for q in expected) / 3)


def test_tied_scores_are_why_runs_are_strict() -> None:
    expected = json.loads((DATA / "expected.json").read_text(encoding="utf-8"))
    # trec_eval orders the tied d1/d2 differently from rag-eval's chunk-id order, and nDCG changes.
    assert expected["raw_tied"]["q1"]["ndcg_cut_10"] != pytest.approx(expected["strict"]["q1"]["ndcg_cut_10"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c", "d", "e", "文", "Z"]), st.sampled_from([0.5, 1.0, 2.0])),
        min_size=1,
        max_size=7,
        unique_by=lambda pair: pair[0],
    ),
    st.sampled_from(["a", "b", "c", "d", "e", "文", "Z"]),
)
def test_read_run_ranks_tied_scores_as_trec_eval_does(docs: list[tuple[str, float]], relevant: str) -> None:
    """Regression: ties were ranked by document id ascending; trec_eval ranks them descending. The rank
    read_run gives the one relevant document is the one trec_eval's reciprocal rank implies."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tied.run"
        path.write_text("".join(f"q1 Q0 {d} 1 {s} t\n" for d, s in docs), encoding="utf-8")
        ranked = read_run(path)
    found = pytrec_eval.RelevanceEvaluator({"q1": {relevant: 1}}, {"recip_rank"}).evaluate({"q1": dict(docs)})["q1"][
        "recip_rank"
    ]
    rank = next((doc.rank for doc in ranked if doc.doc_id == relevant), None)
    assert found == (0.0 if rank is None else 1 / rank)
