"""The receiver's door fails closed (issue 36, "Who gets in", reproductions 1, 2 and 5): once a
receiver has required tokens, or listens beyond loopback, it requires them for its whole life; a
door the ledger cannot answer for refuses — 503 with Retry-After, never a 500, never "open"; a
member's token on /v1/traces is refused, never stored without its member.

Real ledgers (SQLite and PostgreSQL through `db_url`), the receiver over real HTTP on loopback
(in a thread, or the real `loopledger receive` process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
import sqlalchemy as sa
from loopledger import receive, worker
from loopledger.ledger import migrate, team
from loopledger.ledger import schema as t
from loopledger.ledger.engine import make_engine
from loopledger.receive import forwarded

from tests.team_support import free_port, wait_for, wait_http
from tests.test_receive import WINDOW, _served, request, tool_span

ALICE, BOB = "alice@example.com", "bob@example.com"


def _send(url: str, path: str, body: bytes, token: str | None) -> tuple[int, dict, dict]:
    """(status, JSON answer, headers by lower-case name) of a POST."""
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
    req = urllib.request.Request(url + path, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"{}"), {k.lower(): v for k, v in r.headers.items()}
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}"), {k.lower(): v for k, v in exc.headers.items()}


def _live(url: str, token: str | None, key: str = "k-1") -> tuple[int, dict, dict]:
    body = {"sessions": [{"key": key, "agent": "claude-code", "source": "0123456789abcdef",
                          "events": [[0, "user", 1.0, None, None, None, "fix the tests", None, None]]}]}
    return _send(url, "/v1/live", json.dumps(body).encode(), token)


def _traces(url: str, token: str | None, conv: str) -> tuple[int, dict, dict]:
    return _send(url, "/v1/traces", request([tool_span(conv, 0)]), token)


def _sessions(engine) -> list[tuple[str, str | None]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.select(t.sessions.c.key, t.sessions.c.member)
                                               .order_by(t.sessions.c.key))]


@pytest.fixture
def ledger(db_url):
    engine = make_engine(db_url)
    migrate.upgrade(engine)
    yield db_url, engine
    engine.dispose()


@pytest.fixture
def recheck_every_request(monkeypatch):
    """The door asks the ledger on every request (no one-second belief): what a request sees is
    what the ledger holds at that moment, without waiting for the cache to lapse."""
    monkeypatch.setattr(forwarded, "DOOR_CACHE_S", 0.0)


def _receiver(engine, tmp_path, **app):
    return _served(receive.Receiver(engine, tmp_path / "spool", worker.Options(specs=[WINDOW]),
                                    flush_interval=None), **app)


def _token(engine, email: str) -> tuple[int, str]:
    with engine.begin() as conn:
        if email not in team.member_emails(conn):
            team.set_member(conn, email, team.LABELLER)
        return team.create_token(conn, email, "laptop")


# ── 1. revoking the last token never opens the door ──────────────────────────────────────────


@pytest.mark.parametrize("how", ["revoke", "remove"])
def test_revoking_the_last_token_or_removing_the_last_member_keeps_the_door_closed(
        ledger, tmp_path, recheck_every_request, how):
    url, engine = ledger
    with _receiver(engine, tmp_path) as (base, rec):
        # No token ever: a loopback receiver is open, as before tokens existed.
        assert _traces(base, None, "before-tokens")[0] == 200
        tid, token = _token(engine, ALICE)
        assert _live(base, token)[0] == 200
        assert _traces(base, None, "while-a-token-lives")[0] == 401
        with engine.begin() as conn:
            if how == "revoke":
                team.revoke_token(conn, tid)
            else:
                team.remove_member(conn, ALICE)
            assert not team.any_token(conn)  # the ledger holds no live token now
        for i in range(3):  # each request asks the ledger again (recheck_every_request)
            status, answer, headers = _traces(base, None, f"after-{i}")
            assert status == 401 and "www-authenticate" in headers, answer
            assert _live(base, None, f"anon-{i}")[0] == 401
        assert _live(base, token)[0] == 401  # the revoked token itself
        rec.flush()
    keys = [k for k, _ in _sessions(engine)]
    assert not any(k.startswith(("after-", "anon-")) or "after-" in k for k in keys), keys


def test_a_receiver_that_listens_beyond_loopback_requires_tokens_from_the_start(ledger, tmp_path,
                                                                                 recheck_every_request):
    """`closed=True`: what `loopledger receive --host 0.0.0.0` gives the app (no token ever made)."""
    url, engine = ledger
    with _receiver(engine, tmp_path, closed=True) as (base, rec):
        assert _traces(base, None, "anon")[0] == 401
        tid, token = _token(engine, ALICE)
        assert _live(base, token)[0] == 200
        with engine.begin() as conn:
            team.revoke_token(conn, tid)
        assert _traces(base, None, "anon-2")[0] == 401 and _live(base, None)[0] == 401


def _start(db: str, tmp_path, *args: str) -> tuple[subprocess.Popen, str, object]:
    port = free_port()
    log = tmp_path / f"receive-{port}.log"
    env = {k: v for k, v in os.environ.items() if k != "LOOPLEDGER_RECEIVE_TOKEN"}
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "loopledger.cli.app", "receive", "--db", db, "--port", str(port),
                                 "--spool", str(tmp_path / f"spool-{port}"), *args],
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    return proc, f"http://127.0.0.1:{port}", log


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def test_loopledger_receive_on_0000_stays_closed_after_the_last_token_is_revoked(ledger, tmp_path):
    """The reproduction as a team lead meets it: `receive --host 0.0.0.0` started because a token
    existed, the token revoked. Anonymous requests are sent for several door-cache periods
    (each past one makes the old receiver ask the ledger again): every one is refused."""
    url, engine = ledger
    tid, token = _token(engine, ALICE)
    proc, base, log = _start(url, tmp_path, "--host", "0.0.0.0")
    try:
        wait_http(base + "/health", proc, log, {"Authorization": f"Bearer {token}"})
        with engine.begin() as conn:
            team.revoke_token(conn, tid)
        assert _live(base, token)[0] == 401
        until = time.monotonic() + 4 * forwarded.DOOR_CACHE_S
        answers = []
        while time.monotonic() < until:
            answers.append(_live(base, None, f"anon-{len(answers)}")[0])
            answers.append(_traces(base, None, f"anon-{len(answers)}")[0])
            time.sleep(forwarded.DOOR_CACHE_S / 4)
        assert set(answers) == {401}, answers
    finally:
        _stop(proc)
    assert [m for _, m in _sessions(engine)] == []


def test_a_receiver_started_after_every_token_was_revoked_is_closed(ledger, tmp_path):
    """A ledger that held a member's token keeps its receivers closed across restarts: a revoked
    token counts (`members list` and `tokens list` show it, so the team is a team)."""
    url, engine = ledger
    tid, token = _token(engine, ALICE)
    with engine.begin() as conn:
        team.revoke_token(conn, tid)
    proc, base, log = _start(url, tmp_path)
    try:
        def answered():
            if proc.poll() is not None:
                raise AssertionError(f"receive exited {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                return _traces(base, None, "probe")[0]
            except OSError:  # not listening yet
                return None
        status = wait_for(answered, 60)
        assert status == 401, (status, log.read_text()[-2000:])
        assert _live(base, None)[0] == 401
        assert "bearer token required" in log.read_text()
    finally:
        _stop(proc)


# ── 2. a door that cannot be checked refuses ─────────────────────────────────────────────────


def _unreachable(db_url: str, tmp_path) -> str:
    """The same kind of ledger, out of reach: a SQLite file that is not there (a reader cannot
    open it), a PostgreSQL port nobody listens on."""
    if db_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'gone' / 'ledger.sqlite'}"
    return sa.make_url(db_url).set(port=free_port()).render_as_string(hide_password=False)


def test_a_door_the_ledger_cannot_answer_for_refuses_with_503_and_retry_after(db_url, tmp_path):
    """The ledger out of reach at the receiver's first check: an anonymous request is not let in,
    a member's token is answered 503 with Retry-After (which exporters and forwarders retry),
    never 500; the receiver's own --token still passes (it needs no ledger)."""
    (tmp_path / "gone").mkdir()
    engine = make_engine(_unreachable(db_url, tmp_path))
    try:
        with _served(receive.Receiver(engine, tmp_path / "spool", worker.Options(specs=[WINDOW]), flush_interval=None),
                     token=None) as (base, rec):
            for path_, send in (("/v1/traces", lambda tok: _traces(base, tok, "anon")),
                                ("/v1/live", lambda tok: _live(base, tok))):
                status, answer, headers = send(None)
                assert status == 503 and headers.get("retry-after"), (path_, status, answer)
                status, answer, headers = send("ll_" + "x" * 43)
                assert status == 503 and headers.get("retry-after"), (path_, status, answer)
                assert answer["code"] == 14 and "retry" in answer["message"]
            assert rec.stats.spans == 0 and rec.stats.requests == 0  # nothing taken in
        with _served(receive.Receiver(engine, tmp_path / "spool2", worker.Options(specs=[WINDOW]),
                                      flush_interval=None), token="shared-secret") as (base, rec):
            assert _traces(base, "shared-secret", "with-the-receivers-token")[0] == 200
            assert _live(base, "ll_" + "x" * 43)[0] == 503
    finally:
        engine.dispose()


