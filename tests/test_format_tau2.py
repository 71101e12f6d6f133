"""tau2-bench: results files (one session per simulation, streamed), single simulation files
(half- and full-duplex), the dir format's metadata file, and what bad input gives.

The fixtures in fixtures/formats/tau2/ are written by hand from tau2-bench's data model
(`tau2.data_model.simulation.Results` / `SimulationRun`, `tau2.data_model.message`), not by the
reader."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loopledger.analysis.outcome import from_meta
from loopledger.events import Answers, Batch, Prose, ReadError, SessionStart, UserTurn
from loopledger.formats import read, sniff, tau2

FIX = Path(__file__).parent / "fixtures" / "formats" / "tau2"
RESULTS = FIX / "results-airline.json"
TICKS = FIX / "dir-run" / "simulations" / "5d3a7c1e-0000-4000-8000-00000000000a.json"


def sessions(path: Path) -> dict[str, list]:
    """session key → its items after the SessionStart (SessionStart kept under key + '/start')."""
    out: dict[str, list] = {}
    key = None
    for item in read(path):
        if isinstance(item, SessionStart):
            key = item.info.key
            out[key], out[key + "/start"] = [], [item]
        else:
            assert key is not None and not isinstance(item, ReadError), item
            out[key].append(item)
    return out


def kinds(items) -> list[str]:
    return [type(i).__name__ for i in items]


def test_every_fixture_sniffs_as_tau2_whatever_its_name(tmp_path):
    for path in sorted(FIX.rglob("*.json")):
        assert sniff(path) == "tau2-bench", path
        disguised = tmp_path / "notes.txt"
        disguised.write_bytes(path.read_bytes())
        assert sniff(disguised) == "tau2-bench", path


def test_a_results_file_is_one_session_per_simulation_keyed_by_task_and_trial():
    got = sessions(RESULTS)
    keys = [k for k in got if not k.endswith("/start")]
    # the third and fourth simulations repeat task 7 trial 0: their record index keeps them apart
    assert keys == ["task-7.trial-0", "task-8.trial-1", "task-7.trial-0.record-3", "task-7.trial-0.record-4"]
    start = got["task-7.trial-0/start"][0]
    info = start.info
    assert (info.format, info.agent, info.model) == ("tau2-bench", "tau2-bench", "gpt-4.1-mini")
    assert info.title == "Please cancel reservation EHGLP3. My user id is emma_kim_9957."
    assert info.started_at == "2025-07-29T22:39:51"  # portable(): ISO 8601, no zone invented
    assert info.meta == {"task_id": "7", "trial": 0, "termination_reason": "user_stop", "reward": 1.0,
                         "simulation_id": "1b9c0c8e-0000-4000-8000-000000000001", "domain": "airline"}
    assert start.line == 1 and got["task-8.trial-1/start"][0].line == 2
    assert from_meta(info.meta) == ("success", "reward 1")
    assert from_meta(got["task-8.trial-1/start"][0].info.meta) == ("failure", "reward 0")


def test_messages_read_as_turns_calls_answers_and_prose():
    items = sessions(RESULTS)["task-7.trial-0"]
    assert kinds(items) == ["Prose", "UserTurn", "Batch", "Answers", "Batch", "Answers", "Answers", "Prose",
                            "UserTurn"]
    greet, ask, first, _, second, ok, failed, done, bye = items
    assert greet.text == "Hi! How can I help you today?" and ask.line == 2
    assert first.text == "Let me look that up." and first.calls[0].args == {"reservation_id": "EHGLP3"}
    assert first.usage.model == "gpt-4.1-mini-2025-04-14"  # the response's own model
    assert (first.usage.input_tokens, first.usage.output_tokens) == (2100, 31)
    assert second.usage.model == "gpt-4.1-mini"  # no raw_data: the run's agent model
    assert [(c.id, c.name) for c in second.calls] == [("call_a2", "get_flight_status"),
                                                       ("call_a3", "cancel_reservation")]
    assert [(a.call_id, a.is_error) for a in ok.answers + failed.answers] == [("call_a2", False), ("call_a3", True)]
    assert failed.answers[0].text == "Error: Reservation EHGLP4 not found"
    assert isinstance(done, Prose) and isinstance(bye, UserTurn) and bye.text == "Thanks! ###STOP###"


def test_a_multi_tool_message_answers_each_call_and_system_messages_are_skipped():
    items = sessions(RESULTS)["task-8.trial-1"]
    assert kinds(items) == ["UserTurn", "Batch", "Answers", "UserTurn"]
    answers = items[2].answers
    assert [(a.call_id, a.is_error) for a in answers] == [("call_b1", True), ("call_b2", True)]
    assert items[3].text == "[audio]"  # an audio message's content is audio, never read as text


def test_the_user_simulators_own_tool_calls_are_the_users_turn_not_agent_calls():
    items = sessions(RESULTS)["task-7.trial-0.record-3"]
    assert kinds(items) == ["UserTurn", "Batch", "Answers", "UserTurn", "Batch", "Answers"]
    assert items[3].text == "[toggle_airplane_mode]"  # a user message with no words names its action
    calls = [c.name for i in items if isinstance(i, Batch) for c in i.calls]
    assert calls == ["get_customer_by_phone", "check_status_bar"]  # the user's toggle is not one
    texts = [a.text for i in items if isinstance(i, Answers) for a in i.answers]
    assert "Airplane Mode: OFF" not in texts  # answered to the user


def test_a_trimmed_file_without_requestor_or_error_leaves_failure_to_the_text():
    items = sessions(RESULTS)["task-7.trial-0.record-3"]
    broken = items[4].calls[0]
    assert broken.id is None and broken.args_malformed and broken.args == '{"verbose": true'
    answer = items[5].answers[0]
    # no id: it answers the oldest call still open (the agent's); no `error` field: not flagged
    assert answer.call_id is None and answer.text.startswith("Error:") and not answer.is_error


def test_a_single_half_duplex_simulation_file():
    got = sessions(FIX / "simulation-text.json")
    assert list(got) == ["task-21.trial-2", "task-21.trial-2/start"]
    assert got["task-21.trial-2/start"][0].info.model is None
    items = got["task-21.trial-2"]
    assert kinds(items) == ["Prose", "UserTurn", "Batch", "Answers", "Batch", "Answers"]
    assert all(a.is_error for i in items if isinstance(i, Answers) for a in i.answers)


def test_a_full_duplex_simulation_reads_the_agents_tool_calls_from_its_ticks():
    got = sessions(TICKS)
    items = got["task-40.trial-0"]
    # speech after silence starts a turn (ticks 2 and 7); the agent's speech chunks are not Prose
    assert kinds(items) == ["UserTurn", "Batch", "Answers", "Batch", "Answers", "UserTurn"]
    assert [i.line for i in items] == [2, 4, 4, 5, 6, 7]
    assert items[0].text == "I'd like to return" and items[5].text == "Use my PayPal."
    assert [c.name for i in items if isinstance(i, Batch) for c in i.calls] == [
        "get_order_details", "return_delivered_order_items"]
    assert [(a.call_id, a.is_error) for i in items if isinstance(i, Answers) for a in i.answers] == [
        ("fc_1", False), ("fc_2", True)]  # the user's check_order_status is not the agent's


def test_the_dir_formats_results_json_holds_no_conversation():
    assert list(read(FIX / "dir-run" / "results.json")) == []


def _write(tmp_path: Path, doc) -> Path:
    path = tmp_path / "results.json"
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return path


def _results_doc() -> dict:
    return json.loads(RESULTS.read_text())


def test_bad_records_are_errors_naming_file_simulation_and_message_and_the_rest_is_read(tmp_path):
    doc = _results_doc()
    doc["simulations"][0]["messages"][2]["tool_calls"] = "get_reservation_details"
    doc["simulations"][0]["messages"][4]["role"] = "narrator"
    doc["simulations"][1] = ["not", "a", "simulation"]
    del doc["simulations"][2]["messages"]
    path = _write(tmp_path, doc)
    items = list(read(path))
    errors = [str(i) for i in items if isinstance(i, ReadError)]
    assert errors == [
        f"{path}: simulation 1 (task-7.trial-0), message 3: tool_calls must be a list, got str",
        f"{path}: simulation 1 (task-7.trial-0), message 5: unknown message role 'narrator'",
        f"{path}: simulation 2: expected an object, got list",
        f"{path}: simulation 3 (task-7.trial-0.record-3): no \"messages\" list (nor full-duplex \"ticks\")",
    ]
    keys = [i.info.key for i in items if isinstance(i, SessionStart)]
    assert keys == ["task-7.trial-0", "task-7.trial-0.record-4"]


def test_broken_json_keeps_the_sessions_before_it_and_names_the_line(tmp_path):
    raw = orjson.dumps(_results_doc(), option=orjson.OPT_INDENT_2)
    cut = raw.index(b'"id": "1b9c0c8e-0000-4000-8000-000000000003"') + 20
    path = tmp_path / "results.json"
    path.write_bytes(raw[:cut])
    items = list(read(path))
    assert [i.info.key for i in items if isinstance(i, SessionStart)] == ["task-7.trial-0", "task-8.trial-1"]
    errors = [i for i in items if isinstance(i, ReadError)]
    assert len(errors) == 1 and items[-1] is errors[0]
    assert errors[0].line == raw[:cut].count(b"\n") + 1
    assert errors[0].message.startswith("after simulation 2: invalid JSON")


@pytest.mark.parametrize("raw, message", [
    (b'{"timestamp": "x", "info": {"num_trials": 1, "user_info": {}, "agent_info": {}}, "simulations": [\xff]}',
     "not valid UTF-8"),
    (b"[1, 2, 3]", "expected a tau2-bench results object"),
    (b'{"hello": "world"}', "expected a tau2-bench results object"),
    (b"", "invalid JSON"),
])
def test_files_that_are_not_tau2_give_one_clear_error(tmp_path, raw, message):
    path = tmp_path / "x.json"
    path.write_bytes(raw)
    items = list(read(path, format="tau2-bench"))
    assert len(items) == 1 and isinstance(items[0], ReadError), items
    assert items[0].path == str(path) and message in items[0].message


def _big(tmp_path: Path, n: int) -> Path:
    doc = _results_doc()
    sim = doc["simulations"][0]
    doc["simulations"] = [{**sim, "task_id": str(k)} for k in range(n)]
    folder = tmp_path / f"n{n}"
    folder.mkdir()
    return _write(folder, doc)


def _peak(path: Path) -> tuple[int, int]:
    tracemalloc.start()
    try:
        n = sum(isinstance(i, SessionStart) for i in read(path))
        return tracemalloc.get_traced_memory()[1], n
    finally:
        tracemalloc.stop()


def test_memory_holds_one_simulation_not_the_file(tmp_path):
    small, big = _big(tmp_path, 100), _big(tmp_path, 400)
    assert big.stat().st_size > 3.9 * small.stat().st_size
    peak_small, n_small = _peak(small)
    peak_big, n_big = _peak(big)
    assert (n_small, n_big) == (100, 400)
    # holding the simulations would take ~4x; allocator noise gets generous slack
    assert peak_big < 1.5 * peak_small + 256 * 1024, (peak_small, peak_big)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["id", "task_id", "trial", "messages", "ticks", "role", "content", "tool_calls",
                         "tool_messages", "simulations", "info", "tasks", "name", "arguments", "error",
                         "requestor", "agent_tool_calls", "user_chunk", "x"]), inner, max_size=5),
    max_leaves=16,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=json_values)
def test_any_json_is_read_or_refused_cleanly(tmp_path, value):
    """Events only inside a session; errors name the file; nothing escapes read()."""
    path = tmp_path / "doc.json"
    path.write_bytes(orjson.dumps(value))
    started = False
    for item in read(path, format="tau2-bench"):
        if isinstance(item, SessionStart):
            started = True
        elif isinstance(item, ReadError):
            assert item.path == str(path) and item.message
        else:
            assert started and isinstance(item, UserTurn | Prose | Batch | Answers), item


def test_tau_bench_v1_lists_are_not_claimed():
    openai_chat = Path(__file__).parent / "fixtures" / "formats" / "openai_chat" / "tau-bench-results.json"
    assert not tau2.sniff(openai_chat.read_bytes())
    assert sniff(openai_chat) == "openai-chat"


def test_a_forks_single_simulation_with_run_info_is_tau2(tmp_path):
    """codesque16/tau2-bench saves one simulation per task as {"task_id", "task", "run_info":
    {simulation_id, termination_reason, …}, "reward_info", "messages"} (the shape of
    ../shared/released/corpus_ho5/tau2-bench-sim): tau2 messages, tool_calls [{id, name,
    arguments, requestor}] and tool messages answering by `id` with `error`. The general
    OpenAI-chat reader took it before and read no call."""
    doc = {"task_id": "34", "task": {"id": "34", "user_scenario": {"instructions": {"domain": "retail"}}},
           "run_info": {"simulation_id": "sim-1", "timestamp": "2026-02-22T14:35:44", "duration_sec": 9.5,
                        "termination_reason": "user_stop"},
           "reward_info": {"reward": 0.0},
           "messages": [
               {"role": "assistant", "content": "Hi! How can I help you today?", "tool_calls": None, "turn_idx": 0},
               {"role": "user", "content": "Where is order #789456123?", "tool_calls": None, "turn_idx": 1},
               *[m for i in range(2) for m in (
                   {"role": "assistant", "content": None, "turn_idx": 2 + 2 * i,
                    "tool_calls": [{"id": f"call_{i}", "name": "get_order_details",
                                    "arguments": {"order_id": "#789456123"}, "requestor": "assistant"}]},
                   {"role": "tool", "content": "Error: Order not found", "id": f"call_{i}",
                    "requestor": "assistant", "error": True, "turn_idx": 3 + 2 * i})]]}
    path = tmp_path / "task_34.json"
    path.write_text(json.dumps(doc, indent=2))
    assert sniff(path) == "tau2-bench"
    items = list(read(path))
    assert not [i for i in items if isinstance(i, ReadError)]
    assert [i.info.key for i in items if isinstance(i, SessionStart)] == ["task-34"]
    calls = [c for i in items if isinstance(i, Batch) for c in i.calls]
    assert [(c.id, c.name, c.args) for c in calls] == [
        (f"call_{i}", "get_order_details", {"order_id": "#789456123"}) for i in range(2)]
    answers = [a for i in items if isinstance(i, Answers) for a in i.answers]
    assert [(a.call_id, a.is_error, a.text) for a in answers] == [
        (f"call_{i}", True, "Error: Order not found") for i in range(2)]
