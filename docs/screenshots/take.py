"""Take the dashboard screenshots in this folder, at 1400×1000 in headless Chromium: `make screenshots`
(= `.venv/bin/python docs/screenshots/take.py`; `--out DIR` writes them elsewhere).

It builds its own ledgers in a scratch folder — sample_data/ ingested with its labels.csv (what
`make run` serves) for Sessions, Session, Replay, Compare and Ingest health, and ../shared/corpus
with its labels.csv imported for the guard leaderboard (a bigger labelled set) — serves each with `streamlit run app/main.py` on a free port (tests/e2e/conftest.py's
start_server), shoots each page once it has drawn (no spinner left), and stops the servers.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # tests.e2e.conftest: the one way a dashboard is started for a browser

from playwright.sync_api import sync_playwright  # noqa: E402

from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, start_server  # noqa: E402

OUT = Path(__file__).resolve().parent
SIZE = {"width": 1400, "height": 1000}
BIN = Path(sys.executable).parent / "loopledger"
CORPUS = ROOT.parent / "shared" / "corpus"


def demo_ledgers(folder: Path) -> tuple[Path, Path]:
    """(the sample ledger, the labelled corpus ledger), made by the installed command as a person would."""
    sample, board = folder / "sample.sqlite", folder / "corpus.sqlite"
    for args in (["ingest", str(ROOT / "sample_data"), "--db", str(sample)],
                 ["labels", "import", str(ROOT / "sample_data" / "labels.csv"), "--db", str(sample)],
                 ["ingest", str(CORPUS), "--db", str(board)],
                 ["labels", "import", str(CORPUS / "labels.csv"), "--db", str(board)]):
        done = subprocess.run([str(BIN), *args], capture_output=True, text=True, cwd=folder)
        if done.returncode not in (0, 3):  # 3: finished, some lines quarantined (as `make run` allows)
            raise SystemExit(f"loopledger {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return sample, board


def _settle(page, ms: int = 1500) -> None:
    page.wait_for_timeout(ms)
    page.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=120_000)
    page.wait_for_timeout(500)


def shoot(base: str, board: str, out: Path) -> None:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_context(viewport=SIZE).new_page()

        page.goto(base + "/")
        page.locator("[data-testid=stDataFrame]:visible").first.wait_for(timeout=120_000)
        page.get_by_test_id("stVegaLiteChart").first.wait_for(timeout=120_000)
        _settle(page)
        page.screenshot(path=str(out / "sessions.png"))
        table = page.locator("[data-testid=stDataFrame]:visible").last
        table.scroll_into_view_if_needed()
        _settle(page, 500)
        page.screenshot(path=str(out / "sessions-table.png"))  # the title beside the id, no sideways scroll

        page.get_by_role("link", name="Open the most halted session").click()
        page.get_by_text("Replay this run at the halt").wait_for(timeout=120_000)
        _settle(page)
        page.screenshot(path=str(out / "session.png"))

        href = page.get_by_role("link", name="Replay this run at the halt").get_attribute("href")
        page.goto(base + "/" + href.removeprefix("./"))
        page.get_by_text("Detector state").wait_for(timeout=120_000)
        _settle(page)
        page.screenshot(path=str(out / "replay.png"))

        page.goto(base + "/compare")
        page.get_by_role("button", name="Run sweep").click()
        page.get_by_text("First halt per session and setting").wait_for(timeout=240_000)
        _settle(page)
        page.get_by_text("Halts, warnings and calls saved per setting").scroll_into_view_if_needed()
        page.mouse.wheel(0, -120)
        _settle(page, 500)
        page.screenshot(path=str(out / "compare.png"))

        page.goto(base + "/health")
        page.get_by_test_id("stMetric").first.wait_for(timeout=120_000)
        page.locator("[data-testid=stDataFrame]:visible").first.wait_for(timeout=120_000)
        _settle(page, 2000)
        page.screenshot(path=str(out / "health.png"))

        page.goto(board + "/leaderboard")
        page.get_by_text("Where two policies disagree").wait_for(timeout=120_000)
        page.locator("[data-testid=stDataFrame]:visible").first.wait_for(timeout=120_000)
        page.get_by_test_id("stVegaLiteChart").first.wait_for(timeout=120_000)
        _settle(page, 3000)  # the tables draw on a canvas after the page has run
        page.screenshot(path=str(out / "leaderboard.png"))
        browser.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT, help="where the PNGs go (default: this folder)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="loopledger-shots-") as tmp, ExitStack() as stack:
        sample, board = demo_ledgers(Path(tmp))
        base = stack.enter_context(start_server(f"sqlite:///{sample}", Path(tmp) / "sample.log"))
        board_base = stack.enter_context(start_server(f"sqlite:///{board}", Path(tmp) / "board.log"))
        shoot(base, board_base, args.out)
    print(f"wrote {', '.join(sorted(p.name for p in args.out.glob('*.png')))} to {args.out}")


if __name__ == "__main__":
    main()
