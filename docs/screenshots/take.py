"""Take the dashboard screenshots in this folder, at 1400×1000 in headless Chromium.

    loopledger ingest sample_data --db /tmp/sample.sqlite            # what `make run` serves
    loopledger dashboard --db /tmp/sample.sqlite --port 8501 &
    python docs/screenshots/take.py http://127.0.0.1:8501 [LEADERBOARD_BASE]

LEADERBOARD_BASE: a dashboard on a ledger with labels (e.g. ../shared/corpus ingested and its
labels.csv imported with `loopledger labels import`); the sample ledger has none, so its
leaderboard would only say so. Each page is shot once it has drawn (no spinner left).
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

OUT = Path(__file__).resolve().parent
SIZE = {"width": 1400, "height": 1000}


def _settle(page, ms: int = 1500) -> None:
    page.wait_for_timeout(ms)
    page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=120_000)
    page.wait_for_timeout(500)


def main(base: str, board: str) -> None:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"])
        page = browser.new_context(viewport=SIZE).new_page()

        page.goto(base + "/")
        page.locator("[data-testid=stDataFrame]:visible").first.wait_for(timeout=120_000)
        page.get_by_test_id("stVegaLiteChart").first.wait_for(timeout=120_000)
        _settle(page)
        page.screenshot(path=str(OUT / "sessions.png"))
        table = page.locator("[data-testid=stDataFrame]:visible").last
        table.scroll_into_view_if_needed()
        _settle(page, 500)
        page.screenshot(path=str(OUT / "sessions-table.png"))  # the title beside the id, no sideways scroll

        page.get_by_role("link", name="Open the most halted session").click()
        page.get_by_text("Replay this run at the halt").wait_for(timeout=120_000)
        _settle(page)
        page.screenshot(path=str(OUT / "session.png"))

        href = page.get_by_role("link", name="Replay this run at the halt").get_attribute("href")
        page.goto(base + "/" + href.removeprefix("./"))
        page.get_by_text("Detector state").wait_for(timeout=120_000)
        _settle(page)
        page.screenshot(path=str(OUT / "replay.png"))

        page.goto(base + "/compare")
        page.get_by_role("button", name="Run sweep").click()
        page.get_by_text("First halt per session and setting").wait_for(timeout=240_000)
        _settle(page)
        page.get_by_text("Halts, warnings and calls saved per setting").scroll_into_view_if_needed()
        page.mouse.wheel(0, -120)
        _settle(page, 500)
        page.screenshot(path=str(OUT / "compare.png"))

        page.goto(board + "/leaderboard")
        page.get_by_text("Where two policies disagree").wait_for(timeout=120_000)
        page.locator("[data-testid=stDataFrame]:visible").first.wait_for(timeout=120_000)
        page.get_by_test_id("stVegaLiteChart").first.wait_for(timeout=120_000)
        _settle(page, 3000)  # the tables draw on a canvas after the page has run
        page.screenshot(path=str(OUT / "leaderboard.png"))
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1].rstrip("/"), (sys.argv[2] if len(sys.argv) > 2 else sys.argv[1]).rstrip("/"))
