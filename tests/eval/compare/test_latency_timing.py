"""Latency that measures the strategy, not the machine (issue 34): each question timed ``--repeat`` times and its
fastest kept, p50/p95 with bootstrap intervals, pairs that cannot be told apart, the load average, the interval
drawn on the "which strategy?" chart. No assertion here depends on how fast anything ran."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers.compare_calls import compare, run_compare

from rag_eval.cli import cli
from rag_eval.engines import base as engines
from rag_eval.errors import RagEvalError
from rag_eval.eval.compare import compare as compare_module
from rag_eval.eval.compare import latency, runner
from rag_eval.eval.compare.runner import System
from rag_eval.eval.compare.timing import run_system
from rag_eval.eval.datasets.formats import load_dataset
from rag_eval.eval.reporting.charts import quality_latency
from rag_eval.eval.reporting.report import render_html, render_markdown, summary
from rag_eval.measure import latency_summary
from rag_eval.search.searcher import SearchSearcher
from rag_eval.search.searching import SearchResult


def _row(name: str, samples: list[float]) -> dict[str, Any]:
    """A timed report row holding ``samples`` (ms, one per question) and their summary."""
    return {
        "name": name,
        "latency_ms": {"search": latency_summary([v / 1000 for v in samples])},
        "latency_samples_ms": {"search": samples},
    }


# --- the statistics, on timings one can check by hand -------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2, 3, 7, 20, 21, 100, 289, 1000])
def test_the_percentile_index_is_the_one_latency_summary_reports(count: int) -> None:
    values = [float(v) for v in range(1, count + 1)]
    summary_ms = latency_summary([v / 1000 for v in values])
    assert values[latency.percentile_index(count, 0.95)] == pytest.approx(summary_ms["p95"])
    assert values[latency.percentile_index(count, 0.99)] == pytest.approx(summary_ms["p99"])


def test_two_questions_give_the_whole_range_as_interval() -> None:
    """Questions of 1 and 3 ms: a resample is (1, 1), (1, 3), (3, 1) or (3, 3), so its median is 1, 2 or 3 and its
    p95 (the larger value) 1 or 3, each extreme with chance 1/4: the 95% intervals are [1, 3] for both."""
    rows = [_row("a", [1.0, 3.0])]
    latency.intervals_and_pairs(rows)
    assert rows[0]["latency_ci95_ms"] == {"search": {"median": [1.0, 3.0], "p95": [1.0, 3.0]}}


def test_constant_times_have_a_point_interval_and_clear_pairs() -> None:
    rows = [_row("slow", [2.0] * 30), _row("fast", [1.0] * 30), _row("twin", [1.0] * 30)]
    pairs = latency.intervals_and_pairs(rows)
    assert rows[0]["latency_ci95_ms"]["search"] == {"median": [2.0, 2.0], "p95": [2.0, 2.0]}
    by = {(p["a"], p["b"], p["statistic"]): p for p in pairs}
    assert len(pairs) == 3 * 2
    for statistic in latency.STATISTICS:
        slow_fast = by[("slow", "fast", statistic)]
        assert slow_fast["faster"] == "fast" and slow_fast["ratio"] == 0.5
        assert slow_fast["difference_ci95_ms"] == [-1.0, -1.0]
        same = by[("fast", "twin", statistic)]
        assert same["faster"] is None and same["difference_ci95_ms"] == [0.0, 0.0] and same["ratio"] == 1.0


def test_the_same_times_in_another_order_cannot_be_told_apart() -> None:
    """Two systems with the same times on other questions: paired resamples move their medians apart in both
    directions, so the interval of the difference holds 0 (while a system twice as slow on every question is
    told apart)."""
    times = [0.1 * (1 + (7 * q) % 13) for q in range(60)]
    shuffled = times[17:] + times[:17]
    rows = [_row("a", times), _row("b", shuffled), _row("c", [2 * t for t in times])]
    pairs = {(p["a"], p["b"], p["statistic"]): p for p in latency.intervals_and_pairs(rows)}
    for statistic in latency.STATISTICS:
        low, high = pairs[("a", "b", statistic)]["difference_ci95_ms"]
        assert low <= 0 <= high and pairs[("a", "b", statistic)]["faster"] is None
        assert pairs[("a", "c", statistic)]["faster"] == "a"


def test_intervals_are_seeded_and_hold_the_estimate() -> None:
    times = [0.05 + 0.01 * ((q * 37) % 41) for q in range(200)]
    first, second = [_row("a", times)], [_row("a", times)]
    latency.intervals_and_pairs(first)
    latency.intervals_and_pairs(second)
    assert first == second
    for statistic in latency.STATISTICS:
        low, high = first[0]["latency_ci95_ms"]["search"][statistic]
        assert low <= first[0]["latency_ms"]["search"][statistic] <= high and low < high


def test_rows_without_samples_get_no_interval() -> None:
    rows = [_row("a", [1.0, 2.0]), {"name": "outside run"}]
    pairs = latency.intervals_and_pairs(rows)
    assert "latency_ci95_ms" not in rows[1] and pairs == []
    assert latency.intervals_and_pairs([{"name": "outside run"}]) == []


# --- the repeats ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def evidence():
    return load_dataset("evidence-mini")


def _scripted_times(monkeypatch: pytest.MonkeyPatch, seconds_of: Callable[[int], float]) -> list[str]:
    """Make FTS5's searcher report ``seconds_of(call number)`` as its search time (a tenth of it as its tokenize
    time); the texts asked are recorded in order."""
    calls: list[str] = []
    real = SearchSearcher.__call__

    def scripted(self: SearchSearcher, text: str) -> SearchResult:
        result = real(self, text)
        seconds = seconds_of(len(calls))
        calls.append(text)
        return dataclasses.replace(result, tokenize_seconds=seconds / 10, search_seconds=seconds)

    monkeypatch.setattr(SearchSearcher, "__call__", scripted)
    return calls


def test_each_question_keeps_the_fastest_of_its_runs(monkeypatch: pytest.MonkeyPatch, evidence) -> None:
    """Three warm-up calls, then three passes over the questions; question q's run in pass p takes
    (5, 3, 4)[(q + p) % 3] ms, so every question's fastest is 3 ms, found in another pass for each, and its
    first run (the ranked one) is (5, 3, 4)[q % 3]."""
    questions = len(evidence.queries)
    times = (0.005, 0.003, 0.004)

    def seconds_of(call: int) -> float:
        if call < 3:
            return 1.0
        run_pass, question = divmod(call - 3, questions)
        return times[(question + run_pass) % 3]

    calls = _scripted_times(monkeypatch, seconds_of)
    monkeypatch.setattr(runner, "WARMUP", 3)
    result = run_system(evidence, System("bigram", "", "", engine="fts5"), repeat=3)
    assert len(calls) == 3 + 3 * questions and result.repeat == 3
    assert result.search_seconds == [0.003] * questions
    assert result.tokenize_seconds == [0.003 / 10] * questions
    assert result.first_search_seconds == [times[q % 3] for q in range(questions)]
    # Each pass asks every question, in the dataset's order: a question's runs are spread over the run.
    texts = [query.text for query in evidence.queries.values()]
    assert calls[3:] == texts * 3


def test_the_repeats_interleave_the_systems(monkeypatch: pytest.MonkeyPatch, evidence) -> None:
    """Each system ranks its questions in turn; then each repeat pass asks every question of every system, the
    systems' order rotating from question to question, so a slow spell of the machine falls on all of them."""
    from rag_eval.eval.compare.timing import run_systems

    asked: list[tuple[str, str]] = []
    real = SearchSearcher.__call__

    def recorded(self: SearchSearcher, text: str) -> SearchResult:
        asked.append((self.index.tokenizer.spec, text))
        return real(self, text)

    monkeypatch.setattr(SearchSearcher, "__call__", recorded)
    monkeypatch.setattr(runner, "WARMUP", 2)
    systems = [System(name, "", "or", engine="fts5") for name in ("bigram", "unigram", "trigram")]
    results = run_systems(evidence, systems, repeat=3)
    texts = [query.text for query in evidence.queries.values()]
    count = len(texts)
    specs = [result.tokenizer_spec for result in results]
    first = 0
    for spec in specs:  # warm-up and the ranked pass, one system after another
        assert asked[first : first + 2 + count] == [(spec, text) for text in texts[:2] + texts]
        first += 2 + count
    repeats = asked[first:]
    assert len(repeats) == 2 * count * len(specs)
    orders = set()
    for block in range(2 * count):
        group = repeats[block * len(specs) : (block + 1) * len(specs)]
        assert {text for _spec, text in group} == {texts[block % count]} and {s for s, _ in group} == set(specs)
        orders.add(tuple(spec for spec, _text in group))
    assert len(orders) == len(specs)  # every system leads in turn
    assert [result.repeat for result in results] == [3, 3, 3]


