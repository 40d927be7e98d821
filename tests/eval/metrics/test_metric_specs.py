"""Metric specs are read by rag-eval's own grammar: one error line naming the spec, never ir-measures' parser text."""

from __future__ import annotations

from pathlib import Path

import ir_measures
import pytest
from click.testing import CliRunner
from helpers import metric_cli_args

from rag_eval.cli import cli
from rag_eval.eval.datasets.records import Qrel
from rag_eval.eval.metrics.measures import MetricError, RankedDoc, canonical_metric, evaluate, metric_names

QRELS = [Qrel("q1", "d1", 2), Qrel("q1", "d2", 1), Qrel("q1", "d4", 0), Qrel("q2", "d3", 1), Qrel("q2", "d5", 2)]
RUN = [
    RankedDoc("q1", "d2", 1, 3.0),
    RankedDoc("q1", "d4", 2, 2.0),
    RankedDoc("q1", "d1", 3, 1.0),
    RankedDoc("q2", "d9", 1, 2.0),
    RankedDoc("q2", "d5", 2, 1.0),
]

#: Malformed specs and what the one error line says is expected.
MALFORMED = {
    "nDCG@-1": "cutoff must be a whole number from 1 to 10000",
    "nDCG@nan": "cutoff must be a whole number from 1 to 10000",
    "nDCG@010": "without sign or leading zeros",
    "nDCG@+5": "without sign or leading zeros",
    "nDCG@10.0": "cutoff must be a whole number",
    "nDCG@": "cutoff must be a whole number",
    "P@10001": "cutoff must be a whole number from 1 to 10000",
    "P(rel=-1)@5": "rel must be a whole number from 1 to 100",
    "P(rel=01)@5": "without sign or leading zeros",
    "P(rel=nan)@5": "rel must be a whole number",
    "P(rel=)@5": "rel must be a whole number",
    "P()@5": "parameters are key=value",
    "P(rel=2,)@5": "a comma ends the parameters",
    "P(rel=2, rel=3)@5": "parameter 'rel' is given twice",
    "nDCG(cutoff=5)@10": "cutoff is given twice",
    "nDCG@10@5": "expected NAME, NAME@CUTOFF or NAME(key=value, ...)@CUTOFF",
    "nDCG@10 ": "expected NAME, NAME@CUTOFF",
    "ndgc@10": "did you mean nDCG?",
    "P(judged_only=1)@5": "judged_only must be a bool (True or False)",
    "nDCG(gains={0:0,1:-1})@10": "a gain must be a whole number",
}
PARSER_TEXT = ("values must be", "octal", "problem parsing", "literal", "Traceback")


@pytest.mark.parametrize("spec", sorted(MALFORMED))
def test_a_malformed_spec_is_one_error_naming_it(spec: str) -> None:
    with pytest.raises(MetricError) as caught:
        canonical_metric(spec)
    message = str(caught.value)
    assert repr(spec) in message and MALFORMED[spec] in message
    assert not any(text in message for text in PARSER_TEXT), message


@pytest.mark.parametrize("spec", sorted(MALFORMED))
@pytest.mark.parametrize("command", ["compare", "evaluate"])
def test_a_malformed_spec_is_one_error_line_through_the_cli(command: str, spec: str, tmp_path: Path) -> None:
    args = metric_cli_args(command, tmp_path)
    outcome = CliRunner().invoke(cli, [*args, "--metric", spec])
    assert outcome.exit_code == 1, outcome.stderr
    lines = outcome.stderr.splitlines()
    assert lines[0].startswith("error: ") and repr(spec) in lines[0] and MALFORMED[spec] in lines[0], lines
    assert all(line.startswith("hint: ") for line in lines[1:]) and outcome.stdout == ""
    assert not any(text in outcome.stderr for text in PARSER_TEXT)
    assert not (tmp_path / "out").exists()


