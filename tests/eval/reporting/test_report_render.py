"""report.md and report.html: rendered from the report's data by templates, escaped, self-contained, with
matplotlib charts; the HTML checked in headless Chromium (issue #11: reports a researcher would put in a paper)."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO
from helpers.compare_calls import run_compare
from helpers.pages import CHROMIUM, CHROMIUM_ARGS, Page, markdown_html

from rag_eval.eval.compare.compare import OutsideRun
from rag_eval.eval.reporting.charts import pareto_front
from rag_eval.eval.reporting.report import labels, render_html, render_markdown

ROOT = REPO
HOSTILE_NAME = '<script>alert("x")</script> & 外部'
HOSTILE_TEXT = "<b>粗体</b> & *星* `代码` | 管道"
CHARTS = ["chart-which", *(f"chart-bars-{i}" for i in range(1, 7)), "chart-recall", "chart-latency", "chart-kinds"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A real compare with an outside run (no latency) and a gate, as ``rag-eval compare`` writes it."""
    root = tmp_path_factory.mktemp("reports")
    first = run_compare("evidence-mini", output=root / "first", tokenizers=["bigram", "unigram"])
    second = run_compare(
        "evidence-mini",
        output=root / "second",
        tokenizers=["bigram", "trigram"],
        outside=[OutsideRun("outside", first.output / "runs" / "unigram_lines_and.run")],
        against=first.output / "report.json",
    )
    return {"first": first.output, "second": second.output}