def test_repeats_change_no_ranking(evidence) -> None:
    once = run_system(evidence, System("bigram", "", "", engine="fts5"))
    thrice = run_system(evidence, System("bigram", "", "", engine="fts5"), repeat=3)
    assert thrice.run == once.run and thrice.zero_hit_queries == once.zero_hit_queries


def test_a_repeat_with_other_hits_is_an_error(monkeypatch: pytest.MonkeyPatch, evidence) -> None:
    def other(self: engines.Searcher, text: str) -> SearchResult:
        result = self(text)
        return dataclasses.replace(result, hits=list(reversed(result.hits))[:-1])

    monkeypatch.setattr(engines.Searcher, "again", other)
    with pytest.raises(RagEvalError, match="returned other hits when it was run again"):
        run_system(evidence, System("bigram", "", "", engine="fts5"), repeat=2)


@pytest.mark.parametrize("engine", ["impact", "bm25s"])
def test_what_an_engine_counts_per_question_counts_each_question_once(
    monkeypatch: pytest.MonkeyPatch, evidence, engine: str
) -> None:
    """The impact engine's FTS5 fallbacks and bm25s's ranking times are per question, not per timed run."""
    if engine == "bm25s":
        pytest.importorskip("bm25s")
    from rag_eval.engines import impact

    monkeypatch.setattr(impact, "fallback_reason", lambda index, query: "counted")
    searchers: list[engines.Searcher] = []
    real = engines.ENGINES[engine].searcher

    def keep(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        found = real(self, *args, **kwargs)
        searchers.append(found)
        return found

    monkeypatch.setattr(engines.ENGINES[engine], "searcher", keep)
    result = run_system(evidence, System("bigram", "", "or", engine=engine), repeat=4)
    questions = len(evidence.queries)
    if engine == "impact":
        assert result.engine_stats["fts5_fallbacks"] == questions
    else:
        assert len(searchers[0].rank_seconds) == runner.WARMUP + questions  # type: ignore[attr-defined]


# --- the option -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-1", "101", "99999999999999999999999", "1000000"])
def test_repeat_out_of_range_is_one_error_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str
) -> None:
    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("a system ran before --repeat was checked")

    monkeypatch.setattr(compare_module, "run_systems", refuse)
    result = CliRunner().invoke(cli, ["compare", "evidence-mini", "--repeat", value, "-o", str(tmp_path / "out")])
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and len(errors) == 1, result.output
    assert "--repeat must be a whole number from 1 to 100" in errors[0]
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", [0, -2, 101, True, 2.0, "3", None])
def test_the_library_checks_repeat_too(value: object, evidence, tmp_path: Path) -> None:
    with pytest.raises(RagEvalError, match="--repeat must be a whole number"):
        compare(evidence, [System("bigram", "", "")], repeat=value)  # type: ignore[arg-type]
    with pytest.raises(RagEvalError, match="--repeat must be a whole number"):
        run_compare("evidence-mini", output=tmp_path / "out", tokenizers=["bigram"], repeat=value)  # type: ignore[arg-type]
    with pytest.raises(RagEvalError, match="--repeat must be a whole number"):
        run_system(evidence, System("bigram", "", ""), repeat=value)  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()


