"""A gate that compared no system has checked nothing: --fail-on-regression fails it, naming the baseline's systems."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from rag_eval.cli import cli
from rag_eval.eval.compare.gate import GateError, check


def _report(name: str, metrics: dict[str, float], tokenizer: str = "bigram [x]") -> dict:
    system = {"name": name, "tokenizer": tokenizer, "builder": "passages", "metrics": metrics}
    return {"schema": "rag-eval/baseline/1", "dataset": {"checksum": "c1"}, "systems": [system]}


def test_a_gate_that_compared_nothing_fails() -> None:
    base = _report("bigram | passages | or", {"nDCG@10": 0.5})
    other = check(_report("bigram | passages | or | engine=bm25s", {"nDCG@10": 0.5}), base)
    failure = other.failure("base.json", 0.005)
    assert other.compared == 0 and isinstance(failure, GateError)
    assert "the gate compared no system" in str(failure) and "the baseline has: bigram | passages | or" in str(failure)
    stale = check(_report("bigram | passages | or", {"nDCG@10": 0.5}, tokenizer="bigram [y]"), base)
    assert "1 with a changed identity" in str(stale.failure("base.json", 0.005))
    same = check(_report("bigram | passages | or", {"nDCG@10": 0.5}), base)
    assert same.compared == 1 and same.failure("base.json", 0.005) is None
    worse = check(_report("bigram | passages | or", {"nDCG@10": 0.4}), base)
    assert "1 metric regressions against base.json" in str(worse.failure("base.json", 0.005))


def test_fail_on_regression_fails_when_no_system_of_the_baseline_matched(tmp_path: Path) -> None:
    """Regression: --engine bm25s against a default-engine report printed "gate: 0 systems compared" and exited 0."""
    first = CliRunner().invoke(
        cli, ["compare", "evidence-mini", "-t", "bigram", "--mode", "or", "-o", str(tmp_path / "first")]
    )
    assert first.exit_code == 0, first.stderr
    baseline = tmp_path / "first" / "report.json"
    args = ["compare", "evidence-mini", "-t", "bigram", "--mode", "or", "--engine", "bm25s", "--against", str(baseline)]
    outcome = CliRunner().invoke(cli, [*args, "--fail-on-regression", "-o", str(tmp_path / "second")])
    assert "gate: 0 systems compared" in outcome.stderr
    assert outcome.exit_code == 1, outcome.stderr
    errors = [line for line in outcome.stderr.splitlines() if line.startswith("error: ")]
    names = [row["name"] for row in json.loads(baseline.read_text(encoding="utf-8"))["systems"]]
    assert len(errors) == 1 and "the gate compared no system" in errors[0]
    assert errors[0].endswith("the baseline has: " + ", ".join(names)) and "Traceback" not in outcome.stderr


def test_a_gate_with_no_metric_in_common_compares_nothing() -> None:
    """Bug: a baseline written with --metric nDCG@20, gated with --metric R@10, said '1 systems compared: 0
    regressions' and --fail-on-regression passed, though no metric was held against the baseline."""
    system = {"name": "bigram | passages | or", "tokenizer": "bigram", "builder": "passages", "mode": "or"}
    baseline = {
        "schema": "rag-eval/baseline/1",
        "dataset": {"checksum": "abc"},
        "systems": [{**system, "metrics": {"nDCG@20": 0.9}}],
    }
    report = {"dataset": {"checksum": "abc"}, "systems": [{**system, "metrics": {"R@10": 0.1}}]}
    gate = check(report, baseline)
    assert gate.compared == 0
    assert any("no metric in common" in line for line in gate.lines())
    failure = gate.failure("baseline.json", 0.005)
    assert failure is not None and "compared no system" in str(failure)
    # A metric in common is still compared, and a drop in it is still a regression.
    report["systems"][0]["metrics"]["nDCG@20"] = 0.5
    gate = check(report, baseline)
    assert gate.compared == 1 and [item["metric"] for item in gate.regressions] == ["nDCG@20"]
