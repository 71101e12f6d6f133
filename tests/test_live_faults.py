"""Fault injection on the live paths (the hooks, `loopledger guard`, LiveGuard, `loopledger
receive`), each test named for the rule of /work/shared/design.md it pins ("Live paths" and "Bad
input and faults"): real processes, real SQLite files, real PostgreSQL where parametrized, a real
full or read-only file system (tmpfs) under the receiver's spool."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from loopledger.detectors.policy import PolicySpec
from loopledger.ledger import migrate
from loopledger.ledger.engine import make_engine
from loopledger.live import enforce

from tests.live_support import BIN, npm_test_loop, output, run_hook
from tests.test_receive import (
    ReceiverProcess,
    call_counts,
    hold_ledger,
    many_spans,
    post,
    request,
    tool_span,
    wait_for,
)

NO_RESIDENT = {**os.environ, "LOOPLEDGER_HOOK_RESIDENT": "0"}


def _ledger(url: str, spec: PolicySpec | None = None) -> str:
    eng = make_engine(url)
    migrate.upgrade(eng)
    if spec is not None:
        with eng.begin() as conn:
            enforce.set_enforced(conn, spec, origin="cli")
    eng.dispose()
    return url


def _pre(tmp_path: Path) -> dict:
    loop = npm_test_loop(tmp_path, calls=1)
    return next(ev for ev in loop.events if ev["hook_event_name"] == "PreToolUse")


def _enforced_rows(url: str) -> list[tuple]:
    eng = make_engine(url)
    try:
        with eng.connect() as conn:
            return [tuple(r) for r in conn.exec_driver_sql(
                "SELECT call_id, verdict, count FROM enforced_checks ORDER BY seq").fetchall()]
    finally:
        eng.dispose()


# ── a tmpfs under the spool: a real full disk, a real read-only file system ─────────────────

@contextlib.contextmanager
def tmpfs(where: Path, size: str):
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(where)], capture_output=True)
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(folder: Path, leave: int) -> Path:
    """Fill the file system `folder` is on, then free about `leave` bytes (its pages)."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        chunk = b"\0" * 4096
        with contextlib.suppress(OSError):
            while os.write(fd, chunk):
                pass
    finally:
        os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def test_full_disk_under_the_spool_is_not_acknowledged_and_the_retry_is_stored_once(tmp_path):
    """(c) A full disk: the request gets 503 (not acknowledged, the exporter retries); the retry
    once there is room is stored, exactly once, and the half-written line the full disk left does
    not glue onto the next span."""
    spool = tmp_path / "spool"
    with tmpfs(spool, "1m"):
        rp = ReceiverProcess(tmp_path, 300, "--spool", str(spool)).start()
        try:
            assert post(rp.url, request(many_spans("before", 2)), "application/json")[0] == 200
            assert wait_for(lambda: len(call_counts(rp.db)) == 2, 30)
            filler = _fill(spool, 4096)  # room for a part of the request: a torn write
            body = request(many_spans("full", 30))
            status, answer = post(rp.url, body, "application/json")
            assert status == 503, (status, answer)
            assert "spool" in answer["message"]
            filler.unlink()
            status, _ = post(rp.url, body, "application/json")  # the exporter's retry
            assert status == 200
            assert post(rp.url, request(many_spans("after", 2)), "application/json")[0] == 200
            assert wait_for(lambda: len(call_counts(rp.db)) == 34, 30), call_counts(rp.db)
        finally:
            rp.stop()
        want = {**{f"call_before_{i}": 1 for i in range(2)}, **{f"call_full_{i}": 1 for i in range(30)},
                **{f"call_after_{i}": 1 for i in range(2)}}
        assert call_counts(rp.db) == want
        rp.start()  # a restart reads the spool whole again: nothing twice, nothing quarantined
        try:
            assert wait_for(lambda: rp.health()["pending_spans"] == 0, 60)
            assert call_counts(rp.db) == want
        finally:
            rp.stop()  # stopping writes what waits
        assert call_counts(rp.db) == want
        with sqlite3.connect(rp.db) as conn:
            assert conn.execute("SELECT COUNT(*) FROM ingest_errors").fetchone()[0] == 0


def test_a_write_cut_short_by_the_file_size_limit_is_undone_not_acknowledged_and_never_glued(
        tmp_path, monkeypatch):
    """(c) A write the kernel cuts short (RLIMIT_FSIZE: part written, then EFBIG), past the free
    space check: 503, the part written is truncated away, the next request is appended cleanly
    and every acknowledged span is stored once."""
    import functools
    import resource

    limit = 3 * 1024 * 1024

    def capped():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    rp = ReceiverProcess(tmp_path, 300)
    with monkeypatch.context() as m:
        m.setattr(subprocess, "Popen", functools.partial(subprocess.Popen, preexec_fn=capped))
        rp.start()
    try:
        assert post(rp.url, request(many_spans("small", 3)), "application/json")[0] == 200
        assert wait_for(lambda: len(call_counts(rp.db)) == 3, 30)
        day = next((tmp_path / "ledger.sqlite.otlp").glob("otlp-*.jsonl"))
        size = day.stat().st_size
        big = [tool_span("big", i, "ls", json.dumps({"i": i}), "z" * 1500) for i in range(2500)]
        status, answer = post(rp.url, request(big), "application/json")
        assert status == 503 and "too large" in answer["message"].lower(), (status, answer)
        assert day.stat().st_size == size  # the part written is gone
        assert post(rp.url, request(many_spans("next", 2)), "application/json")[0] == 200
        assert wait_for(lambda: len(call_counts(rp.db)) == 5, 30), call_counts(rp.db)
    finally:
        rp.stop()
    assert call_counts(rp.db) == {**{f"call_small_{i}": 1 for i in range(3)}, **{f"call_next_{i}": 1 for i in range(2)}}
    assert all(json.loads(line) for line in day.read_bytes().splitlines())