#: Valid specs as ir-measures writes them, each with its canonical spelling.
VALID = {
    "nDCG@10": "nDCG@10",
    "NDCG@10": "nDCG@10",
    "ndcg@10": "nDCG@10",
    "MAP@100": "MAP@100",
    "map@100": "MAP@100",
    "P@5": "P@5",
    "P(rel=1)@5": "P@5",
    "P(rel=2)@5": "P(rel=2)@5",
    "P( rel = 2 )@5": "P(rel=2)@5",
    "R@10000": "R@10000",
    "Recall@5": "Recall@5",
    "nDCG(cutoff=10)": "nDCG@10",
    "nDCG(gains={2:3, 0:0, 1:1})@10": "nDCG(gains={0:0,1:1,2:3})@10",
    "IPrec@0.5": "IPrec@0.5",
    "SetF(beta=2.0)": "SetF(beta=2.0)",
    "Rprec": "Rprec",
    "Bpref": "Bpref",
}

#: How ir-measures itself spells the specs its parser does not read.
IR_MEASURES_SPELLING = {"ndcg@10": "nDCG@10", "map@100": "MAP@100"}


@pytest.mark.parametrize("spec", sorted(VALID))
def test_a_valid_spec_keeps_its_value_under_its_canonical_name(spec: str) -> None:
    assert canonical_metric(spec) == VALID[spec]
    means, _ = evaluate(QRELS, RUN, [spec])
    # Every query here is judged, so the mean is ir-measures' own (pytrec_eval, trec_eval's definitions).
    qrels = {q.query_id: {} for q in QRELS}
    for q in QRELS:
        qrels[q.query_id][q.doc_id] = q.relevance
    run = {d.query_id: {} for d in RUN}
    for d in RUN:
        run[d.query_id][d.doc_id] = d.score
    reference = ir_measures.parse_measure(IR_MEASURES_SPELLING.get(spec, spec))
    expected = ir_measures.pytrec_eval.calc_aggregate([reference], qrels, run)[reference]
    assert means[spec] == pytest.approx(expected)
    assert evaluate(QRELS, RUN, [VALID[spec]])[0][VALID[spec]] == pytest.approx(expected)


def test_two_spellings_of_one_measure_are_one_metric() -> None:
    """Regression: --metric nDCG@10 --metric NDCG@10 printed two identical columns."""
    names = ["nDCG@10", "NDCG@10", "ndcg@10", "MAP@100", "AP@100", "P(rel=1)@5", "P@5", "MRR@10", "RR@10"]
    # the first spelling given names a measure: the default MAP@100 keeps its name in reports and baselines
    assert metric_names(names) == ["nDCG@10", "MAP@100", "P@5", "MRR@10"]
    assert metric_names(["AP@100", "map@100"]) == ["AP@100"]


def test_evaluate_prints_each_measure_once_under_its_canonical_name(tmp_path: Path) -> None:
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq1 0 d2 0\n", encoding="utf-8")
    (tmp_path / "run.txt").write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d3 2 1.0 x\n", encoding="utf-8")
    outcome = CliRunner().invoke(
        cli,
        ["evaluate", str(tmp_path / "run.txt"), str(tmp_path / "qrels.txt")]
        + ["--metric", "nDCG@10", "--metric", "NDCG@10", "--metric", "ndcg@10", "--metric", "P(rel=1)@1"],
    )
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stdout.splitlines() == ["num_q\tall\t1", "nDCG@10\tall\t1.0000", "P@1\tall\t1.0000"]


def test_compare_reports_each_measure_once_under_its_canonical_name(tmp_path: Path) -> None:
    outcome = CliRunner().invoke(
        cli,
        ["compare", "evidence-mini", "-t", "bigram", "--json", "-o", str(tmp_path / "out")]
        + ["--metric", "nDCG@10", "--metric", "NDCG@10", "--metric", "ndcg@10"],
    )
    assert outcome.exit_code == 0, outcome.stderr
    assert '"nDCG@10"' in outcome.stdout and '"NDCG@10"' not in outcome.stdout and '"ndcg@10"' not in outcome.stdout
