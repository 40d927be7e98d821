"""Take docs/judge-screenshot.png: rag-eval judge on the shipped handbook, a few passages graded by keyboard.

Needs Debian's chromium, Playwright and a CJK font (apt-get install fonts-wqy-microhei; without one the
Chinese text shows as boxes). Run from the repository root:

    .venv/bin/python tools/judge_screenshot.py [OUT.png]

The judgments go to a temporary folder; indexes to the usual cache.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "tests" / "data" / "judge" / "questions.txt"


def main() -> None:
    from playwright.sync_api import expect, sync_playwright

    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "judge-screenshot.png"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("no chromium executable (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "rag_eval", "judge", "handbook", "--queries", str(QUESTIONS)]
        command += ["-t", "bigram", "-t", "jieba", "-t", "unigram", "-o", f"{folder}/h.qrels", "--idle-timeout", "2"]
        server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            url = server.stdout.readline().split()[-1]
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox"])
                page = browser.new_page(viewport={"width": 1280, "height": 860})
                page.goto(url)
                expect(page.locator("#progress-text")).to_contain_text("0 of")
                for number, grade in enumerate("2100201", start=1):
                    page.wait_for_timeout(1500)  # a person's pace, for the page's time estimate
                    page.keyboard.press(grade)
                    expect(page.locator("#progress-text")).to_contain_text(f"{number} of")
                page.screenshot(path=str(out))
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