def test_a_read_only_spool_is_not_acknowledged_and_the_retry_is_stored_once(tmp_path):
    """(c) The spool's file system turned read-only under a running receiver: 503, and once it
    is writable again the retry is stored exactly once."""
    spool = tmp_path / "spool"
    with tmpfs(spool, "4m"):
        rp = ReceiverProcess(tmp_path, 300, "--spool", str(spool)).start()
        try:
            # Before the day's first span (the file is not open yet, so the remount is allowed).
            subprocess.run(["mount", "-o", "remount,ro", str(spool)], check=True)
            body = request(many_spans("ro", 3))
            status, answer = post(rp.url, body, "application/json")
            assert status == 503, (status, answer)
            assert "Read-only file system" in answer["message"]
            subprocess.run(["mount", "-o", "remount,rw", str(spool)], check=True)
            assert post(rp.url, body, "application/json")[0] == 200  # the exporter's retry
            assert post(rp.url, request(many_spans("rw", 2)), "application/json")[0] == 200
            assert wait_for(lambda: len(call_counts(rp.db)) == 5, 30), call_counts(rp.db)
        finally:
            rp.stop()
        assert call_counts(rp.db) == {**{f"call_rw_{i}": 1 for i in range(2)}, **{f"call_ro_{i}": 1 for i in range(3)}}


def test_a_span_acknowledged_then_killed_before_its_flush_with_a_torn_last_line_is_stored_once(tmp_path):
    """(c) kill -9 right after the acknowledgement and before the flush (held off by another
    writer), then a torn last line (a later write the kill cut short): the restart stores every
    acknowledged span exactly once and appends the next span cleanly after the cut."""
    rp = ReceiverProcess(tmp_path, busy_ms=20_000).start()
    try:
        holder = hold_ledger(rp.db)  # the flush cannot write: what is acknowledged is only spooled
        try:
            assert post(rp.url, request(many_spans("acked", 4)), "application/json")[0] == 200
            rp.kill()
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert call_counts(rp.db) == {}
        day = next((tmp_path / "ledger.sqlite.otlp").glob("otlp-*.jsonl"))
        whole = day.read_bytes()
        with open(day, "ab") as fh:  # a line that was being written, never acknowledged
            fh.write(whole.splitlines(keepends=True)[0][:57])
        rp.start()
        assert wait_for(lambda: len(call_counts(rp.db)) == 4, 30)
        assert post(rp.url, request(many_spans("next", 2)), "application/json")[0] == 200
        assert wait_for(lambda: len(call_counts(rp.db)) == 6, 30)
    finally:
        rp.stop()
    assert call_counts(rp.db) == {**{f"call_acked_{i}": 1 for i in range(4)}, **{f"call_next_{i}": 1 for i in range(2)}}
    with sqlite3.connect(rp.db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM ingest_errors").fetchone()[0] == 0
    assert all(json.loads(line) for line in day.read_bytes().splitlines())  # no glued line


# ── the ledger locked by another writer while a hook runs ───────────────────────────────────

def _hook_proc(event: dict, db: str, log: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), "hook", "claude-code", "--db", db, "--log", str(log)],
                          input=json.dumps(event).encode(), capture_output=True, timeout=60, env=env)


@pytest.mark.parametrize("resident", ["0", "1"])
def test_a_ledger_locked_by_another_writer_allows_the_call_after_the_bounded_wait_and_logs_one_line(
        tmp_path, db_url, resident):
    """design.md: a busy ledger allows the call, fast, and logs one line (fail-open) — after
    LOOPLEDGER_HOOK_BUSY_TIMEOUT, not forever; on PostgreSQL too (another writer holding the
    session's row). Once the writer is gone the next call is judged and stored."""
    spec = PolicySpec.parse("ladder:warn_at=2,block_at=3,halt_at=4")
    _ledger(db_url, spec)
    pre = _pre(tmp_path)
    log = tmp_path / "hook.log"
    env = {**os.environ, "LOOPLEDGER_HOOK_BUSY_TIMEOUT": "1", "LOOPLEDGER_HOOK_RESIDENT": resident,
           "XDG_RUNTIME_DIR": str(tmp_path / "run"), "LOOPLEDGER_HOOK_RESIDENT_IDLE": "5"}
    (tmp_path / "run").mkdir(mode=0o700)
    first = _hook_proc({**pre, "tool_use_id": "toolu_first"}, db_url, log, env)  # the session exists now
    assert first.returncode == 0 and first.stdout == b""
    if db_url.startswith("sqlite"):
        holder = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        release = lambda: (holder.execute("ROLLBACK"), holder.close())  # noqa: E731
    else:
        import psycopg

        holder = psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://"))
        holder.execute("SELECT id FROM sessions WHERE key = %s FOR UPDATE", (pre["session_id"],))
        release = lambda: (holder.rollback(), holder.close())  # noqa: E731
    try:
        held = _hook_proc({**pre, "tool_use_id": "toolu_held"}, db_url, log, env)
    finally:
        release()
    assert held.returncode == 0 and held.stdout == b"" and held.stderr == b""  # allowed
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and "allowed without judging" in lines[0]
    assert "lock" in lines[0].lower(), lines[0]
    after = _hook_proc({**pre, "tool_use_id": "toolu_after"}, db_url, log, env)
    assert after.returncode == 0
    assert [r[0] for r in _enforced_rows(db_url)] == ["toolu_first", "toolu_after"]
    assert [r[2] for r in _enforced_rows(db_url)] == [1, 2]  # the held call was never counted


