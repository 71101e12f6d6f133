"""What `loopledger members …`, `tokens …`, `team join` and `forward` do; cli/app.py parses flags.

Members and tokens are the team ledger's (loopledger.ledger.team): whoever can open that ledger
acts as its local user, with every right, and is recorded under their name. `team join` and
`forward` are a member's (loopledger.live.forward): their own ledger, forwarding to the team's
receiver.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from loopledger.cli.commands import EXIT_ERROR, EXIT_OK, EXIT_USAGE, err, open_existing_ledger, out, reading
from loopledger.ledger import team
from loopledger.printable import plain
from rich.text import Text


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M") if ts else "—"


def _line(*fields: str) -> None:
    """One tab-separated line (for people and for `cut -f`), terminal-safe."""
    print("\t".join(plain(f, 200) for f in fields), flush=True)


def _fail(exc: Exception) -> int:
    err.print(Text(f"error: {exc}", style="red"))
    return EXIT_USAGE


def _write(db: str | None, change):
    """`change(conn)` in one transaction on an existing ledger, as its local user."""
    engine = open_existing_ledger(db)
    try:
        with engine.begin() as conn:
            return change(conn)
    finally:
        engine.dispose()


def run_members_add(db: str | None, email: str, role: str, issuer: str | None = None,
                    subject: str | None = None) -> int:
    try:
        added = _write(db, lambda conn: team.set_member(conn, email, role, issuer=issuer, subject=subject))
    except team.TeamError as exc:
        return _fail(exc)
    email = team.normalize_email(email)
    out.print(Text(f"{'added' if added else 'changed'}: {email} is {'an' if role[:1] in 'aeiou' else 'a'} {role}"
                   + (f", signing in as {subject} at {issuer}" if subject else "")))
    return EXIT_OK


def run_members_remove(db: str | None, email: str) -> int:
    try:
        _write(db, lambda conn: team.remove_member(conn, email))
    except team.TeamError as exc:
        return _fail(exc)
    out.print(Text(f"removed: {team.normalize_email(email)} (and their tokens)"))
    return EXIT_OK


def run_members_list(db: str | None) -> int:
    """One member a line, tab-separated (email, role, live tokens, added, by whom, and the issuer
    and subject they sign in as, when keyed on them)."""
    with reading(db) as conn:
        rows = team.members(conn)
    if not rows:
        out.print(Text("No members yet: `loopledger members add EMAIL --role owner`."))
    for r in rows:
        _line(r["email"], r["role"], f"{r['tokens']} token(s)", f"added {_when(r['added_at'])}",
              f"by {r['added_by'] or '—'}", *([f"signs in as {r['subject']} at {r['issuer']}"] if r["subject"] else []))
    return EXIT_OK


def run_tokens_create(db: str | None, email: str, name: str) -> int:
    try:
        tid, token = _write(db, lambda conn: team.create_token(conn, email, name))
    except team.TeamError as exc:
        return _fail(exc)
    err.print(Text(f"token {tid} for {team.normalize_email(email)} (shown once; the ledger keeps only its digest):"))
    out.print(token, markup=False)
    return EXIT_OK


def run_tokens_list(db: str | None) -> int:
    """One token a line, tab-separated (id, member, name, first characters, created, last used,
    revoked); never the token itself, which the ledger does not hold."""
    with reading(db) as conn:
        rows = team.tokens(conn)
    if not rows:
        out.print(Text("No tokens yet: `loopledger tokens create EMAIL`."))
    for r in rows:
        _line(str(r["id"]), r["email"], r["name"], r["prefix"] + "…", f"created {_when(r['created_at'])}",
              f"last used {_when(r['last_used_at'])}",
              f"revoked {_when(r['revoked_at'])}" if r["revoked_at"] else "live")
    return EXIT_OK


def run_tokens_revoke(db: str | None, token_id: int) -> int:
    try:
        email = _write(db, lambda conn: team.revoke_token(conn, token_id))
    except team.TeamError as exc:
        return _fail(exc)
    out.print(Text(f"revoked: token {token_id} of {email} (the receiver refuses it from now on)"))
    return EXIT_OK


def run_team_join(url: str, token: str, db: str | None, agent: str, project: Path | None, user: bool) -> int:
    """A member's one line: check the token with the team's receiver, make (or upgrade) this
    laptop's ledger with the team's enforced setting, keep URL and token (0600), install the hook."""
    from loopledger.cli.commands import run_hook_install
    from loopledger.live import forward

    path = forward.local_ledger(db)
    try:
        hello = forward.join(url, token, path)
    except forward.ForwardError as exc:
        err.print(Text(f"error: {exc}", style="red"))
        return EXIT_ERROR
    out.print(Text(f"joined {url} as {hello['member']}; this laptop's ledger: {path}; "
                   f"forwarding settings: {forward.config_path()}"))
    return run_hook_install(agent, project, project is None, path)


def run_forward(once: bool) -> int:
    """Forward what is waiting now (--once), or keep forwarding until stopped."""
    from loopledger.live import forward

    cfg = forward.load_config()
    if cfg is None:
        err.print(Text(f"error: no forwarding settings at {forward.config_path()} (run `loopledger team join URL "
                       "--token TOKEN` first)", style="red"))
        return EXIT_USAGE
    fwd = forward.Forwarder(cfg)
    if once:
        result = fwd.round()
        out.print(Text(result.summary()))
        return EXIT_OK if result.ok else EXIT_ERROR
    import threading

    from loopledger.watch import stop_on_signals

    stop = threading.Event()
    stop_on_signals(stop)
    fwd.run(stop)
    return EXIT_OK
