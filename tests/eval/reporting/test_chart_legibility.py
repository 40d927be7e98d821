"""Charts a person can read (issue 34): on every chart compare's report and tune draw, no text over another and
none outside the figure, measured with matplotlib's own text extents; every point of the "which strategy?" chart
named, and no system's name cut so that two read the same."""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
from helpers.studies import small_study

from rag_eval.eval.judging.oracle_report import chart_figure
from rag_eval.eval.reporting import charts, legibility
from rag_eval.eval.tuning.report import dev_chart
from rag_eval.eval.tuning.search import Trial
from rag_eval.eval.tuning.space import Candidate

METRIC = "nDCG@10"
#: tune's longest kind of name: a weighted hybrid of three tokenizers with query processing.
HYBRID = "unigram^2+jieba:mode=precise^2+pkuseg^2 | query:stopwords=zh,max_df=0.{}"


def _rows(names: list[str], latencies: list[float], qualities: list[float]) -> list[dict[str, Any]]:
    """Report rows as compare writes them: quality with intervals, latency with samples and p95 intervals, recall
    curve, query kinds and index size."""
    return [
        {
            "name": name,
            "metrics": {METRIC: quality, "R@100": min(1.0, quality + 0.1)},
            "ci95": {METRIC: [max(0.0, quality - 0.03), min(1.0, quality + 0.03)]},
            "latency_ms": {"search": {"p95": p95, "median": p95 / 2}},
            "latency_ci95_ms": {"search": {"p95": [p95 * 0.9, p95 * 1.1]}},
            "latency_samples_ms": {"search": [p95 / 3, p95 / 2, p95]},
            "recall_curve": {"R@1": quality / 2, "R@10": quality, "R@100": min(1.0, quality + 0.1)},
            "by_kind": {"compact": {"queries": 3, METRIC: quality}, "loose": {"queries": 2, METRIC: quality / 2}},
            "build": {"index_bytes": 1e6 * (1 + number)},
        }
        for number, (name, p95, quality) in enumerate(zip(names, latencies, qualities, strict=True))
    ]


def _crowded(count: int) -> tuple[list[float], list[float]]:
    """Latencies and qualities close together, as tune's dev front on handbook: 4.1-5 ms, 0.60-0.70."""
    return [4.1 + 0.08 * i for i in range(count)], [0.60 + 0.008 * i for i in range(count)]


CASES = {
    # twelve long hybrid names that differ only at their end, in a crowd
    "12 long hybrids": ([HYBRID.format(i) for i in range(12)], *_crowded(12)),
    # twelve names of every length, in the same crowd
    "12 mixed names": (
        ["bigram", "unigram", "jieba:mode=precise", "pkuseg", "rrf(unigram, jieba)", "unigram+jieba+pkuseg"]
        + [HYBRID.format(i) for i in range(5)]
        + ["外部知识库检索策略" * 3],
        *_crowded(12),
    ),
    "ties": ([HYBRID.format(i) for i in range(6)], [5.0] * 6, [0.7] * 6),
    "one point": ([HYBRID.format(0)], [5.0], [0.7]),
    "extreme values": ([HYBRID.format(i) for i in range(4)], [0.001, 0.002, 5000.0, 1e5], [0.0, 1.0, 0.0001, 0.9999]),
    "forty short names": ([f"s{i}" for i in range(40)], *_crowded(40)),
}


@functools.cache
def _charts(case: str) -> dict[str, charts.Chart]:
    """Every chart of report.html for the case's rows, by name; drawn once for the tests that read them."""
    rows = _rows(*CASES[case])
    labels = {row["name"]: row["name"] for row in rows}
    made = {
        "which": charts.quality_latency(rows, labels, METRIC),
        "bars": charts.metric_bars(rows, labels, METRIC, 24, {}),
        "recall": charts.recall_curves(rows, labels),
        "latency": charts.search_latency(rows, labels),
        "kinds": charts.kind_heatmap(rows, labels, METRIC),
    }
    return {name: chart for name, chart in made.items() if chart is not None}


def _shown(chart: charts.Chart) -> str:
    """Every text the chart draws, its lines joined, without spaces: where a name is looked for."""
    assert chart.figure is not None
    return "\n".join("".join(box.text.split()) for box in legibility.drawn_texts(chart.figure))


@pytest.mark.parametrize("case", CASES)
def test_no_text_overlaps_another_or_leaves_the_figure(case: str) -> None:
    for name, chart in _charts(case).items():
        assert chart.figure is not None
        problems = legibility.text_problems(chart.figure)
        assert not problems, f"{case}, chart {name}:\n{problems.describe()}"


@pytest.mark.parametrize("case", CASES)
def test_every_system_is_named_whole_in_every_chart(case: str) -> None:
    """Regression: names were cut to 40 characters with an ellipsis ('...| que…'), so hybrids that differ at
    their end read the same, and three markers of tune's chart had no label."""
    names = CASES[case][0]
    for name, chart in _charts(case).items():
        shown = _shown(chart)
        assert "…" not in shown, name
        for system in names:
            assert any("".join(system.split()) in line for line in shown.splitlines()), (
                f"{case}: {system!r} not whole in chart {name}"
            )
    which = _charts(case)["which"]
    assert which.figure is not None
    axes = which.figure.axes[0]
    labels = [text.get_text() for text in axes.texts]
    if "numbered" in which.note or "key under the chart" in which.note:
        numbers = {number for label in labels for number in label.split(", ")}
        assert numbers == {str(n) for n in range(1, len(names) + 1)}, "a marker without its number"
    else:
        assert sorted(line for label in labels for line in label.split("\n")) == sorted(names)


