"""The comparison's result is a typed model with a versioned JSON Schema: report.json is the model's ``to_json()``,
validates against the schema shipped with the package, reads back into an equal model, and a saved report or
baseline that does not follow the schema is one error line naming the file and the key."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from helpers import REPO
from helpers.compare_calls import run_compare

from rag_eval.cli import cli
from rag_eval.eval.compare.compare import CompareRequest, OutsideRun
from rag_eval.eval.reporting.model import BASELINE_SCHEMA, REPORT_SCHEMA, Comparison
from rag_eval.eval.reporting.reader import read_report, report_schema

ROOT = REPO


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A real small compare with every kind of row (systems, an outside run, a fusion), a gate and a baseline."""
    root = tmp_path_factory.mktemp("model")
    first = run_compare("evidence-mini", output=root / "first", tokenizers=["bigram", "unigram"], repeat=1)
    second = run_compare(
        "evidence-mini",
        output=root / "second",
        tokenizers=["bigram", "jieba"],
        outside=[OutsideRun("prior", first.output / "runs" / "unigram_lines_and.run")],
        fuse=["rrf(bigram, jieba)"],
        against=first.output / "report.json",
        write_baseline=root / "baseline.json",
        repeat=2,
    )
    return {"report": second.output / "report.json", "baseline": root / "baseline.json"}


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_real_report_and_its_baseline_validate_against_the_shipped_schema(written: dict[str, Path]) -> None:
    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    report = _json(written["report"])
    kinds = {("fusion" in row, "engine" in row) for row in report["systems"]}
    assert kinds == {(False, True), (False, False), (True, False)}  # systems, the outside run, the fusion
    assert report["gate"]["compared"] > 0 and report["schema"] == REPORT_SCHEMA
    jsonschema.validate(report, schema, cls=jsonschema.Draft202012Validator)
    baseline = _json(written["baseline"])
    assert baseline["schema"] == BASELINE_SCHEMA
    jsonschema.validate(baseline, schema, cls=jsonschema.Draft202012Validator)


def test_the_schema_names_the_versions_the_model_reads() -> None:
    assert report_schema()["properties"]["schema"]["enum"] == [REPORT_SCHEMA, BASELINE_SCHEMA]
    assert report_schema()["$id"] == REPORT_SCHEMA


@pytest.mark.parametrize("name", ["report", "baseline"])
def test_report_json_is_the_model_written_and_reads_back_equal(written: dict[str, Path], name: str) -> None:
    text = written[name].read_text(encoding="utf-8")
    model = read_report(written[name])
    # The model writes exactly the file (key order too), and model -> JSON -> model is the same model.
    assert json.dumps(model.to_json(), ensure_ascii=False, indent=2) == text.rstrip("\n")
    assert Comparison.from_json(json.loads(json.dumps(model.to_json()))) == model


def test_the_model_is_typed_not_a_dict(written: dict[str, Path]) -> None:
    model = read_report(written["report"])
    fused = next(row for row in model.systems if row.fusion is not None)
    assert fused.fusion is not None and fused.fusion.method == "rrf" and fused.fusion.k == 60
    timed = next(row for row in model.systems if row.engine is not None)
    assert timed.search is not None and timed.search.p95 is not None and timed.search_ci95_ms is not None
    assert model.latency is not None and model.latency.repeat == 2 and model.gate is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.reference = "x"  # type: ignore[misc]


def _committed() -> list[Path]:
    return sorted(ROOT.glob("reports/**/report.json")) + sorted(ROOT.glob("reports/baseline/*.json"))


def test_the_committed_reports_and_baselines_load() -> None:
    found = _committed()
    assert found, "no committed report.json or baseline under reports/"
    for path in found:
        model = read_report(path)
        assert model.systems and model.dataset.checksum, path
        assert Comparison.from_json(json.loads(json.dumps(model.to_json()))) == model, path


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (
            lambda data: data["systems"][0]["latency_ms"]["search"].update(p95="fast"),
            "systems[0].latency_ms.search.p95",
        ),
        (lambda data: data["systems"][1].update(ci95={"nDCG@10": [0.1]}), "systems[1].ci95.nDCG@10"),
        (lambda data: data["without_labels"].update(overlap=[{"a": 1, "b": "x"}]), "without_labels.overlap[0].a"),
        (lambda data: data.update(judged_queries=-3), "judged_queries"),
        (lambda data: data["latency"]["pairs"][0].update(statistic="p42"), "latency.pairs[0].statistic"),
        (lambda data: data["dataset"].update(stats=[]), "dataset.stats"),
    ],
)
def test_a_saved_report_against_the_schema_is_one_error_line_naming_file_and_key(
    written: dict[str, Path], change: Any, key: str, tmp_path: Path
) -> None:
    """Regression: --against read a report.json whose values were not report.json's (a p95 of "fast") without a
    word, and whatever read them next failed or misled."""
    data = _json(written["report"])
    change(data)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    outcome = CliRunner().invoke(
        cli, ["compare", "evidence-mini", "-t", "bigram", "--against", str(path), "-o", str(tmp_path / "x")]
    )
    assert outcome.exit_code == 1, outcome.stderr
    lines = outcome.stderr.strip().splitlines()
    assert lines[0].startswith(f"error: {path}: {key}: "), outcome.stderr
    assert sum(line.startswith("error:") for line in lines) == 1 and "Traceback" not in outcome.stderr
    assert not (tmp_path / "x").exists()


def test_run_compare_takes_one_frozen_request(tmp_path: Path) -> None:
    request = CompareRequest("evidence-mini", output=tmp_path / "out", tokenizers=["bigram"], repeat=1)
    assert request.tokenizers == ("bigram",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.repeat = 3  # type: ignore[misc]