@pytest.fixture
def report(folders: dict[str, Path]) -> dict[str, Any]:
    """A fresh copy of the second report, free to change."""
    return json.loads((folders["second"] / "report.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def html(folders: dict[str, Path]) -> str:
    """report.html as compare wrote it."""
    return (folders["second"] / "report.html").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def markdown(folders: dict[str, Path]) -> str:
    """report.md as compare wrote it."""
    return (folders["second"] / "report.md").read_text(encoding="utf-8")


def test_hostile_names_and_query_texts_show_as_text(report: dict[str, Any]) -> None:
    report["systems"][2]["name"] = HOSTILE_NAME
    report["systems"][2]["largest_losses"] = [{"query": "e01", "delta": -0.5, "kind": "compact", "text": HOSTILE_TEXT}]
    page = Page(render_html(report))
    assert "script" not in page.tags and "b" not in page.tags
    text = "".join(page.text)
    assert text.count(HOSTILE_NAME) >= 5  # tables and every chart's tick labels
    assert HOSTILE_TEXT in text
    rendered = Page(markdown_html(render_markdown(report)))
    assert "script" not in rendered.tags and "b" not in rendered.tags
    assert HOSTILE_NAME in "".join(rendered.text) and HOSTILE_TEXT in "".join(rendered.text)


def test_markdown_tables_keep_their_columns_with_pipes_in_names(report: dict[str, Any]) -> None:
    report["systems"][2]["name"] = "a | b | c"
    rendered = markdown_html(render_markdown(report))
    quality = rendered.split("<table>")[1]
    rows = re.findall(r"<tr>(.*?)</tr>", quality, re.DOTALL)
    assert len(rows) == 1 + len(report["systems"])
    assert {len(re.findall(r"<t[hd][ >]", row)) for row in rows} == {1 + len(report["metrics"])}
    assert "<code>a | b | c</code>" in quality


def test_figures_come_from_the_report_unchanged(report: dict[str, Any], markdown: str, html: str) -> None:
    """Every quality value of report.json appears, to 4 places, in both pages; best values are bold."""
    page = html
    label, _ = labels(report)
    for metric in report["metrics"]:
        best = max(row["metrics"][metric] for row in report["systems"])
        for row in report["systems"]:
            value = f"{row['metrics'][metric]:.4f}"
            line = next(line for line in markdown.splitlines() if line.startswith(f"| `{label[row['name']]}` |"))
            assert (f"**{value}**" if row["metrics"][metric] == best else f" {value}") in line
            assert (f"<strong>{value}</strong>" if row["metrics"][metric] == best else f">{value}<") in page


def test_significance_arrows_are_kept(report: dict[str, Any], markdown: str, html: str) -> None:
    trigram = next(row for row in report["systems"] if row["name"].startswith("trigram"))
    assert trigram["significance"]["nDCG@10"]["significant"]  # the case this test is about
    value = f"{trigram['metrics']['nDCG@10']:.4f}"
    assert f"| {value}↓ |" in markdown
    assert re.search(re.escape(value) + r'<span class="down"[^>]*>↓</span>', html)


def test_no_heading_over_an_empty_differences_section(report: dict[str, Any], markdown: str) -> None:
    """Regression: 'Largest per-query differences' appeared with nothing under it."""
    assert "Largest per-query differences" in markdown
    for row in report["systems"]:
        row["largest_gains"], row["largest_losses"] = [], []
    assert "Largest per-query differences" not in render_markdown(report)
    assert "Largest per-query differences" not in render_html(report)


def test_markdown_shows_names_as_code_not_literal_backticks(markdown: str, html: str) -> None:
    """Regression: the HTML page showed Markdown's backticks literally."""
    assert "`" not in "".join(Page(html).text)
    assert "<code>bigram</code>" in markdown_html(markdown)


def test_html_is_self_contained_and_has_every_chart(html: str) -> None:
    page = Page(html)
    assert not {"script", "link", "img", "iframe", "object"} & set(page.tags)
    assert "http" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "src=" not in html and set(re.findall(r"url\((.)", html)) == {"#"}  # only references within the page
    assert [i for i in page.ids if i.startswith("chart-")] == CHARTS
    assert len(page.ids) == len(set(page.ids)), "ids of the inlined SVGs collide"
    assert html.count("<svg") == len(CHARTS)


def test_rendering_is_reproducible(report: dict[str, Any], markdown: str, html: str) -> None:
    """The pages are a function of report.json: rendered again from it, they are the same bytes."""
    assert render_markdown(report) == markdown
    assert render_html(report) == html


def test_gate_and_skipped_systems_are_shown(report: dict[str, Any]) -> None:
    report["skipped"] = [
        {"tokenizer": "pkuseg", "reason": "the model is not installed", "hint": "run: rag-eval models install pkuseg"}
    ]
    report["gate"]["regressions"] = [
        {"system": "bigram | lines | and", "metric": "nDCG@10", "old": 0.9, "new": 0.8211, "tolerance": 0.005}
    ]
    markdown, page = render_markdown(report), Page(render_html(report))
    assert "`pkuseg`, the model is not installed; run: rag-eval models install pkuseg." in markdown
    assert "| REGRESSION | `bigram` | nDCG@10 | 0.9000 | 0.8211 | -0.0789 |" in markdown
    assert f"Gate against {report['gate']['against']}" in page.headings
    text = " ".join("".join(page.text).split())
    assert "1 regression 1 system compared with the baseline" in text
    assert "pkuseg, the model is not installed; run: rag-eval models install pkuseg." in text
    del report["gate"]
    report["skipped"] = []
    assert "Gate" not in render_markdown(report) and "Not compared" not in render_markdown(report)


def test_outside_runs_only_no_latency_anywhere(report: dict[str, Any]) -> None:
    """Rows of --run files have no latency, build or cost: no chart or table of those, and nothing breaks."""
    outside = next(row for row in report["systems"] if row["name"] == "outside")
    for key in ("significance", "largest_gains", "largest_losses"):
        outside.pop(key, None)
    report["systems"] = [outside, {**copy.deepcopy(outside), "name": "another"}]
    report["reference"] = "outside"
    page = Page(render_html(report))
    ids = [i for i in page.ids if i.startswith("chart-")]
    assert "chart-which" not in ids and "chart-latency" not in ids and "chart-bars-1" in ids
    assert "Cost and latency" not in page.headings
    assert "## Cost" not in render_markdown(report) and "## Latency" not in render_markdown(report)


def test_outside_run_beside_timed_systems(markdown: str, html: str) -> None:
    which = html[html.index('id="chart-which"') : html.index("</figure>", html.index('id="chart-which"'))]
    assert "outside (no latency)" in which and "Pareto front" in which
    latency = html[html.index('id="chart-latency"') : html.index("</figure>", html.index('id="chart-latency"'))]
    assert ">outside<" not in latency
    assert "No costs or latency for outside runs: `outside`." in markdown


def test_single_system(report: dict[str, Any]) -> None:
    report["systems"] = [row for row in report["systems"] if row["name"].startswith("bigram")]
    for row in report["systems"]:
        row.pop("significance", None)
    page = Page(render_html(report))
    assert [i for i in page.ids if i.startswith("chart-")] == CHARTS
    assert "On the Pareto front (no system is both faster and better): bigram." in " ".join("".join(page.text).split())
    assert not any(h.startswith("Against") for h in page.headings)
    assert "**" not in render_markdown(report)  # one system has no "best"


def test_many_systems(report: dict[str, Any]) -> None:
    template = next(row for row in report["systems"] if row["name"].startswith("bigram"))
    report["systems"] = []
    for number in range(12):  # past the 8 colours of the palette
        row = copy.deepcopy(template)
        row["name"] = f"s{number:02d}:option=value,long=setting{number} | lines | and"
        row["metrics"] = {m: round(v - 0.02 * number, 4) for m, v in row["metrics"].items()}
        row["latency_ms"]["search"]["p95"] = 0.2 + 0.05 * number
        report["systems"].append(row)
    html = render_html(report)
    for number in range(12):  # each system named in the quality table, every bar chart and the recall legend
        assert html.count(f"s{number:02d}:option=value,long=setting{number}") >= 1 + 6 + 1
    assert len(Page(html).ids) == len(set(Page(html).ids))


def test_pareto_front() -> None:
    # (p95 ms, quality): b is slower and worse than a; d is the slowest but the best; c is dominated by a.
    points = [(1.0, 0.5), (2.0, 0.4), (0.5, 0.2), (3.0, 0.5), (4.0, 0.7)]
    assert pareto_front(points) == [2, 0, 4]
    assert pareto_front([(1.0, 0.3)]) == [0]
    assert pareto_front([(1.0, 0.3), (1.0, 0.3)]) == [0]


def test_charts_have_axes_and_a_log_latency_axis(html: str) -> None:
    def chart(name: str) -> str:
        start = html.index(f'id="{name}"')
        return html[start : html.index("</figure>", start)]

    recall = chart("chart-recall")
    assert "recall@k" in recall and "k (cut-off, log scale)" in recall
    assert all(f">{k}</text>" in recall for k in (1, 10, 100)) and ">0.8</text>" in recall
    latency = chart("chart-latency")
    assert "search time per query (ms, log scale)" in latency and "log axis" in latency
    assert "search latency p95 (ms, log scale)" in chart("chart-which")
    assert ">compact</text>" in chart("chart-kinds") and ">n=2</text>" in chart("chart-kinds")


def test_templates_are_package_data() -> None:
    """The wheel ships eval/templates: pyproject's package data covers every template file."""
    import tomllib  # Python 3.11+, like compare's --systems files

    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = data["tool"]["setuptools"]["package-data"]["rag_eval.eval"]
    templates = sorted(p.relative_to(ROOT / "eval").as_posix() for p in (ROOT / "eval" / "templates").iterdir())
    assert {"templates/judge.html", "templates/report.html", "templates/report.md"} <= set(templates)
    assert all(any(fnmatch(name, pattern) for pattern in patterns) for name in templates)


def test_jinja2_and_matplotlib_load_only_when_a_report_is_rendered() -> None:
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom rag_eval.cli import cli\n"
        "import rag_eval.eval.reporting.report, rag_eval.eval.compare.compare\n"
        "assert CliRunner().invoke(cli, ['--help']).exit_code == 0\n"
        "print(sorted({'jinja2', 'matplotlib', 'markupsafe'} & set(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium executable (Debian: apt-get install chromium; .ci/run installs it)"
)
@pytest.mark.browser
def test_report_in_headless_chromium(folders: dict[str, Path], tmp_path: Path) -> None:
    """The page as a browser shows it: no console error, no request, every chart drawn, every system in the tables."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
    folder = folders["second"]
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    label, _ = labels(report)
    everyone = [label[row["name"]] for row in report["systems"]]
    timed = [label[row["name"]] for row in report["systems"] if "latency_ms" in row]
    problems: list[str] = []
    requests: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1240, "height": 900})
            page.on(
                "console",
                lambda message: problems.append(message.text) if message.type in ("error", "warning") else None,
            )
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.on("request", lambda request: requests.append(request.url))
            page.goto((folder / "report.html").as_uri(), wait_until="load")
            sizes = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('figure')].map(f => {
                const box = f.querySelector('svg').getBoundingClientRect();
                return [f.id, [box.width, box.height]]; }))""")
            tables = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('section')].map(s =>
                [s.id, [...s.querySelectorAll('table')].map(t =>
                    [...t.querySelectorAll('tbody tr th:first-child')].map(th => th.textContent.trim()))]))""")
            overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert problems == []
    assert requests == [(folder / "report.html").as_uri()]
    assert list(sizes) == CHARTS
    assert all(width > 100 and height > 100 for width, height in sizes.values()), sizes
    assert tables["quality"] == [everyone]
    assert tables["cost"] == [timed, timed]
    assert tables["kinds"] == [everyone]
    assert overflow <= 0
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000


def test_short_labels_drop_the_shared_builder_and_mode_but_keep_query_processing() -> None:
    def row(name: str) -> dict[str, Any]:
        tokenizer, builder, mode = name.split(" | ")[:3]
        return {"name": name, "tokenizer": tokenizer, "builder": builder, "mode": mode}

    names = ["unigram | sections | or", "unigram | sections | or | query:stopwords=zh", "bigram | sections | or"]
    label, shared = labels({"systems": [row(name) for name in names] + [{"name": "prior", "mode": None}]})
    assert shared == ("sections", "or")
    assert label == {
        names[0]: "unigram",
        names[1]: "unigram | query:stopwords=zh",
        names[2]: "bigram",
        "prior": "prior",
    }
    mixed, none_shared = labels({"systems": [row(names[0]), row("unigram | lines | and")]})
    assert none_shared is None and mixed == {names[0]: names[0], "unigram | lines | and": "unigram | lines | and"}


def test_bold_compares_values_as_shown() -> None:
    """Two cells that read 0.00 are both bold or neither (bold was decided on unrounded values)."""
    from rag_eval.eval.reporting.page import _column

    cells = _column([0.001, 0.004, 0.5], 2, "low")
    assert [c["text"] for c in cells] == ["0.00", "0.00", "0.50"] and [c["best"] for c in cells] == [True, True, False]
    assert not any(c["best"] for c in _column([0.001, 0.004], 2, "low"))  # they read the same: no best
    assert [c["best"] for c in _column([None, "-", 3, 5], 0, "high")] == [False, False, False, True]


def test_the_fastest_search_minimum_is_not_bolded(report: dict[str, Any]) -> None:
    """A strategy whose empty queries return at once (trigram, 0.001 ms) had the bold "search min": the fastest
    minimum says nothing about a system; the other latency columns still mark the best."""
    timed = [row for row in report["systems"] if row.get("latency_ms")]
    for number, row in enumerate(timed):
        row["latency_ms"]["search"]["min"] = 0.001 * (number + 1)
        row["latency_ms"]["search"]["p95"] = 1.0 + number
    lines = render_markdown(report).splitlines()
    header = next(line for line in lines if "search min" in line)
    columns = [cell.strip() for cell in header.split("|")]
    rows = []
    for line in lines[lines.index(header) + 2 :]:  # the table's rows, after its header and rule
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.split("|")])
    minimum, p95 = columns.index("search min"), columns.index("search p95")
    assert rows and not any(row[minimum].startswith("**") for row in rows)
    assert any(row[p95].startswith("**") for row in rows)


def test_the_report_page_marks_no_best_value_of_a_count() -> None:
    """report.md and report.html bolded the highest NumRet as the best, as if returning more documents were better."""
    from helpers.compare_calls import compare

    from rag_eval.eval.compare.runner import System
    from rag_eval.eval.datasets.formats import load_dataset
    from rag_eval.eval.reporting.page import page_data

    systems = [System("bigram", "", ""), System("unigram", "", "")]
    report, _runs = compare(load_dataset("handbook"), systems, metrics=["nDCG@10", "NumRet"])
    assert report["systems"][0]["metrics"]["NumRet"] != report["systems"][1]["metrics"]["NumRet"]
    rows = page_data(report)["quality"]["rows"]
    assert not any(row["cells"][1]["best"] for row in rows)
    assert any(row["cells"][0]["best"] for row in rows)  # nDCG@10 still marks its best
