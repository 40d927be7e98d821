"""``rag-eval judge`` in a real browser (issue #13): headless Chromium grades passages by keyboard and by
mouse, reloads, undoes, skips, steps back to re-grade, survives the server being killed with SIGKILL and
resumes on a restarted server; the qrels file holds exactly the grades given. The server refuses a wrong
token and a foreign Host header."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rag_eval.eval.judgments import log_path
from rag_eval.eval.sources import question_id
from rag_eval.eval.trec import read_trec_qrels

ROOT = Path(__file__).resolve().parent
QUESTIONS = ROOT / "data" / "judge" / "questions.txt"
#: Debian's chromium: Playwright drives it and never downloads a browser of its own.
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Server:
    """``rag-eval judge`` in a child process; its URL read from the first line it prints."""

    def __init__(self, output: Path) -> None:
        command = [sys.executable, "-m", "rag_eval", "judge", "handbook", "--queries", str(QUESTIONS)]
        command += ["-t", "bigram", "-t", "unigram", "-o", str(output), "--idle-timeout", "3"]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
            # Ctrl-C as in a terminal: a test run started in the background (CI runners, `cmd &`) inherits
            # SIGINT ignored, and Python keeps an ignored SIGINT ignored, so the clean stop below never came
            preexec_fn=_default_sigint,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert "http://127.0.0.1:" in line, line + self.stop()
        self.url = line.split()[-1]
        self.port = int(self.url.split(":")[2].split("/")[0])
        self.token = self.url.split("token=")[1]

    def stop(self, sig: int = signal.SIGKILL) -> str:
        """Stop the server with ``sig``; its stderr."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        _, err = self.process.communicate(timeout=30)
        return err


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


@pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium executable (Debian: apt-get install chromium; .ci/run installs it)"
)
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
