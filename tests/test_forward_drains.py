"""Forwarding that always drains (issue 36, "What gets lost or stuck"): a member's backlog larger
than the receiver's body limit, a session the receiver refuses, a long call id, the OpenCode
guard, spans acknowledged while the team ledger is down, and what /health and the exit line
count. Real parts throughout: the team's `loopledger receive` as a process, members' real
`loopledger guard` / `forward` / `team join` processes with a HOME each, the team ledger on
SQLite and on PostgreSQL (a server of the test's own where the test stops it)."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import sqlalchemy as sa
from loopledger.ledger import migrate
from loopledger.ledger import schema as t
from loopledger.ledger import team as roster
from loopledger.ledger.engine import make_engine

from tests.pg_throwaway import Cluster
from tests.team_support import BIN, Member, Receiver, cli, post, wait_for
from tests.test_receive import request, tool_span

ALICE, BOB = "alice@example.com", "bob@example.com"
SHARED = "shared-door-token-for-otlp"  # the receiver's own --token: its door needs no ledger read


def _team(url: str, tmp_path: Path, args: tuple[str, ...] = ()) -> tuple[Receiver, dict[str, str]]:
    migrate.upgrade(url)
    tokens = {}
    # The owner's `members add` and `tokens create`, in process (their CLI is tests/test_team.py's).
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for email in (ALICE, BOB):
                roster.set_member(conn, email, "labeller")
                tokens[email] = roster.create_token(conn, email)[1]
    finally:
        engine.dispose()
    receiver = Receiver(url, tmp_path / "team", args=args)
    return receiver, tokens


@pytest.fixture
def team(db_url, tmp_path):
    receiver, tokens = _team(db_url, tmp_path)
    receiver.start(tokens[ALICE])
    members = {e: Member(e, tmp_path / e.split("@")[0]) for e in tokens}
    try:
        yield db_url, receiver, tokens, members
    finally:
        for m in members.values():
            m.stop()
        receiver.stop()


def _laptop(member: Member) -> None:
    """A member's own ledger, made as `team join` makes it (before they joined)."""
    member.ledger.parent.mkdir(parents=True, exist_ok=True)
    migrate.upgrade(f"sqlite:///{member.ledger}")


def _join(member: Member, receiver: Receiver, token: str, *extra: str) -> subprocess.CompletedProcess:
    project = member.home / "proj"
    project.mkdir(parents=True, exist_ok=True)
    return cli("team", "join", receiver.url, "--token", token, "--project", str(project), *extra, env=member.env)


