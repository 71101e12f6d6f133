"""OpenHands V1 conversation folders: one session per folder, events in index order, parallel
actions of one LLM response as one batch, observations and errors as answers; discovery hands
over base_state.json; damaged event files are errors naming the file, never an exception."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loopledger.events import Answers, Batch, Prose, ReadError, SessionStart, UserTurn
from loopledger.formats import openhands_v1, read, sniff
from loopledger.worker import discover

FIX = Path(__file__).parent / "fixtures" / "formats" / "openhands_v1" / "conversations" / "7f3c2a1b9d8e4f60a5b4c3d2e1f0a9b8"


def test_conversation_folder_is_one_session():
    items = list(read(FIX / "base_state.json"))
    assert not [i for i in items if isinstance(i, ReadError)]
    info = items[0].info
    assert (info.key, info.format, info.model) == ("7f3c2a1b-9d8e-4f60-a5b4-c3d2e1f0a9b8", "openhands-v1",
                                                   "litellm_proxy/claude-sonnet-4-5-20250929")
    assert info.meta == {"execution_status": "finished"}
    batches = [i for i in items if isinstance(i, Batch)]
    assert [[c.id for c in b.calls] for b in batches] == [["toolu_01A"], ["toolu_01B", "toolu_01C"],
                                                         ["toolu_01R0"], ["toolu_01R1"], ["toolu_01R2"]]
    assert batches[1].calls[1].args == {"command": "view", "path": "/workspace/api/app/orders.py", "view_range": [1, 30]}
    assert batches[0].text == "Reproduce first." and batches[0].line == 3  # event index 2
    answers = {a.call_id: a for i in items if isinstance(i, Answers) for a in i.answers}
    assert answers["toolu_01A"].text == "500" and not answers["toolu_01A"].is_error
    assert answers["toolu_01R2"].is_error and answers["toolu_01R0"].digest == answers["toolu_01R2"].digest
    assert [i.text for i in items if isinstance(i, UserTurn)] == ["The /orders endpoint returns 500. Find out why."]
    assert isinstance(items[-1], Prose)


def test_any_file_of_the_folder_reads_the_same_and_discovery_yields_one(tmp_path):
    conv = tmp_path / "convs" / FIX.name
    shutil.copytree(FIX, conv)
    event = sorted((conv / "events").iterdir())[3]
    assert sniff(event) == "openhands-v1" and sniff(conv / "base_state.json") == "openhands-v1"
    assert list(read(event)) == list(read(conv / "base_state.json")) == list(read(conv))
    assert discover([tmp_path / "convs"]) == [conv / "base_state.json"]
    (conv / "base_state.json").unlink()
    first = sorted((conv / "events").iterdir())[0]
    assert discover([tmp_path / "convs"]) == [first]
    items = list(read(first))
    assert items[0].info.key == FIX.name and items[0].info.model is None


def test_user_rejection_and_agent_error_are_error_answers(tmp_path):
    conv = tmp_path / "c1"
    (conv / "events").mkdir(parents=True)
    evs = [{"kind": "MessageEvent", "source": "user", "timestamp": "2026-03-12T16:20:00",
            "llm_message": {"role": "user", "content": [{"type": "text", "text": "delete the temp dir"}]}},
           {"kind": "ActionEvent", "source": "agent", "timestamp": "2026-03-12T16:20:01", "tool_name": "terminal",
            "tool_call_id": "c1", "tool_call": {"name": "terminal", "arguments": "{\"command\": \"rm -rf /tmp/x\"}"},
            "llm_response_id": "r1", "action": {"kind": "TerminalAction", "command": "rm -rf /tmp/x"}},
           {"kind": "UserRejectObservation", "source": "user", "timestamp": "2026-03-12T16:20:02", "tool_name": "terminal",
            "tool_call_id": "c1", "rejection_reason": "not that one"},
           {"kind": "ActionEvent", "source": "agent", "timestamp": "2026-03-12T16:20:03", "tool_name": "terminal",
            "tool_call_id": "c2", "tool_call": {"name": "terminal", "arguments": "{\"command\": "}, "llm_response_id": "r2"},
           {"kind": "AgentErrorEvent", "source": "agent", "timestamp": "2026-03-12T16:20:04", "tool_name": "terminal",
            "tool_call_id": "c2", "error": "Error validating args {\"command\": for tool terminal"}]
    for i, e in enumerate(evs):
        (conv / "events" / f"event-{i:05d}-x{i}.json").write_text(json.dumps(e))
    items = list(read(conv))
    answers = [a for i in items if isinstance(i, Answers) for a in i.answers]
    assert [(a.call_id, a.is_error) for a in answers] == [("c1", True), ("c2", True)]
    bad_args = [c for i in items if isinstance(i, Batch) for c in i.calls][1]
    assert bad_args.args_malformed and bad_args.args == "{\"command\": "


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_event_files_are_errors_naming_the_file(tmp_path_factory, data):
    conv = tmp_path_factory.mktemp("oh") / FIX.name
    shutil.copytree(FIX, conv)
    files = sorted((conv / "events").iterdir())
    victim = data.draw(st.sampled_from(files))
    raw = victim.read_bytes()
    kind = data.draw(st.sampled_from(["truncate", "bad_bytes", "wrong_type", "not_object"]))
    if kind == "truncate":
        victim.write_bytes(raw[: data.draw(st.integers(1, len(raw) - 1))])
    elif kind == "bad_bytes":
        at = data.draw(st.integers(0, len(raw)))
        victim.write_bytes(raw[:at] + b"\xff" + raw[at:])
    elif kind == "not_object":
        victim.write_text(json.dumps(data.draw(st.lists(st.integers(), max_size=3))))
    else:
        ev = json.loads(raw)
        key = data.draw(st.sampled_from(sorted(ev)))
        ev[key] = data.draw(st.none() | st.integers() | st.text(max_size=5) | st.lists(st.integers(), max_size=2))
        victim.write_text(json.dumps(ev))
    items = list(read(conv / "base_state.json"))
    started = False
    for item in items:
        if isinstance(item, SessionStart):
            started = True
        elif isinstance(item, ReadError):
            assert item.path == str(victim) and item.message
        else:
            assert started, item
    errors = [i for i in items if isinstance(i, ReadError)]
    if kind in ("truncate", "bad_bytes", "not_object"):
        assert len(errors) == 1
    # the other events still read: the loop at the end is there whatever was damaged
    assert sum(1 for i in items if isinstance(i, Batch)) >= 4


def test_sniffer_does_not_claim_the_other_openhands_shapes():
    legacy = Path(__file__).parent / "fixtures" / "formats" / "openhands"
    for p in legacy.iterdir():
        assert not openhands_v1.sniff(p.read_bytes()[:65536]), p
