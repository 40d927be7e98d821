"""rag-eval compare and evaluate: report contents, caching, runs, significance, atomic output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.compare_calls import compare
from hypothesis import given
from hypothesis import strategies as st

from rag_eval.builders.keys import unit_of
from rag_eval.cli import cli
from rag_eval.eval.compare.runner import System
from rag_eval.eval.compare.statistics import significance
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.eval.datasets.records import Qrel
from rag_eval.eval.datasets.trec import read_run
from rag_eval.eval.metrics.measures import RankedDoc, evaluate
from rag_eval.eval.reporting.report import write_outputs
from rag_eval.files.runs import strict_run

SYSTEMS = [System("bigram", "", ""), System("unicode61", "", ""), System("trigram", "", "")]


@pytest.fixture(scope="module")
def evidence():
    return load_dataset("evidence-mini")


@pytest.fixture(scope="module")
def result(evidence):
    return compare(evidence, SYSTEMS)


def test_report_has_everything(result, evidence) -> None:
    report, runs = result
    assert report["dataset"]["id"] == "evidence-mini" and report["dataset"]["checksum"] == evidence.checksum()
    assert report["dataset"]["as_of"] == "2026-10-07"
    assert report["metrics"] == ["nDCG@10", "R@10", "R@100", "RR@10", "P@1", "MAP@100"]
    assert report["reference"] == "bigram | lines | and"
    assert report["judged_queries"] == 19
    for key in ("rag_eval", "python", "sqlite", "packages", "machine", "commit", "created_utc"):
        assert key in report["environment"]
    rows = {row["name"].split(" | ")[0]: row for row in report["systems"]}
    assert set(rows) == {"bigram", "unicode61", "trigram"}
    assert rows["bigram"]["tokenizer"].startswith("bigram:t2s=false [unicode=")
    assert rows["bigram"]["no_answer_queries"] == 5 and rows["bigram"]["no_answer_false_hit_rate"] == 0.0
    assert set(rows["bigram"]["latency_ms"]["search"]) == {"min", "median", "mean", "p95", "p99", "max"}
    assert "significance" not in rows["bigram"]
    trigram = rows["trigram"]["significance"]["nDCG@10"]
    assert trigram["delta"] < 0 and trigram["significant"] and trigram["p_holm"] >= trigram["p"]
    assert trigram["wins"] + trigram["ties"] + trigram["losses"] == 19
    assert rows["bigram"]["by_kind"]["compact"]["queries"] == 2
    assert rows["unicode61"]["by_kind"]["compact"]["nDCG@10"] == 0.0 < rows["bigram"]["by_kind"]["compact"]["nDCG@10"]
    assert len(runs) == 3


def test_runs_are_strictly_ordered(result) -> None:
    _, runs = result
    for docs in runs.values():
        by_query: dict[str, list] = {}
        for doc in docs:
            by_query.setdefault(doc.query_id, []).append(doc)
        for ranked in by_query.values():
            assert [d.rank for d in ranked] == list(range(1, len(ranked) + 1))
            assert all(a.score > b.score for a, b in zip(ranked, ranked[1:], strict=False))


def test_strict_run_keeps_best_rank_of_a_unit() -> None:
    docs = strict_run("q", [("a.md#x", -2.0), ("a.md#x", -1.5), ("b.md#y", -1.5), ("c.md#z", -1.5)])
    assert [(d.doc_id, d.rank) for d in docs] == [("a.md#x", 1), ("b.md#y", 2), ("c.md#z", 3)]
    assert (
        docs[0].score == 2.0 and docs[1].score == 1.5 and docs[2].score == pytest.approx(1.5 - 1.5 * 2**-18, abs=1e-6)
    )
    assert unit_of("guide/a.md#备份~3") == "guide/a.md#备份" and unit_of("p~2") == "p~2"


def test_outputs_and_evaluate_match(result, tmp_path: Path) -> None:
    report, runs = result
    out = write_outputs(report, runs, tmp_path / "report")
    assert sorted(p.name for p in out.iterdir()) == ["per_query.tsv", "report.html", "report.json", "report.md", "runs"]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<svg" in html and "<script" not in html and "http" not in html.replace("http://www.w3.org/2000/svg", "")
    run_file = out / "runs" / "bigram_lines_and.run"
    qrels = load_dataset("evidence-mini").meta["path"] + "/qrels/test.tsv"
    evaluated = CliRunner().invoke(cli, ["evaluate", str(run_file), qrels, "--json"])
    assert evaluated.exit_code == 0, evaluated.output
    mean = json.loads(evaluated.output)["all"]
    bigram = next(row for row in report["systems"] if row["name"].startswith("bigram"))
    assert mean["nDCG@10"] == pytest.approx(bigram["metrics"]["nDCG@10"], abs=1e-4)
    assert len(read_run(run_file)) == len(runs["bigram | lines | and"])


def test_interrupted_write_keeps_the_previous_report(result, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report, runs = result
    out = write_outputs(report, runs, tmp_path / "report")
    before = (out / "report.json").read_text(encoding="utf-8")
    import rag_eval.eval.reporting.report as module

    def interrupted(_report):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "render_html", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_outputs({**report, "judged_queries": 0}, runs, tmp_path / "report")
    assert (out / "report.json").read_text(encoding="utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


def test_indexes_are_cached_by_corpus_and_spec(evidence, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_EVAL_CACHE", str(tmp_path / "fresh-cache"))
    first, _ = compare(evidence, [System("unigram", "", "")])
    second, _ = compare(evidence, [System("unigram", "", ""), System("jieba", "", "")])
    assert first["systems"][0]["build"]["cached"] is False
    cached = {row["name"].split(" | ")[0]: row["build"]["cached"] for row in second["systems"]}
    assert cached == {"unigram": True, "jieba": False}


def test_compare_command_no_text_systems_file_and_outside_run(tmp_path: Path, result) -> None:
    report, runs = result
    first = write_outputs(report, runs, tmp_path / "first")
    systems = tmp_path / "systems.toml"
    systems.write_text(
        '[[system]]\ntokenizer = "bigram"\n\n[[system]]\ntokenizer = "jieba"\nmode = "or"\n', encoding="utf-8"
    )
    out = tmp_path / "out"
    outcome = CliRunner().invoke(
        cli,
        [
            "compare",
            "evidence-mini",
            "--systems",
            str(systems),
            "--no-text",
            "--run",
            f"prior={first / 'runs' / 'unicode61_lines_and.run'}",
            "-o",
            str(out),
        ],
    )
    assert outcome.exit_code == 0, outcome.output + outcome.stderr
    written = json.loads((out / "report.json").read_text(encoding="utf-8"))
    names = [row["name"] for row in written["systems"]]
    assert names == ["bigram | lines | and", "jieba | lines | or", "prior"]
    assert all(
        "text" not in item
        for row in written["systems"]
        for item in row.get("largest_gains", []) + row.get("largest_losses", [])
    )
    unicode61 = next(row for row in report["systems"] if row["name"].startswith("unicode61"))
    assert written["systems"][2]["metrics"] == unicode61["metrics"]


def test_systems_named_by_t_join_a_systems_file_and_a_repeat_is_refused(tmp_path: Path) -> None:
    systems = tmp_path / "systems.toml"
    systems.write_text('[[system]]\ntokenizer = "unigram^2+bigram"\nquery = "query:stopwords=zh"\n', encoding="utf-8")
    base = ["compare", "evidence-mini", "--systems", str(systems), "--json"]
    joined = CliRunner().invoke(cli, [*base, "-t", "bigram", "--processing", "max_df=0.5", "-o", str(tmp_path / "a")])
    assert joined.exit_code == 0, joined.output + joined.stderr
    names = [row["name"] for row in json.loads((tmp_path / "a" / "report.json").read_text(encoding="utf-8"))["systems"]]
    # the file's system keeps its own processing; --processing applies to -t's
    assert names == ["unigram^2+bigram | lines | and | query:stopwords=zh", "bigram | lines | and | query:max_df=0.5"]
    repeated = CliRunner().invoke(
        cli, [*base, "-t", "unigram^2+bigram", "--processing", "stopwords=zh", "-o", str(tmp_path / "b")]
    )
    assert repeated.exit_code == 1 and "is given twice" in repeated.stderr and not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["compare", "nope", "-o", "{tmp}/x"], "error: unknown dataset 'nope'"),
        (["compare", "evidence-mini", "-t", "nope", "-o", "{tmp}/x"], "error: unknown tokenizer 'nope'"),
        (
            ["compare", "evidence-mini", "-t", "bigram", "--metric", "nDCG@x", "-o", "{tmp}/x"],
            "error: metric 'nDCG@x': cutoff must be a whole number from 1 to 10000",
        ),
        (
            ["compare", "evidence-mini", "-t", "bigram", "--reference-system", "jieba", "-o", "{tmp}/x"],
            "error: reference system 'jieba' is not among the systems compared",
        ),
        (
            ["compare", "evidence-mini", "-t", "pkuseg", "-o", "{tmp}/x"],
            "error: the pkuseg default model is not installed",
        ),
    ],
)
def test_compare_errors(tmp_path: Path, args: list[str], message: str) -> None:
    outcome = CliRunner().invoke(cli, [a.replace("{tmp}", str(tmp_path)) for a in args])
    assert outcome.exit_code == 1
    assert outcome.stderr.splitlines()[0].startswith(message)
    assert not (tmp_path / "x").exists()


def test_compare_is_deterministic(evidence) -> None:
    def numbers(report):
        return [
            (row["name"], row["metrics"], row.get("significance"), row["by_kind"], row.get("ci95"))
            for row in report["systems"]
        ], report["per_query"]

    first, runs_a = compare(evidence, SYSTEMS[:2])
    second, runs_b = compare(evidence, SYSTEMS[:2])
    assert numbers(first) == numbers(second)
    assert runs_a == runs_b


def test_markdown_tables_keep_their_columns(result) -> None:
    """System names contain ' | ': unescaped, they split table rows into extra columns."""
    import re

    from rag_eval.eval.reporting.report import render_markdown

    table = [line for line in render_markdown(result[0]).splitlines() if line.startswith("| ")]
    quality = table[: 1 + len(result[0]["systems"])]
    widths = {len(re.split(r"(?<!\\)\|", line.strip().strip("|"))) for line in quality if not line.startswith("|---")}
    assert widths == {7}


def test_run_scores_stay_strictly_ordered_as_32_bit_floats() -> None:
    """trec_eval reads scores as floats: near-equal bm25 scores 1e-6 apart used to tie there and be
    re-ordered by document id (22 CMRC queries scored another ranking than rag-eval's)."""
    import numpy as np

    @given(st.lists(st.floats(min_value=-60, max_value=0, allow_nan=False), min_size=1, max_size=60))
    def check(scores: list[float]) -> None:
        hits = [(f"d{n}", score) for n, score in enumerate(sorted(scores))]
        written = np.array([doc.score for doc in strict_run("q", hits)], dtype=np.float32)
        assert all(written[:-1] > written[1:])

    check()
    ranked = strict_run("q", [("s00", -21.200778), ("s12", -21.200778), ("s08", -19.03)])
    assert np.float32(ranked[0].score) > np.float32(ranked[1].score)


def test_timed_questions_run_with_the_harness_records_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector's full passes over the run's own records must not land inside a timed question: every
    timed call sees them frozen (a fresh freeze every FREEZE_EVERY questions), and the freeze is undone after
    the run, also when it fails."""
    import gc

    from rag_eval.eval.compare import runner, timing
    from rag_eval.search.searcher import SearchSearcher

    monkeypatch.setattr(runner, "FREEZE_EVERY", 3)
    dataset = load_dataset("evidence-mini")
    frozen: list[int] = []
    real = SearchSearcher.__call__

    def timed(self: SearchSearcher, text: str):  # type: ignore[no-untyped-def]
        frozen.append(gc.get_freeze_count())
        return real(self, text)

    monkeypatch.setattr(SearchSearcher, "__call__", timed)
    run = timing.run_system(dataset, System("bigram", "", "", engine="fts5"))
    timed_counts = frozen[runner.WARMUP :]
    assert len(timed_counts) == len(dataset.queries) == len(run.search_seconds) > 6
    assert frozen[: runner.WARMUP] == [0] * runner.WARMUP and all(count > 0 for count in timed_counts)
    refrozen = sum(later > earlier for earlier, later in zip(timed_counts, timed_counts[1:], strict=False))
    assert refrozen >= len(timed_counts) // 3 - 1  # the records written since were frozen too
    assert gc.get_freeze_count() == 0

    def failing(self: SearchSearcher, text: str):  # type: ignore[no-untyped-def]
        if len(frozen) > runner.WARMUP + 4:
            raise RuntimeError("a question failed")
        frozen.append(gc.get_freeze_count())
        return real(self, text)

    frozen.clear()
    monkeypatch.setattr(SearchSearcher, "__call__", failing)
    with pytest.raises(RuntimeError, match="a question failed"):
        timing.run_system(dataset, System("bigram", "", "", engine="fts5"))
    assert gc.get_freeze_count() == 0


def test_a_knowledge_base_without_questions_is_told_how_to_get_some(tmp_path: Path) -> None:
    from rag_eval.eval.datasets.shipped import corpus_dir

    for command in (
        ["compare", str(corpus_dir("handbook")), "-o", str(tmp_path / "x")],
        ["tune", str(corpus_dir("handbook")), "-o", str(tmp_path / "y")],
    ):
        result = CliRunner().invoke(cli, command)
        assert result.exit_code == 1 and "unknown dataset" in result.stderr, result.output
        assert "--queries FILE" in result.stderr and "queries synth" in result.stderr
    result = CliRunner().invoke(cli, ["compare", str(tmp_path / "missing"), "-o", str(tmp_path / "x")])
    assert result.exit_code == 1 and "queries synth" not in result.stderr


def test_compare_into_a_report_folder_says_it_replaced_the_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = CliRunner().invoke(cli, ["compare", "evidence-mini", "-t", "bigram", "-o", str(out)])
    assert first.exit_code == 0 and "replacing" not in first.stderr, first.output
    second = CliRunner().invoke(cli, ["compare", "evidence-mini", "-t", "unigram", "-o", str(out)])
    assert second.exit_code == 0 and "and 1 run file (replacing the report that was there)" in second.stderr


@pytest.mark.parametrize("name", ["a\tb", "a\nb", " "])
def test_a_run_name_that_would_split_the_reports_is_refused(tmp_path: Path, name: str) -> None:
    run = tmp_path / "x.run"
    run.write_text("q1 Q0 d1 1 1.0 x\n", encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["compare", "evidence-mini", "-t", "bigram", "--run", f"{name}={run}", "-o", str(tmp_path / "o")]
    )
    assert result.exit_code == 1 and "control character" in result.stderr and not (tmp_path / "o").exists()


def test_the_report_says_when_its_significance_test_is_exact(tmp_path: Path) -> None:
    """evidence-mini's judged queries: fewer than log2(10000), so every sign vector is tried."""
    out = tmp_path / "o"
    result = CliRunner().invoke(cli, ["compare", "evidence-mini", "-t", "bigram", "-t", "unigram", "-o", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    n = report["judged_queries"]
    assert report["significance"]["exact"] == (2**n <= 10_000)
    if report["significance"]["exact"]:
        assert f"exact: all {2**n} sign vectors" in (out / "report.md").read_text(encoding="utf-8")
    else:
        assert "10000 random sign vectors" in (out / "report.md").read_text(encoding="utf-8")


def test_report_json_maps_each_system_to_its_run_file(tmp_path: Path) -> None:
    out = tmp_path / "o"
    result = CliRunner().invoke(cli, ["compare", "evidence-mini", "-t", "bigram", "-t", "unigram", "-o", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert set(report["run_file_of"]) == {row["name"] for row in report["systems"]}
    assert sorted(path.split("/")[1] for path in report["run_file_of"].values()) == report["run_files"]
    assert all((out / path).is_file() for path in report["run_file_of"].values())


def test_the_report_says_which_builds_came_from_the_cache_and_what_qps_is(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RAG_EVAL_CACHE", str(tmp_path / "cache"))
    for out in ("a", "b"):
        result = CliRunner().invoke(cli, ["compare", "evidence-mini", "-t", "bigram", "-o", str(tmp_path / out)])
        assert result.exit_code == 0, result.output
    first, second = ((tmp_path / out / "report.md").read_text(encoding="utf-8") for out in ("a", "b"))
    assert "QPS: queries answered one after another" in first and "reused from rag-eval's cache" not in first
    assert "reused from rag-eval's cache for `bigram`" in second
    assert "reused from rag-eval's cache for <code>bigram</code>" in (tmp_path / "b" / "report.html").read_text("utf-8")


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
