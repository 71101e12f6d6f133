"""The ingest worker on real files and a real ledger (SQLite and PostgreSQL)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import orjson
import pytest
from loopledger import worker
from loopledger.detectors.policy import DEFAULT_SPECS, PolicySpec
from loopledger.ledger import migrate, schema, store
from loopledger.ledger.engine import make_engine
from sqlalchemy import func, select

from bench.gen_chat import session_lines, write_corpus

TABLES = ("sessions", "events", "calls", "runs", "checks", "results", "session_stats", "run_outcomes",
          "ingest_errors", "policies")


@pytest.fixture
def engine(db_url):
    eng = make_engine(db_url)
    migrate.upgrade(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def other(tmp_path):
    """A second, independent ledger (SQLite) to compare against: same files, another history."""
    eng = make_engine(f"sqlite:///{tmp_path / 'other.sqlite'}")
    migrate.upgrade(eng)
    yield eng
    eng.dispose()


def counts(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t: conn.execute(select(func.count()).select_from(schema.metadata.tables[t])).scalar()
                for t in TABLES}


def dump(engine) -> dict[str, list[tuple]]:
    """Every row of the session-derived tables, keyed by (file name, session key) instead of ids,
    without wall-clock columns: two ledgers built from the same files compare equal."""
    md = schema.metadata.tables
    with engine.connect() as conn:
        names = {sid: (Path(path).name, key) for sid, path, key in conn.execute(
            select(schema.sessions.c.id, schema.sources.c.path, schema.sessions.c.key)
            .join(schema.sources, schema.sources.c.id == schema.sessions.c.source_id))}
        out: dict[str, list[tuple]] = {}
        for t in ("events", "calls", "runs", "checks", "results", "session_stats", "run_outcomes"):
            table = md[t]
            rows = []
            for r in conn.execute(select(table)).mappings():
                d = dict(r)
                d["session_id"] = names[d["session_id"]]
                rows.append(tuple(sorted(d.items(), key=lambda kv: kv[0])))
            out[t] = sorted(rows, key=repr)
        sess = []
        for r in conn.execute(select(schema.sessions)).mappings():
            d = {k: v for k, v in r.items() if k not in ("id", "source_id", "updated_at", "parent_id")}
            d["name"] = names[r["id"]]
            sess.append(repr(sorted(d.items())))
        out["sessions"] = sorted(sess)
        errs = conn.execute(select(schema.sources.c.path, schema.ingest_errors.c.line, schema.ingest_errors.c.message)
                            .join(schema.sources)).all()
        out["ingest_errors"] = sorted((Path(p).name, line, msg) for p, line, msg in errs)
        srcs = conn.execute(select(schema.sources.c.path, schema.sources.c.size, schema.sources.c.content_hash,
                                   schema.sources.c.byte_offset, schema.sources.c.status, schema.sources.c.format))
        out["sources"] = sorted((Path(r[0]).name, *r[1:]) for r in srcs)
    return out


def chat_line(**msg) -> bytes:
    return orjson.dumps(msg) + b"\n"


def call_msg(cid: str, name: str, args: dict | str, content: str | None = None) -> bytes:
    raw = args if isinstance(args, str) else orjson.dumps(args).decode()
    return chat_line(role="assistant", content=content,
                     tool_calls=[{"id": cid, "type": "function", "function": {"name": name, "arguments": raw}}])


def tool_msg(cid: str, content: str) -> bytes:
    return chat_line(role="tool", tool_call_id=cid, content=content)


def test_recheck_from_the_ledger_equals_ingest(engine, tmp_path):
    """load_events + replay give back exactly the stored checks and results, for every policy."""
    write_corpus(tmp_path / "c", 6, 150, seed=3)
    big = tmp_path / "c" / "big.jsonl"
    big.write_bytes(chat_line(role="user", content="go") + b"".join(
        call_msg(f"c{i}", "cat", {"f": "x"}) + tool_msg(f"c{i}", "y" * 3000 + str(i % 2)) for i in range(6))
        + chat_line(role="assistant", content="z" * 3000) * 7)
    totals = worker.ingest_paths(engine, [tmp_path / "c"], worker.Options(max_text=1024))
    assert totals.files == 7 and totals.errors == 0 and totals.halts > 0
    with engine.connect() as conn:
        for sid in store.session_ids(conn):
            events = store.load_events(conn, sid)
            _, verdicts = worker.replay_session(events, DEFAULT_SPECS)
            for pv in verdicts:
                stored = sorted(conn.execute(
                    select(schema.checks.c.seq, schema.checks.c.idx, schema.checks.c.run_idx, schema.checks.c.verdict,
                           schema.checks.c.count, schema.checks.c.total, schema.checks.c.threshold)
                    .where(schema.checks.c.session_id == sid, schema.checks.c.policy_id == pv.policy_id)).all())
                again = sorted((st.seq, c.idx, st.run, c.verdict, c.count, c.total, c.threshold)
                               for st in pv.steps for c in st.checks)
                assert [tuple(r) for r in stored] == again
                res = sorted(tuple(r) for r in conn.execute(
                    select(schema.results.c.seq, schema.results.c.idx, schema.results.c.outcome)
                    .where(schema.results.c.session_id == sid, schema.results.c.policy_id == pv.policy_id)))
                assert res == sorted((r.seq, r.idx, r.outcome) for st in pv.steps for r in st.results)
                stat = conn.execute(select(schema.session_stats.c.halts, schema.session_stats.c.saved).where(
                    schema.session_stats.c.session_id == sid,
                    schema.session_stats.c.policy_id == pv.policy_id)).one()
                assert tuple(stat) == (pv.summary.halts, pv.summary.saved)


def test_reingesting_an_unchanged_file_adds_nothing(engine, tmp_path):
    paths = write_corpus(tmp_path / "c", 4, 60, seed=1)
    first = worker.ingest_paths(engine, [tmp_path / "c"], worker.Options())
    before, snapshot = counts(engine), dump(engine)
    assert first.changed == 4 and before["checks"] > 0
    again = worker.ingest_paths(engine, [tmp_path / "c"], worker.Options())
    assert (again.changed, again.unchanged, again.sessions) == (0, 4, 0)
    # Touched but not changed: the content hash says so, nothing is re-judged.
    os.utime(paths[0], (1, 1))
    touched = worker.ingest_paths(engine, [tmp_path / "c"], worker.Options())
    assert touched.changed == 0 and touched.sessions == 0
    assert counts(engine) == before and dump(engine) == snapshot


def test_appended_file_equals_ingesting_it_whole(engine, tmp_path, other):
    rng = random.Random(5)
    lines = session_lines(rng, 120, session=1)
    f = tmp_path / "grow.jsonl"
    f.write_bytes(b"".join(lines[:70]))
    worker.ingest_paths(engine, [f], worker.Options())
    with engine.connect() as conn:
        old_offset = conn.execute(select(schema.sources.c.byte_offset)).scalar()
    assert old_offset == f.stat().st_size
    with open(f, "ab") as fh:
        fh.writelines(lines[70:])
    report = worker.ingest_file(engine, f, worker.Options())
    assert report.action == "appended" and report.sessions == 1
    worker.ingest_paths(other, [f], worker.Options())
    assert dump(engine) == dump(other)


def _openhands_line(i: int, repeats: int) -> bytes:
    history = [{"id": 0, "source": "user", "action": "message", "args": {"content": f"task {i}"}}]
    for k in range(repeats):
        history.append({"id": 2 * k + 1, "source": "agent", "action": "run",
                        "args": {"command": f"make test{i}", "thought": ""}})
        history.append({"id": 2 * k + 2, "source": "agent", "observation": "run", "cause": 2 * k + 1,
                        "content": "FAILED", "extras": {"exit_code": 1}})
    return orjson.dumps({"instance_id": f"inst-{i}", "instruction": f"task {i}", "history": history}) + b"\n"


def test_append_rejudges_only_changed_sessions(engine, tmp_path, other):
    f = tmp_path / "output.jsonl"
    f.write_bytes(_openhands_line(1, 3) + _openhands_line(2, 5))
    first = worker.ingest_file(engine, f, worker.Options())
    assert first.format == "openhands" and first.sessions == 2
    with engine.connect() as conn:
        stamps = dict(conn.execute(select(schema.sessions.c.key, schema.sessions.c.updated_at)).all())
    with open(f, "ab") as fh:
        fh.write(_openhands_line(3, 4))
    report = worker.ingest_file(engine, f, worker.Options())
    assert report.action == "appended" and report.sessions == 1
    with engine.connect() as conn:
        now = dict(conn.execute(select(schema.sessions.c.key, schema.sessions.c.updated_at)).all())
    assert set(now) == {"inst-1", "inst-2", "inst-3"}
    assert all(now[k] == stamps[k] for k in stamps)  # untouched sessions were not rewritten
    worker.ingest_paths(other, [f], worker.Options())
    assert dump(engine) == dump(other)


def test_rewritten_file_replaces_its_sessions(engine, tmp_path, other):
    f = tmp_path / "output.jsonl"
    f.write_bytes(_openhands_line(1, 3) + _openhands_line(2, 5))
    worker.ingest_file(engine, f, worker.Options())
    size = f.stat().st_size
    # Different bytes, no shorter: a rewrite. (A shorter file is a truncation, whose earlier
    # sessions are kept: tests/test_live_trust_redaction.py.)
    f.write_bytes(_openhands_line(7, 12))
    assert f.stat().st_size >= size
    report = worker.ingest_file(engine, f, worker.Options())
    assert report.action == "rewritten"
    with engine.connect() as conn:
        assert conn.execute(select(schema.sessions.c.key)).scalars().all() == ["inst-7"]
    worker.ingest_paths(other, [f], worker.Options())
    assert dump(engine) == dump(other)


def test_malformed_lines_are_quarantined_and_the_rest_is_stored(engine, tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_bytes(chat_line(role="user", content="hi") + call_msg("a", "ls", {}) + b'{"role": "tool", oops\n'
                  + tool_msg("a", "x") + b"\xff\xfe not utf8\n" + call_msg("b", "ls", {}) + tool_msg("b", "x"))
    report = worker.ingest_file(engine, f, worker.Options())
    assert report.quarantined == 2 and report.calls == 2
    with engine.connect() as conn:
        errs = conn.execute(select(schema.ingest_errors.c.line, schema.ingest_errors.c.message,
                                   schema.sources.c.path, schema.sources.c.status)
                            .join(schema.sources).order_by(schema.ingest_errors.c.line)).all()
        assert [e.line for e in errs] == [3, 5]
        assert all(e.path == str(f) and e.status == "quarantined" for e in errs)
        assert conn.execute(select(func.count()).select_from(schema.calls)).scalar() == 2
    totals = worker.ingest_paths(engine, [f], worker.Options())
    assert totals.quarantined == 2 and totals.exit_code == 3  # still reported on a re-run


def test_unknown_format_is_recorded_and_does_not_stop_others(engine, tmp_path):
    (tmp_path / "notes.json").write_text('{"hello": "world"}')
    write_corpus(tmp_path, 2, 20, seed=2)
    totals = worker.ingest_paths(engine, [tmp_path], worker.Options())
    assert totals.errors == 1 and totals.changed == 2 and totals.exit_code == 1
    with engine.connect() as conn:
        row = conn.execute(select(schema.sources).where(schema.sources.c.path.like("%notes.json"))).mappings().one()
        assert row["status"] == "error" and "notes.json" in row["error"] and "not a transcript" in row["error"]
        assert conn.execute(select(func.count()).select_from(schema.sessions)).scalar() == 2


def test_secrets_never_reach_the_ledger(engine, tmp_path, other):
    key = "sk-proj-" + "A1b2C3d4" * 6
    f = tmp_path / "s.jsonl"
    f.write_bytes(chat_line(role="user", content=f"use {key}") + call_msg("a", "bash", {"cmd": f"export K={key}"})
                  + tool_msg("a", f"K={key}\nBearer abcdefghijklmnopqrstuvwxyz0123") + chat_line(role="assistant", content=key))
    worker.ingest_file(engine, f, worker.Options())
    text = repr(dump(engine))
    assert key not in text and "abcdefghijklmnopqrstuvwxyz0123" not in text and "[REDACTED:openai-key]" in text
    worker.ingest_file(other, f, worker.Options(redact=False))
    assert key in repr(dump(other))


def test_policies_from_config_and_flags(tmp_path):
    cfg = tmp_path / "loopledger.toml"
    cfg.write_text('[[policy]]\ndetector = "window"\nparams = {window = 10, threshold = 4}\n')
    specs = worker.policy_specs(["ladder:halt_at=6"], cwd=tmp_path)
    assert specs[: len(DEFAULT_SPECS)] == list(DEFAULT_SPECS)
    assert PolicySpec("window", {"window": 10, "threshold": 4}) in specs
    assert PolicySpec.parse("ladder:halt_at=6") in specs and len(specs) == len(DEFAULT_SPECS) + 2
    cfg.write_text('[[policy]]\ndetector = "window"\nparams = {window = 2, threshold = 4}\n')
    with pytest.raises(worker.ConfigFileError, match=r"loopledger.toml: \[\[policy\]\] #1: .*threshold"):
        worker.policy_specs([], cwd=tmp_path)


def test_discover_skips_obvious_non_transcripts(tmp_path):
    for name in ("a.jsonl", "sub/b.json", "sub/deep/c.traj", ".aider.chat.history.md", "README.md", "x.png",
                 ".git/objects/d.json", "node_modules/e.json", "notes.txt"):
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("# aider chat started at 2024-05-01 10:00:00\n" if name.endswith(".md") else "{}")
    found = {p.relative_to(tmp_path).as_posix() for p in worker.discover([tmp_path])}
    assert found == {"a.jsonl", "sub/b.json", "sub/deep/c.traj", ".aider.chat.history.md"}
    assert worker.discover([tmp_path / "notes.txt"]) == [tmp_path / "notes.txt"]  # named: always tried


def test_parallel_jobs_write_the_same_ledger(engine, tmp_path, other):
    write_corpus(tmp_path / "c", 8, 120, seed=12)
    (tmp_path / "c" / "junk.json").write_text("[1, 2, 3]")
    par = worker.ingest_paths(engine, [tmp_path / "c"], worker.Options(jobs=2))
    seq = worker.ingest_paths(other, [tmp_path / "c"], worker.Options())
    assert (par.changed, par.errors, par.calls, par.checks) == (seq.changed, seq.errors, seq.calls, seq.checks)
    assert dump(engine) == dump(other)
    again = worker.ingest_paths(engine, [tmp_path / "c"], worker.Options(jobs=2))
    assert again.changed == 0 and again.errors == 1  # the junk file stays reported



def test_subagent_links_to_its_parent_whichever_file_comes_first(engine):
    root = Path(__file__).resolve().parent.parent / "sample_data" / "claude_code"
    children = sorted(root.glob("*/subagents/*.jsonl"))
    parents = sorted(root.glob("*.jsonl"))
    if not children or not parents:
        pytest.skip("sample_data has no Claude Code subagent file")
    for f in children + parents:  # the child first: its parent is not stored yet
        worker.ingest_file(engine, f, worker.Options())
    with engine.connect() as conn:
        rows = conn.execute(select(schema.sessions.c.id, schema.sessions.c.key, schema.sessions.c.parent_key,
                                   schema.sessions.c.parent_id)).all()
    by_key = {r.key: r.id for r in rows}
    linked = [r for r in rows if r.parent_key is not None]
    assert linked and all(r.parent_id == by_key[r.parent_key] for r in linked)


def test_two_sessions_under_one_key_are_both_kept(engine, tmp_path):
    f = tmp_path / "output.jsonl"
    f.write_bytes(_openhands_line(1, 2) + _openhands_line(1, 3) + _openhands_line(1, 4))
    report = worker.ingest_file(engine, f, worker.Options())
    assert report.sessions == 3 and report.error is None
    with engine.connect() as conn:
        keys = sorted(conn.execute(select(schema.sessions.c.key)).scalars())
    assert keys == ["inst-1", "inst-1#2", "inst-1#3"]


def test_jobs_compute_big_files_before_the_claim_and_write_the_same_ledger(engine, tmp_path, other, monkeypatch):
    """With --jobs, a file over BIG_FILE_BYTES is computed before its write lock (spilled to a
    temporary file, not held in memory) instead of under it, where it kept the other jobs
    waiting: the ledger is what one process, streaming it under the claim, writes."""
    from loopledger import file_ingest

    corpus = tmp_path / "c"
    corpus.mkdir()
    rng = random.Random(8)
    with open(corpus / "conversations.jsonl", "wb") as fh:  # one conversation per line
        for k in range(6):
            msgs = [orjson.loads(line) for line in session_lines(rng, 80, session=k)]
            fh.write(orjson.dumps({"messages": msgs}) + b"\n")
    write_corpus(corpus / "more", 3, 60, seed=3)
    monkeypatch.setattr(file_ingest, "BIG_FILE_BYTES", 1000)
    path = (corpus / "conversations.jsonl").absolute()
    spilled = file_ingest.precompute(engine, path, None, worker.Options(jobs=2))
    assert spilled is not None and isinstance(spilled.sessions, file_ingest.SpilledRows)
    first, again = list(spilled.sessions), list(spilled.sessions)  # a retried write reads it again
    assert [r.key for r in first] == [r.key for r in again] == [f"line-{i}" for i in range(1, 7)]
    assert first == again
    assert file_ingest.precompute(engine, path, None, worker.Options(jobs=1)) is None  # streamed under the claim

    # As a --jobs process ingests each file (in this process, so the small BIG_FILE_BYTES holds).
    par = [worker.ingest_file(engine, p, worker.Options(jobs=2)) for p in worker.discover([corpus])]
    seq = worker.ingest_paths(other, [corpus], worker.Options())
    assert sum(r.sessions for r in par) == seq.sessions == 6 + 3
    assert (sum(r.calls for r in par), sum(r.checks for r in par)) == (seq.calls, seq.checks)
    assert dump(engine) == dump(other)
