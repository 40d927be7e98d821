"""rag-eval's default recommendation for users who cannot judge: shipped with its evidence, named in the labels-free
report, built by ``index build --from default`` and compared by ``compare --systems default``."""

from __future__ import annotations

import json
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest
from helpers import invoke, make_docs

from rag_eval.eval.compare.recommended import DEFAULT_NAME, default_choice, shipped_systems_file
from rag_eval.index.processing import QueryProcessing
from rag_eval.index.store import Index
from rag_eval.tokenizers import get_tokenizer

FOLDER = files("rag_eval.eval") / "recommendations"


def _shipped() -> tuple[dict, dict]:
    evidence = json.loads((FOLDER / "default.json").read_text(encoding="utf-8"))
    systems = tomllib.loads((FOLDER / "default.toml").read_text(encoding="utf-8"))
    return evidence, systems


def _name(system: dict) -> str:
    """The name tune gives the candidate a [[system]] table describes (eval/tuning/space.py)."""
    query, engine = system.get("query", ""), system.get("engine", "")
    return system["tokenizer"] + (f" | {query}" if query else "") + (f" | engine={engine}" if engine else "")


def test_the_default_is_the_tuned_recommendation_with_its_leave_one_out_evidence() -> None:
    evidence, systems = _shipped()
    [system] = systems["system"]  # one system: index build --from takes it
    assert _name(system) == evidence["system"]  # the evidence speaks of the system the file builds
    folds = evidence["leave_one_out"]
    assert [fold["collection"] for fold in folds] == evidence["collections"] and len(folds) >= 3
    for fold in folds:
        assert fold["as_good"] == (fold["delta"] >= -0.005)
        assert fold["significantly_better"] == (fold["p_holm"] < 0.05 and fold["delta"] > 0)
    choice = default_choice()
    assert choice is not None and choice["system"] == evidence["system"]
    assert f"{sum(f['as_good'] for f in folds)} of {len(folds)}" in choice["evidence"]
    assert "caveat" in choice and "judge" in choice["caveat"]


def test_a_bare_name_is_the_shipped_file_unless_a_file_of_that_name_is_here(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert shipped_systems_file(Path(DEFAULT_NAME)).name == "default.toml"
    assert shipped_systems_file(Path("no-such-recommendation")) == Path("no-such-recommendation")
    (tmp_path / DEFAULT_NAME).write_text("[[system]]\ntokenizer = 'bigram'\n", encoding="utf-8")
    assert shipped_systems_file(Path(DEFAULT_NAME)) == Path(DEFAULT_NAME)  # the user's own file wins


def test_index_build_from_default_builds_the_default_system(tmp_path: Path) -> None:
    _evidence, systems = _shipped()
    [system] = systems["system"]
    docs = make_docs(tmp_path / "docs")
    result = invoke("index", "build", str(docs), "--from", DEFAULT_NAME, "-o", str(tmp_path / "kb.sqlite"))
    assert result.exit_code == 0, result.output
    index = Index.open(tmp_path / "kb.sqlite")
    try:
        assert index.tokenizer.system == get_tokenizer(system["tokenizer"]).system
        recorded = QueryProcessing.parse(index.meta.get("query_processing") or "").written
        assert recorded == QueryProcessing.parse(system.get("query", "")).written
    finally:
        index.close()


@pytest.fixture(scope="module")
def unjudged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("unjudged")
    docs = make_docs(root / "docs")
    questions = root / "q.txt"
    questions.write_text("如何导出数据\n安装步骤\n", encoding="utf-8")
    out = root / "out"
    result = invoke("compare", str(docs), "--queries", str(questions), "-t", "bigram", "-t", "unigram", "-o", str(out))
    assert result.exit_code == 0, result.output
    return out


def test_a_report_without_judgments_names_the_default_with_its_evidence_and_caveat(unjudged: Path) -> None:
    choice = default_choice()
    assert choice is not None
    report = json.loads((unjudged / "report.json").read_text(encoding="utf-8"))
    assert report["without_labels"]["default_choice"] == choice
    markdown = (unjudged / "report.md").read_text(encoding="utf-8")
    assert "rag-eval's default recommendation is" in markdown and "--from default" in markdown
    assert choice["caveat"] in markdown
    html = (unjudged / "report.html").read_text(encoding="utf-8")
    assert 'id="default-choice"' in html


def test_the_terminal_says_it_too_and_a_judged_report_does_not(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "docs")
    questions = tmp_path / "q.txt"
    questions.write_text("如何导出数据\n", encoding="utf-8")
    result = invoke("compare", str(docs), "--queries", str(questions), "-t", "bigram", "-o", str(tmp_path / "o1"))
    assert result.exit_code == 0 and "rag-eval's default:" in result.output, result.output
    judged = invoke("compare", "evidence-mini", "-t", "bigram", "-o", str(tmp_path / "o2"))
    assert judged.exit_code == 0 and "rag-eval's default" not in judged.output
    report = json.loads((tmp_path / "o2" / "report.json").read_text(encoding="utf-8"))
    assert "default_choice" not in report["without_labels"]


def test_compare_systems_default_compares_the_default(tmp_path: Path) -> None:
    _evidence, systems = _shipped()
    result = invoke("compare", "evidence-mini", "--systems", DEFAULT_NAME, "--repeat", "1", "-o", str(tmp_path / "o"))
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "o" / "report.json").read_text(encoding="utf-8"))
    assert report["systems"][0]["tokenizer"].split(" [")[0] == get_tokenizer(systems["system"][0]["tokenizer"]).system
