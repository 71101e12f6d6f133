"""In a real browser: the guard leaderboard on the hand-worked ledger of tests/score_support.py
shows its numbers; a number opens the sessions behind it, and a session opens Replay at the halt."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import start_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ (score_support)
from score_support import WINDOW, build  # noqa: E402


@pytest.fixture(scope="module")
def scored_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e_leaderboard")
    url, _ = build(tmp)
    with start_server(url, tmp / "server.log") as base:
        yield base


def choose(page, label: str, option: str) -> None:
    """Pick `option` in the selectbox `label`, until the box shows it: a pick made while the page
    is still rerunning from the previous one is dropped by Streamlit, so look and pick again."""
    box = page.get_by_test_id("stSelectbox").filter(has_text=label).first
    for _ in range(5):
        box.click()
        page.get_by_role("option", name=option, exact=True).click()
        try:
            expect(box.get_by_role("combobox")).to_have_value(option, timeout=10_000)
            return
        except AssertionError:
            continue
    expect(box.get_by_role("combobox")).to_have_value(option)


def test_follow_a_number_to_replay_at_the_halt(scored_server, page):
    page.goto(f"{scored_server}/leaderboard")
    page.get_by_test_id("stDataFrame").first.wait_for(timeout=60_000)
    page.get_by_text("Guard leaderboard").first.wait_for(timeout=30_000)
    # Pick WINDOW's "early" number (1, counted by hand) and open it.
    choose(page, "Sessions of policy", WINDOW.label)
    choose(page, "Behind the number", "early: 1")
    link = page.get_by_role("link", name="Open these sessions")
    link.wait_for(timeout=30_000)
    # The button is redrawn by the rerun the pick started: read its link once that rerun is done.
    expect(link).to_have_attribute("href", re.compile(r"cell=early"), timeout=60_000)
    q = parse_qs(urlparse(link.get_attribute("href")).query)
    assert q == {"policy": [WINDOW.id], "cell": ["early"], "n": ["1"]}
    with page.context.expect_page() as opened:
        link.click()
    listing = opened.value
    listing.wait_for_load_state()
    listing.get_by_text("The sessions behind early: 1").wait_for(timeout=60_000)
    replay = listing.get_by_role("link", name="Replay at the halt")
    replay.wait_for(timeout=30_000)
    replay.click()  # Replay opens in this tab
    rp = listing
    # task-2's halt under WINDOW is its 4th call: event seq 7 (user turn, then call/answer pairs).
    rp.wait_for_url(re.compile(r"/replay\?.*step=7(&|$)"), timeout=60_000)
    rp.get_by_text("▶ at the cursor").wait_for(timeout=60_000)
    assert f"policy={WINDOW.id}" in rp.url
    for pg in (page, listing, rp):
        assert not pg.get_by_test_id("stException").count()
