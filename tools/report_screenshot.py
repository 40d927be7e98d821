"""Take docs/report-screenshot.png: the top of report.html from the main job (`rag-eval compare handbook`).

    .venv/bin/rag-eval compare handbook -o out/handbook
    .venv/bin/python tools/report_screenshot.py out/handbook/report.html [OUT.png]

Needs Debian's chromium (the browser tests' one) and Playwright; nothing is downloaded.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    from playwright.sync_api import sync_playwright

    report = Path(sys.argv[1]).resolve()
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "docs" / "report-screenshot.png"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("no chromium executable (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 1500})
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        page.screenshot(path=str(out))
        browser.close()


if __name__ == "__main__":
    main()