def test_help_names_the_option_and_its_default() -> None:
    result = CliRunner().invoke(cli, ["compare", "--help"])
    assert "--repeat K" in result.output and f"[default: {latency.DEFAULT_REPEAT}]" in result.output


# --- the report -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("latency") / "report"
    result = run_compare("evidence-mini", output=out, tokenizers=["bigram", "unigram", "trigram"], repeat=2)
    return json.loads((result.output / "report.json").read_text(encoding="utf-8"))


def test_the_report_records_repeats_intervals_pairs_and_load(compared: dict[str, Any]) -> None:
    assert compared["latency"]["repeat"] == 2 and compared["latency"]["per_question"] == "fastest of the repeats"
    load = compared["environment"]["load_average"]
    assert set(load) == {"start", "end"} and all(len(load[k]) == 3 for k in load)
    rows = compared["systems"]
    for row in rows:
        for statistic in latency.STATISTICS:
            low, high = row["latency_ci95_ms"]["search"][statistic]
            assert low <= row["latency_ms"]["search"][statistic] <= high
        assert set(row["latency_ms"]["search"]) == {"min", "median", "mean", "p95", "p99", "max"}
        assert "search_first_run" in row["latency_ms"]
    pairs = compared["latency"]["pairs"]
    assert {(p["a"], p["b"]) for p in pairs} == {(a["name"], b["name"]) for a, b in itertools.combinations(rows, 2)}