# ── a corrupt or missing ledger; malformed, empty, huge hook stdin ───────────────────────────

def _corrupt_ledgers(tmp_path: Path) -> dict[str, Path]:
    real = tmp_path / "real.sqlite"
    _ledger(f"sqlite:///{real}")
    out = {"random bytes": tmp_path / "random.sqlite", "empty file": tmp_path / "empty.sqlite",
           "cut short": tmp_path / "cut.sqlite", "a folder": tmp_path / "folder.sqlite"}
    out["random bytes"].write_bytes(os.urandom(20_000))
    out["empty file"].write_bytes(b"")
    out["cut short"].write_bytes(real.read_bytes()[:8192])  # the header says more pages than there are
    out["a folder"].mkdir()
    return out


@pytest.mark.parametrize("agent", ["claude-code", "gemini-cli"])
def test_a_corrupt_or_missing_ledger_allows_logs_one_line_and_is_left_as_it_was(tmp_path, agent):
    """design.md: a missing ledger (or one that is not a ledger) allows the call and logs one
    line; the hook never creates, repairs or rewrites the file."""
    pre = _pre(tmp_path)
    if agent == "gemini-cli":
        pre = {**pre, "hook_event_name": "BeforeTool"}
    log = tmp_path / "hook.log"
    cases = {**_corrupt_ledgers(tmp_path), "missing": tmp_path / "nowhere" / "ledger.sqlite"}
    before = {name: (p.read_bytes() if p.is_file() else None) for name, p in cases.items()}
    for name, path in cases.items():
        proc = subprocess.run([str(BIN), "hook", agent, "--db", str(path), "--log", str(log)],
                              input=json.dumps(pre).encode(), capture_output=True, timeout=60, env=NO_RESIDENT)
        assert proc.returncode == 0 and proc.stderr == b"", (name, proc.stderr)
        assert proc.stdout == (b"{}\n" if agent == "gemini-cli" else b""), (name, proc.stdout)  # allowed
    lines = log.read_text().splitlines()
    assert len(lines) == len(cases), lines
    for (name, path), line in zip(cases.items(), lines, strict=True):
        assert "allowed without judging" in line and str(path) in line, (name, line)
        if path.is_file():
            assert path.read_bytes() == before[name], f"the hook changed the {name} ledger"
    assert not cases["missing"].exists() and not cases["missing"].parent.exists()


HUGE = 12 * 1024 * 1024


@pytest.mark.parametrize("raw,what", [
    (b"", "empty"),
    (b"  \n\t ", "empty"),
    (b"\xff\xfe{\"session_id\": 1}", "not JSON"),
    (b"{" * 100_000, "not JSON"),
    (b'{"session_id": 7, "hook_event_name": "PreToolUse"}', "no session_id"),
    (b'{"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": 3}', "without tool_name"),
    (b'"PreToolUse"', "not an object"),
])
def test_malformed_or_empty_hook_stdin_allows_and_logs_what_was_wrong(tmp_path, fresh_db, raw, what):
    _ledger(fresh_db)
    log = tmp_path / "hook.log"
    proc = run_hook(raw, fresh_db, log=log)
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and what in lines[0], lines
    assert len(lines[0]) < 2000  # the log names the problem, it does not copy the input


def test_a_huge_hook_event_is_judged_and_stored_bounded(tmp_path, fresh_db):
    """12 MB of tool_input (a Write of a big file): judged like any call (the agent is not
    blocked, nothing is logged), stored capped, the decision in the ledger."""
    _ledger(fresh_db)
    pre = {**_pre(tmp_path), "tool_name": "Write", "tool_use_id": "toolu_huge",
           "tool_input": {"file_path": "/w/big.txt", "content": "x" * HUGE}}
    log = tmp_path / "hook.log"
    proc = run_hook(pre, fresh_db, log=log)
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
    assert not log.exists()
    assert _enforced_rows(fresh_db) == [("toolu_huge", "allow", 1)]
    with sqlite3.connect(fresh_db.removeprefix("sqlite:///")) as conn:
        (longest,) = conn.execute("SELECT MAX(length(args)) FROM live_events").fetchone()
    assert longest < HUGE // 10


# ── `loopledger guard` fed bad lines ──────────────────────────────────────────────────────────

