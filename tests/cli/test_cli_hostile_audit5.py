"""Hostile input, fifth audit: ``compare --systems`` and ``tune --space`` files, ``tune --metric`` spellings and
``--against`` baselines. Each case ends in the right result or one error line, never a traceback, a hang or a
gate that passes having checked nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_eval.cli import cli
from rag_eval.errors import RagEvalError
from rag_eval.eval.compare.compare import load_systems_toml
from rag_eval.eval.compare.gate import check
from rag_eval.eval.tuning import space as tune_space
from rag_eval.eval.tuning.tune import candidates, load_space, tune


def _error_lines(result) -> list[str]:  # noqa: ANN001 - click's Result
    return [line for line in result.output.splitlines() if line.startswith("error:")]


def test_a_systems_file_nested_thousands_deep_is_one_error_line(tmp_path: Path) -> None:
    """Bug: arrays nested 5,000 deep in a --systems file raised RecursionError out of tomllib: a traceback."""
    path = tmp_path / "systems.toml"
    path.write_text("system = " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(RagEvalError, match="invalid TOML"):
        load_systems_toml(path)
    result = CliRunner().invoke(cli, ["compare", "handbook", "--systems", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert len(_error_lines(result)) == 1 and "invalid TOML" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()


def _huge_space(tmp_path: Path) -> Path:
    """A space under 100 kB of 3,000 weights and 3,001 query processings: 9 million candidates."""
    weights = ", ".join(f"{1 + i / 10000:.4f}" for i in range(1, 3001))
    processing = ", ".join(f'"top_terms={i}"' for i in range(1, 3001))
    path = tmp_path / "space.toml"
    path.write_text(
        'tokenizers = ["bigram", "unigram"]\nhybrid_sizes = [2]\n'
        f'weights = [{weights}]\nprocessing = ["", {processing}]\n',
        encoding="utf-8",
    )
    return path


def test_a_space_of_millions_of_candidates_is_refused_before_any_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: a space file under the 100 kB limit multiplied to 16 million candidates, which tune enumerated (for
    hours, gigabytes of memory) before running 3 x --budget of them."""
    path = _huge_space(tmp_path)

    def made(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a candidate was made: the space was enumerated instead of refused")

    monkeypatch.setattr(tune_space, "Candidate", made)  # looked up where candidates() is
    with pytest.raises(RagEvalError, match=r"candidates, more than \d+"):
        candidates(load_space(path))
    result = CliRunner().invoke(cli, ["tune", "handbook", "--space", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1 and len(_error_lines(result)) == 1 and "candidates" in result.output
    assert not (tmp_path / "out").exists()


def test_the_default_space_and_a_wide_space_are_still_enumerated() -> None:
    """The bound refuses only what is too large to enumerate: the shipped space and 2,000 weights pass."""
    assert candidates(load_space(None))
    space = {"tokenizers": ["bigram", "unigram"], "hybrid_sizes": [2], "weights": [1 + i / 1000 for i in range(2000)]}
    assert len(candidates(space)) == 2 + 2000


@pytest.mark.parametrize("spelling", ["ndcg@10", "P(rel=1)@5"])
def test_tune_takes_any_spelling_of_a_metric(tmp_path: Path, spelling: str) -> None:
    """Bug: --metric ndcg@10 (names are case-insensitive) passed the check, ran the whole search, then raised
    KeyError: compare keys its rows by the canonical spelling nDCG@10."""
    space = tmp_path / "space.toml"
    space.write_text('tokenizers = ["bigram", "unigram"]\n', encoding="utf-8")
    result = tune("handbook", output=tmp_path / "tune", space_file=space, budget=2, metric=spelling)
    canonical = {"ndcg@10": "nDCG@10", "P(rel=1)@5": "P@5"}[spelling]
    assert result.report["metric"] == canonical
    written = json.loads((tmp_path / "tune" / "tune.json").read_text(encoding="utf-8"))
    assert written["metric"] == canonical


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
