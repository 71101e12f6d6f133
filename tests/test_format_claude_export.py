"""Claude markdown exports ("# Claude Session Export"): sections joined into messages, tool_use /
tool_result blocks as calls and answers, the person's turns, the session id as the key."""

from __future__ import annotations

import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loopledger.events import Answers, Batch, Prose, ReadError, SessionStart, UserTurn
from loopledger.formats import claude_export, read, readers, sniff

FIX = Path(__file__).parent / "fixtures" / "formats" / "claude_export" / "staging-deploy-export.md"


def test_session_information_calls_answers_and_turns():
    items = list(claude_export.read(FIX))
    assert not [i for i in items if isinstance(i, ReadError)]
    info = items[0].info
    assert isinstance(items[0], SessionStart) and info.key == "4e2b7a90-1c3d-4f5e-8a6b-7c8d9e0f1a2b"
    assert info.format == "claude-export" and info.meta["project_path"] == "/home/dev/platform/deploy"
    assert info.started_at == "2026-03-09T09:14:02" and info.title == "the staging deploy is stuck, watch it until it finishes"
    batches = [i for i in items if isinstance(i, Batch)]
    assert [[c.name for c in b.calls] for b in batches] == [["Bash"], ["BashOutput"] * 1, ["BashOutput"],
                                                           ["BashOutput"], ["BashOutput"], ["Bash", "Bash"]]
    # text, thinking and tool_use sections of one message are one batch with the text alongside
    assert batches[0].text == "I'll start the deploy watcher in the background and poll it."
    assert batches[-1].text.startswith("Still 1 of 3 pods") and batches[-1].line == 235
    polls = [a for i in items if isinstance(i, Answers) for a in i.answers if a.call_id.startswith("toolu_01Poll")]
    assert len({a.digest for a in polls}) == 1 and len(polls) == 4  # the quiet poll repeats exactly
    errors = [a for i in items if isinstance(i, Answers) for a in i.answers if a.is_error]
    assert [a.call_id for a in errors] == ["toolu_01Evts"]
    turns = [i for i in items if isinstance(i, UserTurn)]
    # a "---" inside a plain-text body stays in it; the interruption marker is not the person
    assert [t.text for t in turns] == ["the staging deploy is stuck, watch it until it finishes\n\n---\n\nit usually takes 5 minutes",
                                       "the image tag is wrong, use the one from the last green build"]
    assert isinstance(items[-1], Prose)


def test_sniffed_by_its_header_only():
    head = FIX.read_bytes()[:65536]
    assert [name for name, mod in readers().items() if mod.sniff(head)] == ["claude-export"]
    assert not claude_export.sniff(b"# Claude Session Exporter\n\nA desktop app that exports sessions.\n")
    assert not claude_export.sniff(b"# Notes\n\n### User\n> today\n\nhello\n")


def test_sniffed_under_any_name(tmp_path):
    copy = tmp_path / "notes.txt"
    shutil.copy(FIX, copy)
    assert sniff(copy) == "claude-export"


def test_broken_json_body_is_kept_as_text_and_bad_bytes_reported(tmp_path):
    path = tmp_path / "x.md"
    path.write_bytes(b"# Claude Session Export\n\n## Session Information\n\n- **Session ID**: `s1`\n\n---\n\n"
                     b"## Conversation\n\n### User\n> 3/9/2026, 9:00:00 AM\n\nfix the caf\xe9 menu\n\n---\n\n"
                     b"### Assistant\n> 3/9/2026, 9:00:01 AM\n\n[\n  {\"type\": \"tool_use\", \"id\": \"t1\"\n\n---\n\n"
                     b"### User\n> 3/9/2026, 9:00:02 AM\n\n[1, 2]\n\n---\n")
    items = list(claude_export.read(path))
    errors = [i for i in items if isinstance(i, ReadError)]
    assert [e.line for e in errors] == [14, 26] and all(e.path == str(path) for e in errors)
    assert "0xe9" in errors[0].message and "list of content blocks" in errors[1].message
    assert next(i for i in items if isinstance(i, SessionStart)).info.key == "s1"
    assert [type(i).__name__ for i in items if not isinstance(i, ReadError)] == ["SessionStart", "UserTurn", "Prose"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_exports_read_cleanly_and_keep_what_came_before(tmp_path_factory, data):
    """Junk, cut-offs and bad bytes past the first poll: never an exception, errors name the file,
    events only inside the session, and the deploy call and first poll before the damage stay."""
    raw = FIX.read_bytes()
    safe = raw.index(b"toolu_01Poll1")  # everything before the second poll is left alone
    at = data.draw(st.integers(safe, len(raw)))
    junk = data.draw(st.sampled_from([b"", b"\xff\xfe", b"\n### User\n", b"\n---\n\n### Assistant\n> x\n\n[\n",
                                      b"[{\"type\": 7}]", b"\n### Nobody\n", b"\x00"]))
    cut = data.draw(st.booleans())
    damaged = raw[:at] + junk + (b"" if cut else raw[at:])
    path = tmp_path_factory.mktemp("export") / "x.md"
    path.write_bytes(damaged)
    items = list(read(path, format="claude-export"))
    started = False
    for item in items:
        if isinstance(item, SessionStart):
            started = True
        elif isinstance(item, ReadError):
            assert item.path == str(path) and item.message and (item.line is None or item.line >= 1)
        else:
            assert started, item
    calls = [c.id for i in items if isinstance(i, Batch) for c in i.calls]
    assert calls[:2] == ["toolu_01Dep", "toolu_01Poll0"]
