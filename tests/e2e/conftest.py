"""Browser end-to-end fixtures: a real `streamlit run app/main.py` on a free port and Debian chromium.

Skipped only when /usr/bin/chromium is missing and LOOPLEDGER_REQUIRE_BROWSER is not "1".
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.gen_ledger import generate

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
START_TIMEOUT_S = 90


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the group marks into the test ids
def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/e2e/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.e2e)
            # xdist --dist loadgroup: a module's browser tests on one worker, so its ledger, its
            # server and its browser context are made once (modules still spread over workers).
            item.add_marker(pytest.mark.xdist_group(f"e2e-{Path(str(item.fspath)).stem}"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def e2e_ledger(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('e2e') / 'ledger.sqlite'}"
    generate(url, sessions=80, calls=6000, seed=3, hostile=True)
    return url


def _wait_healthy(base: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.3)
    raise RuntimeError(f"streamlit did not answer {base}/_stcore/health in {START_TIMEOUT_S}s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def server(e2e_ledger, tmp_path_factory) -> str:
    """Base URL of a dashboard serving the e2e ledger."""
    with start_server(e2e_ledger, tmp_path_factory.mktemp("streamlit") / "server.log") as base:
        yield base


@pytest.fixture
def fresh_server(e2e_ledger, tmp_path) -> str:
    """A server no browser has visited yet (its first request is the test's)."""
    with start_server(e2e_ledger, tmp_path / "server.log") as base:
        yield base


@contextmanager
def start_server(ledger_url: str, log: Path):
    """A `streamlit run app/main.py` on a free port; yields its base URL once it answers /_stcore/health."""
    port = _free_port()
    env = dict(os.environ, LOOPLEDGER_DATABASE_URL=ledger_url)
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app" / "main.py"), "--server.address", "127.0.0.1",
           "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none"]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base, proc, log)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        if os.environ.get("LOOPLEDGER_REQUIRE_BROWSER") == "1":
            pytest.fail("LOOPLEDGER_REQUIRE_BROWSER=1 but /usr/bin/chromium is missing")
        pytest.skip("no /usr/bin/chromium (set LOOPLEDGER_REQUIRE_BROWSER=1 to make this a failure)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def _context(browser):
    """One browser context per module: its tests share the cache of the app's scripts, which a
    fresh context compiles again (~1 CPU-s a test). Each test still gets a page of its own and no
    cookie of an earlier test (a sign-in), and every new page opens a new app session."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    requested: list[list[str]] = [[]]
    # Every URL the test's pages ask for, so tests can prove nothing from a transcript was fetched.
    ctx.on("request", lambda r: requested[-1].append(r.url))
    yield ctx, requested
    ctx.close()


@pytest.fixture
def page(_context):
    ctx, requested = _context
    ctx.clear_cookies()
    requested.append([])
    pg = ctx.new_page()
    pg.requested = requested[-1]
    yield pg
    for left in ctx.pages:  # the test's page and any it opened (a link to a new tab)
        left.close()


def metric_value(page, label: str) -> str:
    """The value of the st.metric labelled exactly `label`. Exactly: `has_text` would also take
    "Sessions without usage" for "Sessions", and which of the two comes first can change while a
    fragment redraws."""
    label_el = page.get_by_test_id("stMetricLabel").get_by_text(label, exact=True)
    m = page.get_by_test_id("stMetric").filter(has=label_el).first
    m.wait_for(timeout=60_000)
    return m.get_by_test_id("stMetricValue").inner_text().strip()


def expect_metric(page, label: str, value: str, timeout_ms: int = 60_000) -> None:
    """Until the st.metric labelled exactly `label` shows `value` (a Playwright expect: the page
    may still be drawing, or a live fragment re-reading the ledger)."""
    from playwright.sync_api import expect

    label_el = page.get_by_test_id("stMetricLabel").get_by_text(label, exact=True)
    value_el = page.get_by_test_id("stMetric").filter(has=label_el).first.get_by_test_id("stMetricValue")
    expect(value_el).to_have_text(value, timeout=timeout_ms)


def expect_run_over(page, timeout_ms: int = 60_000) -> None:
    """Until Streamlit's script run is over: the app root's `data-test-script-state` (the attribute
    Streamlit's own browser tests read) says notRunning. Proof only once the page shows something
    the awaited run drew: from a click until the server starts the run it asks for, and between a
    run stopped by st.rerun() and the next, the root says notRunning too. Not the status widget: it
    appears only once a run has gone on for 500 ms, so a shorter run never shows it."""
    from playwright.sync_api import expect

    expect(page.get_by_test_id("stApp")).to_have_attribute("data-test-script-state", "notRunning",
                                                           timeout=timeout_ms)


def sql(url: str, query: str, **params) -> list:
    """Rows of one read-only query on a ledger (what a test checks the page against)."""
    import sqlalchemy as sa
    from loopledger.ledger.engine import make_engine

    eng = make_engine(url, readonly=True)
    try:
        with eng.connect() as conn:
            return conn.execute(sa.text(query), params).all()
    finally:
        eng.dispose()