def _reads(session: str, n: int, size: int, start: int = 0) -> list[dict]:
    """`n` file reads of about `size` bytes each: a call and its answer each."""
    out = []
    for i in range(start, start + n):
        line = f"    {i:04d} | return compute(value_{i}, other) if ready else wait()\n"
        out.append({"session": session, "event": "call", "id": f"read-{i}", "tool": "Read",
                    "args": {"file_path": f"src/module_{i}.py"}})
        out.append({"session": session, "event": "answer", "id": f"read-{i}", "text": line * (size // len(line))})
    return out


def _guard(member: Member, events: list[dict], forwarding: bool = True) -> list[dict]:
    """`loopledger guard` on the member's ledger, as an agent's plugin drives it; its verdicts.
    `forwarding=False`: without the member's team settings (so only `forward --once` sends)."""
    lines = "".join(json.dumps(e) + "\n" for e in events)
    env = member.env | ({} if forwarding else {"XDG_CONFIG_HOME": str(member.home / "not-joined")})
    proc = subprocess.run([str(BIN), "guard", "--db", str(member.ledger)], input=lines, capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(x) for x in proc.stdout.splitlines()]


def _local_events(member: Member, key: str | None = None) -> int:
    with sqlite3.connect(member.ledger) as conn:
        if key is None:
            return conn.execute("SELECT COUNT(*) FROM live_events").fetchone()[0]
        return conn.execute("SELECT COUNT(*) FROM live_events l JOIN sessions s ON s.id = l.session_id "
                            "WHERE s.key = ?", (key,)).fetchone()[0]


def _team_events(url: str, member: str) -> dict[str, int]:
    """Live events per session key the team ledger holds for `member`."""
    engine = make_engine(url, readonly=True)
    try:
        with engine.connect() as conn:
            s, le = t.sessions.c, t.live_events.c
            rows = conn.execute(sa.select(s.key, sa.func.count(le.seq)).select_from(
                t.sessions.join(t.live_events, t.live_events.c.session_id == s.id))
                .where(s.member == member).group_by(s.key)).all()
        return {k: n for k, n in rows}
    finally:
        engine.dispose()


# ── 7: a backlog over the body limit ─────────────────────────────────────────────────────────


def test_7_a_day_offline_of_large_answers_drains_in_batches_under_the_receivers_limit(team):
    """300 reads of ~60 KB made while the receiver was down (18 MB: over its default 16 MiB
    limit) all reach the team ledger once it is back, in requests it takes; never "cannot reach"."""
    url, receiver, tokens, members = team
    alice = members[ALICE]
    _join(alice, receiver, tokens[ALICE])
    receiver.stop()
    _guard(alice, _reads("offline-day", 300, 60_000))  # its forwarder cannot reach the receiver: queued
    local = _local_events(alice)
    assert local == 600 and alice.ledger.stat().st_size > 16 * 1024 * 1024
    receiver.start(tokens[ALICE])
    proc = cli("forward", "--once", env=alice.env, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cannot reach" not in proc.stdout and "413" not in proc.stdout
    assert _team_events(url, ALICE) == {"offline-day": 600}
    health = receiver.health(tokens[ALICE])
    assert health["max_body"] == 16 * 1024 * 1024
    assert health["forwarded_batches"] >= 5 and health["rejected"] == 0  # 18 MB in steps, none refused
    with sqlite3.connect(alice.ledger) as conn:
        assert conn.execute("SELECT seq FROM forwarded").fetchall() == [(600,)]


def test_7_one_event_over_the_limit_holds_its_session_and_the_rest_flows_never_cannot_reach(db_url, tmp_path):
    """A receiver whose limit is below one answer: the events before it go, that session is held
    and said so once, the other session arrives whole; nothing is reported as "cannot reach"."""
    receiver, tokens = _team(db_url, tmp_path, ("--max-body", "40000"))
    receiver.start(tokens[ALICE])
    alice = Member(ALICE, tmp_path / "alice")
    try:
        _laptop(alice)
        _guard(alice, _reads("small-first", 3, 2_000) + _reads("big-answer", 2, 2_000)
               + _reads("big-answer", 1, 50_000, start=2) + _reads("small-after", 4, 2_000))
        _join(alice, receiver, tokens[ALICE])
        proc = cli("forward", "--once", env=alice.env, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "cannot reach" not in proc.stdout
        assert re.search(r"session big-answer is held .*limit of 40000 bytes", proc.stdout), proc.stdout
        # The big answer's call went (alone under the limit), its answer and what follows did not.
        assert _team_events(db_url, ALICE) == {"small-first": 6, "big-answer": 5, "small-after": 8}
        # Said once: the next round sends what is new and says nothing of the held session.
        _guard(alice, _reads("small-after", 1, 2_000, start=10) + _reads("big-answer", 1, 100, start=20),
               forwarding=False)
        again = cli("forward", "--once", env=alice.env)
        assert "held" not in again.stdout and "forwarded 2 live event(s) of 1 session(s)" in again.stdout
        assert _team_events(db_url, ALICE) == {"small-first": 6, "big-answer": 5, "small-after": 10}
    finally:
        alice.stop()
        receiver.stop()


# ── 8: a session the receiver refuses ────────────────────────────────────────────────────────


def test_8_a_session_the_receiver_refuses_is_held_once_while_the_other_sessions_flow(team):
    """A row an older laptop stored (a 600-character call id, refused with 400 on every retry)
    holds that session only: the other sessions arrive, the member is told once, and later
    rounds go on without it."""
    url, receiver, tokens, members = team
    bob = members[BOB]
    _laptop(bob)
    _guard(bob, _reads("a-refused", 2, 100) + _reads("b-fine", 3, 100) + _reads("c-fine", 1, 100))
    with sqlite3.connect(bob.ledger) as conn:  # as LoopLedger before stored_id stored a long id
        conn.execute("UPDATE live_events SET call_id = ? WHERE call_id = 'read-1' AND session_id = "
                     "(SELECT id FROM sessions WHERE key = 'a-refused')", ("x" * 600,))
    _join(bob, receiver, tokens[BOB])
    proc = cli("forward", "--once", env=bob.env, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"session a-refused is held .*HTTP 400.*call_id", proc.stdout), proc.stdout
    assert _team_events(url, BOB) == {"b-fine": 6, "c-fine": 2}
    _guard(bob, _reads("b-fine", 2, 100, start=10) + _reads("a-refused", 1, 100, start=10), forwarding=False)
    again = cli("forward", "--once", env=bob.env)
    assert "held" not in again.stdout and "HTTP 400" not in again.stdout, again.stdout
    assert _team_events(url, BOB) == {"b-fine": 10, "c-fine": 2}


def test_8_a_call_id_over_the_receivers_limit_is_stored_within_it_and_forwarded(team):
    """The hook stores what the receiver takes: a 600-character call id is kept within 512 (two
    long ids that share their start stay two), the verdict still names the id the agent gave,
    and the session is forwarded, not refused."""
    url, receiver, tokens, members = team
    alice = members[ALICE]
    _laptop(alice)
    long_a, long_b = "toolu_" + "a" * 594, "toolu_" + "a" * 593 + "b"
    events = [{"session": "long-ids", "event": "call", "id": cid, "tool": "Bash", "args": {"command": f"ls {n}"}}
              for n, cid in enumerate((long_a, long_b))]
    events += [{"session": "long-ids", "event": "answer", "id": cid, "text": "ok"} for cid in (long_a, long_b)]
    verdicts = _guard(alice, events)
    assert [v["id"] for v in verdicts] == [long_a, long_b]  # the caller matches its verdict by its own id
    with sqlite3.connect(alice.ledger) as conn:
        ids = [r[0] for r in conn.execute("SELECT call_id FROM live_events ORDER BY seq")]
        checks = [r[0] for r in conn.execute("SELECT call_id FROM enforced_checks ORDER BY seq")]
    assert all(len(i) <= 512 for i in ids) and len(set(ids)) == 2 and ids[:2] == ids[2:] and checks == ids[:2]
    _join(alice, receiver, tokens[ALICE])
    proc = cli("forward", "--once", env=alice.env)
    assert "held" not in proc.stdout
    assert _team_events(url, ALICE) == {"long-ids": 4}


def test_a_binary_answer_with_nul_bytes_is_forwarded_not_retried_for_ever(team):
    """`cat` of a binary file answers NUL bytes, which PostgreSQL's text cannot hold: the receiver
    stores them as U+FFFD on both backends instead of answering 503 on every retry (which left
    that laptop's forwarding stuck behind the session)."""
    url, receiver, tokens, members = team
    alice = members[ALICE]
    _laptop(alice)
    _guard(alice, [{"session": "binary", "event": "call", "id": "c1", "tool": "Bash", "args": {"command": "cat a.out"}},
                   {"session": "binary", "event": "answer", "id": "c1", "text": "\x7fELF\x02\x01\x00\x00 header"}]
           + _reads("after-binary", 2, 100))
    _join(alice, receiver, tokens[ALICE])
    proc = cli("forward", "--once", env=alice.env, check=False)
    assert proc.returncode == 0 and "held" not in proc.stdout, proc.stdout
    assert _team_events(url, ALICE) == {"binary": 2, "after-binary": 4}
    engine = make_engine(url, readonly=True)
    with engine.connect() as conn:
        text = conn.execute(sa.select(t.live_events.c.text).where(t.live_events.c.kind == "answer",
                                                                  t.live_events.c.call_id == "c1")).scalar_one()
    engine.dispose()
    assert text == "\x7fELF\x02\x01\ufffd\ufffd header"


# ── 10: the OpenCode guard forwards ──────────────────────────────────────────────────────────


def _plugin_command(project: Path) -> list[str]:
    """The command the installed OpenCode plugin starts its guard with."""
    text = next(project.glob(".opencode/plugins/*.js")).read_text()
    config = re.search(r"/\* loopledger:config \*/(.*?)/\* loopledger:end \*/", text, re.S)
    assert config, "the installed plugin has no config block"
    return json.loads(config.group(1))["command"]


def test_10_team_join_for_opencode_forwards_from_the_guard_the_plugin_runs(team):
    url, receiver, tokens, members = team
    bob = members[BOB]
    proc = _join(bob, receiver, tokens[BOB], "--agent", "opencode")
    assert f"as {BOB}" in proc.stdout
    command = _plugin_command(bob.home / "proj")
    guard = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=bob.env,
                             cwd=bob.home / "proj")
    try:
        assert guard.stdin and guard.stdout
        for e in _reads("ses_opencode1", 3, 200):
            guard.stdin.write(json.dumps(dict(e, format="opencode")) + "\n")
            guard.stdin.flush()
            if e["event"] == "call":
                assert json.loads(guard.stdout.readline())["verdict"] == "allow"
        # OpenCode keeps its guard running: what it stored reaches the team meanwhile.
        arrived = wait_for(lambda: _team_events(url, BOB).get("ses_opencode1") == 6, timeout=60)
        assert arrived, _team_events(url, BOB)
    finally:
        guard.stdin.close()
        guard.wait(60)
    assert _local_events(bob, "ses_opencode1") == 6


# ── 11: /health and the exit line count forwarded batches ────────────────────────────────────


def test_11_health_and_the_exit_line_count_forwarded_batches(team):
    url, receiver, tokens, members = team
    batch = {"sessions": [{"key": f"k{n}", "agent": "claude-code", "source": "0123456789abcdef", "from": 0,
                           "events": [[i, "user", 1.0 + i, None, None, None, f"prompt {i}", None, None]
                                      for i in range(3)], "checks": []} for n in range(2)]}
    assert post(receiver.url, batch, tokens[ALICE])[0] == 200
    assert post(receiver.url, {"sessions": batch["sessions"][:1]}, tokens[BOB])[0] == 200
    health = receiver.health(tokens[ALICE])
    assert (health["forwarded_batches"], health["forwarded_events"], health["forwarded_sessions"],
            health["members"]) == (2, 9, 3, 2)
    receiver.stop()
    last = receiver.log.read_text().strip().splitlines()[-1]
    assert "received 0 OTLP request(s)" in last and "2 forwarded batch(es), 9 live event(s) of 3 session(s) " \
                                                   "from 2 member(s)" in last, last


# ── 9 and the fault run: the team ledger stopped and started ─────────────────────────────────


def _post_spans(url: str, spans: list[dict]) -> int:
    req = urllib.request.Request(url + "/v1/traces", data=request(spans), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {SHARED}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def _calls(url: str) -> dict[str, int]:
    """Calls rows per call id in the ledger (0 rows: an empty dict, also when it cannot be read)."""
    try:
        engine = make_engine(url, readonly=True)
    except Exception:  # noqa: BLE001
        return {}
    try:
        with engine.connect() as conn:
            return dict(conn.execute(sa.select(t.calls.c.call_id, sa.func.count()).group_by(t.calls.c.call_id)).all())
    except sa.exc.SQLAlchemyError:
        return {}
    finally:
        engine.dispose()


def test_9_spans_acknowledged_while_the_ledger_is_down_reach_it_when_it_is_back_without_another_request(tmp_path):
    """The receiver's first spool file is made while its PostgreSQL ledger is stopped: /health
    says those spans are pending, and once the server is back they are written with no further
    request (the flusher tries again), not at the next request or at shutdown."""
    cluster = Cluster()
    cluster.start()
    try:
        migrate.upgrade(cluster.url)
        receiver = Receiver(cluster.url, tmp_path / "team", args=("--token", SHARED))
        receiver.start(SHARED)
        try:
            cluster.stop()
            spans = [tool_span("down", i, "ls", json.dumps({"i": i}), f"answer {i}") for i in range(3)]
            assert _post_spans(receiver.url, spans) == 200  # acknowledged: in the spool
            health = wait_for(lambda: (lambda h: h if h["last_error"] else None)(receiver.health(SHARED)), 30)
            assert health and health["pending_spans"] == 3, health
            cluster.start()
            assert wait_for(lambda: _calls(cluster.url) == {f"call_down_{i}": 1 for i in range(3)}, 60), \
                receiver.log.read_text()[-2000:]
            assert wait_for(lambda: receiver.health(SHARED)["pending_spans"] == 0, 30)
        finally:
            receiver.stop()
    finally:
        cluster.remove()


class _Ledger:
    """The team ledger to stop and start: a PostgreSQL server of the test's own, or a SQLite file
    held by another writer (what "stopped" is for a file: nobody else can write it)."""

    def __init__(self, backend: str, tmp_path: Path) -> None:
        self.backend = backend
        self.cluster = Cluster() if backend == "postgresql" else None
        if self.cluster is not None:
            self.cluster.start()
            self.url = self.cluster.url
        else:
            self.path = tmp_path / "team.sqlite"
            self.url = f"sqlite:///{self.path}"
        self._holder: sqlite3.Connection | None = None

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
        else:
            self._holder = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            self._holder.execute("BEGIN IMMEDIATE")

    def start(self) -> None:
        if self.cluster is not None:
            self.cluster.start()
        elif self._holder is not None:
            self._holder.execute("ROLLBACK")
            self._holder.close()
            self._holder = None

    def remove(self) -> None:
        if self.cluster is not None:
            self.cluster.remove()
        elif self._holder is not None:
            self.start()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_team_ledger_stopped_and_started_under_load_loses_nothing_acknowledged(backend, tmp_path):
    """Spans streaming in and a member's OpenCode guard forwarding while the team ledger is
    stopped for a few seconds and started again: every span the receiver acknowledged is in the
    ledger exactly once, and every live event the member stored reaches it."""
    ledger = _Ledger(backend, tmp_path)
    try:
        receiver, tokens = _team(ledger.url, tmp_path, ("--token", SHARED))
        receiver.start(SHARED)
        alice = Member(ALICE, tmp_path / "alice")
        try:
            _join(alice, receiver, tokens[ALICE], "--agent", "opencode")
            acked: list[int] = []
            stop = threading.Event()

            def load() -> None:
                n = 0
                while not stop.is_set():
                    ids = list(range(n, n + 5))
                    if _post_spans(receiver.url, [tool_span("load", i, "ls", json.dumps({"i": i}), f"a {i}")
                                                  for i in ids]) == 200:
                        acked.extend(ids)
                    n += 5
                    time.sleep(0.02)

            streamer = threading.Thread(target=load, daemon=True)
            streamer.start()
            guard = subprocess.Popen(_plugin_command(alice.home / "proj"), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=alice.env, cwd=alice.home / "proj")
            assert guard.stdin and guard.stdout
            phases = [("before", None), ("down", ledger.stop), ("after", ledger.start)]
            try:
                for name, change in phases:
                    if change is not None:
                        change()
                    for e in _reads(f"ses_{name}", 15, 3_000):
                        guard.stdin.write(json.dumps(e) + "\n")
                        guard.stdin.flush()
                        if e["event"] == "call":
                            assert "verdict" in json.loads(guard.stdout.readline())
                        time.sleep(0.05)
                stop.set()
                streamer.join(60)
                local = {k: _local_events(alice, k) for k in ("ses_before", "ses_down", "ses_after")}
                assert local == {"ses_before": 30, "ses_down": 30, "ses_after": 30}
                assert len(acked) > 100
                want = {f"call_load_{i}": 1 for i in acked}
                got = wait_for(lambda: (lambda c: c if set(want) <= set(c) else None)(_calls(ledger.url)), 120)
                assert got, f"{len(want)} acknowledged spans, ledger holds {len(_calls(ledger.url))}"
                assert {k: v for k, v in got.items() if k in want} == want  # each exactly once
                assert wait_for(lambda: _team_events(ledger.url, ALICE) == local, 120), \
                    (_team_events(ledger.url, ALICE), (alice.home / "hook.log").read_text()[-2000:])
                assert receiver.health(SHARED)["pending_spans"] == 0
            finally:
                guard.stdin.close()
                guard.wait(60)
                stop.set()
        finally:
            alice.stop()
            receiver.stop()
    finally:
        ledger.remove()
