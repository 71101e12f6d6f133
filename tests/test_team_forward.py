"""One team ledger, local guards: two members' real hooks decide on their own laptops' ledgers and
their resident guards forward the live events and decisions to the team's real `loopledger
receive`, each under that member; one member's session is made while the receiver is down and
arrives once it is back; a revoked token is refused; what an owner enforces on the team reaches
the members' guards. Each member has a HOME of their own (their ledger, settings, resident)."""

from __future__ import annotations

import json
import sqlite3

import pytest
import sqlalchemy as sa
from loopledger.ledger import migrate
from loopledger.ledger import schema as t
from loopledger.ledger.engine import make_engine

from tests.live_support import npm_test_loop, output
from tests.team_support import Member, Receiver, cli, post, wait_for

ALICE, BOB = "alice@example.com", "bob@example.com"
SECRET = "sk-ant-api03-" + "Q" * 80  # an Anthropic key in a tool's arguments: never leaves redacted-less


@pytest.fixture
def team(db_url, tmp_path):
    """The team ledger with two members and their tokens, and its receiver (stopped at the end)."""
    migrate.upgrade(db_url)  # a new, empty team ledger
    tokens = {}
    for email, role in ((ALICE, "labeller"), (BOB, "viewer")):
        cli("members", "add", email, "--role", role, "--db", db_url)
        tokens[email] = cli("tokens", "create", email, "--db", db_url).stdout.strip()
    receiver = Receiver(db_url, tmp_path / "team")
    receiver.start(tokens[ALICE])
    members = {e: Member(e, tmp_path / e.split("@")[0]) for e in tokens}
    try:
        yield db_url, receiver, tokens, members
    finally:
        for m in members.values():
            m.stop()
        receiver.stop()


def _team_rows(url: str, member: str):
    engine = make_engine(url, readonly=True)
    try:
        with engine.connect() as conn:
            s = t.sessions.c
            sessions = conn.execute(sa.select(s.id, s.key, s.member, s.n_calls, t.sources.c.path)
                                    .select_from(t.sessions.join(t.sources, t.sources.c.id == s.source_id))
                                    .where(s.member == member)).all()
            live = {sid: conn.execute(sa.select(sa.func.count()).select_from(t.live_events)
                                      .where(t.live_events.c.session_id == sid)).scalar_one() for sid, *_ in sessions}
            verdicts = {sid: [r[0] for r in conn.execute(sa.select(t.enforced_checks.c.verdict)
                                                        .where(t.enforced_checks.c.session_id == sid)
                                                        .order_by(t.enforced_checks.c.seq))]
                        for sid, *_ in sessions}
            return sessions, live, verdicts
    finally:
        engine.dispose()


def _local(member: Member) -> tuple[int, list[str]]:
    with sqlite3.connect(member.ledger) as conn:
        n = conn.execute("SELECT COUNT(*) FROM live_events").fetchone()[0]
        verdicts = [r[0] for r in conn.execute("SELECT verdict FROM enforced_checks ORDER BY seq")]
    return n, verdicts


def _work(member: Member, folder, session: str, calls: int = 6) -> list[dict | None]:
    loop = npm_test_loop(folder, calls=calls, session=session)
    events = [dict(e, tool_input=dict(e["tool_input"], env=f"ANTHROPIC_API_KEY={SECRET}"))
              if "tool_input" in e else e for e in loop.events]
    outs = []
    for ev in events:
        proc = member.hook(ev)
        assert proc.returncode == 0, proc.stderr
        outs.append(output(proc))
    return outs


