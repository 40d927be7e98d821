"""rag-eval tune over several collections: one system for all, its held-back evidence per collection, and the
leave-one-collection-out table; the objectives; bad inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import invoke, one_error

from rag_eval.eval.compare.runner import System
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.eval.datasets.split import DEV_FRACTION, split_ids
from rag_eval.eval.reporting.model import SystemResult
from rag_eval.eval.tuning.collections import AS_GOOD, OBJECTIVES, _objective, tune_collections
from rag_eval.eval.tuning.search import Measured
from rag_eval.eval.tuning.space import Candidate

SPACE = """
tokenizers = ["bigram", "unigram"]
hybrid_sizes = [2]
weights = [1]
processing = ["", "stopwords=zh"]
"""


def _beir(folder: Path, data: Any, keep: list[str], grades: dict[str, dict[str, int]] | None = None) -> Path:
    """A BEIR folder of ``data``'s corpus and the queries ``keep`` (their qrels, or ``grades``)."""
    folder.mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for passage in data.corpus.values():
            out.write(json.dumps({"_id": passage.id, "title": passage.title, "text": passage.text}, ensure_ascii=False))
            out.write("\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as out:
        for q in keep:
            out.write(json.dumps({"_id": q, "text": data.queries[q].text}, ensure_ascii=False) + "\n")
    (folder / "qrels").mkdir()
    qrels = grades if grades is not None else {q: data.qrels[q] for q in keep if q in data.qrels}
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{g}" for q, docs in qrels.items() for d, g in docs.items()]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """handbook, evidence-mini and a third collection (half of handbook's questions as a BEIR folder), tuned."""
    root = tmp_path_factory.mktemp("across")
    space = root / "space.toml"
    space.write_text(SPACE, encoding="utf-8")
    handbook = load_dataset("handbook")
    half = [q for i, q in enumerate(handbook.queries) if i % 2 == 0]
    third = _beir(root / "hb-half", handbook, half)
    refs = ["handbook", "evidence-mini", str(third)]
    result = tune_collections(refs, output=root / "out", space_file=space, budget=3, repeat=1)
    return {"root": root, "space": space, "refs": refs, "result": result}


def test_it_chooses_one_system_and_leaves_each_collection_out(three: dict[str, Any]) -> None:
    report = three["result"].report
    ids = [c["id"] for c in report["collections"]]
    assert report["schema"] == "rag-eval/tune-collections/1" and len(ids) == 3
    assert [h["collection"] for h in report["held_back"]] == ids
    assert [h["collection"] for h in report["leave_one_out"]] == ids
    for fold in report["leave_one_out"]:
        assert fold["collection"] not in fold["chosen_on"] and len(fold["chosen_on"]) == 2
        assert fold["as_good"] == (fold["delta"] >= -AS_GOOD)
        assert fold["significantly_better"] == (fold["p_holm"] < 0.05 and fold["delta"] > 0)
    # The held-back figures are from each collection's own held-back part, the size a tune of it alone holds back.
    for collection, item in zip(report["collections"], report["held_back"], strict=True):
        assert item["judged_queries"] <= collection["test_queries"]
    text = (three["root"] / "out" / "report.md").read_text(encoding="utf-8")
    assert "leave one collection out" in text and report["recommendation"] in text.replace("\\|", "|")
    assert three["result"].paragraph.startswith("Chosen on the dev queries of 3 collections")


def test_a_fold_chooses_what_a_tune_of_the_other_collections_alone_chooses(
    three: dict[str, Any], tmp_path: Path
) -> None:
    """Evaluations are shared between folds; that must not change any fold's choice."""
    report = three["result"].report
    left = report["leave_one_out"][1]  # evidence-mini left out
    others = [ref for ref, c in zip(three["refs"], report["collections"], strict=True) if c["id"] != left["collection"]]
    alone = tune_collections(others, output=tmp_path / "o", space_file=three["space"], budget=3, repeat=1)
    assert alone.report["recommendation"] == left["candidate"]
    assert alone.report["objective_on_dev"] == left["objective_on_dev"]


def test_compare_on_each_collection_evaluates_its_held_back_queries(three: dict[str, Any], tmp_path: Path) -> None:
    """recommendation.toml records every collection's split; compare picks the one of the data it is given."""
    recommendation = three["root"] / "out" / "recommendation.toml"
    report = three["result"].report
    for ref, collection, held in zip(three["refs"], report["collections"], report["held_back"], strict=True):
        out = tmp_path / collection["id"].replace("/", "_")
        result = invoke("compare", ref, "--systems", str(recommendation), "--repeat", "1", "-o", str(out))
        assert result.exit_code == 0, result.output
        compared = json.loads((out / "report.json").read_text(encoding="utf-8"))
        data = load_dataset(ref)
        _dev, test = split_ids(list(data.queries), DEV_FRACTION)
        assert compared["dataset"]["stats"]["queries"] == len(test) and compared["tuned_split"]["same_data"]
        row = compared["systems"][0]
        assert round(row["metrics"]["nDCG@10"], 4) == held["nDCG@10"]


def _measured(quality: float) -> Measured:
    return Measured(SystemResult("x", metrics={"nDCG@10": quality}), {})


def test_the_objectives_weigh_each_collection_by_its_gain_over_its_own_best_single() -> None:
    a, b = Candidate("a", System("bigram", "", "")), Candidate("b", System("unigram", "", ""))
    hybrid = Candidate("h", System("bigram+unigram", "", ""))
    rows = {
        "one": {"a": _measured(0.90), "b": _measured(0.80), "h": _measured(0.95)},  # h +0.05 over a
        "two": {"a": _measured(0.30), "b": _measured(0.50), "h": _measured(0.48)},  # h -0.02 under b
    }
    mean, best = _objective(rows, [a, b, hybrid], "nDCG@10", "mean")
    worst, _ = _objective(rows, [a, b, hybrid], "nDCG@10", "worst")
    assert best == {"one": "a", "two": "b"}
    assert mean["h"] == pytest.approx(0.015) and worst["h"] == pytest.approx(-0.02)
    assert mean["a"] == pytest.approx(-0.1) and worst["b"] == pytest.approx(-0.1)
    assert set(OBJECTIVES) == {"mean", "worst"}


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["handbook", "handbook"], ["the same data as handbook"]),
        (["handbook", "--objective", "worst"], ["--objective applies to tuning across several collections"]),
        (["handbook", "--no-leave-one-out"], ["--no-leave-one-out applies to tuning across several"]),
        (["handbook", "evidence-mini", "--eval-on", "evidence-mini"], ["--eval-on applies to one dataset"]),
        (["handbook", "evidence-mini", "--budget", "0"], ["--budget must be at least 1"]),
    ],
)
def test_bad_collections_and_options_are_one_error(tmp_path: Path, extra: list[str], words: list[str]) -> None:
    result = invoke("tune", *extra, "-o", str(tmp_path / "out"))
    line = one_error(result)
    assert all(word in line for word in words), line
    assert not (tmp_path / "out").exists()