def test_the_guard_answers_every_bad_line_with_an_error_naming_it_and_keeps_serving(tmp_path, fresh_db):
    _ledger(fresh_db)
    good = {"session": "g1", "event": "call", "id": "c-good", "tool": "Bash", "args": {"command": "ls"}}
    bad = [b"\xff\xfe not utf-8\n", b"{not json\n", b"[1, 2]\n", b'{"event": "call"}\n',
           b'{"session": "g1", "event": "dance"}\n', b'{"session": "g1", "event": "call", "id": "c-notool"}\n',
           b"[" * 5000 + b"\n", json.dumps({"session": "g1", "event": "call", "tool": "Bash",
                                            "args": {"blob": "y" * 3_000_000}, "id": "c-big"}).encode() + b"\n"]
    lines = [*bad[:4], b"\n", *bad[4:], json.dumps(good).encode() + b"\n"]
    proc = subprocess.run([str(BIN), "guard", "--db", fresh_db], input=b"".join(lines), capture_output=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    outs = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    errors = [o for o in outs if "error" in o]
    # Every bad line but the big call (which is a call: judged) gets an error naming its line number.
    assert [o["line"] for o in errors] == [1, 2, 3, 4, 6, 7, 8]
    assert all(o["verdict"] == "allow" and o["error"] for o in errors)
    verdicts = {o["id"]: o["verdict"] for o in outs if "error" not in o}
    assert verdicts == {"c-big": "allow", "c-good": "allow"}
    assert [r[0] for r in _enforced_rows(fresh_db)] == ["c-big", "c-good"]
    assert len(proc.stderr.decode().splitlines()) == len(errors)  # one line each on stderr too


# ── secrets of every shape redact.py knows, through every live entry point ──────────────────

# (the text as an agent sees it, the part that must never be stored in clear); hand-written,
# one per pattern of loopledger.redact.
SHAPES = [
    ("sk-ant-api03-" + "Rk2mVq8LpZ4tXn7cB1wY5dH9gJ3sA6eU0iO-pT_rK2yM7", None),
    ("sk-proj-" + "Tz8Kq3WmN5bV7cX9zL1aS3dF5gH7jK9lQ2wE4rT6yU8iO0p", None),
    ("sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", None),
    ("AKIAZ7QW3ERT5YUI9OPL", None),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq3RT8KEYA", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq3RT8KEYA"),
    ("ghp_" + "a9B8c7D6e5F4g3H2i1J0k9L8m7N6o5P4q3R2", None),
    ("github_pat_11AZQW3" + "x7Yc2Vb9Nm4Kl1Jh6Gf3Ds8Aa5Pp0Oo", None),
    ("AIzaSyD" + "4kQ9vB2nM7xL1cZ8pR3tW6yH0jF5gS2a", None),
    ("xoxb-918273645012-5647382910123-QwErTyUiOpAsDfGh", None),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJsb29wIn0.Zm9yZ2Vk", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJsb29wIn0.Zm9yZ2Vk"),
    ("postgresql://admin:Pa55w0rd-Xq9vL2@db.internal:5432/app", "Pa55w0rd-Xq9vL2"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----",
     "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"),
]
CLEAR = [secret or text for text, secret in SHAPES]
ALL_TEXT = "\n".join(text for text, _ in SHAPES)


def _assert_no_secret(blob: bytes, where: str) -> None:
    for secret in CLEAR:
        assert secret.encode() not in blob, f"{secret[:14]}… is in clear in {where}"


def _live_bytes(url: str) -> bytes:
    from tests.test_secrets_everywhere import ledger_bytes

    return ledger_bytes(url)


def _args() -> dict:
    """Arguments holding every shape as values, nested, in a list, and as a key."""
    return {"command": f"echo '{ALL_TEXT}'", "env": {f"K{i}": t for i, (t, _) in enumerate(SHAPES)},
            "argv": [t for t, _ in SHAPES], "headers": {text: "x" for text, _ in SHAPES}}


@pytest.mark.parametrize("agent", ["claude-code", "gemini-cli"])
def test_every_secret_shape_through_the_hooks_never_reaches_the_ledger_output_or_log_in_clear(
        tmp_path, db_url, agent):
    _ledger(db_url)
    log = tmp_path / "hook.log"
    base = {"session_id": f"sec-{agent}", "transcript_path": str(tmp_path / "t.jsonl"), "cwd": "/w"}
    pre, post_ev, user = {"claude-code": ("PreToolUse", "PostToolUse", "UserPromptSubmit"),
                          "gemini-cli": ("BeforeTool", "AfterTool", "BeforeAgent")}[agent]
    response = ({"stdout": ALL_TEXT, "stderr": ALL_TEXT, "interrupted": False} if agent == "claude-code"
                else {"llmContent": ALL_TEXT, "returnDisplay": ALL_TEXT})
    events = [{**base, "hook_event_name": user, "prompt": f"use these: {ALL_TEXT}"}]
    for i in range(3):
        events.append({**base, "hook_event_name": pre, "tool_name": "run_shell_command", "tool_input": _args(),
                       "tool_use_id": f"toolu_s{i}"})
        events.append({**base, "hook_event_name": post_ev, "tool_name": "run_shell_command", "tool_input": _args(),
                       "tool_use_id": f"toolu_s{i}", "tool_response": response})
    printed = b""
    for ev in events:
        proc = run_hook(ev, db_url, agent=agent, log=log)
        assert proc.returncode == 0, proc.stderr
        printed += proc.stdout + proc.stderr
    # Malformed events quoting secrets: logged, redacted.
    for raw in (json.dumps(events[1]).encode()[:-40], json.dumps({**events[1], "tool_name": 5}).encode()):
        proc = run_hook(raw, db_url, agent=agent, log=log)
        printed += proc.stdout + proc.stderr
    stored = _live_bytes(db_url)
    assert stored.count(b"[REDACTED:") >= 3 * len(SHAPES)  # not vacuous: the calls are stored
    _assert_no_secret(stored, "the ledger")
    _assert_no_secret(printed, "the hook's stdout/stderr")
    assert len(log.read_text().splitlines()) == 2
    _assert_no_secret(log.read_bytes(), "the hook log")


