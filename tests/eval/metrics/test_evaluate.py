"""rag-eval evaluate: trec_eval's all row (a sum for the counts, a mean for the rest), --json, --per-query, and queries
missing from the run counted as trec_eval -c counts them."""

from __future__ import annotations

import json
from pathlib import Path

import ir_measures
import pytest
from helpers import invoke

# -- 3. evaluate --json names the all row honestly ---------------------------------------------------------------


def test_evaluate_json_calls_the_all_row_all_and_its_counts_are_totals(tmp_path: Path) -> None:
    """Bug: the all row was under "mean", though its NumQ, NumRel and NumRet are totals over the queries."""
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq1 0 d2 1\nq2 0 d3 1\n", encoding="utf-8")
    (tmp_path / "run.txt").write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d9 2 1.0 x\nq2 Q0 d3 1 1.0 x\n", encoding="utf-8")
    args = ["evaluate", tmp_path / "run.txt", tmp_path / "qrels.txt", "--json"]
    result = invoke(*args, "--metric", "NumRet", "--metric", "NumRel", "--metric", "P@1")
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert "mean" not in found and found["num_q"] == 2
    assert found["all"] == {"NumRet": 3, "NumRel": 3, "P@1": 1.0}
    result = invoke("evaluate", "--help")
    assert "all (the all row: each metric's mean, the total" in " ".join(result.output.split())


QRELS = "q1 0 d1 1\nq1 0 d2 0\nq1 0 d4 2\nq2 0 d3 2\nq3 0 d5 1\n"


RUN = "q1 Q0 d1 1 3.0 t\nq1 Q0 d2 2 2.0 t\nq1 Q0 d9 3 1.0 t\nq2 Q0 d3 1 1.0 t\nq3 Q0 d8 1 4.0 t\nq3 Q0 d5 2 3.5 t\n"


def _trec(text: str) -> dict[str, dict[str, float]]:
    found: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        parts = line.split()
        found.setdefault(parts[0], {})[parts[2]] = float(parts[4]) if len(parts) == 6 else int(parts[3])
    return found


# --- evaluate: trec_eval's "all" row sums the counts (num_q, num_rel, num_ret, num_rel_ret); it averaged them.

COUNTS_AND_MEANS = ["NumQ", "NumRet", "NumRel", "NumRet(rel=1)", "NumRet(rel=2)", "P@1", "nDCG@10", "AP", "R@2"]


@pytest.mark.parametrize("metric", COUNTS_AND_MEANS)
def test_evaluate_aggregates_every_measure_as_trec_eval(tmp_path: Path, metric: str) -> None:
    (tmp_path / "run.txt").write_text(RUN, encoding="utf-8")
    (tmp_path / "qrels.txt").write_text(QRELS, encoding="utf-8")
    result = invoke("evaluate", tmp_path / "run.txt", tmp_path / "qrels.txt", "--metric", metric, "--json")
    assert result.exit_code == 0, result.output
    measure = ir_measures.parse_measure(metric)
    qrels = {q: {d: int(g) for d, g in docs.items()} for q, docs in _trec(QRELS).items()}
    # ir-measures aggregates as trec_eval's all row: a sum for the counts, a mean for the rest
    expected = ir_measures.calc_aggregate([measure], qrels, _trec(RUN))[measure]
    assert json.loads(result.output)["all"][metric] == pytest.approx(expected)


def test_evaluate_counts_are_totals_over_the_judged_queries(tmp_path: Path) -> None:
    (tmp_path / "run.txt").write_text(RUN, encoding="utf-8")
    (tmp_path / "qrels.txt").write_text(QRELS, encoding="utf-8")
    result = invoke("evaluate", tmp_path / "run.txt", tmp_path / "qrels.txt", "--metric", "NumQ", "--metric", "NumRet")
    assert result.exit_code == 0, result.output
    assert "NumQ\tall\t3.0000" in result.output.splitlines()  # three judged queries, as num_q
    assert "NumRet\tall\t6.0000" in result.output.splitlines()  # six lines retrieved in all


# --- 1. a judged query the run does not contain ----------------------------------------------------------------


def test_numrel_counts_a_query_missing_from_the_run_as_trec_eval_c_does(tmp_path: Path) -> None:
    """Regression: NumRel of h002 (not in the run) was 0 and the all row 2; trec_eval -c prints 3 and 5."""
    (tmp_path / "two.qrels").write_text("h001 0 d1 1\nh001 0 d2 1\nh002 0 d3 1\nh002 0 d4 1\nh002 0 d5 2\n")
    (tmp_path / "one.run").write_text("h001 Q0 d1 1 2 t\n")
    out = invoke(
        "evaluate", "--metric", "NumRel", "--per-query", str(tmp_path / "one.run"), str(tmp_path / "two.qrels")
    )
    assert out.exit_code == 0, out.stderr
    rows = {tuple(line.split("\t")[:2]): float(line.split("\t")[2]) for line in out.stdout.splitlines()}
    assert rows[("NumRel", "h001")] == 2 and rows[("NumRel", "h002")] == 3 and rows[("NumRel", "all")] == 5
