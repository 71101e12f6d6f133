"""Labels at scale: `loopledger labels import | export` (real subprocesses and real ledgers).

The corpus' labels.csv imports as it is; rows that match nothing are named FILE:LINE; labels stay
on their sessions across re-ingest and recheck; export round-trips import (hypothesis).
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loopledger.analysis import scoring
from loopledger.ledger import labels, migrate, read
from loopledger.ledger import schema as t
from loopledger.ledger.engine import make_engine
from score_support import EXPECTED, FILE, LADDER, WINDOW, build

BIN = Path(sys.executable).with_name("loopledger")
CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"  # absent in a fresh clone


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=300)


def _labels(url: str) -> dict[str, tuple]:
    eng = make_engine(url, readonly=True)
    try:
        with eng.connect() as conn:
            q = (sa.select(t.sessions.c.key, t.sessions.c.id, t.labels.c.label, t.labels.c.loop_first,
                           t.labels.c.loop_last, t.labels.c.note, t.labels.c.labelled_by)
                 .select_from(t.labels.join(t.sessions, t.sessions.c.id == t.labels.c.session_id)))
            return {r[0]: tuple(r[1:]) for r in conn.execute(q)}
    finally:
        eng.dispose()


# ── the corpus ────────────────────────────────────────────────────────────────────────────────


@pytest.mark.skipif(not (CORPUS / "labels.csv").is_file(), reason="../shared/corpus is absent (a fresh clone)")
def test_the_corpus_labels_import_as_they_are_and_every_row_matches(tmp_path):
    db = str(tmp_path / "corpus.sqlite")
    ing = _run("ingest", str(CORPUS), "--db", db)
    assert ing.returncode in (0, 3), ing.stderr
    imp = _run("labels", "import", str(CORPUS / "labels.csv"), "--db", db)
    assert imp.returncode == 0, imp.stderr
    assert "64 session(s) labelled from 64 row(s)" in imp.stdout and "skipped" not in imp.stderr
    url = f"sqlite:///{db}"
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        kinds = dict(conn.execute(sa.select(t.labels.c.label, sa.func.count()).group_by(t.labels.c.label)).all())
        assert conn.execute(sa.select(sa.func.count(t.labels.c.session_id.distinct()))).scalar() == 64
    eng.dispose()
    assert kinds == {"loop": 11, "normal": 47, "unclear": 6}
    # The README's own example: the eps submit loop is calls 10-13, the same `submit flag{…}` each time.
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        sid = conn.execute(sa.select(t.sessions.c.id).join(t.sources).where(
            t.sources.c.path.like("%ctf-crypto-eps-submit-loop.traj"))).scalar_one()
        calls = conn.execute(sa.select(t.calls.c.tool, t.calls.c.args_hash).where(t.calls.c.session_id == sid)
                             .order_by(t.calls.c.seq, t.calls.c.idx)).all()
    eng.dispose()
    assert len({tuple(c) for c in calls[9:13]}) == 1 and calls[9][0] == "submit" and calls[8] != calls[9]
    # Every default policy judged every labelled session.
    score = _run("score", "--db", db, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(score.stdout)))
    assert rows and all((r["loops"], r["normal"]) == ("11", "47") for r in rows)
    # Export gives the corpus file back, row for row, in its own (relative) form.
    out = _run("labels", "export", "--db", db)
    assert out.returncode == 0
    original = list(csv.reader(io.StringIO((CORPUS / "labels.csv").read_text(encoding="utf-8"))))
    exported = [r[:5] for r in csv.reader(io.StringIO(out.stdout))]
    assert exported == original


# ── matching rows to sessions ─────────────────────────────────────────────────────────────────


def _lone_session(root: Path) -> Path:
    """A file holding one session (OpenAI chat message list: its key is "0")."""
    path = root / "transcripts" / "lone" / "chat.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a b"}]), encoding="utf-8")
    return path


def test_rows_that_match_nothing_are_named_by_file_and_line_and_the_rest_are_stored(tmp_path):
    url, _ = build(tmp_path)
    _lone_session(tmp_path)
    assert _run("ingest", str(tmp_path / "transcripts" / "lone"), "--db", url).returncode == 0
    bad = tmp_path / "mixed.csv"
    bad.write_text(
        "file,session_key,label,loop_calls,reason\n"
        f"{FILE},task-4.trial-0,unclear,,\"a reason\nover two lines\"\n"   # lines 2-3: fine
        "nope/missing.json,task-1.trial-0,loop,1-2,\n"                     # line 4: no such file
        f"{FILE},task-99.trial-0,normal,,\n"                               # line 5: no such session
        f"{FILE},task-1.trial-0,maybe,,\n"                                 # line 6: bad label
        f"{FILE},task-2.trial-0,loop,,\n"                                  # line 7: loop without calls
        f"{FILE},task-3.trial-0,loop,5-40,\n"                              # line 8: past its 7 calls
        "mini.json,task-1.trial-0,normal,,\n"                              # line 9: not a whole component
        "lone/chat.json,1,loop,1-1,\n",                                    # line 10: a lone session's 1
        encoding="utf-8")
    out = _run("labels", "import", str(bad), "--db", url)
    assert out.returncode == 3, out.stderr
    err = out.stderr.replace("\n", " ")
    for line, why in ((4, "no ingested file ends with 'nope/missing.json'"),
                      (5, "no session 'task-99.trial-0' in"), (6, "unknown label 'maybe'"),
                      (7, "a loop label needs the loop's calls"), (8, "loop calls 5-40 go past the session's 7 call(s)"),
                      (9, "no ingested file ends with 'mini.json'")):
        assert f"{bad}:{line}: {why}" in err, (line, out.stderr)
    assert "6 row(s) skipped" in out.stderr
    assert "2 session(s) labelled from 8 row(s)" in out.stdout
    got = _labels(url)
    assert got["task-4.trial-0"][1:4] == ("unclear", None, None) and got["task-4.trial-0"][4] == "a reason\nover two lines"
    assert got["0"][1:4] == ("loop", 1, 1)
    # The rows skipped left the earlier labels alone.
    assert got["task-1.trial-0"][1:4] == ("loop", 3, 6) and got["task-3.trial-0"][1:4] == ("loop", 2, 6)


def test_a_file_that_is_not_a_labels_csv_is_one_clear_error(tmp_path):
    url, _ = build(tmp_path)
    for name, content in (("empty.csv", ""), ("wrong.csv", "path,key\nx,y\n")):
        (tmp_path / name).write_text(content, encoding="utf-8")
        out = _run("labels", "import", str(tmp_path / name), "--db", url)
        assert out.returncode == 1 and f"{tmp_path / name}:1:" in out.stderr and "Traceback" not in out.stderr
    (tmp_path / "latin1.csv").write_bytes("file,session_key,label\nf\xe9,1,loop\n".encode("latin-1"))
    out = _run("labels", "import", str(tmp_path / "latin1.csv"), "--db", url)
    assert out.returncode == 1 and "not UTF-8" in out.stderr
    assert _run("labels", "import", str(tmp_path / "absent.csv"), "--db", url).returncode == 2
    assert len(_labels(url)) == 6, "nothing stored was lost"


def test_key_tails_and_path_suffixes():
    sessions = [(1, "run-a/task-1", 3), (2, "run-b:task-2", 4), (3, "task-1x", 2)]
    assert labels.Matcher._key(sessions, "task-2") == (2, 4)
    assert labels.Matcher._key(sessions, "task-1") == (1, 3)
    assert labels.Matcher._key(sessions, "1") is None  # several sessions: no positional guess
    assert labels.Matcher._key([(7, "abc", 5)], "0") == (7, 5) == labels.Matcher._key([(7, "abc", 5)], "1")
    assert labels.path_matches("/d/corpus/x/tau.json", "x/tau.json")
    assert labels.path_matches("C:\\d\\x\\tau.json", "x/tau.json")
    assert not labels.path_matches("/d/x/mytau.json", "tau.json")


def test_the_same_file_under_two_paths_gets_the_label_twice(tmp_path):
    url, csv_path = build(tmp_path)
    copy = tmp_path / "copy" / FILE
    copy.parent.mkdir(parents=True)
    copy.write_bytes((tmp_path / "transcripts" / FILE).read_bytes())
    assert _run("ingest", str(copy), "--db", url).returncode == 0
    out = _run("labels", "import", str(csv_path), "--db", url)
    assert out.returncode == 0 and "12 session(s) labelled from 6 row(s)" in out.stdout


def test_an_import_over_a_dashboard_label_says_so(tmp_path):
    url, csv_path = build(tmp_path)
    eng = make_engine(url)
    with eng.begin() as conn:
        sid = conn.execute(sa.select(t.sessions.c.id).where(t.sessions.c.key == "task-4.trial-0")).scalar_one()
        read.write_label(conn, sid, 0, "loop", "I think so")  # run 0's calls: 1-4
    eng.dispose()
    assert _labels(url)["task-4.trial-0"][1:] == ("loop", 1, 4, "I think so", "dashboard")
    out = _run("labels", "import", str(csv_path), "--db", url)
    assert "1 label(s) set in the dashboard were replaced" in out.stdout
    assert _labels(url)["task-4.trial-0"][1:] == ("normal", None, None, "no repeats", "imported")


# ── labels stay on their sessions ─────────────────────────────────────────────────────────────


def test_labels_survive_reingest_and_recheck(tmp_path):
    url, _ = build(tmp_path)
    before = _labels(url)
    tau = tmp_path / "transcripts" / FILE
    # The file is rewritten with one more session: every session is read again.
    records = json.loads(tau.read_text())
    extra = dict(records[3], task_id=7)
    tau.write_text(json.dumps([*records, extra]))
    out = _run("ingest", str(tau), "--db", url, "--policy", WINDOW.text, "--policy", LADDER.text)
    assert out.returncode == 0, out.stderr
    assert "sessions (re)judged" in out.stdout
    after = _labels(url)
    assert after == before and "task-7.trial-0" not in after
    out = _run("recheck", "--db", url, "--policy", "window:window=8,threshold=4")
    assert out.returncode == 0, out.stderr
    assert _labels(url) == before
    rows = {r["policy_id"]: r for r in csv.DictReader(io.StringIO(
        _run("score", "--db", url, "--format", "csv").stdout))}
    # Still the hand-counted numbers for the two policies (the rechecked one is scored too).
    assert [rows[WINDOW.id][k] for k in ("loops", "caught", "early", "false_halts")] == \
        [str(v) for v in EXPECTED[WINDOW.id][:3]] + [str(EXPECTED[WINDOW.id][5])]
    assert len(rows) >= 3


# ── export round-trips import ─────────────────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def roundtrip_ledger(tmp_path_factory):
    url, _ = build(tmp_path_factory.mktemp("roundtrip"))
    eng = make_engine(url)
    with eng.connect() as conn:
        calls = dict(conn.execute(sa.select(t.sessions.c.id, t.sessions.c.n_calls)).all())
    yield eng, calls
    eng.dispose()


# Reasons are any text a person may type (NUL aside: PostgreSQL text cannot hold it).
REASONS = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)


@st.composite
def label_sets(draw, calls: dict[int, int]):
    out = {}
    for sid in draw(st.lists(st.sampled_from(sorted(calls)), unique=True)):
        label = draw(st.sampled_from(scoring.LABELS))
        first = last = None
        if label == scoring.LOOP:
            first = draw(st.integers(1, calls[sid]))
            last = draw(st.integers(first, calls[sid]))
        out[sid] = (label, first, last, draw(REASONS), draw(st.sampled_from(scoring.LABELLED_BY)))
    return out


def _stored(conn) -> dict[int, tuple]:
    lb = t.labels.c
    return {r[0]: (r[1], r[2], r[3], r[4] or "") for r in conn.execute(
        sa.select(lb.session_id, lb.label, lb.loop_first, lb.loop_last, lb.note))}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_export_then_import_gives_the_same_labels(roundtrip_ledger, data):
    eng, calls = roundtrip_ledger
    want = data.draw(label_sets(calls))
    with eng.begin() as conn:
        conn.execute(sa.delete(t.labels))
        for sid, (label, first, last, reason, by) in want.items():
            read.write_label(conn, sid, t.SESSION_LEVEL, label, reason, first, last, by)
        written = _stored(conn)
        text = labels.to_csv(labels.export_rows(conn))
        conn.execute(sa.delete(t.labels))
        rows, problems = labels.parse(io.StringIO(text), "export.csv")
        report = labels.import_rows(conn, rows, "export.csv")
        assert not problems and not report.problems
        assert _stored(conn) == written == {sid: v[:4] for sid, v in want.items()}
        # And the export of the import is the same file (who labelled aside: now `imported`).
        again = labels.to_csv(labels.export_rows(conn))
        conn.execute(sa.delete(t.labels))

    def core(csv_text: str) -> list[list[str]]:
        return [r[:5] for r in csv.reader(io.StringIO(csv_text))]

    assert core(again) == core(text)


# ── ledgers from before labels judged sessions ────────────────────────────────────────────────


def test_per_run_labels_of_an_older_ledger_become_session_labels(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    eng = make_engine(url)
    migrate.upgrade(eng, "0002")
    # Rows as a 0002 ledger held them: two sessions of three runs (2, 3 and 1 calls: calls 1-2,
    # 3-5, 6), labelled per run with the old words.
    with eng.begin() as conn:
        conn.execute(sa.text("INSERT INTO sources (id, path, size, byte_offset, status) VALUES (1, '/x.json', 0, 0, 'ok')"))
        for sid in (1, 2):
            conn.execute(sa.text("INSERT INTO sessions (id, source_id, key, format, title, n_events, n_runs, n_calls) "
                                 "VALUES (:i, 1, :k, 'f', '', 0, 3, 6)"), {"i": sid, "k": f"s{sid}"})
            for idx, n in enumerate((2, 3, 1)):
                conn.execute(sa.text("INSERT INTO runs (session_id, idx, first_seq, last_seq, n_calls) "
                                     "VALUES (:s, :i, 0, 0, :n)"), {"s": sid, "i": idx, "n": n})
        for sid, run, label, ts in ((1, 0, "not_loop", 1.0), (1, 1, "real_loop", 2.0), (1, 2, "not_loop", 3.0),
                                    (2, 2, "not_loop", 1.0)):
            conn.execute(sa.text("INSERT INTO labels (session_id, run_idx, label, note, created_at) "
                                 "VALUES (:s, :r, :l, 'n', :c)"), {"s": sid, "r": run, "l": label, "c": ts})
    migrate.upgrade(eng)
    with eng.connect() as conn:
        rows = conn.execute(sa.select(t.labels.c.session_id, t.labels.c.run_idx, t.labels.c.label,
                                      t.labels.c.loop_first, t.labels.c.loop_last, t.labels.c.labelled_by)
                            .order_by(t.labels.c.session_id)).all()
    assert [tuple(r) for r in rows] == [(1, 1, "loop", 3, 5, "dashboard"), (2, 2, "normal", None, None, "dashboard")]
    with eng.begin() as conn, pytest.raises(sa.exc.IntegrityError):
        conn.execute(t.labels.insert().values(session_id=1, run_idx=0, label="normal"))  # one per session
    eng.dispose()


def test_export_to_a_file_with_full_paths_imports_back(tmp_path):
    url, _ = build(tmp_path)
    target = tmp_path / "out.csv"
    out = _run("labels", "export", str(target), "--db", url, "--full-paths")
    assert out.returncode == 0 and "6 label(s) written" in out.stderr
    with open(target, encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["file"] for r in rows] == [str(tmp_path / "transcripts" / FILE)] * 6
    assert [(r["session_key"], r["label"], r["loop_calls"], r["labelled_by"]) for r in rows][:2] == [
        ("task-1.trial-0", "loop", "3-6", "imported"), ("task-2.trial-0", "loop", "5-8", "imported")]
    before = _labels(url)
    out = _run("labels", "import", str(target), "--db", url)
    assert out.returncode == 0 and "6 session(s) labelled from 6 row(s)" in out.stdout
    assert {k: v[:5] for k, v in _labels(url).items()} == {k: v[:5] for k, v in before.items()}
    bad = _run("labels", "export", str(tmp_path / "no" / "such" / "dir.csv"), "--db", url)
    assert bad.returncode == 1 and "cannot write" in bad.stderr and "Traceback" not in bad.stderr
