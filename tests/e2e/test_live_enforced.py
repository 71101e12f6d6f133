"""What a live hook enforced, seen in the browser: the Session page's enforced table grows on its
own while the page is open (its fragment re-reads the ledger every second)."""

from __future__ import annotations

import re
import time

import pytest
from loopledger import worker
from loopledger.ledger.engine import make_engine
from loopledger.ledger.migrate import upgrade
from loopledger.live.enforce import LIVE_DEFAULT
from sqlalchemy import text

from tests.e2e.conftest import start_server
from tests.live_support import SESSION, npm_test_loop, run_hook


@pytest.fixture(scope="module")
def live_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e_live")
    url = f"sqlite:///{tmp / 'ledger.sqlite'}"
    eng = make_engine(url)
    upgrade(eng)
    loop = npm_test_loop(tmp, calls=3)
    for ev in loop.events[:4]:  # SessionStart, the prompt, one call and its answer
        run_hook(ev, url)
    worker.ingest_paths(eng, [loop.transcript], worker.Options(specs=list(LIVE_DEFAULT)))
    with eng.connect() as conn:
        sid = conn.execute(text("SELECT id FROM sessions WHERE key = :k"), {"k": SESSION}).scalar_one()
    eng.dispose()
    with start_server(url, tmp / "server.log") as base:
        yield base, url, sid, loop


def test_a_hook_decision_appears_on_the_open_session_page(live_server, page, artifacts_dir):
    base, url, sid, loop = live_server
    page.goto(f"{base}/session?session={sid}")
    page.get_by_test_id("stHeading").filter(has_text="Enforced on the live agent").wait_for(timeout=60_000)
    page.get_by_text(re.compile(r"^1 decision\(s\)")).wait_for(timeout=30_000)
    pre = [ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse"]
    for ev in pre[1:]:
        assert run_hook(ev, url).returncode == 0
    t0 = time.monotonic()
    # No reload, no click: the page's own refresh brings the two new decisions in.
    page.get_by_text(re.compile(r"^3 decision\(s\)")).wait_for(timeout=30_000)
    print(f"new decisions on the open page after {time.monotonic() - t0:.2f} s")  # for people; not asserted
    page.screenshot(path=str(artifacts_dir / "e2e-session-enforced.png"), full_page=True)
