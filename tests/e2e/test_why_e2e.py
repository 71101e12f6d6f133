"""In a real browser at 1400×1000 (issue 10's "Done when"): from the Sessions page to the sentence
saying why the most halted run halted in at most two clicks, and from there to the next halted run
in one — on the ledger `make run` builds (sample_data) and on one built from ../shared/corpus.
Screenshots land in test-artifacts/."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from loopledger.ledger.engine import make_engine

from tests.conftest import CORPUS
from tests.e2e.conftest import start_server

ROOT = Path(__file__).resolve().parents[2]
VIEW_H = 1000
WHY = re.compile(r"^[a-z][\w-]* halted at (call #\d+|step \d+)")


def _ingest(src: Path, db: Path) -> str:
    # What `make run` does before it serves: `loopledger ingest sample_data --db LEDGER`.
    done = subprocess.run([sys.executable, "-m", "loopledger.cli.app", "ingest", str(src), "--db", str(db)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode in (0, 3), done.stderr[-2000:]
    return f"sqlite:///{db}"


@pytest.fixture(scope="module", params=["sample_data", "corpus"])
def ledger_server(request, tmp_path_factory):
    if request.param == "corpus" and not CORPUS.exists():
        pytest.skip("../shared/corpus is absent (a fresh clone)")
    tmp = tmp_path_factory.mktemp(f"why-{request.param}")
    url = _ingest(ROOT / "sample_data" if request.param == "sample_data" else CORPUS, tmp / "ledger.sqlite")
    with start_server(url, tmp / "server.log") as base:
        yield request.param, url, base


def _expected(url: str) -> tuple[int, int, list[int]]:
    """Independently of the pages: the most halted session (halts summed over the default
    policies, ties → the higher id, as the Sessions table sorts), its most halted run, its halted runs."""
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        sid = conn.execute(sa.text("SELECT s.session_id FROM session_stats s JOIN policies p ON p.id = s.policy_id "
                                   "WHERE p.is_default GROUP BY s.session_id ORDER BY sum(s.halts) DESC, "
                                   "s.session_id DESC LIMIT 1")).scalar()
        runs = conn.execute(sa.text("SELECT run_idx, count(*) FROM run_outcomes WHERE session_id = :s AND "
                                    "outcome = 'halted' GROUP BY run_idx ORDER BY run_idx"), {"s": sid}).all()
    eng.dispose()
    most = min(runs, key=lambda r: (-r[1], r[0]))[0]
    return sid, most, [r for r, _ in runs]


def _no_exception(page) -> None:
    assert page.get_by_test_id("stException").count() == 0


def _in_first_screen(locator) -> None:
    box = locator.bounding_box()
    assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= VIEW_H, box
    assert box["x"] >= 0 and box["x"] + min(box["width"], 600) <= 1400, box


def test_two_clicks_to_why_and_one_to_the_next_halted_run(ledger_server, page, artifacts_dir):
    name, url, base = ledger_server
    sid, run, halted = _expected(url)
    page.goto(base + "/")
    page.get_by_test_id("stMetric").first.wait_for(timeout=60_000)
    page.locator("[data-testid=stDataFrame]:visible").first.wait_for(timeout=60_000)
    page.get_by_test_id("stVegaLiteChart").first.wait_for(timeout=60_000)
    _no_exception(page)
    page.screenshot(path=str(artifacts_dir / f"e2e-why-{name}-1-sessions.png"))
    link = page.get_by_role("link", name=re.compile(rf"Open the most halted session \(#{sid}\)"))
    _in_first_screen(link)

    link.click()  # click 1 (of at most 2)
    heading = page.get_by_test_id("stHeading").filter(has_text=f"Why run #{run + 1} halted")  # runs counted from 1
    heading.wait_for(timeout=60_000)
    sentence = page.get_by_text(WHY).first
    sentence.wait_for(timeout=30_000)
    # The sentence is readable where the page opens: no scrolling, nothing cut at 1400×1000.
    _in_first_screen(sentence)
    text = sentence.inner_text()
    assert re.search(r"\d+ times|attempt \d+|once|twice", text) and "-1" not in text
    page.wait_for_url(re.compile(rf"session={sid}&run={run}"), timeout=30_000)
    _no_exception(page)
    page.screenshot(path=str(artifacts_dir / f"e2e-why-{name}-2-session.png"))
    page.screenshot(path=str(artifacts_dir / f"e2e-why-{name}-2-session-full.png"), full_page=True)

    later = [r for r in halted if r > run]
    if later:
        target = (sid, later[0])
    else:  # past the session's last halted run: the next halted session in the Sessions order
        eng = make_engine(url, readonly=True)
        with eng.connect() as conn:
            ranked = conn.execute(sa.text("SELECT session_id FROM session_stats GROUP BY session_id HAVING "
                                          "sum(halts) > 0 ORDER BY sum(halts) DESC, session_id DESC")).scalars().all()
            nxt = ranked[ranked.index(sid) + 1]
            first = conn.execute(sa.text("SELECT min(run_idx) FROM run_outcomes WHERE session_id = :s AND "
                                         "outcome = 'halted'"), {"s": nxt}).scalar()
        eng.dispose()
        target = (nxt, first)
    button = page.get_by_role("button", name="Next halted run ▶")
    _in_first_screen(button)
    button.click()  # one click to the next halted run
    page.get_by_test_id("stHeading").filter(has_text=f"Why run #{target[1] + 1} halted").wait_for(timeout=60_000)
    page.wait_for_url(re.compile(rf"session={target[0]}&run={target[1]}"), timeout=30_000)
    _in_first_screen(page.get_by_text(WHY).first)
    _no_exception(page)
    page.screenshot(path=str(artifacts_dir / f"e2e-why-{name}-3-next.png"))


def test_replay_and_compare_read_at_1400(ledger_server, page, artifacts_dir):
    name, url, base = ledger_server
    sid, run, halted = _expected(url)
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:  # a stored policy that halts this run, and the run's first step
        pid, first = conn.execute(sa.text(
            "SELECT o.policy_id, r.first_seq FROM run_outcomes o JOIN runs r ON r.session_id = o.session_id AND "
            "r.idx = o.run_idx WHERE o.session_id = :s AND o.run_idx = :r AND o.outcome = 'halted' "
            "AND o.halt_seq > r.first_seq LIMIT 1"), {"s": sid, "r": run}).one()
    eng.dispose()
    page.goto(f"{base}/replay?session={sid}&run={run}&policy={pid}&step={first}")
    page.get_by_test_id("stMetric").first.wait_for(timeout=60_000)
    nxt = page.get_by_role("button", name="Next halt ▶")
    nxt.wait_for(timeout=30_000)
    nxt.click()
    page.get_by_test_id("stMetric").filter(has_text="Verdict at this call").get_by_text("halt", exact=True) \
        .wait_for(timeout=60_000)
    _no_exception(page)
    page.screenshot(path=str(artifacts_dir / f"e2e-why-{name}-replay.png"), full_page=True)

    page.goto(base + "/compare")
    page.get_by_role("button", name="Run sweep").click()
    page.get_by_text("First halt per session and setting").wait_for(timeout=120_000)
    page.get_by_test_id("stVegaLiteChart").nth(1).wait_for(timeout=60_000)
    _no_exception(page)
    # The first-halt heatmap is sized by its rows: not a strip, and not wider than the page.
    chart = page.get_by_test_id("stVegaLiteChart").nth(1)
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    assert box["height"] > 100 and box["x"] + box["width"] <= 1400, box
    page.screenshot(path=str(artifacts_dir / f"e2e-why-{name}-compare.png"), full_page=True)

    page.goto(base + "/health")
    page.get_by_test_id("stMetric").first.wait_for(timeout=60_000)
    last = page.get_by_test_id("stMetric").filter(has_text="Last ingest")
    value = last.get_by_test_id("stMetricValue").filter(has_text=re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d UTC$"))
    value.wait_for(timeout=30_000)  # the page refreshes every few seconds: wait for the value, not a moment
    # Not cut: the value's text fits its box.
    assert value.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
    _no_exception(page)
    page.screenshot(path=str(artifacts_dir / f"e2e-why-{name}-health.png"), full_page=True)
