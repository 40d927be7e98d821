"""rag-eval tune: the space, successive halving, the dev front, held-back evidence, no leakage."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_eval.cli import cli
from rag_eval.errors import RagEvalError
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.eval.datasets.shipped import export_shipped
from rag_eval.eval.datasets.split import split_ids, subset
from rag_eval.eval.tuning.tune import candidates, load_space, search_space, tune

SMALL = """
tokenizers = ["bigram", "unigram", "jieba:mode=precise"]
hybrid_sizes = [2]
weights = [1]
processing = ["", "stopwords=zh"]
fusion = ["rrf"]
"""


@pytest.fixture(scope="module")
def small_space(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("space") / "space.toml"
    path.write_text(SMALL, encoding="utf-8")
    return path


def test_the_space_lists_singles_hybrids_processing_and_fusions(small_space: Path) -> None:
    pool = candidates(load_space(small_space))
    names = [c.name for c in pool]
    assert names[:2] == ["bigram", "bigram | query:stopwords=zh"]
    assert "bigram+unigram" in names and "unigram+jieba:mode=precise | query:stopwords=zh" in names
    assert "rrf(bigram, jieba:mode=precise)" in names
    assert len(pool) == 3 * 2 + 3 * 2 + 3  # singles x processing, pairs x processing, fusions of pairs
    assert [c.name for c in pool if c.single] == ["bigram", "unigram", "jieba:mode=precise"]
    default = candidates(load_space(None))
    assert len(default) > 50 and not any("trigram" in c.name for c in default)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tokenizers = []", "at least one tokenizer"),
        ('tokenizers = ["bigram"]\nextra = 1', "unknown keys extra"),
        ('tokenizers = ["bigram"]\nweights = ["x"]', "weights must be a list of"),
        ("tokenizers = [", "invalid TOML"),
    ],
)
def test_a_malformed_space_is_one_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "space.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RagEvalError, match=message):
        load_space(path)


def test_tune_recommends_from_dev_and_tests_on_held_back_queries(small_space: Path, tmp_path: Path) -> None:
    result = tune("evidence-mini", output=tmp_path / "tune", space_file=small_space, budget=4)
    report = json.loads((tmp_path / "tune" / "tune.json").read_text(encoding="utf-8"))
    assert report["schema"] == "rag-eval/tune/1" and report["recommendation"] == result.recommendation.name
    rounds = {t["round"] for t in report["trials"]}
    assert rounds == {1, 2}  # a larger space than the budget is halved
    finalists = [t for t in report["trials"] if t["round"] == 2]
    assert len(finalists) == 4 and {"bigram", "unigram", "jieba:mode=precise"} <= {t["candidate"] for t in finalists}
    assert report["front"][0] == report["recommendation"]
    svg = (tmp_path / "tune" / "pareto.svg").read_text(encoding="utf-8")
    assert svg.startswith("<svg") or "<svg" in svg[:500]
    assert report["chart"]["file"] == "pareto.svg" and "](pareto.svg)" in (tmp_path / "tune" / "report.md").read_text(
        encoding="utf-8"
    )
    assert report["test"]["best_single"] in {"bigram", "unigram", "jieba:mode=precise"}
    assert report["split"]["dev_queries"] + report["split"]["test_queries"] == 24
    recommendation = tomllib.loads((tmp_path / "tune" / "recommendation.toml").read_text(encoding="utf-8"))
    assert recommendation["system"] or recommendation["fusion"]
    split = report["split"]
    assert result.paragraph.startswith(f"Chosen on the {split['dev_queries']} dev queries (")
    assert f": {result.recommendation.name}, the best by nDCG@10 there" in result.paragraph
    assert f"Evidence on the {split['test_queries']} held-back queries" in result.paragraph
    compared = CliRunner().invoke(
        cli,
        [
            "compare",
            "evidence-mini",
            "--systems",
            str(tmp_path / "tune" / "recommendation.toml"),
            "--json",
            "-o",
            str(tmp_path / "check"),
        ],
    )
    assert compared.exit_code == 0, compared.stderr


def test_constraints_are_honoured(small_space: Path, tmp_path: Path) -> None:
    with pytest.raises(RagEvalError, match="no candidate meets the constraints"):
        tune("evidence-mini", output=tmp_path / "none", space_file=small_space, budget=3, max_index_mb=0.000001)
    loose = tune("evidence-mini", output=tmp_path / "loose", space_file=small_space, budget=3, max_index_mb=1000)
    assert all(t.feasible for t in loose.trials if t.round == 2)
    assert not (tmp_path / "none").exists()


def test_no_leakage_the_choice_never_depends_on_test_judgements(tmp_path: Path) -> None:
    """Removing every judgement of the test part changes nothing the dev search decides."""
    folder = export_shipped("handbook", tmp_path / "handbook")
    full = load_dataset(str(folder))
    dev_ids, test_ids = split_ids(list(full.queries), 0.5)
    stripped = tmp_path / "stripped"
    shutil.copytree(folder, stripped)
    qrels = (folder / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    test_set = set(test_ids)
    kept = [line for line in qrels if line.split("\t")[0] not in test_set]
    assert len(kept) < len(qrels)
    (stripped / "qrels" / "test.tsv").write_text("\n".join(kept) + "\n", encoding="utf-8")
    space = tmp_path / "space.toml"
    space.write_text(
        'tokenizers = ["bigram", "unigram"]\nhybrid_sizes = [2]\nweights = [1]\nprocessing = [""]\n', encoding="utf-8"
    )
    pool = candidates(load_space(space))
    choices = []
    for dataset in (full, load_dataset(str(stripped))):
        found = search_space(subset(dataset, dev_ids, "dev"), pool, budget=3)
        # the front's other members depend on measured latency too, which varies run to run
        choices.append((found.front[0].candidate.name, [(t.candidate.name, t.round, t.quality) for t in found.trials]))
    assert choices[0] == choices[1]


def test_the_cli_writes_a_folder_only_where_allowed(small_space: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep", encoding="utf-8")
    refused = runner.invoke(cli, ["tune", "evidence-mini", "--space", str(small_space), "-o", str(tmp_path / "mine")])
    assert refused.exit_code == 1 and "refusing to replace it" in refused.stderr
    assert (tmp_path / "mine" / "notes.txt").read_text(encoding="utf-8") == "keep"
    bad = runner.invoke(cli, ["tune", "evidence-mini", "--budget", "0", "-o", str(tmp_path / "t")])
    assert bad.exit_code == 1 and "--budget must be at least 1" in bad.stderr
    done = runner.invoke(
        cli,
        ["tune", "evidence-mini", "--space", str(small_space), "--budget", "3", "--json", "-o", str(tmp_path / "t")],
    )
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["recommendation"]
    again = runner.invoke(
        cli, ["tune", "evidence-mini", "--space", str(small_space), "--budget", "3", "-o", str(tmp_path / "t")]
    )
    assert again.exit_code == 0, again.stderr  # its own folder is replaced


def test_the_last_round_keeps_the_first_rounds_results_and_equals_a_run_on_all_dev_queries(
    small_space: Path,
) -> None:
    """Finalists run only on the dev queries round 1 did not see; merged, their quality is exactly what a
    run on every dev query gives (a judged query with no result counts 0 in both)."""
    from rag_eval.eval.tuning.search import _evaluate

    data = load_dataset("handbook")
    dev_ids, _test = split_ids(list(data.queries), 0.5)
    dev = subset(data, dev_ids, "dev")
    pool = candidates(load_space(small_space))
    found = search_space(dev, pool, budget=4)
    final = [t for t in found.trials if t.round == 2]
    assert len(final) == 4 and all(t.queries == len(dev.queries) for t in final)
    direct = _evaluate(dev, [t.candidate for t in final], "nDCG@10", None, 2)
    for trial in final:
        assert trial.quality == pytest.approx(direct[trial.candidate.name].row.metrics["nDCG@10"], abs=5e-5)
        assert trial.p95_ms is not None and trial.p95_ms > 0


def reworded(folder: Path) -> Path:
    """The exported set with every question asked in other words (a suffix): the same judgements, new questions."""
    lines = (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    for row in rows:
        row["text"] += " 请说明"
    (folder / "queries.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return folder


def test_eval_on_tests_the_dev_choice_on_every_judged_query_of_another_dataset(
    small_space: Path, tmp_path: Path
) -> None:
    """--eval-on: the same dev search and choice; the evidence comes from all of the other set's queries when
    none of them asks a dev question again."""
    other = reworded(export_shipped("evidence-mini", tmp_path / "other"))  # BEIR passages: other builder, units
    held = load_dataset(str(other))
    judged = {q for q in held.queries if any(g > 0 for g in held.qrels.get(q, {}).values())}
    own = tune("evidence-mini", output=tmp_path / "own", space_file=small_space, budget=4)
    moved = tune("evidence-mini", output=tmp_path / "moved", space_file=small_space, budget=4, eval_on=str(other))
    assert moved.recommendation == own.recommendation
    assert [(t.candidate.name, t.round, t.quality) for t in moved.trials] == [
        (t.candidate.name, t.round, t.quality) for t in own.trials
    ]
    report = json.loads((tmp_path / "moved" / "tune.json").read_text(encoding="utf-8"))
    assert report["evaluated_on"] == held.id != report["dataset"]["id"]
    assert report["left_out_dev_queries"] == 0
    assert report["test"]["judged_queries"] == len(judged) > report["split"]["test_queries"]
    assert f"queries of {held.id}" in moved.paragraph and "held-back" not in moved.paragraph
    assert "held-back queries" in own.paragraph