def test_an_unknown_objective_is_a_usage_error(tmp_path: Path) -> None:
    line = one_error(invoke("tune", "handbook", "evidence-mini", "--objective", "best", "-o", str(tmp_path)), code=2)
    assert "'best' is not one of 'mean', 'worst'" in line, line


def test_a_collection_without_judged_relevant_queries_is_one_error(tmp_path: Path) -> None:
    data = load_dataset("evidence-mini")
    keep = list(data.queries)
    unjudged = _beir(tmp_path / "unjudged", data, keep, grades={q: {d: 0 for d in data.qrels[q]} for q in data.qrels})
    result = invoke("tune", "handbook", str(unjudged), "-o", str(tmp_path / "out"))
    line = one_error(result)
    assert "has no judged query with a relevant document" in line, line
    assert not (tmp_path / "out").exists()


def test_json_prints_the_summary_of_a_tune_across_collections(three: dict[str, Any], tmp_path: Path) -> None:
    result = invoke(
        "tune",
        *three["refs"][:2],
        "--space",
        str(three["space"]),
        "--budget",
        "3",
        "--repeat",
        "1",
        "--json",
        "-o",
        str(tmp_path / "out"),
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert {"recommendation", "objective", "held_back", "leave_one_out", "paragraph"} <= set(summary)
    assert [h["collection"] for h in summary["leave_one_out"]] == ["handbook", "evidence-mini"]
