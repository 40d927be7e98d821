"""Defects from a new user's walkthrough: judge --oracle's sampling study ran for minutes without progress,
tune recommended from a handful of queries without a warning and broke dev-quality ties by latency noise,
and queries synth told a user who gave no --kinds to drop a kind from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import REPO

import rag_eval.eval.tuning.search as tune_search
from rag_eval.cli import cli
from rag_eval.eval.compare.agreement import FEW_QUERIES
from rag_eval.eval.judging.oracle import sampling_study
from rag_eval.eval.tuning.tune import Candidate, Trial, few_queries_warning, pick

ROOT = REPO

RUNS = {
    "a": {"q1": ["x", "y", "n1"], "q2": ["z", "n2"], "q3": ["w", "v"]},
    "b": {"q1": ["y", "x", "n3"], "q2": ["n2", "z"], "q3": ["v", "w"]},
}
QRELS = {"q1": {"x": 2, "y": 1}, "q2": {"z": 1}, "q3": {"v": 1}}
STUDY = {"samples": 4, "sample_queries": 2, "budget": 4, "until_settled": 4, "mc_samples": 50}


# -- judge --oracle: progress of the sampling study ------------------------------------------------------------


def test_the_sampling_study_reports_samples_done_and_computes_the_same() -> None:
    """Regression: a study of 200 samples showed nothing for minutes."""
    calls: list[tuple[str, int, int]] = []
    watched = sampling_study(RUNS, QRELS, **STUDY, progress=lambda *call: calls.append(call))
    plain = sampling_study(RUNS, QRELS, **STUDY)
    assert calls == [("samples", done, 4) for done in range(5)]
    assert json.dumps(watched) == json.dumps(plain)  # progress observes only: same records, same random draws
    calls.clear()
    sampling_study(RUNS, QRELS, **STUDY, first=1, count=2, progress=lambda *call: calls.append(call))
    assert calls == [("samples", 0, 2), ("samples", 1, 2), ("samples", 2, 2)]  # the samples this call runs


def test_judge_oracle_shows_the_sampling_studys_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: `judge --oracle` showed the query bars, then nothing while its samples ran."""
    import rag_eval.cli.judge as judge_cli
    from rag_eval.cli.progress import Bars
    from rag_eval.eval.datasets.sources import question_id

    shown: list[tuple[str, float, int]] = []

    class Recording(Bars):
        def __call__(self, phase: str, done: float, total: int) -> None:
            shown.append((phase, done, total))

    monkeypatch.setattr(judge_cli, "Bars", Recording)
    questions = (ROOT / "docs" / "examples" / "handbook-questions.txt").read_text(encoding="utf-8").splitlines()[:12]
    ids = {question_id(q) for q in questions}
    qrels = (ROOT / "docs" / "examples" / "handbook-questions.qrels").read_text(encoding="utf-8").splitlines()
    (tmp_path / "q.txt").write_text("\n".join(questions) + "\n", encoding="utf-8")
    (tmp_path / "q.qrels").write_text("".join(f"{line}\n" for line in qrels if line.split()[0] in ids), "utf-8")
    result = CliRunner().invoke(
        cli,
        ["judge", "handbook", "--queries", str(tmp_path / "q.txt"), "-t", "bigram", "-t", "unigram"]
        + ["--oracle", str(tmp_path / "q.qrels"), "--samples", "2", "--sample-queries", "6"],
    )
    assert result.exit_code == 0, result.output + result.stderr
    samples = [(done, total) for phase, done, total in shown if phase.endswith("samples")]
    assert samples and samples[-1] == (2, 2)


# -- tune: a deterministic tie-break and a warning on few queries -----------------------------------------------


def _trial(name: str, quality: float, p95_ms: float, index_mb: float) -> Trial:
    return Trial(Candidate(name), 2, 7, quality, p95_ms, index_mb)


def test_a_dev_quality_tie_is_broken_by_index_size_then_name_never_by_latency_noise() -> None:
    """Regression: two identical runs recommended jieba:mode=precise, then jieba (whichever p95 was lower)."""
    for fast, slow in (("jieba", "jieba:mode=precise"), ("jieba:mode=precise", "jieba")):
        trials = [_trial(fast, 0.8333, 0.27, 0.078), _trial(slow, 0.8333 + 1e-12, 0.38, 0.078)]
        chosen, tied = pick(trials)
        assert chosen.candidate.name == "jieba" and [t.candidate.name for t in tied] == ["jieba:mode=precise"]
    smaller = [_trial("bigram", 0.5, 0.3, 0.078), _trial("unigram", 0.5, 0.2, 0.082)]
    assert pick(smaller)[0].candidate.name == "bigram"  # the smaller index, though its p95 is higher
    clearly = [_trial("bigram", 0.5, 5.0, 0.078), _trial("unigram", 0.5, 2.0, 0.082)]
    assert pick(clearly)[0].candidate.name == "unigram"  # over 1.5 times and 1 ms slower: latency decides
    better = [_trial("bigram", 0.5, 0.3, 0.078), _trial("bigram+unigram", 0.6, 9.0, 0.3)]
    assert pick(better) == (better[1], [])  # without a tie, the best dev quality, whatever it costs


