"""In a real browser: Sessions → the most halted session → its halted run → the halting batch."""

from __future__ import annotations

import re

import sqlalchemy as sa
from loopledger.ledger.engine import make_engine
from playwright.sync_api import expect

from tests.e2e.conftest import expect_metric


def _most_halted(url: str) -> tuple[int, int, int]:
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        sid = conn.execute(sa.text("SELECT session_id FROM session_stats GROUP BY session_id "
                                   "ORDER BY sum(halts) DESC, session_id DESC LIMIT 1")).scalar()
        # The page opens the run the most policies halted (the earliest on a tie), at its first halt.
        run, seq = conn.execute(sa.text("SELECT run_idx, min(halt_seq) FROM run_outcomes WHERE session_id = :s "
                                        "AND outcome = 'halted' GROUP BY run_idx ORDER BY count(*) DESC, run_idx "
                                        "LIMIT 1"), {"s": sid}).one()
        n = conn.execute(sa.text("SELECT count(*) FROM sessions")).scalar()
    eng.dispose()
    return sid, run, seq, n


def _call_no(url: str, sid: int, seq: int) -> int:
    """The first call of the batch at `seq`, numbered over the session as every page numbers calls."""
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        n = conn.execute(sa.text("SELECT count(*) FROM calls WHERE session_id = :s AND seq < :q"),
                         {"s": sid, "q": seq}).scalar()
    eng.dispose()
    return n + 1


def test_follow_the_most_halted_session_to_its_halt(server, page, e2e_ledger, artifacts_dir):
    sid, run, seq, n = _most_halted(e2e_ledger)
    page.goto(server + "/")
    page.get_by_test_id("stMetric").first.wait_for(timeout=60_000)
    page.get_by_test_id("stVegaLiteChart").first.wait_for(timeout=60_000)
    page.locator("[data-testid=stDataFrame]:visible").first.wait_for(timeout=60_000)
    expect_metric(page, "Sessions", str(n))
    page.screenshot(path=str(artifacts_dir / "e2e-sessions.png"), full_page=True)

    page.get_by_role("link", name=re.compile(rf"Open the most halted session \(#{sid}\)")).click()
    page.wait_for_url(re.compile(rf"/session\?session={sid}"), timeout=30_000)
    halting = page.get_by_text(re.compile(rf"^▶ halted here · call #{_call_no(e2e_ledger, sid, seq)}\b")).first
    halting.wait_for(timeout=60_000)
    # The page opened the first halted run and wrote it into the URL (shareable as is).
    page.wait_for_url(re.compile(rf"session={sid}&run={run}"), timeout=30_000)
    expect(page.get_by_test_id("stHeading").filter(has_text=f"Session #{sid}")).to_have_count(1, timeout=60_000)
    page.get_by_test_id("stVegaLiteChart").first.wait_for(timeout=30_000)
    replay = page.get_by_role("link", name="Replay this run at the halt")
    assert f"step={seq}" in replay.get_attribute("href")
    halting.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts_dir / "e2e-session.png"), full_page=True)

    page.goto(server + "/health")
    page.get_by_test_id("stMetric").first.wait_for(timeout=60_000)
    expect_metric(page, "Sources", str(n))
    page.locator("[data-testid=stDataFrame]:visible").first.wait_for(timeout=30_000)
    page.screenshot(path=str(artifacts_dir / "e2e-health.png"), full_page=True)


def test_transcript_html_and_markdown_stay_inert(server, page, artifacts_dir):
    page.goto(server + "/session?session=1&run=0")
    step = page.get_by_label("Around call #", exact=True)
    step.wait_for(timeout=60_000)
    step.fill("1")
    step.press("Enter")
    code = page.get_by_test_id("stCode").filter(has_text="tool said").first
    code.wait_for(timeout=30_000)
    # Shown verbatim as text ...
    assert "<script>window.__pwned=1</script>" in code.inner_text()
    assert "![x](http://127.0.0.1:9/pwn.png)" in code.inner_text()
    # ... and never alive: no script ran, no image element, nothing fetched.
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img[src*='pwn.png'], img[src='x']").count() == 0
    assert page.evaluate("[...document.scripts].filter(s => s.textContent.includes('__pwned')).length") == 0
    assert not [u for u in page.requested if "pwn.png" in u]
    host = server.split("//", 1)[1]
    assert not [u for u in page.requested if not u.startswith(("data:", "blob:")) and host not in u]
    page.screenshot(path=str(artifacts_dir / "e2e-inert-transcript.png"), full_page=True)


