"""Hostile text in report.md and report.html (names, query texts, ids, gate lines): it shows as text, keeps every
table's columns and every list's shape, and never reverses the text after it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers.compare_calls import run_compare
from helpers.pages import CHROMIUM, CHROMIUM_ARGS, Page, _tables, markdown_html

from rag_eval.eval.reporting.report import render_html, render_markdown

#: Explicit bidi formatting characters: embeddings, overrides and isolates (not the marks LRM/RLM, which are letters).
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


@pytest.fixture(scope="module")
def base_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = run_compare(
        "evidence-mini", output=tmp_path_factory.mktemp("audit") / "r", tokenizers=["bigram", "unigram"]
    )
    return json.loads((folder.output / "report.json").read_text(encoding="utf-8"))


@pytest.fixture
def report(base_report: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(base_report))


# -- report.md ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("line", ["- x", "+ x", "* x", "1. x", "2) x", "> x", "# x"])
def test_a_line_that_starts_like_a_list_marker_stays_one_list_item(report: dict[str, Any], line: str) -> None:
    """Bug: _md left a leading '-', '+' or '1.' as it was, so a gate line '- x' became a list inside the list."""
    report["gate"] = {"against": "base.json", "tolerance": 0.01, "compared": 0, "unmatched": [line, line]}
    gate = render_markdown(report).split("## Gate")[1].split("\n## ")[0]
    rendered = Page(markdown_html(gate))
    assert rendered.tags.count("ul") == 1 and "ol" not in rendered.tags and "blockquote" not in rendered.tags
    assert "".join(rendered.text).count(line + ".") == 2


@pytest.mark.parametrize("name", ["", " ", "   "])
def test_an_empty_or_blank_name_is_an_empty_code_span_not_two_backticks(report: dict[str, Any], name: str) -> None:
    """Bug: _md_code('') wrote '``', which is no code span: it showed as backticks, or opened a span that ran on
    to the next '``' on the line and swallowed the text between."""
    report["dataset"]["id"] = name
    markdown = render_markdown(report)
    first = Page(markdown_html(markdown.split("\n\n")[1].splitlines()[0]))
    assert "``" not in "".join(first.text)
    assert first.tags.count("code") == 2  # the id and the checksum
    hits = report["without_labels"]["disagreements"][0]["top"]
    system = next(iter(hits))
    hits[system] = [name, "second", name, "third"]
    rendered = markdown_html(render_markdown(report))
    item = next(li for li in re.findall(r"<li>(.*?)</li>", rendered, re.S) if "second" in li)
    assert re.findall(r"<code>(.*?)</code>", item)[-4:] == [" " * 2, "second", " " * 2, "third"]


@pytest.mark.parametrize("control", BIDI_CONTROLS)
def test_bidi_controls_in_names_and_texts_are_shown_not_obeyed_in_markdown(
    report: dict[str, Any], control: str
) -> None:
    """Bug: an override (U+202E) in a system name or query text reached report.md as it was and reversed the rest
    of its table row (the numbers too) wherever the file is shown."""
    name = report["systems"][0]["name"]
    text = json.dumps(report, ensure_ascii=False).replace(json.dumps(name)[1:-1], f"{control}evil")
    hostile = json.loads(text)
    hostile["without_labels"]["disagreements"][0]["text"] = f"{control}问题"
    markdown = render_markdown(hostile)
    assert not set(BIDI_CONTROLS) & set(markdown)
    assert f"\\u{ord(control):04x}evil" in markdown


def test_markdown_tables_keep_their_columns_whatever_a_name_holds(report: dict[str, Any]) -> None:
    """A name with pipes, backticks, backslashes, markup and bidi controls keeps every table row's cell count."""
    name = report["systems"][0]["name"]
    hostile_name = "a | b \\| `c` ``d`` \\ <e> [f](g) \u202eh"
    hostile = json.loads(
        json.dumps(report, ensure_ascii=False).replace(json.dumps(name)[1:-1], json.dumps(hostile_name)[1:-1])
    )
    plain = _tables(markdown_html(render_markdown(report)))
    assert _tables(markdown_html(render_markdown(hostile))) == plain


# -- report.html --------------------------------------------------------------------------------------------


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium executable (Debian: apt-get install chromium)")
@pytest.mark.browser
def test_a_bidi_override_in_an_id_does_not_reverse_the_text_after_it(report: dict[str, Any], tmp_path: Path) -> None:
    """Bug: a document id holding U+202E (an override, which TREC ids may hold) reversed what followed it in its
    line of report.html: the passage's title was drawn left of the id, every later name of a list reversed."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
    hits, system = next(
        (item, system)
        for item in report["without_labels"]["disagreements"]
        for system, docs in item["top"].items()
        if docs
    )
    hits["top"][system] = ["\u202eD1"]
    hits["titles"] = {"\u202eD1": "TITLE"}
    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(report), encoding="utf-8")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(page_file.as_uri())
            item = page.locator("li", has_text="TITLE").first
            code_x = item.locator("code").bounding_box()["x"]
            title_x = item.locator("span").bounding_box()["x"]
        finally:
            browser.close()
    assert title_x > code_x


def test_html_tags_do_not_depend_on_what_a_text_holds(report: dict[str, Any]) -> None:
    """Markup, attribute and script breakers in every kind of text leave report.html's elements as they were."""
    hostile = "</code></td><script>alert(1)</script>\" ' > <img src=x onerror=alert(1)> </textarea> \u2028 \\"

    def variant(value: str) -> dict[str, Any]:
        changed = json.loads(json.dumps(report))
        changed["dataset"]["id"] = value
        changed["skipped"] = [{"tokenizer": value, "reason": value, "hint": value}]
        changed["environment"]["command"] = value
        for item in changed["without_labels"]["disagreements"]:
            item["text"] = value
            item["titles"] = {doc: value for doc in item["titles"]}
        return changed

    def tags(html: str) -> list[str]:
        return Page(re.sub(r"<svg.*?</svg>", "", html, flags=re.S)).tags

    assert tags(render_html(variant(hostile))) == tags(render_html(variant("plain")))
