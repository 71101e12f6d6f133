"""Gemini CLI sessions: the JSONL upsert log ($set, $rewindTo) and the older single JSON."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from loopledger.events import Answers, Batch, Prose, UserTurn
from loopledger.formats import gemini
from reader_checks_b import (
    JUNK_VALUES,
    assert_fuzz,
    assert_growth_shows_past_the_old_end,
    assert_survives,
    calls,
    errors,
    kinds,
    ledger_sessions,
    replace_node,
)

FIX = Path(__file__).parent / "fixtures" / "formats" / "gemini"
JSONL = FIX / "session-2026-03-14T09-12-4f1c2a9e.jsonl"
LEGACY = FIX / "session-2025-09-02T10-05-b8e1d0c2.json"


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


META = {"sessionId": "s-1", "projectHash": "ab" * 32, "startTime": "2026-01-01T00:00:00Z"}


def test_jsonl_session_info():
    info = next(iter(gemini.read(JSONL))).info
    assert info.key == "4f1c2a9e-7b7d-4c1e-9d0a-2f6b8c3e1a55"
    assert info.format == "gemini-cli" and info.model == "gemini-2.5-pro"
    assert info.title == "Fix invoice rounding in CI"  # from the last $set summary
    assert info.started_at == "2026-03-14T09:12:03.114Z" and info.meta["kind"] == "main"


def test_jsonl_upsert_rewind_and_skips():
    items = list(gemini.read(JSONL))
    assert not errors(items)
    # u2 and its reply g3 were rewound; the info line is the CLI's notice, not an event
    assert [i.text for i in items if isinstance(i, UserTurn)] == [
        "The CI build of the invoices service is red. Find out why and fix it.",
        "Fix the rounding in total() instead."]
    assert all("Deleting" not in i.text for i in items if isinstance(i, Prose))
    assert kinds(items) == ["SessionStart", "UserTurn", "Batch", "Answers", "Batch", "Answers",
                            "UserTurn", "Batch", "Answers", "Batch", "Answers", "Prose"]
    # g1 was written twice (executing, then finished): one batch, with the final result
    names = [c.name for c in calls(items)]
    assert names == ["run_shell_command", "read_file", "glob", "replace", "run_shell_command"]
    first = next(i for i in items if isinstance(i, Answers)).answers
    assert len(first) == 1 and first[0].is_error and "Expected: 10.05" in first[0].text
    assert first[0].call_id == "run_shell_command-1710407532-a1"


def test_jsonl_parallel_calls_and_cancelled():
    items = list(gemini.read(JSONL))
    batches = [i for i in items if isinstance(i, Batch)]
    assert [c.id for c in batches[1].calls] == ["read_file-1710407540-b2", "glob-1710407540-b3"]
    assert batches[1].text.startswith("The rounding test fails")
    assert batches[1].calls[1].args == {"pattern": "src/**/*.test.ts"}
    answers = [i for i in items if isinstance(i, Answers)]
    assert [a.call_id for a in answers[1].answers] == ["read_file-1710407540-b2", "glob-1710407540-b3"]
    cancelled = answers[-1].answers[0]
    assert cancelled.is_error and cancelled.text.startswith("[Operation Cancelled]")


def test_legacy_single_json():
    items = list(gemini.read(LEGACY))
    assert kinds(items) == ["SessionStart", "UserTurn", "Batch", "Answers", "Prose"]
    info = items[0].info
    assert info.key == "b8e1d0c2-33aa-4e0f-a1c9-5d2e7f6a9b10" and info.model == "gemini-2.5-flash"
    assert info.title == "What does the deploy script do when the health check fails?"
    assert items[2].calls[0].args == {"absolute_path": "/srv/app/scripts/deploy.sh"}
    assert "rollback.sh" in items[3].answers[0].text
    assert [i.line for i in items[1:]] == [1, 2, 2, 4]  # message index (m3, an info, skipped)


def test_minified_single_line_document(tmp_path):
    doc = json.loads(LEGACY.read_text())
    path = tmp_path / "session.json"
    path.write_text(json.dumps(doc))
    assert kinds(list(gemini.read(path))) == kinds(list(gemini.read(LEGACY)))


def test_rewind_to_unknown_id_drops_everything(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [
        META, {"id": "a", "type": "user", "content": "first"},
        {"id": "b", "type": "gemini", "content": "reply"},
        {"$rewindTo": "zzz"},
        {"id": "c", "type": "user", "content": "again"}])
    assert [i.text for i in gemini.read(path) if isinstance(i, UserTurn)] == ["again"]


def test_rewind_is_inclusive_and_later_messages_append(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [
        META, {"id": "a", "type": "user", "content": "one"},
        {"id": "b", "type": "user", "content": "two"},
        {"id": "c", "type": "gemini", "content": "three"},
        {"$rewindTo": "b"},
        {"id": "d", "type": "gemini", "content": "four"}])
    items = list(gemini.read(path))
    assert [(type(i).__name__, i.text) for i in items[1:]] == [("UserTurn", "one"), ("Prose", "four")]


def test_set_messages_upserts_without_dropping(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [
        META, {"id": "a", "type": "user", "content": "look"},
        {"id": "b", "type": "gemini", "content": "", "toolCalls": [
            {"id": "t1", "name": "read_file", "args": {"absolute_path": "/x"}, "status": "success",
             "result": [{"functionResponse": {"id": "t1", "name": "read_file",
                                              "response": {"output": "full text"}}}]}]},
        {"$set": {"messages": [{"id": "a", "type": "user", "content": "look (masked)"}]}}])
    items = list(gemini.read(path))
    assert [i.text for i in items if isinstance(i, UserTurn)] == ["look (masked)"]
    assert [c.id for c in calls(items)] == ["t1"]


def test_subagent_file_names_its_parent(tmp_path):
    parent_id = "4f1c2a9e-7b7d-4c1e-9d0a-2f6b8c3e1a55"
    folder = tmp_path / "chats" / parent_id
    folder.mkdir(parents=True)
    path = write_jsonl(folder / "sub-7.jsonl", [
        dict(META, sessionId="sub-7", kind="subagent"), {"id": "a", "type": "user", "content": "scan"}])
    info = next(iter(gemini.read(path))).info
    assert info.key == "sub-7" and info.parent_key == parent_id
    assert next(iter(gemini.read(JSONL))).info.parent_key is None  # kind "main"


def test_synced_tool_response_turn_is_not_a_person(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [
        META, {"id": "a", "type": "user", "content": "go"},
        {"$set": {"messages": [{"id": "h2", "type": "user", "content": [
            {"functionResponse": {"id": "t1", "name": "ls", "response": {"output": "masked"}}}]}]}}])
    assert [i.text for i in gemini.read(path) if isinstance(i, UserTurn)] == ["go"]


def test_call_still_running_has_no_answer(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [
        META, {"id": "b", "type": "gemini", "content": "", "toolCalls": [
            {"id": "t1", "name": "run_shell_command", "args": {"command": "sleep 60"},
             "status": "executing"}]}])
    assert kinds(list(gemini.read(path))) == ["SessionStart", "Batch"]


def test_bad_lines_are_reported_and_reading_goes_on(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join([
        json.dumps(META),
        '{"id": "a", "type": "user", "content": "hi"',      # 2: truncated
        '"just a string"',                                  # 3: not an object
        '{"$rewindTo": 5}',                                 # 4: bad rewind target
        '{"hello": "world"}',                               # 5: unknown record
        json.dumps({"id": "b", "type": "user", "content": "still read"}),
    ]) + "\n")
    items = list(gemini.read(path))
    errs = errors(items)
    assert [e.line for e in errs] == [2, 3, 4, 5]
    assert all(e.path == str(path) for e in errs)
    assert "invalid JSON" in errs[0].message and "$rewindTo" in errs[2].message
    assert [i.text for i in items if isinstance(i, UserTurn)] == ["still read"]


def test_broken_legacy_document_names_the_line(tmp_path):
    path = tmp_path / "session.json"
    path.write_text(LEGACY.read_text()[:400])
    items = list(gemini.read(path))
    assert len(items) == 1 and items[0].path == str(path) and items[0].line and items[0].line > 1


def test_sniff():
    assert gemini.sniff(JSONL.read_bytes()) and gemini.sniff(LEGACY.read_bytes())
    assert gemini.sniff(b'{"$rewindTo": "abc"}\n')
    claude = b'{"type":"user","sessionId":"x","message":{"role":"user","content":"hi"}}\n'
    assert not gemini.sniff(claude)
    assert not gemini.sniff(b'[{"role": "user", "content": "hi"}]')


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.integers(0, 6000), pos=st.integers(0, 6000),
       junk=st.sampled_from([b"", b"\xff\xfe", b"{", b"]]]", b"\n\n{\"id\": 7}\n", b"[" * 3000,
                             b'{"$rewindTo": "g2"}\n', b'{"$set": []}\n']))
@example(cut=10**7, pos=0, junk=b"")
def test_fuzz_never_raises(cut, pos, junk):
    for source, suffix in ((JSONL, ".jsonl"), (LEGACY, ".json")):
        assert_fuzz(gemini, source.read_bytes(), cut, pos, junk, suffix)


@settings(max_examples=150, deadline=None)
@given(k=st.integers(0, 10_000), value=st.sampled_from(JUNK_VALUES))
def test_wrong_types_never_raise(k, value):
    records = [json.loads(line) for line in JSONL.read_text().splitlines()]
    broken = replace_node(records, k, value)
    lines = broken if isinstance(broken, list) else [broken]
    assert_survives(gemini, "".join(json.dumps(r) + "\n" for r in lines).encode(), ".jsonl")
    doc = replace_node(json.loads(LEGACY.read_text()), k, value)
    assert_survives(gemini, json.dumps(doc, indent=1).encode(), ".json")


def test_appended_rewind_reaches_the_ledger(tmp_path):
    """A live session file grows by a $rewindTo line only: the worker re-reads the session (its
    SessionStart carries the last line) and the ledger matches a fresh ingest of the whole file."""
    lines = JSONL.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if '"$rewindTo"' in line)
    live = tmp_path / "session.jsonl"
    live.write_text("".join(lines[:cut]))

    def grow():
        with open(live, "a") as fh:
            fh.write(lines[cut])

    grown = ledger_sessions(tmp_path / "a.sqlite", live, grow)
    fresh = ledger_sessions(tmp_path / "b.sqlite", live)
    assert grown == fresh
    (events,) = fresh.values()
    assert not any(isinstance(e, UserTurn) and "delete the failing test" in e.text for e in events)


def test_a_grown_file_shows_every_changed_session_past_the_old_end(tmp_path):
    assert_growth_shows_past_the_old_end(gemini, JSONL.read_bytes(), tmp_path, ".jsonl")