def test_every_secret_shape_through_guard_and_live_guard_never_reaches_the_ledger_or_output_in_clear(
        tmp_path, db_url):
    from loopledger.guards import LiveGuard

    _ledger(db_url)
    lines = [{"session": "g", "event": "user", "text": ALL_TEXT}]
    for i in range(3):
        lines += [{"session": "g", "event": "call", "id": f"c{i}", "tool": "Bash", "args": _args()},
                  {"session": "g", "event": "answer", "id": f"c{i}", "text": {"out": ALL_TEXT}, "error": True}]
    feed = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    feed += json.dumps({"session": "g", "event": ALL_TEXT}).encode() + b"\n"  # a bad line quoting them
    feed += json.dumps(lines[1]).encode()[:-30] + b"\n"
    proc = subprocess.run([str(BIN), "guard", "--db", db_url], input=feed, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    _assert_no_secret(proc.stdout + proc.stderr, "guard's output")
    with LiveGuard(db=db_url, session="py") as g:
        g.user(ALL_TEXT)
        for i in range(3):
            d = g.call("Bash", _args(), f"p{i}")
            _assert_no_secret(json.dumps([d.reason, d.message(), d.tool]).encode(), "a decision")
            g.answer(f"p{i}", ALL_TEXT, is_error=True)
    stored = _live_bytes(db_url)
    assert stored.count(b"[REDACTED:") >= 6 * len(SHAPES)
    _assert_no_secret(stored, "the ledger")


def test_every_secret_shape_through_the_receiver_never_reaches_spool_ledger_or_output_in_clear(tmp_path):
    rp = ReceiverProcess(tmp_path, 300)
    rp.start()
    try:
        spans = [tool_span("sec", i, "Bash", json.dumps(_args()), ALL_TEXT) for i in range(3)]
        for sp in spans:  # a plain attribute, and a kvlist attribute keyed by them
            sp["attributes"].append({"key": "note", "value": {"stringValue": ALL_TEXT}})
            sp["attributes"].append({"key": "headers", "value": {"kvlistValue": {"values": [
                {"key": t, "value": {"stringValue": t}} for t, _ in SHAPES]}}})
        assert post(rp.url, request(spans), "application/json")[0] == 200
        assert wait_for(lambda: len(call_counts(rp.db)) == 3, 30)
    finally:
        rp.stop()
    printed = rp.proc.stderr.read().encode()
    _assert_no_secret(printed, "receive's output")
    for f in (tmp_path / "ledger.sqlite.otlp").iterdir():
        _assert_no_secret(f.read_bytes(), f"the spool file {f.name}")
    stored = _live_bytes(f"sqlite:///{rp.db}")
    assert stored.count(b"[REDACTED:") >= 3 * len(SHAPES)
    _assert_no_secret(stored, "the ledger")


# ── (a) nothing stored in a ledger row chooses code ──────────────────────────────────────────

def _forged_state(marker: Path) -> bytes:
    """A snapshot as someone with write access to the ledger (not to this user's key) can make
    one: a MAC of their own, then zlib'd pickle whose loading would run code."""
    import hashlib
    import hmac
    import pickle
    import zlib

    class Boom:
        def __reduce__(self):
            return (exec, (f"open({str(marker)!r}, 'w').write('unpickled')",))

    raw = zlib.compress(pickle.dumps(Boom(), protocol=5), 1)
    return hmac.new(b"not this user's key", raw, hashlib.sha256).digest() + raw


def test_a_forged_snapshot_in_the_ledger_is_never_unpickled_by_hook_guard_or_ingest(tmp_path):
    """A ledger row of sealed state (live_states, resume_states) is only unpickled when it carries
    this user's MAC: a forged one is replayed around, the decisions unchanged, no code run."""
    marker = tmp_path / "UNPICKLED"
    url = _ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}", PolicySpec.parse("ladder"))
    path = url.removeprefix("sqlite:///")
    loop = npm_test_loop(tmp_path, calls=5)
    forged = _forged_state(marker)

    def forge():
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE live_states SET state = ?", (forged,))
            conn.execute("UPDATE resume_states SET state = ?", (forged,))

    outs = {}
    for ev in loop.events:
        forge()
        if ev["hook_event_name"] == "PostToolUseFailure" and outs.get(ev["tool_use_id"]):
            continue
        proc = run_hook(ev, url)
        assert proc.returncode == 0, proc.stderr
        if ev["hook_event_name"] == "PreToolUse":
            outs[ev["tool_use_id"]] = output(proc)
    # Ladder at its defaults (2 / 3 / 4) on five identical failing calls: allow, warn, block, halt, after.
    said = [("halt" if o and o.get("continue") is False else "block" if o else "allow/warn")
            for o in outs.values()]
    assert said == ["allow/warn", "allow/warn", "block", "halt", "halt"]
    forge()
    feed = b"".join(json.dumps({"session": "g", "event": "call", "id": f"c{i}", "tool": "Bash",
                                "args": {"command": "ls"}}).encode() + b"\n" for i in range(3))
    guard = subprocess.run([str(BIN), "guard", "--db", url], input=feed, capture_output=True, timeout=120)
    assert guard.returncode == 0 and len(guard.stdout.splitlines()) == 3
    forge()
    ing = subprocess.run([str(BIN), "ingest", str(loop.transcript), "--db", url], capture_output=True, timeout=300)
    assert ing.returncode == 0, ing.stderr
    assert not marker.exists(), "a ledger row's pickle was loaded"