def test_pages_refresh_themselves_while_the_ledger_grows(server, page, e2e_ledger, artifacts_dir):
    """What a running worker does, done by hand: new rows appear without a reload."""
    import time

    from loopledger.ledger import schema as t

    eng = make_engine(e2e_ledger)
    with eng.connect() as conn:
        n = conn.execute(sa.text("SELECT count(*) FROM sessions")).scalar()
        errors = conn.execute(sa.text("SELECT count(*) FROM ingest_errors")).scalar()
        pid = conn.execute(sa.text("SELECT id FROM policies ORDER BY id LIMIT 1")).scalar()
    page.goto(server + "/")
    page.get_by_test_id("stMetric").first.wait_for(timeout=60_000)
    expect_metric(page, "Sessions", str(n))
    with eng.begin() as conn:
        conn.execute(sa.insert(t.sources).values(id=n + 1, path="/live/new.jsonl", format="claude-code", size=10,
                                                 status="ok", ingested_at=time.time()))
        conn.execute(sa.insert(t.sessions).values(id=n + 1, source_id=n + 1, key="0", format="claude-code",
                                                  title="live session", n_runs=1, n_calls=3))
        conn.execute(sa.insert(t.session_stats).values(session_id=n + 1, policy_id=pid, runs=1, calls=3, halts=1))
        conn.execute(sa.insert(t.ingest_errors).values(source_id=n + 1, line=9, message="live bad line",
                                                       created_at=time.time()))
    eng.dispose()
    # No reload: the live fragment re-reads the ledger on its own.
    page.get_by_test_id("stMetricValue").filter(has_text=str(n + 1)).first.wait_for(timeout=60_000)
    expect_metric(page, "Sessions", str(n + 1))
    page.goto(server + "/health")
    page.get_by_test_id("stMetric").first.wait_for(timeout=60_000)
    expect_metric(page, "Quarantined lines", str(errors + 1))
    page.screenshot(path=str(artifacts_dir / "e2e-health-live.png"), full_page=True)


def test_a_deep_link_on_a_fresh_server_is_served_by_the_app(fresh_server, page, e2e_ledger):
    """The first request of a new server is a shared link to a session (not the home page)."""
    sid, run, seq, _ = _most_halted(e2e_ledger)
    page.goto(f"{fresh_server}/session?session={sid}&run={run}")
    page.get_by_text(re.compile(rf"^▶ halted here · call #{_call_no(e2e_ledger, sid, seq)}\b")).first.wait_for(
        timeout=60_000)
    nav = page.get_by_test_id("stSidebarNav")
    # The app's own navigation (titles from app/main.py), not one built from file names.
    assert nav.get_by_text("Ingest health").count() == 1
    assert nav.get_by_text("main", exact=True).count() == 0


def test_clicking_a_bar_opens_that_session(server, page, e2e_ledger):
    sid, _, _, _ = _most_halted(e2e_ledger)
    page.goto(server + "/")
    chart = page.get_by_test_id("stVegaLiteChart").first
    chart.wait_for(timeout=60_000)
    # The first mark drawn is the top row's first stack piece: the most halted session.
    bars = chart.locator("svg path[role=graphics-symbol]")
    bars.first.wait_for(timeout=30_000)
    bars.first.click()
    page.wait_for_url(re.compile(rf"/session\?session={sid}(&|$)"), timeout=30_000)
    page.get_by_test_id("stHeading").filter(has_text=f"Session #{sid}").first.wait_for(timeout=60_000)


def _nothing_alive(page, server) -> None:
    """No script from a transcript or link ran, no image element, nothing fetched off the server."""
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img[src*='pwn.png'], img[src='x']").count() == 0
    assert page.evaluate("[...document.scripts].filter(s => s.textContent.includes('__pwned')).length") == 0
    host = server.split("//", 1)[1]
    # Only the server itself is asked for anything (the pages' own URLs may quote the link).
    assert not [u for u in page.requested if not u.startswith(("data:", "blob:", f"{server}/"))]
    assert host != "127.0.0.1:9"


def test_hostile_tool_names_user_text_and_arguments_stay_inert(server, page, artifacts_dir):
    """gen_ledger seeds session 1 with hostile text in its title, user turn, tool name, arguments
    and answer: the Session and Replay pages show each verbatim and none of it comes alive."""
    page.goto(server + "/session?session=1&run=0")
    step = page.get_by_label("Around call #", exact=True)
    step.wait_for(timeout=60_000)
    step.fill("1")
    step.press("Enter")
    for marker in ("user said", "hostile_tool", "arg said"):
        block = page.locator("[data-testid=stCode], [data-testid=stText]").filter(has_text=marker).first
        expect(block).to_contain_text("<script>window.__pwned=1</script>", timeout=30_000)
    _nothing_alive(page, server)
    page.screenshot(path=str(artifacts_dir / "e2e-inert-session.png"), full_page=True)
    page.goto(server + "/replay?session=1&run=0&policy=ladder&step=2")
    page.get_by_test_id("stCode").filter(has_text="hostile_tool").first.wait_for(timeout=60_000)
    _nothing_alive(page, server)


def test_hostile_link_parameters_stay_inert(server, page, artifacts_dir):
    from urllib.parse import quote

    hostile = quote("![x](http://127.0.0.1:9/pwn.png) <img src=x onerror=\"window.__pwned=3\">", safe="")
    page.goto(server + f"/replay?session=1&run=0&step=1&policy=run-length:observation_tools={hostile}")
    shown = page.get_by_test_id("stText").filter(has_text="Replaying:").first
    expect(shown).to_contain_text("![x](http://127.0.0.1:9/pwn.png)", timeout=60_000)  # the link's text, verbatim
    page.goto(server + f"/replay?session={hostile}&run={hostile}&step={hostile}&policy={hostile}")
    page.get_by_test_id("stText").filter(has_text="pwn.png").first.wait_for(timeout=60_000)
    _nothing_alive(page, server)
    page.screenshot(path=str(artifacts_dir / "e2e-inert-link.png"), full_page=True)
