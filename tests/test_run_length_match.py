"""Run-length's `match` parameter: seed 000's substring rule stays the default (a pattern inside a
word makes a mutating tool read-only), `name-parts` matches whole words; Replay and the Session
page say when a tool counted as read-only only through a pattern inside a word."""

from __future__ import annotations

import orjson
import pytest
from app_support import ledger_env, plain_texts
from loopledger.detectors.policy import PolicySpec
from loopledger.detectors.run_length import DEFAULT_OBSERVATION_TOOLS, LoopDetected, LoopDetector, inside_word
from loopledger.events import Answer, Answers, Batch, Call, UserTurn
from loopledger.replay import replay
from replay_support import open_page, pipeline_ledger

INSIDE = {"reply_to_thread": "read", "submit_review": "view", "update_spreadsheet": "read",
          "set_budget_limit": "get_"}


@pytest.mark.parametrize("name,pattern", INSIDE.items())
def test_the_issue_names_match_only_inside_a_word(name, pattern):
    assert inside_word(name, DEFAULT_OBSERVATION_TOOLS) == pattern


@pytest.mark.parametrize("name", ["read_file", "Read", "NotebookRead", "WebSearch", "get_issue", "list_dir",
                                  "mcp__playwright__browser_snapshot", "bash", "write_file"])
def test_whole_words_or_no_match_are_not_flagged(name):
    assert inside_word(name, DEFAULT_OBSERVATION_TOOLS) is None


def _halts_at(match: str | None, name: str, times: int = 6) -> int | None:
    det = LoopDetector()
    kw = {} if match is None else {"match": match}
    for i in range(1, times + 1):
        try:
            det.check([(name, {"id": 1})], 2, DEFAULT_OBSERVATION_TOOLS, 15, **kw)
        except LoopDetected:
            return i
    return None


@pytest.mark.parametrize("name", INSIDE)
def test_substring_stays_the_default_and_name_parts_gives_the_ceiling(name):
    assert PolicySpec("run-length").params["match"] == "substring"
    assert _halts_at(None, name) is None  # seed 000: read-only, 15 allowed, no ceiling
    assert _halts_at("substring", name) is None
    assert _halts_at("name-parts", name) == 3  # mutating: S = 2 allows two, halts the third
    assert _halts_at("name-parts", "read_file") is None  # a real read stays read-only


def test_match_is_validated_and_labelled():
    with pytest.raises(ValueError, match="match must be one of substring, name-parts"):
        PolicySpec.parse("run-length:match=fuzzy")
    assert "match=name-parts" in PolicySpec.parse("run-length:match=name-parts").label
    assert "match" not in PolicySpec("run-length").label  # the default label is unchanged


def _session(name: str, times: int = 4) -> list:
    out = [UserTurn("go", None, 1)]
    for i in range(times):
        c = Call(f"c{i}", name, {"thread": 7})
        out += [Batch((c,), "", None, 2 + 2 * i), Answers((Answer(f"c{i}", "sent", False, None),), 3 + 2 * i)]
    return out


def test_the_replay_state_names_the_pattern_inside_the_word():
    steps = list(replay(_session("reply_to_thread"), PolicySpec("run-length"), with_state=True))
    assert steps[1].state["inside_word"] == {"reply_to_thread": "read"}
    named = list(replay(_session("reply_to_thread"), PolicySpec.parse("run-length:match=name-parts"),
                        with_state=True))
    assert "inside_word" not in named[1].state and named[5].checks[0].verdict == "halt"


@pytest.fixture(scope="module")
def inside_ledger(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inside")
    lines = [{"role": "user", "content": "answer the thread"}]
    for i in range(4):
        lines.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function",
                      "function": {"name": "reply_to_thread", "arguments": '{"thread": 7}'}}]})
        lines.append({"role": "tool", "tool_call_id": f"c{i}", "content": "sent"})
    (folder / "t.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    return pipeline_ledger(folder / "l.sqlite", [folder / "t.jsonl"])


def test_replay_page_says_read_only_through_a_word(inside_ledger):
    with ledger_env(inside_ledger):
        at = open_page("views/replay.py", session="1", run="0", policy="run-length", step="3")
        assert not at.exception, at.exception
        assert any("inside a word" in w.value for w in at.warning)
        assert any("reply_to_thread: 'read' inside it" in p for p in plain_texts(at))


def test_session_page_says_read_only_through_a_word(inside_ledger):
    with ledger_env(inside_ledger):
        at = open_page("views/session.py", session="1", run="0")
        assert not at.exception, at.exception
        assert any("reply_to_thread" in p and "'read' inside a word" in p for p in plain_texts(at))