def test_two_members_sessions_reach_the_team_ledger_each_under_its_member(team, tmp_path):
    url, receiver, tokens, members = team
    alice, bob = members[ALICE], members[BOB]
    for m in (alice, bob):
        (tmp_path / m.home.name / "proj").mkdir(parents=True)
        proc = cli("team", "join", receiver.url, "--token", tokens[m.email], "--project",
                   str(tmp_path / m.home.name / "proj"), env=m.env)
        assert f"as {m.email}" in proc.stdout and m.ledger.is_file()
        settings = json.loads((tmp_path / m.home.name / "proj" / ".claude" / "settings.json").read_text())
        assert str(m.ledger) in json.dumps(settings)  # the hook writes to this laptop's ledger
        cfg = m.home / ".config" / "loopledger" / "team.json"
        assert oct(cfg.stat().st_mode & 0o777) == "0o600"

    # Alice works while the receiver is up: her guard halts the loop locally, and the team sees it.
    outs = _work(alice, tmp_path / "alice", "a1111111-0000-4000-8000-000000000001")
    assert any(o and o.get("hookSpecificOutput", {}).get("permissionDecision") == "deny" for o in outs)
    n_local, local_verdicts = _local(alice)
    arrived = wait_for(lambda: (lambda r: r if r[0] and r[1][r[0][0][0]] == n_local else None)(_team_rows(url, ALICE)))
    assert arrived, f"alice's session never reached the team ledger: {receiver.log.read_text()[-2000:]}"
    sessions, live, verdicts = arrived
    (sid, key, member, n_calls, path), = sessions
    assert member == ALICE and key == "a1111111-0000-4000-8000-000000000001"
    assert path.startswith(f"team:{ALICE}/claude-code/") and "/home/dev/shop" not in path
    assert verdicts[sid] == local_verdicts and "halt" in verdicts[sid]
    assert n_calls >= 4  # the forwarded session is a session of its own: calls, judged by the team's policies
    assert _team_rows(url, BOB)[0] == []  # nothing of alice's under bob

    # Bob works while the receiver is down: decided locally, queued on disk, sent once it is back.
    receiver.stop()
    bob_outs = _work(bob, tmp_path / "bob", "b2222222-0000-4000-8000-000000000002", calls=5)
    assert any(o and o.get("hookSpecificOutput", {}).get("permissionDecision") == "deny" for o in bob_outs)
    n_bob, bob_verdicts = _local(bob)
    with sqlite3.connect(bob.ledger) as conn:
        assert conn.execute("SELECT COALESCE(MAX(seq), 0) FROM forwarded").fetchone()[0] == 0  # nothing acknowledged
    receiver.start(tokens[ALICE])
    arrived = wait_for(lambda: (lambda r: r if r[0] and r[1][r[0][0][0]] == n_bob else None)(_team_rows(url, BOB)),
                       timeout=120)
    assert arrived, f"bob's queued session never arrived: {(bob.home / 'hook.log').read_text() if (bob.home / 'hook.log').exists() else ''}"
    sessions, live, verdicts = arrived
    assert [s.member for s in sessions] == [BOB] and verdicts[sessions[0].id] == bob_verdicts
    # Said once when it failed, once when it worked again (written just after the round the team
    # ledger already shows: awaited).
    log = wait_for(lambda: (lambda text: text if "works" in text else None)((bob.home / "hook.log").read_text()))
    assert log and "queued on disk" in log, (bob.home / "hook.log").read_text()

    # Secrets never reached the team ledger (redacted on the laptop, and again on arrival).
    engine = make_engine(url, readonly=True)
    with engine.connect() as conn:
        args = [r[0] for r in conn.execute(sa.select(t.live_events.c.args).where(t.live_events.c.args.is_not(None)))]
    engine.dispose()
    assert args and all(SECRET not in a for a in args) and any("[REDACTED:" in a for a in args)


