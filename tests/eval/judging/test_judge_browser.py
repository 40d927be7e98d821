"""``rag-eval judge`` in a real browser (issue #13): headless Chromium grades passages by keyboard and by
mouse, reloads, undoes, skips, steps back to re-grade, survives the server being killed with SIGKILL and
resumes on a restarted server; the qrels file holds exactly the grades given. The server refuses a wrong
token and a foreign Host header. The leader the panel names is its first bar or it says why, and a Markdown
passage is rendered, hostile Markdown as text, its source one key away (issue #34)."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import TESTS
from helpers.judging import Server

from rag_eval.eval.datasets.sources import question_id
from rag_eval.eval.datasets.trec import read_trec_qrels
from rag_eval.eval.judging.judgments import log_path

pytestmark = pytest.mark.browser

ROOT = TESTS
QUESTIONS = ROOT / "data" / "judge" / "questions.txt"
#: Debian's chromium: Playwright drives it and never downloads a browser of its own.
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    """Servers a test starts; every one is stopped at the end (they also stop by themselves when idle)."""
    started: list[Server] = []
    yield started
    for server in started:
        server.stop()


def status(port: int, path: str, headers: dict[str, str], method: str = "GET", body: bytes = b"") -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest(method, path, skip_host="Host" in headers)
        for key, value in headers.items():
            connection.putheader(key, value)
        connection.endheaders(body or None)
        return connection.getresponse().status
    finally:
        connection.close()


def shown(page: Any) -> tuple[str, str]:
    """The (question, passage key) on the page."""
    return page.locator("#question").inner_text(), page.locator("#source").inner_text()


needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium executable (Debian: apt-get install chromium; .ci/run installs it)"
)


@needs_chromium
def test_judge_in_headless_chromium(tmp_path: Path, servers: list[Server]) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
    expect = sync_api.expect
    output = tmp_path / "h.qrels"
    first = Server(output)
    servers.append(first)
    problems: list[str] = []
    graded: dict[tuple[str, str], int] = {}
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
            page.goto(first.url)
            assert page.url == f"http://127.0.0.1:{first.port}/"  # the token left the address bar
            progress = page.locator("#progress-text")
            expect(progress).to_contain_text("0 of ")
            pooled = int(progress.inner_text().split(" of ")[1].split()[0])
            assert pooled > 10
            assert page.locator("#passage mark").count() > 0  # the question's terms are highlighted

            def grade_by(action: str, value: int, judged_after: int) -> tuple[str, str]:
                question, key = shown(page)
                if action == "key":
                    page.keyboard.press(str(value))
                else:
                    page.click(f"#grade-{value}")
                expect(progress).to_contain_text(f"{judged_after} of {pooled}")
                return question, key

            one = grade_by("key", 2, 1)
            two = grade_by("mouse", 0, 2)
            three = grade_by("key", 1, 3)
            for item, grade in ((one, 2), (two, 0), (three, 1)):
                graded[item] = grade
            assert len(set(graded)) == 3
            after_three = shown(page)
            assert sum(len(docs) for docs in read_trec_qrels(output).values()) == 3  # written at once

            page.reload()
            expect(progress).to_contain_text(f"3 of {pooled}")
            assert shown(page) == after_three  # the same passage waits after a reload

            page.keyboard.press("u")
            expect(progress).to_contain_text(f"2 of {pooled}")
            assert shown(page) == three  # undo shows the withdrawn passage again
            del graded[three]

            page.keyboard.press("s")
            expect(progress).to_contain_text("1 skipped")
            assert shown(page) != three

            page.keyboard.press("k")  # back to the last judged passage: two
            expect(page.locator("#where")).to_contain_text("judged earlier, 2 of 2: grade 0")
            assert shown(page) == two
            expect(page.locator("#grade-0")).to_have_class("grade current")
            page.click("#grade-2")  # re-grade by mouse; forward to the next unjudged one
            expect(page.locator("#where")).to_have_text("")
            graded[two] = 2
            # The clicked button gave its focus back: Enter and Space do not grade the passage now shown, unseen.
            page.keyboard.press("Enter")
            page.keyboard.press(" ")
            page.wait_for_timeout(400)
            expect(progress).to_contain_text(f"2 of {pooled}")
            assert problems == []

            first.stop(signal.SIGKILL)
            page.keyboard.press("1")  # the server is gone: nothing is acknowledged
            expect(page.locator("#status")).to_contain_text("Not saved")
            expect(progress).to_contain_text(f"2 of {pooled}")

            second = Server(output)
            servers.append(second)
            page.goto(second.url)
            expect(progress).to_have_text(f"2 of {pooled} pooled passages judged, 1 skipped")
            assert shown(page) not in graded and shown(page) != three
            graded[grade_by("key", 0, 3)] = 0
            page.keyboard.press("k")
            expect(page.locator("#where")).to_contain_text("3 of 3: grade 0")
            page.keyboard.press("j")
            expect(page.locator("#where")).to_have_text("")
            page.screenshot(path=str(tmp_path / "judge.png"))
        finally:
            browser.close()
    assert status(second.port, "/?token=wrong", {}) == 403
    assert status(second.port, "/api/state", {}) == 403
    cookie = {"Cookie": f"rag_eval_judge_{second.port}={second.token}"}
    assert status(second.port, "/api/state", cookie) == 200
    assert status(second.port, "/api/state", cookie | {"Host": f"evil.example:{second.port}"}) == 403
    assert status(second.port, f"/?token={second.token}", {"Host": f"rebind.example:{second.port}"}) == 403
    post = cookie | {"Content-Type": "application/json", "Content-Length": "0"}
    assert status(second.port, "/api/undo", post | {"Origin": "http://evil.example"}, "POST") == 403
    # hostile bodies: one 400 each, and the server goes on serving
    for body in (b"[" * 8000 + b"]" * 8000, b'{"query": "\\ud800", "doc": "x", "grade": 1}', b"\xff\xfe", b"{1e999}"):
        sized = post | {"Content-Length": str(len(body))}
        assert status(second.port, "/api/grade", sized, "POST", body) == 400, body[:20]
    assert status(second.port, "/api/state", cookie) == 200
    # A second tab grading, as new, a passage this one graded: 409, and the grade on disk stays.
    (question, key), kept = next(iter(graded.items()))
    body = json.dumps({"query": question_id(question), "doc": key, "grade": 1 - min(kept, 1)}).encode()
    assert status(second.port, "/api/grade", post | {"Content-Length": str(len(body))}, "POST", body) == 409
    err = second.stop(signal.SIGINT)  # Ctrl-C: a clean stop
    assert second.process.returncode == 0, err
    assert "stopped (interrupted); 3 of" in err
    assert second.token not in err and first.token not in first.stop()
    expected: dict[str, dict[str, int]] = {}
    for (question, key), grade in graded.items():
        expected.setdefault(question_id(question), {})[key] = grade
    assert read_trec_qrels(output) == expected
    assert sum(len(docs) for docs in expected.values()) == 3
    events = [json.loads(line).get("event") for line in log_path(output).read_text(encoding="utf-8").splitlines()]
    assert events == [None, "grade", "grade", "grade", "undo", "skip", "grade", "grade"]
    assert (tmp_path / "judge.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _watched_page(browser: Any, problems: list[str]) -> Any:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
    return page


@needs_chromium
def test_the_panel_names_its_first_bar_as_leader_or_says_why(tmp_path: Path, servers: list[Server]) -> None:
    """Regression: after two grades the panel said "Leader bigram (though 0.002 nDCG@10 behind unigram on
    average); 50% sure", unigram the first bar and bigram's row in bold; the badge rounded in JavaScript."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
    server = Server(tmp_path / "h.qrels")
    servers.append(server)
    problems: list[str] = []
    said: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = _watched_page(browser, problems)
            page.goto(server.url)
            progress = page.locator("#progress-text")
            sync_api.expect(progress).to_contain_text("0 of ")
            for judged, grade in enumerate([0, 0, 0, 1, 2, 0], start=1):
                page.keyboard.press(str(grade))
                sync_api.expect(progress).to_contain_text(f"{judged} of ")
                words = page.locator("#decision-words").inner_text()
                badge = page.locator("#badge").inner_text()
                rows = page.locator("#scores tr td.name").all_inner_texts()
                values = [float(v) for v in page.locator("#scores tr td.value").all_inner_texts()]
                bold = page.locator("#scores tr.leader td.name").all_inner_texts()
                said.append(words)
                assert sorted(rows) == ["bigram", "unigram"] and values == sorted(values, reverse=True)
                assert "0% sure" not in words + badge
                if "Too early to tell" in words:
                    assert bold == [] and badge == "too early to tell"
                    continue
                assert len(bold) == 1 and f"Leader: {bold[0]}, " in words
                if bold[0] != rows[0]:
                    assert f"though {rows[0]} has the higher average estimate" in words
                else:
                    gap = f"{values[0] - values[1]:.3f} nDCG@10 ahead of {rows[1]}"
                    assert gap in words or f"level with {rows[1]}" in words
                # one number: the badge's percentage is the words'
                assert re.findall(r"\d+%", badge) == re.findall(r"\d+%", words) != []
        finally:
            browser.close()
    assert any("Too early to tell" in words for words in said) and any("Leader: " in words for words in said)
    assert problems == []


