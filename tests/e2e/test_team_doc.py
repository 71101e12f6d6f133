"""docs/team.md, end to end on one machine: every `sh` block of the page run in order by bash, as
a person following it from a checkout would (free ports in place of 4318, 8501 and 9000, a
throwaway database on the test PostgreSQL server as $TEAM_DB) — the members and tokens, the
receiver, npm's OpenID Connect provider, the dashboard behind sign-in, two members' `team join`
— then both members' real hooks at work, their sessions in the team ledger under each member,
and the owner signing in through the browser to filter the Sessions page by member."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from loopledger.ledger import schema as t
from loopledger.ledger.engine import make_engine

from tests.conftest import PG_URL, REQUIRE_PG, _pg_database, _pg_drop
from tests.e2e.conftest import expect_metric
from tests.live_support import npm_test_loop
from tests.real_clients import OIDC_PROVIDER, npm_package
from tests.signin_support import sign_in
from tests.team_support import Member, free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "team.md").read_text(encoding="utf-8")


def script(ports: dict[str, int]) -> str:
    blocks = re.findall(r"^```sh\n(.*?)^```", PAGE, flags=re.S | re.M)
    text = "\n".join(blocks)
    for fixed, port in ports.items():
        text = text.replace(fixed, str(port))
    return "set -euo pipefail\n" + text + "\n"


@pytest.fixture
def team_db():
    if not PG_URL:
        if REQUIRE_PG:
            pytest.fail("LOOPLEDGER_REQUIRE_PG=1 but LOOPLEDGER_TEST_PG_URL is not set")
        pytest.skip("docs/team.md runs the team ledger on PostgreSQL (set LOOPLEDGER_TEST_PG_URL)")
    url = _pg_database()
    yield url
    _pg_drop(url)


def _stop(group: int) -> None:
    """End what the page started in the background (the script's own process group)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(group, sig)
        except ProcessLookupError:
            return
        wait_for(lambda: not _alive(group), timeout=20)


def _alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
        return True
    except ProcessLookupError:
        return False


def _sessions(url: str) -> dict[str, int]:
    engine = make_engine(url, readonly=True)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.select(t.sessions.c.member, sa.func.count()).where(t.sessions.c.member.is_not(None))
                                .group_by(t.sessions.c.member)).all()
        return {m: int(n) for m, n in rows}
    finally:
        engine.dispose()


def test_the_team_page_end_to_end(team_db, tmp_path, page):
    npm_package(*OIDC_PROVIDER)  # skips, saying why, where npm's registry cannot be reached
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))  # this checkout's venv
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    ports = {"4318": free_port(), "8501": free_port(), "9000": free_port()}
    (tmp_path / "team.sh").write_text(script(ports))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPLEDGER_")} | {"TEAM_DB": team_db}
    members = [Member("alice@example.com", tmp_path / "alice"), Member("bob@example.com", tmp_path / "bob")]
    # Its own process group: what the page starts in the background is ended with it.
    proc = subprocess.Popen(["bash", "team.sh"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"docs/team.md failed:\n{out[-3000:]}\n{err[-3000:]}"
        assert "as alice@example.com" in out and "as bob@example.com" in out

        # Each member's agent at work: their hooks decide locally, their residents forward.
        for i, m in enumerate(members):
            assert m.ledger.is_file() and (m.home / ".claude" / "settings.json").is_file()
            loop = npm_test_loop(tmp_path / m.home.name, calls=5, session=f"d0c{i}0000-0000-4000-8000-00000000000{i}")
            for ev in loop.events:
                assert m.hook(ev).returncode == 0
        arrived = wait_for(lambda: (lambda s: s if len(s) == 2 else None)(_sessions(team_db)), timeout=120)
        assert arrived == {"alice@example.com": 1, "bob@example.com": 1}

        # The owner signs in and narrows the Sessions page to one member.
        base = f"http://127.0.0.1:{ports['8501']}"
        sign_in(page, base, "lead@example.com")
        page.get_by_test_id("stSidebar").get_by_text("Role: owner").wait_for(timeout=60_000)
        expect_metric(page, "Sessions", "2")
        box = page.get_by_test_id("stSelectbox").filter(has_text="Member").first
        for _ in range(6):  # a rerun still drawing the page closes an open list: open it and pick again
            box.get_by_role("combobox").click()
            try:
                page.get_by_role("option", name="bob@example.com", exact=True).click(timeout=10_000)
                break
            except Exception:  # noqa: BLE001
                continue
        expect_metric(page, "Sessions", "1")
    finally:
        for m in members:
            m.stop()
        _stop(proc.pid)