def _with_samples(report: dict[str, Any], samples: dict[str, list[float]]) -> dict[str, Any]:
    """``report`` with its rows' search times replaced by ``samples`` and the intervals and pairs made again."""
    report = copy.deepcopy(report)
    for row in report["systems"]:
        made = _row(row["name"], samples[row["name"].split(" | ")[0]])
        row["latency_ms"]["search"] = made["latency_ms"]["search"]
        row["latency_samples_ms"] = made["latency_samples_ms"]
    report["latency"]["pairs"] = latency.intervals_and_pairs(report["systems"])
    report["environment"]["load_average"] = {"start": [3.21, 2.5, 1.0], "end": [4.56, 2.75, 1.25]}
    return report


def test_the_pages_say_which_latencies_cannot_be_told_apart(compared: dict[str, Any]) -> None:
    count = len(compared["systems"][0]["latency_samples_ms"]["search"])
    times = [0.1 * (1 + (7 * q) % 13) for q in range(count)]
    report = _with_samples(
        compared, {"bigram": times, "unigram": times[5:] + times[:5], "trigram": [5 * t for t in times]}
    )
    markdown, html = render_markdown(report), render_html(report)
    for page in (markdown, re.sub(r"<[^>]+>", "", html)):
        assert "Search p50: cannot be told apart: bigram and unigram" in page
        assert "Search p95: cannot be told apart: bigram and unigram" in page
        assert "and trigram" not in page.split("cannot be told apart")[1].split("\n")[0]
        assert "3.21 at the start and 4.56 at the end" in page  # the load average beside the latency
        assert "3.21, 2.5, 1.0 at the start; 4.56, 2.75, 1.25 at the end" in page  # and in the environment
        assert "Each question ran 2 times per system" in page and "fastest of the 2" in page
    apart = _with_samples(
        compared, {"bigram": times, "unigram": [2 * t for t in times], "trigram": [5 * t for t in times]}
    )
    assert "every pair of systems can be told apart" in render_markdown(apart)
    assert "cannot be told apart" not in render_markdown(apart)


def test_the_latency_table_shows_the_intervals(compared: dict[str, Any]) -> None:
    markdown = render_markdown(compared)
    header = next(line for line in markdown.splitlines() if line.startswith("| system | search min"))
    assert "median 95% interval" in header and "p95 95% interval" in header
    row = next(r for r in compared["systems"] if r["name"].startswith("bigram"))
    low, high = row["latency_ci95_ms"]["search"]["p95"]
    assert f"{low:.3f}-{high:.3f}" in markdown
    printed = summary(compared, Path("out"))
    assert printed["systems"][0]["search_ms_ci95"]["p95"] == compared["systems"][0]["latency_ci95_ms"]["search"]["p95"]


def test_an_older_report_renders_without_intervals_or_load(compared: dict[str, Any]) -> None:
    old = copy.deepcopy(compared)
    del old["latency"], old["environment"]["load_average"]
    for row in old["systems"]:
        del row["latency_ci95_ms"]
    markdown = render_markdown(old)
    assert "95% interval" not in markdown and "cannot be told apart" not in markdown
    assert "Load average" not in markdown and "## Latency" in markdown
    render_html(old)


def test_the_which_strategy_chart_draws_each_p95_interval(compared: dict[str, Any]) -> None:
    rows = compared["systems"]
    labels = {row["name"]: row["name"].split(" | ")[0] for row in rows}
    chart = quality_latency(rows, labels, compared["metrics"][0])
    assert chart is not None
    drawn = re.findall(r'id="which-p95-interval-(\d+)"', chart.svg)
    assert sorted(set(drawn)) == [str(i) for i in range(len(rows))]
    assert "95% interval" in chart.note
    for row in rows:  # without intervals (tune's dev chart, an older report): no bars, no word of them
        del row["latency_ci95_ms"]
    bare = quality_latency(rows, labels, compared["metrics"][0])
    assert bare is not None and "p95-interval" not in bare.svg and "interval" not in bare.note