def test_tune_picks_the_same_system_whatever_the_latency_noise_and_warns_on_few_queries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: 7 dev queries gave a recommendation without the warning compare gives below 25."""
    space = tmp_path / "space.toml"
    space.write_text('tokenizers = ["jieba", "jieba:mode=precise"]\n', encoding="utf-8")
    measured = tune_search._trial

    def noisy(candidate: Candidate, row: dict[str, Any], metric: str, round_number: int, queries: int) -> Trial:
        trial = measured(candidate, row, metric, round_number, queries)
        trial.p95_ms = 0.2 if candidate.name == "jieba:mode=precise" else 0.3  # faster, within the noise
        return trial

    monkeypatch.setattr(tune_search, "_trial", noisy)  # looked up where search_space() is
    out = tmp_path / "tune"
    result = CliRunner().invoke(cli, ["tune", "evidence-mini", "--space", str(space), "--budget", "2", "-o", str(out)])
    assert result.exit_code == 0, result.output + result.stderr
    report = json.loads((out / "tune.json").read_text(encoding="utf-8"))
    assert report["recommendation"] == report["front"][0] == "jieba"
    assert report["tied_on_dev"] == ["jieba:mode=precise"] and report["tie_rule"] in report["paragraph"]
    paragraph, warning = result.stdout.splitlines()
    assert paragraph == report["paragraph"] and warning == f"warning: {report['warning']}"
    assert f"picked on {report['split']['dev_queries'] - 1} judged dev queries" in warning  # one dev query is unjudged
    assert f"at least {FEW_QUERIES}" in warning
    assert f"Warning: {report['warning']}." in (out / "report.md").read_text(encoding="utf-8")


def test_enough_judged_queries_on_both_sides_give_no_warning() -> None:
    test = {"judged_queries": FEW_QUERIES, "detectable_difference": None}
    assert few_queries_warning(FEW_QUERIES, test, "nDCG@10", "held-back queries") is None
    short = few_queries_warning(FEW_QUERIES - 1, test, "nDCG@10", "held-back queries")
    assert short is not None and f"{FEW_QUERIES - 1} judged dev queries" in short
    found = {"between": ["a", "b"], "nDCG@10": 0.2, "alpha": 0.05, "power": 0.8}
    stated = few_queries_warning(30, {"judged_queries": 10, "detectable_difference": found}, "nDCG@10", "x")
    assert stated is not None and "difference in nDCG@10 of about 0.200 or more" in stated


# -- queries synth: why a kind is unsupported, and what helps --------------------------------------------------


@pytest.fixture
def two_notes(tmp_path: Path) -> Path:
    """Two short Markdown files: too little text for any Chinese word to recur four times."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "install.md").write_text("# 安装\n\n先下载安装包，然后运行安装程序。\n", encoding="utf-8")
    (folder / "settings.md").write_text("# 配置\n\n打开设置页面，修改服务器地址。\n", encoding="utf-8")
    return folder


def test_the_default_kind_unsupported_says_why_and_not_to_drop_an_option_never_given(
    two_notes: Path, tmp_path: Path
) -> None:
    """Regression: `queries synth SMALL -n 5` said 'drop it from --kinds' to a user who gave no --kinds."""
    result = CliRunner().invoke(cli, ["queries", "synth", str(two_notes), "-n", "5", "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    error, hint = result.stderr.splitlines()
    assert error.startswith("error: no unit of this source supports the default query kind 'terms'")
    assert "occurs at least 4 times in the corpus" in error and "(this corpus has 0 such words)" in error
    assert "drop it" not in hint and "--kinds heading" in hint and "larger corpus" in hint
    assert not (tmp_path / "out").exists()


def test_a_named_unsupported_kind_says_why_and_what_this_source_supports(two_notes: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["queries", "synth", str(two_notes), "-n", "5", "--kinds", "heading,typo", "-o", str(tmp_path / "out")]
    )
    assert result.exit_code == 1
    error, hint = result.stderr.splitlines()
    assert error.startswith("error: no unit of this source supports query kind 'typo'")
    assert "none of its 2 units holds the 2 words a query samples" in error
    assert (
        hint
        == "hint: drop it from --kinds (this source supports: heading), or use a larger corpus, in which words recur"
    )
    handbook = CliRunner().invoke(
        cli, ["queries", "synth", "handbook", "-n", "5", "--kinds", "simplified", "-o", str(tmp_path / "h")]
    )
    assert "traditional-script corpus" in handbook.stderr and "larger corpus" not in handbook.stderr