def test_the_receiver_never_imports_the_module_an_enforced_ledger_row_names(tmp_path):
    """The receiver replays the enforced policies as ingest does; a stored `module:factory` row
    (written with plain SQL) is skipped, never imported, and the spans are still stored."""
    import hashlib

    site = tmp_path / "site"
    site.mkdir()
    marker = tmp_path / "IMPORTED"
    (site / "ll_row_plugin.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n"
                                           "def make():\n    raise SystemExit('ran')\n")
    db = tmp_path / "ledger.sqlite"
    _ledger(f"sqlite:///{db}")
    pid = hashlib.md5(b"row").hexdigest()
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO policies (id, detector, params, label, is_default, created_at) "
                     "VALUES (?, 'll_row_plugin:make', '{}', 'row', 0, 0)", (pid,))
        conn.execute("INSERT INTO enforcements (policy_id, set_at, origin) VALUES (?, 0, 'api')", (pid,))
    rp = ReceiverProcess(tmp_path, 300, env={"PYTHONPATH": str(site)}).start()
    try:
        assert post(rp.url, request(many_spans("rowcode", 3)), "application/json")[0] == 200
        assert wait_for(lambda: len(call_counts(rp.db)) == 3, 30)
    finally:
        rp.stop()
    assert not marker.exists(), "the receiver imported a module a ledger row named"


# ── the receiver fed what is not a trace: a clear 4xx, serving on, nothing stored lost ───────

def test_bad_bodies_get_a_clear_4xx_and_the_spans_stored_before_stay(tmp_path):
    import gzip

    rp = ReceiverProcess(tmp_path, 300, "--max-body", "65536").start()
    try:
        assert post(rp.url, request(many_spans("kept", 3)), "application/json")[0] == 200
        assert wait_for(lambda: len(call_counts(rp.db)) == 3, 30)
        bomb = gzip.compress(b'{"resourceSpans": [' + b" " * 50_000_000 + b"]}")
        cases = [
            (b"\x0a\xff\xff\xff\xff\x0f", "application/x-protobuf", None, 400, "protobuf"),
            (b"\x0a\x05\x0a\x03", "application/x-protobuf", None, 400, "protobuf"),  # cut short
            (b'{"resourceSpans": [', "application/json", None, 400, "JSON"),
            (b'{"resourceSpans": "nope"}', "application/json", None, 400, "OTLP"),
            (b"[]", "application/json", None, 400, "OTLP"),
            (request(many_spans("xml", 1)), "text/xml", None, 415, "Content-Type"),
            (request(many_spans("none", 1)), "", None, 415, "Content-Type"),
            (request(many_spans("enc", 1)), "application/json", "br", 415, "Content-Encoding"),
            (b"not gzip at all", "application/json", "gzip", 400, "gzip"),
            (bomb, "application/json", "gzip", 413, "limit"),
            (b"{" + b" " * 70_000 + b"}", "application/json", None, 413, "limit"),
        ]
        for body, ctype, enc, status, word in cases:
            got, answer = post(rp.url, body, ctype or "application/octet-stream", enc) if ctype else _post_no_type(
                rp.url, body)
            assert got == status and word in answer["message"], (ctype, enc, got, answer)
        assert rp.health()["rejected"] == len(cases)
        assert post(rp.url, request(many_spans("after", 2)), "application/json")[0] == 200
        assert wait_for(lambda: len(call_counts(rp.db)) == 5, 30)
    finally:
        rp.stop()
    assert call_counts(rp.db) == {**{f"call_kept_{i}": 1 for i in range(3)}, **{f"call_after_{i}": 1 for i in range(2)}}


def _post_no_type(url: str, body: bytes) -> tuple[int, dict]:
    import http.client
    from urllib.parse import urlsplit

    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.putrequest("POST", "/v1/traces")
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        conn.send(body)
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


# ── (d) the live default on a poll: moving output goes on, identical output halts ───────────

def _poll_session(folder: Path, session: str, answers: list[str],
                  command: str = "gh run view 4242 --json status,jobs") -> tuple[Path, list[dict], list[str]]:
    """A Claude Code session polling CI with `command` (one call per turn, each answered by
    `answers[i]`): its transcript file and the hook events Claude Code sends for it."""
    path = folder / f"{session}.jsonl"
    base = {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": session,
            "version": "2.1.40", "gitBranch": "main"}
    args = {"command": command, "description": "Check the CI run"}
    prompt = "wait for CI to finish, then tell me"
    lines = [{**base, "uuid": "u-0", "timestamp": "2026-11-30T10:00:00Z", "type": "user",
              "message": {"role": "user", "content": prompt}}]
    hook = {"session_id": session, "transcript_path": str(path), "cwd": "/w", "permission_mode": "default"}
    events = [{**hook, "hook_event_name": "UserPromptSubmit", "prompt": prompt}]
    ids = []
    for i, text in enumerate(answers):
        tid = f"toolu_poll{i:03d}"
        ids.append(tid)
        lines.append({**base, "uuid": f"a-{i}", "timestamp": f"2026-11-30T10:{i:02d}:01Z", "type": "assistant",
                      "message": {"model": "claude-sonnet-4-5", "id": f"msg_{i}", "type": "message",
                                  "role": "assistant", "stop_reason": "tool_use", "usage": {"input_tokens": 10},
                                  "content": [{"type": "tool_use", "id": tid, "name": "Bash", "input": args}]}})
        lines.append({**base, "uuid": f"r-{i}", "timestamp": f"2026-11-30T10:{i:02d}:30Z", "type": "user",
                      "message": {"role": "user", "content": [{"tool_use_id": tid, "type": "tool_result",
                                                               "content": text, "is_error": False}]},
                      "toolUseResult": {"stdout": text, "stderr": "", "interrupted": False}})
        events.append({**hook, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": args,
                       "tool_use_id": tid})
        events.append({**hook, "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": args,
                       "tool_use_id": tid, "tool_response": {"stdout": text, "stderr": "", "interrupted": False}})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path, events, ids


