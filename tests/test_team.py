"""A team on one ledger: roles checked where the write happens, who and when recorded beside
every label and every change of the enforced setting, members' tokens stored hashed.

Real ledgers (SQLite and PostgreSQL through `db_url`) and the real `loopledger` command."""

from __future__ import annotations

import getpass
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from loopledger.config import Options
from loopledger.file_ingest import ingest_file
from loopledger.ledger import migrate, read, team, writes
from loopledger.ledger import schema as t
from loopledger.ledger.engine import make_engine
from loopledger.live import enforce

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).with_name("loopledger")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def ledger(db_url):
    """A real ledger holding the sample data's sessions, and members of each role."""
    engine = make_engine(db_url)
    migrate.upgrade(engine)
    report = ingest_file(engine, ROOT / "sample_data" / "anthropic" / "helpdesk_resend_email.json", Options())
    assert report.sessions >= 1
    with engine.begin() as conn:
        for email, role in (("vera@example.com", "viewer"), ("lou@example.com", "labeller"),
                            ("olga@example.com", "owner")):
            team.set_member(conn, email, role)
    yield db_url, engine
    engine.dispose()


def _session(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(t.sessions.c.id).order_by(t.sessions.c.id).limit(1)).scalar_one()


def _signed(email: str) -> team.Actor:
    return team.Actor(email, signed_in=True)


def test_a_viewer_cannot_label_and_a_labeller_can_with_who_and_when(ledger):
    url, engine = ledger
    sid = _session(engine)
    with pytest.raises(team.Forbidden, match="vera@example.com is a viewer"):
        writes.save_label(engine, sid, 0, "normal", "looks fine", actor=_signed("vera@example.com"))
    with engine.connect() as conn:
        assert read.run_labels(conn, sid).empty  # refused: nothing written
    writes.save_label(engine, sid, 0, "normal", "looks fine", actor=_signed("lou@example.com"))
    with engine.connect() as conn:
        lab = read.run_labels(conn, sid)
        listed = read.label_list(conn)
    assert lab["by_user"].tolist() == ["lou@example.com"] and lab["who"].tolist() == ["lou@example.com"]
    assert lab["created_at"].iloc[0] > 0
    assert listed["by_user"].tolist() == ["lou@example.com"]


def test_the_role_is_read_when_the_label_is_written(ledger):
    """A role taken away after a page was drawn: the write itself is refused."""
    url, engine = ledger
    sid = _session(engine)
    lou = _signed("lou@example.com")
    with engine.begin() as conn:
        team.set_member(conn, "lou@example.com", "viewer")
    with pytest.raises(team.Forbidden):
        writes.save_label(engine, sid, 0, "loop", actor=lou)
    # Signed in but not a member: the default role (viewer) unless the sign-in settings give another.
    with pytest.raises(team.Forbidden):
        writes.save_label(engine, sid, 0, "unclear", actor=_signed("stranger@example.com"))
    writes.save_label(engine, sid, 0, "unclear", actor=team.Actor("stranger@example.com", True, team.LABELLER))


def test_only_an_owner_changes_the_enforced_setting_and_each_change_says_who(ledger):
    url, engine = ledger
    for who in ("vera@example.com", "lou@example.com"):
        # In plain words (issue 37: "takes a owner"): "… is a viewer: to enforce takes an owner or more".
        with pytest.raises(team.Forbidden, match=r"is a (viewer|labeller): .* takes an owner or more"), \
                engine.begin() as conn:
            enforce.set_enforced(conn, "cycle:halt_repeats=5", origin="compare", actor=_signed(who))
    with engine.connect() as conn:
        assert enforce.enforced_specs(conn) == ()  # nothing of the refused attempts stayed
    with engine.begin() as conn:
        enforce.set_enforced(conn, "cycle:halt_repeats=5", origin="compare", actor=_signed("olga@example.com"))
    with engine.connect() as conn:
        now = enforce.now(conn)
        hist = enforce.history(conn)
    assert now["by"] == "olga@example.com" and now["origin"] == "compare" and now["since"] > 0
    assert hist[0]["by"] == "olga@example.com"


