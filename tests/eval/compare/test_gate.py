"""The quality gate fails on regressions, reports improvements, and calls a changed spec stale."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import REPO, invoke, one_error

from rag_eval.errors import RagEvalError
from rag_eval.eval.compare.gate import check, load_baseline
from rag_eval.tokenizers import TOKENIZERS
from rag_eval.tokenizers.bigram import BigramTokenizer


@pytest.fixture
def baseline(tmp_path: Path) -> Path:
    path = tmp_path / "baseline.json"
    outcome = invoke(
        "compare",
        "evidence-mini",
        "-t",
        "bigram",
        "-t",
        "jieba",
        "--write-baseline",
        str(path),
        "-o",
        str(tmp_path / "first"),
    )
    assert outcome.exit_code == 0, outcome.stderr
    return path


def test_unchanged_run_passes(baseline: Path, tmp_path: Path) -> None:
    outcome = invoke(
        "compare",
        "evidence-mini",
        "-t",
        "bigram",
        "-t",
        "jieba",
        "--against",
        str(baseline),
        "--fail-on-regression",
        "-o",
        str(tmp_path / "again"),
    )
    assert outcome.exit_code == 0
    assert "gate: 2 systems compared" in outcome.stderr and "0 regressions" in outcome.stderr
    report = json.loads((tmp_path / "again" / "report.json").read_text(encoding="utf-8"))
    assert report["gate"]["compared"] == 2 and report["gate"]["regressions"] == []


def test_a_baseline_with_a_higher_number_fails(baseline: Path, tmp_path: Path) -> None:
    data = json.loads(baseline.read_text(encoding="utf-8"))
    bigram = next(row for row in data["systems"] if row["name"].startswith("bigram"))
    old = bigram["metrics"]["nDCG@10"]
    bigram["metrics"]["nDCG@10"] = round(old + 0.1, 4)
    bigram["metrics"]["P@1"] = round(bigram["metrics"]["P@1"] - 0.1, 4)
    baseline.write_text(json.dumps(data), encoding="utf-8")
    outcome = invoke(
        "compare",
        "evidence-mini",
        "-t",
        "bigram",
        "-t",
        "jieba",
        "--against",
        str(baseline),
        "--fail-on-regression",
        "-o",
        str(tmp_path / "again"),
    )
    assert outcome.exit_code == 1
    assert f"REGRESSION bigram | lines | and: nDCG@10 {old + 0.1:.4f} -> {old:.4f}" in outcome.stderr
    assert "improved bigram | lines | and: P@1" in outcome.stderr
    assert "error: 1 metric regressions against" in outcome.stderr
    assert (tmp_path / "again" / "report.json").is_file()  # the report is written before the gate fails


class Flaky(BigramTokenizer):
    """A plug-in whose behaviour changes without its spec changing (the regression a gate must catch)."""

    name = "flaky"
    broken = False

    def _spans(self, text: str) -> list[tuple[int, int]]:
        spans = super()._spans(text)
        return spans[::2] if self.broken else spans


def test_a_plugin_that_silently_drops_tokens_fails_the_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    TOKENIZERS.register(Flaky)
    try:
        monkeypatch.setenv("RAG_EVAL_CACHE", str(tmp_path / "cache-1"))
        first = invoke(
            "compare",
            "handbook",
            "-t",
            "flaky",
            "--write-baseline",
            str(tmp_path / "b.json"),
            "-o",
            str(tmp_path / "a"),
        )
        assert first.exit_code == 0, first.stderr
        monkeypatch.setattr(Flaky, "broken", True)
        monkeypatch.setenv("RAG_EVAL_CACHE", str(tmp_path / "cache-2"))
        second = invoke(
            "compare",
            "handbook",
            "-t",
            "flaky",
            "--against",
            str(tmp_path / "b.json"),
            "--fail-on-regression",
            "-o",
            str(tmp_path / "b"),
        )
    finally:
        TOKENIZERS.unregister("flaky")
    assert second.exit_code == 1
    assert "REGRESSION flaky | sections | or: nDCG@10" in second.stderr


def test_changed_spec_is_stale_not_a_regression(baseline: Path, tmp_path: Path) -> None:
    data = json.loads(baseline.read_text(encoding="utf-8"))
    jieba = next(row for row in data["systems"] if row["name"].startswith("jieba"))
    jieba["tokenizer"] = jieba["tokenizer"].replace("jieba=0.42.1", "jieba=0.41.0")
    jieba["metrics"] = {k: 1.0 for k in jieba["metrics"]}
    baseline.write_text(json.dumps(data), encoding="utf-8")
    outcome = invoke(
        "compare",
        "evidence-mini",
        "-t",
        "bigram",
        "-t",
        "jieba",
        "--against",
        str(baseline),
        "--fail-on-regression",
        "-o",
        str(tmp_path / "again"),
    )
    assert outcome.exit_code == 0
    assert (
        "baseline stale jieba | lines | and: tokenizer: jieba:hmm=true,mode=search,t2s=false [jieba=0.41.0"
        in outcome.stderr
    )
    assert "1 stale" in outcome.stderr


def test_gate_needs_a_baseline(tmp_path: Path) -> None:
    outcome = invoke("compare", "evidence-mini", "-t", "bigram", "--fail-on-regression", "-o", str(tmp_path / "x"))
    assert outcome.exit_code == 2 and "--fail-on-regression needs --against FILE" in outcome.stderr
    missing = invoke(
        "compare", "evidence-mini", "-t", "bigram", "--against", str(tmp_path / "none.json"), "-o", str(tmp_path / "x")
    )
    assert missing.exit_code == 1 and "no such baseline" in missing.stderr


@pytest.mark.parametrize("dataset", ["handbook", "evidence-mini"])
def test_committed_baselines_match_the_shipped_data(dataset: str) -> None:
    from rag_eval.eval.datasets.formats import load_dataset

    baseline = json.loads((REPO / "reports" / "baseline" / f"{dataset}.json").read_text(encoding="utf-8"))
    assert baseline["dataset"]["checksum"] == load_dataset(dataset).checksum()
    assert [row["name"].split(" | ")[0] for row in baseline["systems"]] == [
        "unicode61",
        "trigram",
        "jieba",
        "pkuseg:model=mini",
        "bigram",
        "unigram",
    ]


@pytest.mark.parametrize("tolerance", [math.nan, math.inf, -math.inf, -0.001])
def test_a_tolerance_that_is_not_a_finite_non_negative_number_is_refused(tolerance: float) -> None:
    from rag_eval.eval.compare.gate import check

    report = {
        "dataset": {"checksum": "c"},
        "systems": [{"name": "s", "tokenizer": "t", "builder": "b", "metrics": {"P@1": 0.1}}],
    }
    baseline = {
        "schema": "rag-eval/baseline/1",
        "dataset": {"checksum": "c"},
        "systems": [{"name": "s", "tokenizer": "t", "builder": "b", "metrics": {"P@1": 0.9}}],
    }
    with pytest.raises(RagEvalError, match="tolerance must be a finite number of at least 0"):
        check(report, baseline, tolerance=tolerance)
    assert len(check(report, baseline, tolerance=0.0).regressions) == 1


@pytest.mark.parametrize("tolerance", ["nan", "inf", "-inf", "-1", "1e999"])
def test_the_cli_refuses_such_a_tolerance_before_running(
    tolerance: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rag_eval.eval.compare.compare as module

    monkeypatch.setattr(module, "run_systems", lambda *a, **k: pytest.fail("ran before checking the tolerance"))
    outcome = invoke("compare", "evidence-mini", "-t", "bigram", "--tolerance", tolerance, "-o", str(tmp_path / "x"))
    assert outcome.exit_code == 1 and outcome.stderr.startswith("error: tolerance must be a finite number"), (
        outcome.stderr
    )
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "content",
    [
        '{"schema": "rag-eval/baseline/1", "dataset": {"checksum": "c"}, '
        '"systems": [{"name": "s", "metrics": {"P@1": "0.5"}}]}',
        '{"schema": "rag-eval/baseline/1", "dataset": {"checksum": "c"}, '
        '"systems": [{"name": "s", "metrics": {"P@1": 1e999}}]}',
        '{"schema": "rag-eval/baseline/1", "dataset": {"checksum": "c"}, "systems": [7]}',
        '{"schema": "rag-eval/baseline/1", "systems": []}',
        '{"systems": []}',
        "[" * 100_000,
        "\ud800".encode("utf-8", "surrogatepass").decode("latin-1"),
    ],
)
def test_a_baseline_the_gate_cannot_rely_on_is_one_error_line(content: str, tmp_path: Path) -> None:
    baseline = tmp_path / "b.json"
    baseline.write_text(content, encoding="utf-8")
    outcome = invoke("compare", "evidence-mini", "-t", "bigram", "--against", str(baseline), "-o", str(tmp_path / "x"))
    assert outcome.exit_code == 1 and outcome.stderr.startswith(f"error: {baseline}"), outcome.stderr
    assert "Traceback" not in outcome.stderr and not (tmp_path / "x").exists()


def _report(
    metrics: dict[str, float],
    *,
    tokenizer: str = "bigram [x]",
    checksum: str = "c1",
    name: str = "bigram | passages | or",
) -> dict:
    system = {"name": name, "tokenizer": tokenizer, "builder": "passages", "metrics": metrics}
    return {"schema": "rag-eval/baseline/1", "dataset": {"checksum": checksum}, "systems": [system]}


@pytest.mark.parametrize(
    ("new", "outcome"),
    [
        (0.500, "same"),  # unchanged
        (0.495, "same"),  # a drop of exactly the tolerance is not a regression
        (0.4949, "regression"),  # just beyond it is
        (0.4925, "regression"),  # 1.5 x the tolerance: a gate with a doubled tolerance would miss it
        (0.5051, "improvement"),
        (0.5049, "same"),
    ],
)
def test_check_compares_each_metric_with_the_tolerance(new: float, outcome: str) -> None:
    from rag_eval.eval.compare.gate import check

    result = check(_report({"nDCG@10": new}), _report({"nDCG@10": 0.5}), tolerance=0.005)
    found = "regression" if result.regressions else "improvement" if result.improvements else "same"
    assert found == outcome and result.compared == 1


def test_check_calls_a_changed_identity_stale_and_lists_unmatched_systems() -> None:
    from rag_eval.eval.compare.gate import check

    base = _report({"nDCG@10": 0.9})
    stale = check(_report({"nDCG@10": 0.1}, tokenizer="bigram [y]"), base)
    assert not stale.regressions and stale.compared == 0
    assert stale.stale[0]["differences"] == {"tokenizer": ("bigram [x]", "bigram [y]")}
    moved = check(_report({"nDCG@10": 0.1}, checksum="c2"), base)
    assert not moved.regressions and "dataset checksum" in moved.stale[0]["differences"]
    other = check(_report({"nDCG@10": 0.9}, name="jieba | passages | or"), base)
    assert other.unmatched == [
        "new system jieba | passages | or: not in the baseline",
        "baseline system bigram | passages | or: not in this run",
    ]


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
