"""Audit helperB sections 1, 2, 8 and 9: a query missing from the run, counts taken for quality, baselines and
space or systems files whose values were not checked (or were checked without naming the file)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import pytrec_eval
from helpers import invoke, one_error
from helpers.trec_eval import SPECS, TOLERANCE, _trec_measure, _trec_order, cases
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_eval.errors import RagEvalError
from rag_eval.eval.compare.gate import check, load_baseline
from rag_eval.eval.compare.statistics import significance
from rag_eval.eval.compare.systems import load_systems_toml
from rag_eval.eval.datasets.records import Qrel
from rag_eval.eval.metrics import measures as metrics
from rag_eval.eval.metrics.measures import MetricError, RankedDoc, evaluate, parse_metric
from rag_eval.eval.tuning.space import load_space

COUNTS = [spec for spec in SPECS if parse_metric(spec).NAME in ("NumQ", "NumRel", "NumRet")]
QUALITY = [spec for spec in SPECS if spec not in COUNTS]


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


@pytest.mark.parametrize("spec", SPECS)
def test_every_measure_of_a_query_missing_from_the_run(spec: str) -> None:
    """Hand-computed, trec_eval -c: the missing q2 is one query (NumQ), has its 2 relevant documents (NumRel, from
    the qrels; with rel=2, one), and retrieved nothing, so every other measure is 0."""
    qrels = [Qrel("q1", "a", 1), Qrel("q2", "b", 1), Qrel("q2", "c", 2), Qrel("q2", "d", 0)]
    _, per_query = evaluate(qrels, [RankedDoc("q1", "a", 1, 1.0)], [spec])
    measure = parse_metric(spec)
    expected = {"NumQ": 1.0, "NumRel": 2.0}.get(measure.NAME, 0.0)
    assert per_query["q2"][spec] == expected


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


# --- 2. counts are not quality ---------------------------------------------------------------------------------


def test_counts_are_the_measures_trec_eval_totals_and_the_rest_lie_in_0_to_1() -> None:
    assert COUNTS and QUALITY
    assert not any(metrics.is_quality(spec) for spec in COUNTS) and all(metrics.is_quality(spec) for spec in QUALITY)


@pytest.mark.parametrize("spec", COUNTS)
def test_tune_refuses_a_count_as_its_quality_measure(spec: str, tmp_path: Path) -> None:
    """Regression: tune --metric NumRet recommended the system that retrieves the most ("NumRet 91.96")."""
    outcome = invoke("tune", "evidence-mini", "--metric", spec, "-o", str(tmp_path / "t"))
    assert one_error(outcome, alone=True).startswith("error: tune needs a quality measure")
    assert not (tmp_path / "t").exists()
    with pytest.raises(MetricError, match="needs a quality measure"):
        metrics.quality_metric(spec, "tune")


def test_counts_get_no_significance_arrow_and_numrel_is_the_same_for_every_system() -> None:
    """Regression: NumRel differed between systems (a query without hits counted 0) and got an arrow."""
    qrels = [Qrel("q1", "a", 1), Qrel("q2", "b", 1), Qrel("q2", "c", 1)] + [Qrel(f"p{n}", "a", 1) for n in range(8)]
    full = [RankedDoc(q, "a", 1, 1.0) for q in ["q1", "q2"] + [f"p{n}" for n in range(8)]]
    names = ["NumRel", "NumRet", "P@1"]
    per_query = {"ref": evaluate(qrels, full[:1], names)[1], "other": evaluate(qrels, full, names)[1]}
    assert per_query["ref"]["q2"]["NumRel"] == per_query["other"]["q2"]["NumRel"] == 2
    rows = [{"name": "ref"}, {"name": "other"}]
    significance(rows, per_query, sorted(per_query["ref"]), names, "ref")
    assert set(rows[1]["significance"]) == {"P@1"}


# --- 3. the baseline of compare --against ----------------------------------------------------------------------


def _baseline(values: dict, **top) -> dict:
    system = {"name": "bigram | passages | or", "tokenizer": "bigram [x]", "builder": "passages", "metrics": values}
    return {"schema": "rag-eval/baseline/1", "dataset": {"checksum": "c"}, "systems": [system], **top}


@pytest.mark.parametrize(
    ("baseline", "says"),
    [
        (_baseline({"nDCG@10": 2.5}), "system 1: metric nDCG@10 is 2.5, outside its values (from 0 to 1)"),
        (_baseline({"nDCG@10": -1}), "system 1: metric nDCG@10 is -1, outside its values"),
        (_baseline({"NumRet": -3}), "system 1: metric NumRet is -3, outside its values (a count of at least 0)"),
        (_baseline({"bogus@3": 0.5}), "system 1: unknown metric 'bogus@3'"),
        (_baseline({"ndcg@10": 0.5}), "system 1: metric 'ndcg@10' is written nDCG@10"),
        (_baseline({"nDCG@10": 0.5}, metrics=["P@0"]), "metrics: metric 'P@0': cutoff must be"),
        (_baseline({"nDCG@10": 0.5}, metrics="nDCG@10"), "'metrics' must be a list"),
        ({**_baseline({"nDCG@10": 0.5}), "schema": "rag-eval/baseline/99"}, "schema 'rag-eval/baseline/99' is not"),
    ],
)
def test_a_baseline_with_values_or_names_the_gate_cannot_hold_is_one_error_line_naming_it(
    baseline: dict, says: str, tmp_path: Path
) -> None:
    path = tmp_path / "base.json"
    path.write_text(json.dumps(baseline), encoding="utf-8")
    outcome = invoke("compare", "evidence-mini", "-t", "bigram", "--against", str(path), "-o", str(tmp_path / "x"))
    assert one_error(outcome, alone=True).startswith(f"error: {path}: {says}")
    assert not (tmp_path / "x").exists()


def test_a_count_over_1_is_a_valid_baseline_value_and_the_gate_holds_quality_only(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    path.write_text(json.dumps(_baseline({"NumRet": 57.0, "nDCG@10": 0.5})), encoding="utf-8")
    baseline = load_baseline(path)
    report = _baseline({"NumRet": 12.0, "nDCG@10": 0.5})
    result = check(report, baseline)
    assert result.compared == 1 and not result.regressions and not result.improvements


# --- 4. tune space and --systems files -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("space", "says"),
    [
        ('tokenizers = ["bigram"]\nfusion = ["bogus"]', "fusion: unknown fusion method 'bogus'"),
        ('tokenizers = ["bigram", "unigram"]\nfusion = ["bogus"]', "fusion: unknown fusion method 'bogus'"),
        ('tokenizers = ["bigram"]\nfusion = ["rrf"]', "fusion: a fusion combines two tokenizers"),
        ('tokenizers = ["bigram"]\nprocessing = ["bogus=1"]', "processing: unknown option 'bogus'"),
        ('tokenizers = ["bogus"]', "tokenizers: unknown tokenizer 'bogus'"),
        ('tokenizers = ["bigram"]\nengines = ["bogus"]', "engines: unknown engine 'bogus'"),
        ('tokenizers = ["trigram", "unigram"]\nhybrid_sizes = [2]', "hybrid_sizes: a hybrid of 2 needs 2"),
        ('tokenizers = ["bigram+unigram", "bigram"]\nhybrid_sizes = [2]', "hybrid_sizes: a hybrid of 2 needs 2"),
    ],
)
def test_every_value_of_a_space_file_is_checked_at_load_naming_file_and_key(
    space: str, says: str, tmp_path: Path
) -> None:
    path = tmp_path / "space.toml"
    path.write_text(space, encoding="utf-8")
    with pytest.raises(RagEvalError) as caught:
        load_space(path)
    assert str(caught.value).startswith(f"{path}: {says}"), caught.value
    assert one_error(
        invoke("tune", "evidence-mini", "--space", str(path), "-o", str(tmp_path / "t")), alone=True
    ).startswith(f"error: {path}: {says}")
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("tokenizer", "bogus", "unknown tokenizer 'bogus'"),
        ("builder", "bogus", "unknown builder 'bogus'"),
        ("mode", "bogus", "unknown query mode 'bogus'"),
        ("query", "bogus=1", "unknown option 'bogus'"),
        ("engine", "bogus", "unknown engine 'bogus'"),
    ],
)
def test_a_systems_file_error_names_the_file_and_the_table(key: str, value: str, says: str, tmp_path: Path) -> None:
    path = tmp_path / "systems.toml"
    table = {"tokenizer": "bigram", key: value}
    path.write_text("[[system]]\n" + "".join(f'{k} = "{v}"\n' for k, v in table.items()), encoding="utf-8")
    with pytest.raises(RagEvalError) as caught:
        load_systems_toml(path)
    assert str(caught.value).startswith(f"{path}: [[system]] number 1: {key}: {says}"), caught.value
    outcome = invoke("compare", "evidence-mini", "--systems", str(path), "-o", str(tmp_path / "x"))
    assert one_error(outcome, alone=True).startswith(f"error: {path}: [[system]] number 1: {key}: {says}")


def test_the_report_page_marks_no_best_value_of_a_count() -> None:
    """report.md and report.html bolded the highest NumRet as the best, as if returning more documents were better."""
    from helpers.compare_calls import compare

    from rag_eval.eval.compare.runner import System
    from rag_eval.eval.datasets.formats import load_dataset
    from rag_eval.eval.reporting.page import page_data

    systems = [System("bigram", "", ""), System("unigram", "", "")]
    report, _runs = compare(load_dataset("handbook"), systems, metrics=["nDCG@10", "NumRet"])
    assert report["systems"][0]["metrics"]["NumRet"] != report["systems"][1]["metrics"]["NumRet"]
    rows = page_data(report)["quality"]["rows"]
    assert not any(row["cells"][1]["best"] for row in rows)
    assert any(row["cells"][0]["best"] for row in rows)  # nDCG@10 still marks its best