def test_a_revoked_token_is_refused_and_the_team_setting_reaches_members(team, tmp_path):
    url, receiver, tokens, members = team
    bob = members[BOB]
    (tmp_path / "proj").mkdir()
    cli("team", "join", receiver.url, "--token", tokens[BOB], "--project", str(tmp_path / "proj"), env=bob.env)

    # The owner enforces on the team ledger; bob's laptop follows it at its next round.
    cli("enforce", "--db", url, "cycle:halt_repeats=5")
    proc = cli("forward", "--once", env=bob.env)
    assert "now enforcing the team's cycle" in proc.stdout
    with sqlite3.connect(bob.ledger) as conn:
        origin, by = conn.execute("SELECT origin, by_user FROM enforcements ORDER BY id DESC LIMIT 1").fetchone()
        label = conn.execute("SELECT p.label FROM enforcement_policies m JOIN policies p ON p.id = m.policy_id "
                             "JOIN enforcements e ON e.id = m.enforcement_id ORDER BY e.id DESC LIMIT 1").fetchone()[0]
    assert origin == "team" and by and "halt_repeats=5" in label

    status, answer = post(receiver.url, {"sessions": []}, tokens[BOB])
    assert status == 200 and answer["member"] == BOB
    tid = [ln.split("\t")[0] for ln in cli("tokens", "list", "--db", url).stdout.splitlines() if BOB in ln][0]
    cli("tokens", "revoke", tid, "--db", url)
    status, answer = post(receiver.url, {"sessions": []}, tokens[BOB])
    assert status == 401
    refused = cli("forward", "--once", env=bob.env, check=False)
    assert refused.returncode == 1 and "refused the token" in refused.stdout
    # The other member's token still works; no token, or the shared door, cannot forward.
    assert post(receiver.url, {"sessions": []}, tokens[ALICE])[0] == 200
    assert post(receiver.url, {"sessions": []}, None)[0] == 401


def test_a_batch_that_is_not_one_is_a_400_and_stores_nothing(team):
    url, receiver, tokens, members = team
    for body in ({"sessions": "no"}, {"sessions": [{"key": "k", "agent": "claude-code", "source": "s",
                                                    "events": [[0, "explode", 1.0, None, None, None, None, None, None]]}]},
                 {"sessions": [{"key": "k", "agent": "claude-code", "source": "s", "events": [],
                                "checks": [[0, "claude-code", None, "Bash", "halt", 1, 1, "", 1.0, 1.0,
                                            "cycle", "{\"halt_repeats\": 1}", "cycle"]]}]}):
        status, answer = post(receiver.url, body, tokens[ALICE])
        assert status == 400, answer
    assert _team_rows(url, ALICE)[0] == []


def test_what_arrives_is_redacted_again_and_a_policy_id_is_the_receivers(team):
    """A batch from outside passes the one redaction point on arrival, and the policy a decision
    names gets the id of its spec here, whatever id the member's side had."""
    url, receiver, tokens, members = team
    args = json.dumps({"command": f"curl -H 'x-api-key: {SECRET}' https://api.example.com"}, sort_keys=True)
    body = {"sessions": [{"key": "raw-1", "agent": "claude-code", "source": "0123456789abcdef", "from": 0,
                          "events": [[0, "user", 1.0, None, None, None, f"my key is {SECRET}", None, None],
                                     [1, "call", 2.0, "c1", "Bash", args, None, "d" * 32, None],
                                     [2, "answer", 3.0, "c1", None, None, f"echo {SECRET}", "e" * 32, True]],
                          "checks": [[1, "claude-code", "c1", "Bash", "allow", None, None, None, 2.0, 1.5,
                                      "cycle", "{}", "cycle"]]}]}
    status, answer = post(receiver.url, body, tokens[ALICE])
    assert status == 200 and answer["accepted"][0]["events"] == 3, answer
    engine = make_engine(url, readonly=True)
    with engine.connect() as conn:
        texts = [v for r in conn.execute(sa.select(t.live_events.c.text, t.live_events.c.args)) for v in r if v]
        policy = conn.execute(sa.select(t.enforced_checks.c.policy_id)).scalar_one()
        calls = conn.execute(sa.select(t.calls.c.args)).scalars().all()
    engine.dispose()
    from loopledger.detectors.policy import PolicySpec

    assert texts and all(SECRET not in x for x in texts + calls) and all("[REDACTED:" in x for x in texts)
    assert policy == PolicySpec("cycle").id