def test_names_are_wrapped_never_cut() -> None:
    for name in [HYBRID.format(3), "x" * 95, "外部" * 30, "a | b", "rrf(unigram, jieba)", "bigram"]:
        wrapped = charts.wrap_name(name)
        assert all(charts._columns(line) <= charts.LABEL_CHARS for line in wrapped.split("\n"))
        assert "".join(wrapped.split()) == "".join(name.split())
    assert charts.wrap_name(HYBRID.format(1)) != charts.wrap_name(HYBRID.format(2))


def test_crowded_long_names_are_numbered_with_a_key() -> None:
    """Twelve long hybrids in a crowd: numbers beside the markers, each number once, and a key under the chart
    that gives every full name; the numbers go by quality, best first."""
    names, _latencies, qualities = CASES["12 long hybrids"]
    chart = _charts("12 long hybrids")["which"]
    assert chart is not None and chart.figure is not None
    assert "numbered" in chart.note
    key = next(legend for legend in chart.figure.legends if legend.get_gid() == "point-key")
    entries = [text.get_text() for text in key.get_texts()]
    best_first = sorted(names, key=lambda n: -qualities[names.index(n)])
    assert entries == [f"{number}  {name}" for number, name in enumerate(best_first, 1)]


def test_a_few_short_names_are_written_beside_their_markers() -> None:
    names = ["bigram", "unigram", "jieba"]
    chart = charts.quality_latency(_rows(names, [1.0, 3.0, 9.0], [0.5, 0.6, 0.7]), {n: n for n in names}, METRIC)
    assert chart is not None and chart.figure is not None
    assert "numbered" not in chart.note and not chart.figure.legends[1:]
    assert sorted(text.get_text() for text in chart.figure.axes[0].texts) == sorted(names)


@pytest.mark.parametrize("kinds", [2, 9, 14])
def test_the_kind_heatmap_is_legible_with_many_kinds_and_long_names(kinds: int) -> None:
    names = [HYBRID.format(i) for i in range(5)]
    rows = _rows(names, *_crowded(5))
    for row in rows:
        row["by_kind"] = {f"kind-{k}-{'long' * (k % 4)}": {"queries": 10 + k, METRIC: 0.5} for k in range(kinds)}
    chart = charts.kind_heatmap(rows, {name: name for name in names}, METRIC)
    assert chart is not None and chart.figure is not None
    problems = legibility.text_problems(chart.figure)
    assert not problems, problems.describe()


@pytest.mark.parametrize("case", CASES)
def test_tunes_dev_chart_is_legible(case: str) -> None:
    """tune's pareto.svg: the dev candidates of the last round (no interval bars, sizes in MB)."""
    names, latencies, qualities = CASES[case]
    trials = [
        Trial(Candidate(name), 2, 166, quality, p95, 1.0 + number)
        for number, (name, p95, quality) in enumerate(zip(names, latencies, qualities, strict=True))
    ]
    trials.append(Trial(Candidate("dropped in round 1"), 1, 50, 0.1, 1.0, 1.0))
    chart = dev_chart(trials, METRIC)
    assert chart is not None and chart.figure is not None
    problems = legibility.text_problems(chart.figure)
    assert not problems, problems.describe()
    assert "dropped in round 1" not in _shown(chart)


@pytest.mark.parametrize("sets", [1, 4])
def test_judging_study_charts_are_legible(sets: int) -> None:
    study = small_study()
    studies = {f"{'a-long-study-file-name-' * 3}{number}": copy.deepcopy(study) for number in range(sets)}
    for kind in ("picks", "settled"):
        problems = legibility.text_problems(chart_figure(kind, studies))
        assert not problems, f"{kind}:\n{problems.describe()}"


# --- the check itself ------------------------------------------------------------------------------------------
def test_the_check_finds_overlapping_texts_and_texts_outside_the_figure() -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2))
    ax = fig.add_subplot()
    ax.set_xticks([])
    ax.set_yticks([])
    fig.text(0.1, 0.5, "first label")
    fig.text(0.12, 0.5, "second label")
    fig.text(0.9, 0.1, "a text that runs off the right edge")
    fig.text(0.5, 0.9, "")  # nothing drawn: not counted
    problems = legibility.text_problems(fig)
    assert [(a.text, b.text) for a, b in problems.overlaps] == [("first label", "second label")]
    assert [item.text for item in problems.outside] == ["a text that runs off the right edge"]
    assert "overlap: 'first label'" in problems.describe()


def test_the_check_passes_a_clean_figure_and_ignores_ticks_out_of_view() -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4, 3), layout="constrained")
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1])
    ax.set_xticks([0, 0.5, 1, 50])  # 50 is out of view: its label is not drawn
    ax.set_xlim(0, 1)
    ax.set_xlabel("x")
    assert not legibility.text_problems(fig)
    assert "50" not in [box.text for box in legibility.drawn_texts(fig)]
