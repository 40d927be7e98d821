"""Engines in compare: fts5 and impact side by side (identical runs), bm25s as a peer over the same tokens,
engine specs in -t/--engine, systems files and tune spaces, and one error line for what cannot run."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.compare_calls import compare

from rag_eval.builders import get_builder
from rag_eval.cli import cli
from rag_eval.engines import base as engines_module
from rag_eval.engines import impact as impact_module
from rag_eval.engines.base import engine_names, get_engine, written_engine
from rag_eval.errors import RagEvalError
from rag_eval.eval.compare.compare import load_systems_toml
from rag_eval.eval.compare.runner import System, _cached_report, cached_build, corpus_source, index_path
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.eval.datasets.split import subset
from rag_eval.eval.reporting.report import render_markdown, summary, write_outputs
from rag_eval.eval.tuning.tune import Candidate, candidates, load_space, recommendation_toml
from rag_eval.index.store import Index
from rag_eval.tokenizers import get_tokenizer

bm25s = pytest.importorskip("bm25s", reason="bm25s is not installed (pip install 'rag-eval[bm25s]')")


@pytest.fixture(scope="module")
def handbook_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """unigram on the handbook's first 80 questions (seconds, not minutes) under the three engines."""
    handbook = load_dataset("handbook")
    data = subset(handbook, list(handbook.queries)[:80], "first80")
    systems = [System("unigram", "", "", engine=engine) for engine in ("fts5", "impact", "bm25s")]
    report, runs = compare(data, systems, metrics=["nDCG@10"])
    folder = write_outputs(report, runs, tmp_path_factory.mktemp("engines") / "report")
    return json.loads((folder / "report.json").read_text(encoding="utf-8")) | {"_folder": str(folder)}


def test_fts5_and_impact_give_identical_runs_and_per_query_metrics(handbook_report: dict) -> None:
    rows = {row["engine"]["name"]: row for row in handbook_report["systems"]}
    assert set(rows) == {"fts5", "impact", "bm25s"}
    assert rows["impact"]["name"] == "unigram | sections | or"  # the default engine: the name baselines know
    assert rows["fts5"]["name"] == "unigram | sections | or | engine=fts5"
    per_query = handbook_report["per_query"]
    assert per_query[rows["fts5"]["name"]] == per_query[rows["impact"]["name"]]
    assert len(per_query[rows["fts5"]["name"]]) == handbook_report["judged_queries"] > 0
    (agreement,) = handbook_report["engines"]
    assert agreement["engines"] == ["fts5", "impact"] and agreement["queries_differing"] == 0
    assert agreement["same_metrics"] is True and agreement["queries_with_hits"] > 0
    assert rows["impact"]["engine"]["fts5_fallbacks"] == 0 and rows["impact"]["engine"]["postings_bytes"] > 0
    assert rows["impact"]["engine"]["postings_preloaded"] is True  # timed warm: read whole while prepared
    # the impact build is its own index (with postings), larger than the plain one
    assert rows["impact"]["build"]["index_bytes"] > rows["fts5"]["build"]["index_bytes"]
    runs = Path(handbook_report["_folder"]) / "runs"
    lines = {path.name: path.read_text(encoding="utf-8").split() for path in runs.glob("*.run")}
    fts5_run, impact_run = (lines[n] for n in sorted(lines) if "bm25s" not in n)
    assert fts5_run[::6] == impact_run[::6] and fts5_run[2::6] == impact_run[2::6]  # ids and ranks


def test_a_hybrid_runs_identically_under_fts5_and_impact(tmp_path: Path) -> None:
    handbook = load_dataset("handbook")
    data = subset(handbook, list(handbook.queries)[:40], "first40")
    systems = [System("unigram^2+bigram", "", "", engine=engine) for engine in ("fts5", "impact")]
    report, runs = compare(data, systems, metrics=["nDCG@10"])
    folder = write_outputs(report, runs, tmp_path / "report")
    written = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    (agreement,) = written["engines"]
    assert agreement["queries_differing"] == 0 and agreement["same_metrics"] is True
    assert agreement["queries_with_hits"] > 0
    row = next(row for row in written["systems"] if row["engine"]["name"] == "impact")
    assert row["engine"]["fts5_fallbacks"] == 0 and row["engine"]["postings_bytes"] > 0


def test_the_default_engine_ranks_every_mode_and_counts_what_fts5_answered(tmp_path: Path) -> None:
    """A system naming no engine is ranked by impact; phrase queries, which postings cannot answer, are FTS5's
    (counted), with the run FTS5's statement gives."""
    handbook = load_dataset("handbook")
    data = subset(handbook, list(handbook.queries)[:30], "first30")
    systems = [System("bigram", "", "phrase"), System("bigram", "", "phrase", engine="fts5")]
    report, runs = compare(data, systems, metrics=["nDCG@10"])
    default, reference = report["systems"]
    assert default["name"] == "bigram | sections | phrase" and default["engine"]["name"] == "impact"
    assert default["engine"]["fts5_fallbacks"] == 30 and reference["name"].endswith("| engine=fts5")
    (agreement,) = report["engines"]
    assert agreement["queries_differing"] == 0 and agreement["same_metrics"] is True
    assert agreement["queries_with_hits"] > 0


