"""Pages a person can read at 1400 px (issue 34), as Chromium draws them: in report.html (many long-named
systems; a report without judgments whose "disagree most" table holds long questions) and in tune's pareto.svg,
no chart text over another or outside its chart, and no table wider than its box or the page. Screenshots are
saved next to the test's files; a failure names them."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from helpers.compare_calls import run_compare
from helpers.pages import CHROMIUM, CHROMIUM_ARGS

from rag_eval.eval.reporting.report import render_html
from rag_eval.eval.tuning.report import dev_chart
from rag_eval.eval.tuning.search import Trial
from rag_eval.eval.tuning.space import Candidate

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None, reason="no chromium executable (Debian: apt-get install chromium; .ci/run installs it)"
    ),
]

WIDTH = 1400
HYBRID = "unigram^2+jieba:mode=precise^2+pkuseg^2"
#: Questions of a knowledge base, long ones among them: one with no space to break at.
QUESTIONS = [
    "如何在团队空间中为每个成员分别设置页面的查看、评论与编辑权限，并在成员离职后把他创建的所有页面一次性转交给另一位管理员，同时保留页面的历史版本和评论记录？",
    "导出数据",
    "审计日志保留多久",
    "账号被盗了找谁报告",
    "getting-started/create-and-edit-pages.md#从Markdown导入的操作步骤里提到的图片附件最大能有多大"
    "以及超过限制以后会发生什么事情",
]

#: What the page shows, measured by the browser: each chart's texts (the lines of one text joined into one box)
#: that overlap or leave the chart's box, each table's width against its box, the page's width.
MEASURE = """() => {
    const tolerance = 1;
    const box = (r) => ({x0: r.left, y0: r.top, x1: r.right, y1: r.bottom});
    const outermost = (svg) => !(svg.parentElement && svg.parentElement.closest('svg'));
    const charts = [...document.querySelectorAll('svg')].filter(outermost).map(svg => {
            const frame = box(svg.getBoundingClientRect());
            const groups = new Map();
            for (const text of svg.querySelectorAll('text')) {
                const r = text.getBoundingClientRect();
                if (!text.textContent.trim() || r.width === 0) continue;
                const key = text.parentElement;
                const had = groups.get(key);
                const b = box(r);
                groups.set(key, had ? {text: had.text + ' / ' + text.textContent,
                    x0: Math.min(had.x0, b.x0), y0: Math.min(had.y0, b.y0),
                    x1: Math.max(had.x1, b.x1), y1: Math.max(had.y1, b.y1)} : {text: text.textContent, ...b});
            }
            const texts = [...groups.values()];
            const overlaps = [];
            texts.forEach((a, i) => texts.slice(i + 1).forEach(b => {
                if (Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0) > tolerance
                    && Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0) > tolerance) overlaps.push([a.text, b.text]);
            }));
            const outside = texts.filter(t => t.x0 < frame.x0 - tolerance || t.y0 < frame.y0 - tolerance
                || t.x1 > frame.x1 + tolerance || t.y1 > frame.y1 + tolerance).map(t => t.text);
            const cut = texts.filter(t => t.text.includes('\u2026')).map(t => t.text);
            const figure = svg.closest('figure');
            return {chart: figure ? figure.id : 'svg', texts: texts.length, overlaps, outside, cut};
        });
    const tables = [...document.querySelectorAll('table')].map(table => ({
        caption: (table.caption ? table.caption.textContent : table.rows[0].textContent).trim().slice(0, 70),
        width: table.getBoundingClientRect().width,
        room: table.parentElement.clientWidth,
    }));
    return {charts, tables, page: document.documentElement.scrollWidth};
}"""


def _measure(path: Path, shot: Path) -> dict[str, Any]:
    """``path`` opened in headless Chromium at 1400 px: what MEASURE finds; a screenshot saved to ``shot``."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
            page.goto(path.as_uri(), wait_until="load")
            found = page.evaluate(MEASURE)
            if path.suffix == ".svg":  # a bare SVG document: its own box
                page.screenshot(
                    path=str(shot),
                    clip=page.evaluate(
                        "() => { const r = document.documentElement.getBoundingClientRect();"
                        " return {x: 0, y: 0, width: Math.ceil(r.width), height: Math.ceil(r.height)}; }"
                    ),
                )
            else:
                page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    return found


def _assert_legible(found: dict[str, Any], shot: Path, charts: int) -> None:
    where = f"(screenshot: {shot})"
    assert len(found["charts"]) == charts and all(chart["texts"] > 3 for chart in found["charts"]), where
    for chart in found["charts"]:
        assert chart["overlaps"] == [], f"{chart['chart']}: texts over each other {where}"
        assert chart["outside"] == [], f"{chart['chart']}: texts outside the chart {where}"
        assert chart["cut"] == [], f"{chart['chart']}: names cut short {where}"
    for table in found["tables"]:
        assert table["width"] <= table["room"] + 1, f"table wider than its box: {table} {where}"
    assert found["page"] <= WIDTH, f"the page is {found['page']} px wide {where}"


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real compare's report.json (judged, timed, with kinds and the label-free section)."""
    out = tmp_path_factory.mktemp("judged") / "report"
    run_compare("evidence-mini", output=out, tokenizers=["bigram", "unigram"], repeat=1)
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