@pytest.mark.parametrize("moving", ["moving", "sleeping", "quick", "stuck"])
def test_the_live_default_goes_on_through_a_moving_poll_halts_an_identical_one_as_replay_does(
        tmp_path, fresh_db, moving):
    """A build polled 14 times: its output moving (progress); the same `in_progress` each time
    after a `sleep 30` the agent asked for (a patient wait, judged by the minutes it lasts); the
    same `in_progress` asked again at once (a quick poll: warned once three polls answered the
    same, halted at the 6th, design rule 2); or the same finished-looking answer each time with
    nothing between (stuck: halted at the third)."""
    from loopledger.detectors.policy import DEFAULT_SPECS
    from loopledger.events import ReadError, SessionStart
    from loopledger.formats import read
    from loopledger.replay import PolicySet, replay

    _ledger(fresh_db)  # nothing enforced: the live default set
    n = 14
    waiting = '{"status": "in_progress", "jobs_done": 3, "jobs": 14, "log": "building step 3/14"}'
    answers = ([f'{{"status": "in_progress", "jobs_done": {k}, "jobs": 14, "log": "building step {k}/14"}}'
                for k in range(1, n + 1)] if moving == "moving"
               else [waiting] * n if moving in ("sleeping", "quick")
               else ['{"jobs_done": 3, "jobs": 14, "log": "stopped at step 3/14"}'] * n)
    command = "gh run view 4242 --json status,jobs"
    if moving == "sleeping":
        command = "sleep 30 && " + command
    transcript, events, ids = _poll_session(tmp_path, f"poll-{moving}", answers, command)
    live: dict[str, str] = {}
    for ev in events:
        if ev["hook_event_name"] == "PostToolUse" and live.get(ev["tool_use_id"]) in ("block", "halt"):
            continue  # a refused call never ran
        out = output(run_hook(ev, fresh_db, env=NO_RESIDENT))
        if ev["hook_event_name"] == "PreToolUse":
            hs = (out or {}).get("hookSpecificOutput", {})
            live[ev["tool_use_id"]] = ("halt" if out and out.get("continue") is False
                                       else "block" if hs.get("permissionDecision") == "deny" else "go")
        if live and "halt" in live.values():
            break
    stored = dict((c, v) for c, v, _ in _enforced_rows(fresh_db))
    # What a replay of the transcript (the engine ingest runs) gives the same set, call by call.
    read_events = [e for e in read(transcript, "claude-code") if not isinstance(e, SessionStart | ReadError)]
    replayed = {}
    for step in replay(read_events, PolicySet.of(DEFAULT_SPECS)):
        for c in step.checks:
            replayed[step.event.calls[max(c.idx, 0)].id] = c.verdict
    if moving in ("moving", "sleeping"):
        assert len(live) == n and set(live.values()) == {"go"}, live  # never refused: it moves, or it waits
        assert set(stored.values()) <= {"allow", "warn"}
    elif moving == "quick":
        assert list(live.values()) == ["go"] * 5 + ["halt"], live
        assert [stored[t] for t in ids[:6]] == ["allow"] * 3 + ["warn"] * 2 + ["halt"], stored
    else:
        assert list(live.values()) == ["go", "go", "halt"], live  # the same answer, nothing between
    for tid, verdict in stored.items():  # every call the live hook judged, judged alike by replay
        assert replayed[tid] == verdict, (tid, verdict, replayed[tid])