#: A Markdown section as a knowledge base holds them: a 40-row table, a link, raw HTML, code with '<'.
HOSTILE_SECTION = (
    "## 套餐上限\n\n下表列出每个套餐的成员上限，详见 [价格页](https://evil.example/phish)。\n\n"
    "| 套餐 | 成员上限 | 说明 |\n|:--|--:|---|\n"
    + "".join(f"| 套餐{n} | {n * 10} | **上限** `<{n}>` |\n" for n in range(40))
    + '\n<script>window.pwned = 1</script> <img src=x onerror="window.pwned = 2">\n\n'
    "```bash\nxy plan list --limit 10 < plans.txt\n```\n"
)


@needs_chromium
def test_a_markdown_passage_is_rendered_and_its_source_one_key_away(tmp_path: Path, servers: list[Server]) -> None:
    """Regression: the page showed a section's raw Markdown, a 40-row pipe table as a wall of '|'."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
    expect = sync_api.expect
    knowledge = tmp_path / "kb"
    knowledge.mkdir()
    (knowledge / "plans.md").write_text(HOSTILE_SECTION, encoding="utf-8")
    questions = tmp_path / "q.txt"
    questions.write_text("套餐的成员上限是多少\n", encoding="utf-8")
    server = Server(tmp_path / "kb.qrels", str(knowledge), questions)
    servers.append(server)
    problems: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = _watched_page(browser, problems)
            page.goto(server.url)
            passage, source = page.locator("#passage"), page.locator("#passage-source")
            expect(page.locator("#source")).to_have_text("plans.md#套餐上限")
            expect(passage.locator("table")).to_have_count(1)
            expect(passage.locator("table tr")).to_have_count(41)
            expect(passage.locator("table td.right")).to_have_count(40)  # the column's alignment, as a class
            assert passage.locator("td mark").count() >= 80  # the question's terms, in the cells too
            for hostile in ("a", "[href]", "[src]", "[style]", "[onerror]", "script", "img"):
                expect(passage.locator(hostile)).to_have_count(0)
            assert page.evaluate("window.pwned") is None
            link = passage.locator("span.link")
            expect(link).to_have_text("价格页")
            expect(link).to_have_attribute("title", "https://evil.example/phish")
            expect(passage.locator("pre code")).to_have_text("xy plan list --limit 10 < plans.txt\n")
            assert "<script>window.pwned = 1</script>" in passage.inner_text()
            assert "|" not in passage.locator("table").inner_text()
            expect(source).to_be_hidden()

            page.keyboard.press("m")  # the source as written, highlighted the same way
            expect(source).to_be_visible()
            expect(passage).to_be_hidden()
            assert source.inner_text() == HOSTILE_SECTION.rstrip("\n")  # the section as written, to the byte
            assert source.locator("mark").count() > 0
            expect(page.locator("#view")).to_have_attribute("aria-pressed", "true")
            page.click("#view")  # and back, by the button
            expect(passage).to_be_visible()
            expect(source).to_be_hidden()
            page.keyboard.press("2")
            expect(page.locator("#done")).to_be_visible()
            expect(page.locator("#view")).to_be_hidden()
        finally:
            browser.close()
    assert problems == []