def test_bm25s_row_has_quality_speed_memory_and_index_size(handbook_report: dict) -> None:
    row = next(row for row in handbook_report["systems"] if row["engine"]["name"] == "bm25s")
    engine = row["engine"]
    assert row["name"] == "unigram | sections | or | engine=bm25s"
    assert engine["spec"] == f"bm25s:b=0.75,k1=1.2,method=lucene [bm25s={bm25s.__version__}]"
    assert engine["exact"] is False and engine["variant"].startswith("bm25s lucene, k1 1.2, b 0.75")
    assert 0 < row["metrics"]["nDCG@10"] <= 1 and row["qps"] > 0
    assert engine["arrays_bytes"] > 0 and engine["saved_bytes"] > 0 and engine["terms"] > 0
    assert set(engine["rank_ms"]) == {"min", "median", "mean", "p95", "p99", "max"}
    fts5 = next(r for r in handbook_report["systems"] if r["engine"]["name"] == "fts5")
    assert row["tokens_per_passage"] == fts5["tokens_per_passage"]  # the same tokens
    markdown = render_markdown(handbook_report)
    assert "## Engines" in markdown and "bm25s lucene, k1 1.2, b 0.75" in markdown
    assert "| `unigram` | fts5 and impact |" in markdown
    printed = summary(handbook_report, Path(handbook_report["_folder"]))
    specs = {system["engine"].split(" ")[0] for system in printed["systems"]}
    assert specs == {"fts5", "impact", "bm25s:b=0.75,k1=1.2,method=lucene"}


@pytest.mark.parametrize("spec", ["unicode61", "bigram"])
def test_bm25s_indexes_exactly_the_tokens_of_each_chunk(spec: str) -> None:
    """Native (FTS5's tokens, as its Python mirror gives them) and Python strategies alike."""
    from rag_eval.engines.bm25s import index_tokens

    dataset = load_dataset("evidence-mini")
    source, builder_name = corpus_source(dataset)
    tokenizer = get_tokenizer(spec)
    path, _report = cached_build(source, get_builder(builder_name), tokenizer)
    with Index.open(path) as index:
        rows, documents, vocabulary = index_tokens(index)
        names = {number: term for term, number in vocabulary.items()}
        chunks = dict(index.db.execute("SELECT id, text FROM chunks").fetchall())
        titles = dict(index.db.execute("SELECT id, title FROM chunks").fetchall())
    assert len(rows) == len(chunks) > 0
    indexed_title = get_builder(builder_name).index_title
    for rowid, document in zip(rows, documents, strict=True):
        expected = Counter(tokenizer.terms(chunks[rowid]))
        if indexed_title:
            expected += Counter(tokenizer.terms(titles[rowid] or ""))
        assert Counter(names[number] for number in document) == expected


def test_bm25s_honours_as_of_and_ranks_by_its_own_scores() -> None:
    dataset = load_dataset("evidence-mini")
    report, runs = compare(dataset, [System("bigram", "", "or", engine="bm25s"), System("bigram", "", "or")])
    bm25s_name, fts5_name = (row["name"] for row in report["systems"])
    assert bm25s_name.endswith("| engine=bm25s")
    assert {doc.doc_id for doc in runs[bm25s_name]} <= {doc.doc_id for doc in runs[fts5_name]}  # same filter
    assert report["engines"] == []  # one exact engine only: nothing to compare


def test_an_index_without_impacts_is_never_reused_for_impact() -> None:
    dataset = load_dataset("evidence-mini")
    source, builder_name = corpus_source(dataset)
    builder, tokenizer = get_builder(builder_name), get_tokenizer("unigram")
    plain, corpus = index_path(source, builder, tokenizer.spec)
    with_impacts, _ = index_path(source, builder, tokenizer.spec, "impact")
    assert plain != with_impacts
    path, _report = cached_build(source, builder, tokenizer)
    assert path == plain
    expected = {"tokenizer_spec": tokenizer.spec, "builder": builder.system, "corpus_sha256": corpus}
    assert _cached_report(path, expected) is not None
    assert _cached_report(path, expected, "impact") is None  # a plain build found under an impact key