def test_the_guard_on_a_missing_ledger_answers_every_call_allow_and_judges_once_it_is_there(tmp_path):
    """design.md: a missing ledger allows the call. A client waiting for a verdict line per call
    (docs/live.md's Node client) must get one, not a guard that exited at start."""
    db = tmp_path / "later.sqlite"
    proc = subprocess.Popen([str(BIN), "guard", "--db", str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)

    def ask(msg: dict) -> dict:
        proc.stdin.write(json.dumps(msg).encode() + b"\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    try:
        call = {"session": "m", "event": "call", "tool": "Bash", "args": {"command": "ls"}}
        first = ask({**call, "id": "c1"})
        assert first["verdict"] == "allow" and "no ledger at" in first["error"] and first["id"] == "c1"
        proc.stdin.write(json.dumps({"session": "m", "event": "answer", "id": "c1", "text": "x"}).encode() + b"\n")
        _ledger(f"sqlite:///{db}")  # the person creates it meanwhile
        second = ask({**call, "id": "c2"})
        assert second["verdict"] == "allow" and "error" not in second, second
    finally:
        proc.stdin.close()
        assert proc.wait(60) == 0
    assert [r[0] for r in _enforced_rows(f"sqlite:///{db}")] == ["c2"]
    assert "no ledger at" in proc.stderr.read().decode()


def test_a_hook_on_a_full_disk_allows_logs_one_line_and_keeps_what_the_ledger_held(tmp_path):
    """The ledger's disk is full: SQLite cannot write the decision, the call is allowed and one
    line logged; what was stored before is intact, and once there is room the next call is judged."""
    where = tmp_path / "disk"
    with tmpfs(where, "3m"):
        url = _ledger(f"sqlite:///{where / 'ledger.sqlite'}", PolicySpec.parse("ladder"))
        pre = _pre(tmp_path)
        log = tmp_path / "hook.log"
        assert run_hook({**pre, "tool_use_id": "toolu_d1"}, url, log=log, env=NO_RESIDENT).returncode == 0
        filler = _fill(where, 0)
        for i in (2, 3):
            proc = run_hook({**pre, "tool_use_id": f"toolu_d{i}", "tool_input": {"command": "x" * 200_000}},
                            url, log=log, env=NO_RESIDENT)
            assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
        lines = log.read_text().splitlines()
        assert len(lines) == 2 and all("full" in line for line in lines), lines
        filler.unlink()
        assert run_hook({**pre, "tool_use_id": "toolu_d4"}, url, log=log, env=NO_RESIDENT).returncode == 0
        assert _enforced_rows(url) == [("toolu_d1", "allow", 1), ("toolu_d4", "warn", 2)]
        with sqlite3.connect(where / "ledger.sqlite") as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_an_installed_hook_command_runs_no_shell_text_hidden_in_the_ledger_path(tmp_path):
    """The settings JSON `hook install` writes is run by the agent through a shell: a ledger path
    holding shell syntax is one quoted argument, never a command."""
    folder = tmp_path / "x$(touch PWNED)`touch PWNED`;touch PWNED;'x"
    folder.mkdir()
    url = _ledger(f"sqlite:///{folder / 'ledger.sqlite'}", PolicySpec.parse("ladder"))
    project = tmp_path / "p"
    project.mkdir()
    marker = project / "PWNED"  # the shell runs in the project folder
    done = subprocess.run([str(BIN), "hook", "install", "claude-code", "--project", str(project), "--db", url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    command = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]["PreToolUse"][0]["hooks"][0][
        "command"]
    pre = {**_pre(tmp_path), "cwd": str(project)}
    for i in range(3):
        proc = subprocess.run(command, shell=True, input=json.dumps({**pre, "tool_use_id": f"toolu_q{i}"}),
                              capture_output=True, text=True, cwd=project, timeout=120, env=NO_RESIDENT)
        assert proc.returncode == 0, proc.stderr
    assert not marker.exists()
    assert [r[1] for r in _enforced_rows(url)] == ["allow", "warn", "block"]  # that ledger, judged


def test_an_unreachable_postgresql_ledger_allows_at_once_and_logs_no_password(tmp_path):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"postgresql+psycopg://loopledger:Hunter2-Pg-Pass@127.0.0.1:{port}/ledger"
    log = tmp_path / "hook.log"
    for agent, event in (("claude-code", "PreToolUse"), ("gemini-cli", "BeforeTool")):
        proc = run_hook({**_pre(tmp_path), "hook_event_name": event}, url, agent=agent, log=log, env=NO_RESIDENT)
        assert proc.returncode == 0 and proc.stderr == b""
        assert proc.stdout == (b"{}\n" if agent == "gemini-cli" else b"")
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and all(f"127.0.0.1:{port}/ledger" in line for line in lines), lines
    assert "Hunter2" not in log.read_text()


def test_a_full_ledger_disk_under_the_receiver_keeps_acknowledged_spans_pending_then_stores_them_once(tmp_path):
    """The spool has room, the ledger's disk does not: requests are still acknowledged (they are
    on disk), the flush fails and is retried, and once there is room every span is stored once."""
    disk = tmp_path / "disk"
    with tmpfs(disk, "6m"):
        rp = ReceiverProcess(disk, 300, "--spool", str(tmp_path / "spool"))
        rp.start()
        try:
            assert post(rp.url, request(many_spans("roomy", 2)), "application/json")[0] == 200
            assert wait_for(lambda: len(call_counts(rp.db)) == 2, 30)
            filler = _fill(disk, 0)
            big = [tool_span("tight", i, "ls", json.dumps({"i": i}), "w" * 4000) for i in range(400)]
            assert post(rp.url, request(big), "application/json")[0] == 200  # spooled: acknowledged
            assert wait_for(lambda: rp.health()["pending_spans"] == 400 and rp.health()["last_error"], 60)
            assert "full" in rp.health()["last_error"]
            filler.unlink()
            assert wait_for(lambda: len(call_counts(rp.db)) == 402, 60), len(call_counts(rp.db))
        finally:
            rp.stop()
        assert call_counts(rp.db) == {**{f"call_roomy_{i}": 1 for i in range(2)},
                                      **{f"call_tight_{i}": 1 for i in range(400)}}
        with sqlite3.connect(rp.db) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_the_guard_behind_another_writer_answers_allow_after_the_bounded_wait_and_judges_after(tmp_path, fresh_db):
    _ledger(fresh_db, PolicySpec.parse("ladder"))
    env = {**os.environ, "LOOPLEDGER_HOOK_BUSY_TIMEOUT": "1"}
    proc = subprocess.Popen([str(BIN), "guard", "--db", fresh_db], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)

    def ask(i: int) -> dict:
        msg = {"session": "b", "event": "call", "id": f"c{i}", "tool": "Bash", "args": {"command": "npm test"}}
        proc.stdin.write(json.dumps(msg).encode() + b"\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    try:
        assert ask(1)["verdict"] == "allow" and "error" not in ask(2)  # judged: allow, warn
        holder = hold_ledger(Path(fresh_db.removeprefix("sqlite:///")))
        try:
            held = ask(3)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert held["verdict"] == "allow" and "locked" in held["error"] and held["id"] == "c3", held
        after = ask(4)  # judged again, from the ledger: the held call was never counted
        assert after["verdict"] == "block" and after["count"] == 3, after
    finally:
        proc.stdin.close()
        assert proc.wait(60) == 0
    assert [(r[0], r[2]) for r in _enforced_rows(fresh_db)] == [("c1", 1), ("c2", 2), ("c4", 3)]
