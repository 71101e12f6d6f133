"""Appends read only the new bytes and replay only the new events (loopledger.resume), and the
ledger equals a whole-file ingest: readers continued from a Checkpoint give exactly the items a
whole read gives after it, and the worker's rows, tallies and snapshots chain over many appends."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from loopledger import formats, worker
from loopledger.events import Checkpoint
from loopledger.ledger import migrate, schema
from loopledger.ledger.engine import make_engine
from sqlalchemy import func, select
from test_worker import dump

from bench.gen_chat import session_lines

HERE = Path(__file__).parent
CLAUDE = HERE / "fixtures" / "formats" / "claude_code" / "session.jsonl"
CORPUS_CLAUDE = Path("/work/shared/corpus/claude-code-jsonl/spotter-tool_heavy.jsonl")
CHAT = HERE / "fixtures" / "formats" / "openai_chat" / "support.jsonl"


def _corpus(name: str) -> Path:
    p = HERE.parent.parent / "shared" / "corpus" / "claude-code-jsonl" / name
    return p if p.exists() else Path("/work/shared/corpus/claude-code-jsonl") / name


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


CODEX = HERE / "fixtures" / "formats" / "codex"
CODEX_CORPUS = _corpus("x").parent.parent / "codex-rollout-jsonl" / "acidicsoil-codex-session-view-rollout-2025-11-17.jsonl"


@pytest.mark.parametrize(("source", "fmt", "share"), [
    (CLAUDE, "claude-code", 3), (_corpus("spotter-tool_heavy.jsonl"), "claude-code", 3), (CHAT, "openai-chat", 3),
    (CODEX / "rollout-2025-12-02T09-00-00-019ad001-aaaa-7bbb-8ccc-123456789abc.jsonl", "codex", 3),
    (CODEX_CORPUS, "codex", 3),
    # a legacy rollout names no model: its title/model could still change, so it never resumes
    (CODEX / "rollout-legacy.jsonl", "codex", 0)])
def test_a_reader_continued_from_its_checkpoint_gives_what_a_whole_read_gives(tmp_path, source, fmt, share):
    lines = _lines(source)
    whole_path = tmp_path / "whole.jsonl"
    whole_path.write_bytes(b"".join(lines))
    whole = [it for it in formats.read_from(whole_path, fmt) if not isinstance(it, Checkpoint)]
    assert whole == list(formats.read(whole_path, fmt))
    resumed_at = 0
    for cut in range(1, len(lines)):
        f = tmp_path / f"grow-{cut}.jsonl"
        f.write_bytes(b"".join(lines[:cut]))
        before: list = []
        cp = None
        for it in formats.read_from(f, fmt):
            if isinstance(it, Checkpoint):
                cp = it
                break
            before.append(it)
        if cp is None:
            continue
        resumed_at += 1
        assert cp.offset == f.stat().st_size
        with open(f, "ab") as fh:
            fh.writelines(lines[cut:])
        after = [it for it in formats.read_from(f, fmt, cp) if not isinstance(it, Checkpoint)]
        assert before + after == whole, cut
    assert resumed_at >= (len(lines) // share if share else 0)  # many cuts resume: not a vacuous loop


def test_no_checkpoint_inside_an_unfinished_line(tmp_path):
    lines = _lines(CLAUDE)
    f = tmp_path / "partial.jsonl"
    f.write_bytes(b"".join(lines[:5]) + lines[5][:-1])  # the last line without its newline
    assert not any(isinstance(it, Checkpoint) for it in formats.read_from(f, "claude-code"))


@pytest.fixture
def engine(db_url):
    eng = make_engine(db_url)
    migrate.upgrade(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def other(tmp_path):
    eng = make_engine(f"sqlite:///{tmp_path / 'other.sqlite'}")
    migrate.upgrade(eng)
    yield eng
    eng.dispose()


def _grow_and_compare(engine, other, tmp_path, lines: list[bytes], cuts: list[int], name: str) -> list:
    f = tmp_path / name
    f.write_bytes(b"".join(lines[:cuts[0]]))
    reports = [worker.ingest_file(engine, f, worker.Options())]
    for a, b in zip(cuts, [*cuts[1:], len(lines)], strict=True):
        with open(f, "ab") as fh:
            fh.writelines(lines[a:b])
        reports.append(worker.ingest_file(engine, f, worker.Options()))
    worker.ingest_paths(other, [f], worker.Options())
    assert dump(engine) == dump(other)
    return reports


@pytest.mark.parametrize("name", ["spotter-tool_heavy.jsonl", "spotter-4d5611e5-subagent-a2898e3.jsonl"])
def test_claude_code_appends_resume_and_equal_a_whole_ingest(engine, other, tmp_path, name):
    lines = _lines(_corpus(name))
    rng = random.Random(len(lines))
    for trial in range(3):
        cuts = sorted(rng.sample(range(2, len(lines) - 1), 3))
        reports = _grow_and_compare(engine, other, tmp_path, lines, cuts, f"t{trial}-{name}")
        assert all(r.action == "appended" for r in reports[1:]), reports
        assert sum(r.resumed for r in reports[1:]) >= 2, [(r.action, r.resumed) for r in reports]


def test_codex_appends_resume_and_equal_a_whole_ingest(engine, other, tmp_path):
    lines = _lines(CODEX_CORPUS)
    rng = random.Random(11)
    cuts = sorted(rng.sample(range(len(lines) // 2, len(lines) - 1), 4))
    reports = _grow_and_compare(engine, other, tmp_path, lines, cuts, "rollout.jsonl")
    assert all(r.action == "appended" for r in reports[1:]), reports
    assert sum(r.resumed for r in reports[1:]) >= 3, [(r.action, r.resumed) for r in reports]


def test_chat_appends_two_lines_at_a_time_resume_every_time(engine, other, tmp_path):
    lines = session_lines(random.Random(9), 80, session=1)
    cuts = list(range(len(lines) - 20, len(lines), 2))
    reports = _grow_and_compare(engine, other, tmp_path, lines, cuts, "chat.jsonl")
    assert all(r.action == "appended" and r.resumed for r in reports[1:]), reports
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(schema.resume_states)).scalar() > 0
        assert conn.execute(select(func.count()).select_from(schema.reader_states)).scalar() == 1


def test_a_stale_snapshot_falls_back_to_reading_the_file_whole(engine, other, tmp_path):
    lines = session_lines(random.Random(4), 40, session=1)
    f = tmp_path / "stale.jsonl"
    f.write_bytes(b"".join(lines[:30]))
    worker.ingest_file(engine, f, worker.Options())
    with engine.begin() as conn:  # as if written by older code
        conn.execute(schema.resume_states.update().values(version="older"))
    with open(f, "ab") as fh:
        fh.writelines(lines[30:])
    report = worker.ingest_file(engine, f, worker.Options())
    assert report.action == "appended" and not report.resumed
    worker.ingest_paths(other, [f], worker.Options())
    assert dump(engine) == dump(other)


def test_the_state_after_an_ingest_judges_the_next_call_as_a_full_replay_does(engine, tmp_path):
    """The live hook's view: after the worker ingested a Claude Code transcript, `resume.current`
    (the snapshot at the reader's checkpoint + the stored events after it) judges one more call
    exactly as a replay of the whole stored session plus that call."""
    from loopledger import resume
    from loopledger.detectors.policy import DEFAULT_SPECS
    from loopledger.events import Batch, Call
    from loopledger.ledger import store
    from loopledger.replay import replay_many

    f = tmp_path / "live.jsonl"
    f.write_bytes(b"".join(_lines(_corpus("spotter-tool_heavy.jsonl"))))
    assert worker.ingest_file(engine, f, worker.Options()).action == "new"
    with engine.connect() as conn:
        sid = conn.execute(select(schema.sessions.c.id)).scalar_one()
        n = conn.execute(select(schema.sessions.c.n_events)).scalar_one()
        snap_seq = conn.execute(select(func.max(schema.resume_states.c.seq))).scalar_one()
        events = store.load_events(conn, sid)
        point = resume.current(conn, sid, DEFAULT_SPECS)
    assert snap_seq is not None and snap_seq <= n and point.seq == n
    nxt = Batch((Call("toolu_next", "Bash", {"command": "npm test"}),))
    [got] = resume.feed(point, [nxt])
    want = list(replay_many([*events, nxt], DEFAULT_SPECS))[-1]
    assert [st.checks for st in got] == [st.checks for st in want]
    assert [st.run for st in got] == [st.run for st in want]


def test_an_append_parses_only_the_new_lines_and_replays_only_the_new_events(engine, tmp_path, monkeypatch):
    """Proportional to the append, counted (not timed): a 2-line append to a 1,000-call session
    parses 2 JSONL lines and feeds each policy only the events from the snapshot on."""
    import orjson as real_orjson
    from loopledger.formats import _common
    from loopledger.replay import _Driver

    lines = session_lines(random.Random(3), 1000, session=1)
    f = tmp_path / "long.jsonl"
    f.write_bytes(b"".join(lines[:-2]))
    assert worker.ingest_file(engine, f, worker.Options()).calls >= 1000
    with open(f, "ab") as fh:
        fh.writelines(lines[-2:])
    parsed, fed = [], []

    class CountingOrjson:
        JSONDecodeError = real_orjson.JSONDecodeError

        @staticmethod
        def loads(raw):
            parsed.append(raw)
            return real_orjson.loads(raw)

    real_feed = _Driver.feed

    def counting_feed(self, seq, event, last=False, with_state=False):
        fed.append(seq)
        return real_feed(self, seq, event, last, with_state)

    monkeypatch.setattr(_common, "orjson", CountingOrjson)
    monkeypatch.setattr(_Driver, "feed", counting_feed)
    report = worker.ingest_file(engine, f, worker.Options())
    assert report.action == "appended" and report.resumed
    assert len(parsed) == 2
    n_policies = len(worker.Options().specs)
    assert 0 < len(fed) <= 2 * n_policies and min(fed) > 1000