def _many_long_named(report: dict[str, Any], count: int = 12) -> dict[str, Any]:
    """The report with ``count`` systems named as tune's hybrids are, differing only at the end (the last one
    named in Chinese), crowded together in quality and latency."""
    report = copy.deepcopy(report)
    template = next(row for row in report["systems"] if row["name"].startswith("bigram"))
    for key in ("significance", "largest_gains", "largest_losses"):
        template.pop(key, None)
    rows = []
    for number in range(count):
        row = copy.deepcopy(template)
        row["tokenizer"] = HYBRID if number < count - 1 else "外部知识库检索策略" * 3
        row["name"] = (
            f"{row['tokenizer']} | {row['builder']} | {row['mode']} | query:stopwords=zh,max_df=0.{number:02d}"
        )
        row["metrics"] = {metric: round(value - 0.006 * number, 4) for metric, value in row["metrics"].items()}
        row["latency_ms"]["search"]["p95"] = 4.1 + 0.08 * number
        rows.append(row)
    names = [row["name"] for row in rows]
    report["systems"], report["reference"] = rows, names[0]
    labels = report["without_labels"]
    labels["zero_hit_rate"] = dict.fromkeys(names, 0.0)
    labels["overlap"] = [
        {"a": a, "b": b, "jaccard@10": 0.5, "rbo@10": 0.5} for a, b in itertools.combinations(names[:4], 2)
    ]
    for item, question in zip(labels["disagreements"], itertools.cycle(QUESTIONS), strict=False):
        hits = next(iter(item["top"].values())) or ["getting-started/create-and-edit-pages.md#从Markdown导入"]
        item["top"], item["text"] = dict.fromkeys(names, hits), question
    report.pop("gate", None)
    return report


def test_a_report_with_many_long_named_systems(judged: dict[str, Any], tmp_path: Path) -> None:
    """Regression: the 'which strategy?' labels overlapped and were cut to '...| que…'; the heatmap's names left
    its figure."""
    page = tmp_path / "report.html"
    page.write_text(render_html(_many_long_named(judged)), encoding="utf-8")
    shot = tmp_path / "report.png"
    _assert_legible(_measure(page, shot), shot, charts=page.read_text(encoding="utf-8").count("<figure"))


def test_a_report_without_judgments_and_long_questions(tmp_path: Path) -> None:
    """Regression: the 'disagree most' table of a report without judgments was wider than the page (its
    questions never wrapped; six systems' columns of at least 12 em each)."""
    questions = tmp_path / "questions.txt"
    questions.write_text("\n".join(QUESTIONS) + "\n", encoding="utf-8")
    out = tmp_path / "report"
    tokenizers = ["bigram", "unigram", "trigram", "unicode61", "jieba", "jieba:mode=precise"]
    run_compare("handbook", output=out, queries=questions, tokenizers=tokenizers, repeat=1)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Questions the systems disagree on most" in html and QUESTIONS[0] in html
    shot = tmp_path / "unjudged.png"
    _assert_legible(_measure(out / "report.html", shot), shot, charts=html.count("<figure"))


#: tune's last round on handbook (reports/tune/handbook/tune.json before the latency fix): name, p95 ms, nDCG@10.
HANDBOOK_FRONT = [
    ("bigram", 4.1332, 0.6439),
    ("unigram", 4.6855, 0.6467),
    ("jieba:mode=precise", 4.3165, 0.6229),
    ("jieba", 4.3772, 0.6392),
    ("pkuseg", 4.4257, 0.6075),
    ("rrf(unigram, jieba)", 6.1187, 0.6672),
    ("unigram+jieba:mode=precise", 4.7594, 0.6763),
    ("unigram^2+jieba:mode=precise^2", 4.5347, 0.6664),
    ("unigram^2+jieba:mode=precise^2 | query:stopwords=zh", 4.6432, 0.6807),
    ("unigram+jieba+pkuseg", 4.9401, 0.6795),
    ("unigram+jieba:mode=precise+pkuseg | query:stopwords=zh", 5.041, 0.6959),
    ("unigram^2+jieba:mode=precise^2+pkuseg^2", 4.9519, 0.6616),
]
LONG_FRONT = [
    (f"{HYBRID} | query:stopwords=zh,max_df=0.{number:02d}", 4.1 + 0.08 * number, 0.6 + 0.008 * number)
    for number in range(12)
]


@pytest.mark.parametrize("front", [HANDBOOK_FRONT, LONG_FRONT], ids=["handbook", "long names"])
def test_tunes_pareto_chart(tmp_path: Path, front: list[tuple[str, float, float]]) -> None:
    """Regression: on tune's pareto.svg of handbook labels overlapped, one was cut to '…| que...' and three
    markers had none."""
    trials = [
        Trial(Candidate(name), 2, 166, quality, p95, 1.0 + number) for number, (name, p95, quality) in enumerate(front)
    ]
    chart = dev_chart(trials, "nDCG@10")
    assert chart is not None
    svg = tmp_path / "pareto.svg"
    svg.write_text(chart.svg, encoding="utf-8")  # as tune writes it
    shot = tmp_path / "pareto.png"
    _assert_legible(_measure(svg, shot), shot, charts=1)