def test_the_cli_records_the_local_user(ledger):
    url, engine = ledger
    proc = _cli("enforce", "--db", url, "cycle:halt_repeats=6")
    assert proc.returncode == 0, proc.stderr
    me = getpass.getuser()
    assert f"by {me}" in proc.stdout
    with engine.connect() as conn:
        assert enforce.now(conn)["by"] == me
        from loopledger.ledger import read_live

        history = read_live.enforcement_history(conn)
    assert history["by"].iloc[0] == me and "cycle" in history["enforced"].iloc[0]


def test_tokens_are_stored_hashed_listed_without_themselves_and_revoked(ledger, tmp_path):
    url, engine = ledger
    proc = _cli("tokens", "create", "lou@example.com", "--name", "lou's laptop", "--db", url)
    assert proc.returncode == 0, proc.stderr
    token = proc.stdout.strip()
    assert token.startswith(team.TOKEN_PREFIX) and len(token) > 40
    with engine.connect() as conn:
        rows = conn.execute(sa.select(t.member_tokens)).mappings().all()
        assert team.member_of_token(conn, token) == "lou@example.com"
        assert team.member_of_token(conn, token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert [r["digest"] for r in rows] == [hashlib.sha256(token.encode()).hexdigest()]
    if url.startswith("sqlite"):  # the token itself is nowhere in the ledger's bytes
        path = Path(url.split("///", 1)[1])
        blob = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
        assert token.encode() not in blob and token[len(team.TOKEN_PREFIX):].encode() not in blob
    listed = _cli("tokens", "list", "--db", url)
    assert "lou@example.com" in listed.stdout and token not in listed.stdout and token[:10] in listed.stdout
    proc = _cli("tokens", "revoke", str(rows[0]["id"]), "--db", url)
    assert proc.returncode == 0, proc.stderr
    with engine.connect() as conn:
        assert team.member_of_token(conn, token) is None
        assert not team.any_token(conn)


def test_members_cli_adds_changes_lists_and_removes(ledger):
    url, engine = ledger
    assert _cli("members", "add", "New@Example.com", "--role", "labeller", "--db", url).returncode == 0
    assert "changed" in _cli("members", "add", "new@example.com", "--role", "owner", "--db", url).stdout
    bad = _cli("members", "add", "new@example.com", "--role", "admin", "--db", url)
    assert bad.returncode == 2 and "unknown role" in bad.stderr
    listed = _cli("members", "list", "--db", url).stdout
    assert "new@example.com" in listed and "owner" in listed
    assert _cli("tokens", "create", "nobody@example.com", "--db", url).returncode == 2
    assert _cli("members", "remove", "new@example.com", "--db", url).returncode == 0
    with engine.connect() as conn:
        assert "new@example.com" not in team.member_emails(conn)


def test_an_owner_on_the_dashboard_manages_members_and_a_labeller_cannot(ledger):
    url, engine = ledger
    with pytest.raises(team.Forbidden), engine.begin() as conn:
        team.set_member(conn, "x@example.com", "owner", by=_signed("lou@example.com"))
    with engine.begin() as conn:
        team.set_member(conn, "x@example.com", "labeller", by=_signed("olga@example.com"))
        assert team.role_of(conn, _signed("x@example.com")) == team.LABELLER


def _policy_rows(engine) -> tuple[int, int]:
    with engine.connect() as conn:
        return (conn.execute(sa.select(sa.func.count()).select_from(t.policies)).scalar_one(),
                conn.execute(sa.select(sa.func.count()).select_from(t.checks)).scalar_one())


def test_a_viewer_cannot_save_policies_and_a_labeller_can(ledger):
    """Compare's "Save as policies" (app.data.save_policies → worker.judge_stored) checks the role
    in its transactions, like save_label: a viewer's save stores nothing (issue 36, reproduction 3:
    it stored a policy and its checks)."""
    from loopledger import worker
    from loopledger.detectors.policy import PolicySpec

    url, engine = ledger
    spec = PolicySpec.parse("cycle:halt_repeats=7")
    before = _policy_rows(engine)
    for who in ("vera@example.com", "stranger@example.com"):  # a viewer; signed in, not a member
        with pytest.raises(team.Forbidden, match=f"{who} is a viewer: to save policies takes a labeller"):
            worker.judge_stored(engine, [spec], actor=_signed(who))
    assert _policy_rows(engine) == before
    assert worker.judge_stored(engine, [spec], actor=_signed("lou@example.com")) == 1
    after = _policy_rows(engine)
    assert after[0] == before[0] + 1 and after[1] > before[1]


def test_a_role_taken_away_while_policies_are_saved_stops_the_rest(ledger):
    """Each session's transaction reads the role again: demoted after the first session, the
    labeller's save stops there."""
    from loopledger import worker
    from loopledger.detectors.policy import PolicySpec

    url, engine = ledger
    ingest_file(engine, ROOT / "sample_data" / "openai_chat" / "support_order_clean.json", Options())
    with engine.connect() as conn:
        ids = conn.execute(sa.select(t.sessions.c.id).order_by(t.sessions.c.id)).scalars().all()
    assert len(ids) >= 2
    spec = PolicySpec.parse("cycle:halt_repeats=8")

    def demote(done: int, total: int, sid: str) -> None:
        if done == 1:
            with engine.begin() as conn:
                team.set_member(conn, "lou@example.com", team.VIEWER)

    with pytest.raises(team.Forbidden):
        worker.judge_stored(engine, [spec], ids, progress=demote, actor=_signed("lou@example.com"))
    with engine.connect() as conn:
        judged = conn.execute(sa.select(sa.func.count(sa.distinct(t.checks.c.session_id)))
                              .where(t.checks.c.policy_id == spec.id)).scalar_one()
    assert judged == 1  # the first session, judged while lou was a labeller; none after


ISS = "https://login.microsoftonline.com/0a1b2c3d-tenant/v2.0"


def test_a_member_keyed_on_issuer_and_subject_is_matched_on_them_alone(ledger):
    """The write's own role check (here set_enforced, an owner's) reads the role of the identity
    the provider vouches for: (iss, sub) for a member added with a subject; an email only when
    verified (issue 36, reproduction 4)."""
    url, engine = ledger
    proc = _cli("members", "add", "kim@example.com", "--role", "owner", "--issuer", ISS + "/", "--subject",
                "sub-kim-0001", "--db", url)
    assert proc.returncode == 0 and "signing in as sub-kim-0001" in proc.stdout, proc.stderr
    assert "signs in as sub-kim-0001 at " + ISS in _cli("members", "list", "--db", url).stdout
    kim = team.Actor("kim@example.com", signed_in=True, issuer=ISS, subject="sub-kim-0001", match_email=False)
    impostor = team.Actor("kim@example.com", signed_in=True, issuer=ISS, subject="sub-other", match_email=False)
    verified_claim = team.Actor("kim@example.com", signed_in=True)  # a verified email: kim is keyed on her sub
    unverified_owner = team.Actor("olga@example.com", signed_in=True, match_email=False)
    with engine.connect() as conn:
        assert team.role_of(conn, kim) == team.OWNER
        assert [team.role_of(conn, a) for a in (impostor, verified_claim, unverified_owner)] == [team.VIEWER] * 3
        assert team.role_of(conn, _signed("olga@example.com")) == team.OWNER  # verified email, no subject
    for who in (impostor, unverified_owner):
        with pytest.raises(team.Forbidden), engine.begin() as conn:
            enforce.set_enforced(conn, "cycle:halt_repeats=4", origin="compare", actor=who)
    with engine.begin() as conn:
        enforce.set_enforced(conn, "cycle:halt_repeats=4", origin="compare", actor=kim)
    with engine.connect() as conn:
        assert enforce.now(conn)["by"] == "kim@example.com"
    # A subject is one member's; an issuer without a subject (or the reverse) is not an identity.
    taken = _cli("members", "add", "eve@example.com", "--issuer", ISS, "--subject", "sub-kim-0001", "--db", url)
    assert taken.returncode == 2 and "already the member kim@example.com" in taken.stderr
    half = _cli("members", "add", "eve@example.com", "--subject", "sub-eve", "--db", url)
    assert half.returncode == 2 and "both the issuer" in half.stderr