def test_a_closed_door_the_ledger_cannot_answer_for_refuses_anonymous_401_and_members_503(db_url, tmp_path):
    """Beyond loopback (closed from the start) with the ledger out of reach: an anonymous request
    is refused as always (no ledger needed to say no), a member's token gets 503 + Retry-After."""
    (tmp_path / "gone").mkdir()
    engine = make_engine(_unreachable(db_url, tmp_path))
    try:
        with _served(receive.Receiver(engine, tmp_path / "spool", worker.Options(specs=[WINDOW]), flush_interval=None),
                     closed=True) as (base, rec):
            assert _traces(base, None, "anon")[0] == 401 and _live(base, None)[0] == 401
            status, answer, headers = _live(base, "ll_" + "y" * 43)
            assert status == 503 and headers.get("retry-after"), answer
    finally:
        engine.dispose()


# ── 5. a member's token on /v1/traces ────────────────────────────────────────────────────────


def test_a_members_token_on_v1_traces_is_refused_and_nothing_is_stored(ledger, tmp_path):
    """Spans carry no member: a member's token there is refused (403, saying where it belongs),
    never stored as a session without its member; the same token forwards on /v1/live."""
    url, engine = ledger
    _, token = _token(engine, BOB)
    with _receiver(engine, tmp_path, token="exporters-token") as (base, rec):
        status, answer, _ = _traces(base, token, "by-a-member")
        assert status == 403 and "/v1/live" in answer["message"], answer
        assert _traces(base, "exporters-token", "by-the-exporter")[0] == 200
        assert _live(base, token, "bobs-session")[0] == 200
        rec.flush()
    stored = _sessions(engine)
    assert ("bobs-session", BOB) in stored
    assert not any("by-a-member" in k for k, _ in stored), stored
    assert any("by-the-exporter" in k for k, _ in stored), stored