def test_a_cached_build_with_postings_of_an_older_layout_is_rebuilt() -> None:
    """They rank the same, but compare times them: an impact build from before the blocks is not reused."""
    dataset = load_dataset("evidence-mini")
    source, builder_name = corpus_source(dataset)
    builder, tokenizer = get_builder(builder_name), get_tokenizer("bigram")
    path, _report = cached_build(source, builder, tokenizer, engine="impact")
    expected = {"tokenizer_spec": tokenizer.spec, "builder": builder.system, "corpus_sha256": _report_corpus(path)}
    assert _cached_report(path, expected, "impact") is not None
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE impact_blocks RENAME TO impacts")  # where an earlier version kept its postings
    db.commit()
    db.close()
    assert _cached_report(path, expected, "impact") is None
    rebuilt, report = cached_build(source, builder, tokenizer, engine="impact")
    assert rebuilt == path and report["cached"] is False
    with Index.open(path) as index:
        assert impact_module.postings_table(index.db) == impact_module.BLOCKS_TABLE


def _report_corpus(path: Path) -> str:
    with Index.open(path) as index:
        return index.meta["corpus_sha256"]


def test_engine_specs_in_systems_files_and_tune_spaces(tmp_path: Path) -> None:
    file = tmp_path / "systems.toml"
    file.write_text('[[system]]\ntokenizer = "bigram"\nengine = "fts5"\n[[system]]\ntokenizer = "jieba"\n')
    systems, _ = load_systems_toml(file)
    assert [s.engine for s in systems] == ["fts5", "impact"]  # naming none: the default
    assert written_engine("bm25s: method = robertson") == "bm25s:method=robertson"
    assert engine_names() == ["bm25s", "fts5", "impact"]
    pool = candidates({"tokenizers": ["bigram"], "hybrid_sizes": [2], "engines": ["impact", "bm25s"]})
    assert [c.name for c in pool] == ["bigram", "bigram | engine=bm25s"]  # no hybrid: bm25s ranks one field
    assert [c.single for c in pool] == [True, False]
    toml = recommendation_toml(Candidate("x", System("bigram", "", "", engine="fts5")), "why")
    assert 'engine = "fts5"' in toml
    assert "engine" not in recommendation_toml(Candidate("x", System("bigram", "", "")), "why")  # the default
    space = tmp_path / "space.toml"
    space.write_text('tokenizers = ["bigram"]\nengines = ["fts5", "okapi"]\n')
    with pytest.raises(RagEvalError, match="engines: unknown engine 'okapi'; choose from: bm25s, fts5, impact"):
        load_space(space)
    file.write_text('[[system]]\ntokenizer = "bigram"\nengine = 2\n')
    with pytest.raises(RagEvalError, match="engine must be a string"):
        load_systems_toml(file)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["-t", "bigram", "--engine", "lucene"], "unknown engine 'lucene'; choose from: bm25s, fts5, impact"),
        (["-t", "bigram", "--engine", "bm25s:method=okapi"], "bad value 'okapi' for bm25s option 'method'"),
        (["-t", "bigram+unigram", "--engine", "bm25s"], "engine 'bm25s' ranks one-field systems"),
        (["-t", "bigram", "--engine", "bm25s", "--mode", "and"], "engine 'bm25s' answers or queries, not 'and'"),
        (["-t", "bigram", "-b", "sections:title_weight=2", "--engine", "bm25s"], "weights its columns 2, 1"),
    ],
)
def test_what_an_engine_cannot_run_is_one_error_line(tmp_path: Path, arguments: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["compare", "handbook", *arguments, "-o", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[0].startswith("error: ") and message in lines[0], result.output
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()


def test_a_missing_bm25s_is_an_error_with_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(engines_module, "library_version", lambda name: "missing")
    assert get_engine("bm25s").availability() == "not installed: bm25s"
    result = CliRunner().invoke(
        cli, ["compare", "handbook", "-t", "bigram", "--engine", "bm25s", "-o", str(tmp_path / "out")]
    )
    assert result.exit_code == 1
    assert "error: engine 'bm25s' is unavailable: not installed: bm25s" in result.output
    assert "pip install 'rag-eval[bm25s]'" in result.output


def test_index_build_from_a_systems_file_takes_its_engine(tmp_path: Path) -> None:
    """A file naming the impact engine (compare's default) builds impact postings; one naming fts5 leaves the
    build's own default (auto: impact); --engine overrides both."""
    from rag_eval.eval.datasets.shipped import corpus_dir

    runner = CliRunner()
    cases = [("impact", [], "impact"), ("fts5", [], "impact"), ("impact", ["--engine", "fts5"], "fts5")]
    for number, (named, options, recorded) in enumerate(cases):
        file = tmp_path / f"{number}.toml"
        file.write_text(f'[[system]]\ntokenizer = "bigram"\nengine = "{named}"\n', encoding="utf-8")
        index = tmp_path / f"{number}.sqlite"
        arguments = ["index", "build", str(corpus_dir("handbook")), "-b", "sections", "--from", str(file), *options]
        result = runner.invoke(cli, [*arguments, "-o", str(index)])
        assert result.exit_code == 0, result.output
        with Index.open(index) as opened:
            assert opened.meta["engine"] == recorded, (named, options)
