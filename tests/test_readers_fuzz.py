"""Fuzzing the readers: broken files give ReadErrors or skipped records — never an exception
escaping read(), and never a silently dropped broken line.

Realistic fixtures are damaged line by line (truncated, non-UTF-8 bytes, enormous, nested past
orjson's 1024 levels, or a value swapped for one of the wrong type) or whole (JSON documents).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import loopledger.formats._common as common
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loopledger.events import Answers, Batch, Prose, ReadError, Retry, SessionStart, UserTurn
from loopledger.formats import read

FIX = Path(__file__).parent / "fixtures" / "formats"
JSONL = {
    "claude-code": ["claude_code/session.jsonl", "claude_code/agent-a7f3c21.jsonl"],
    "codex": ["codex/rollout-2025-12-02T09-00-00-019ad001-aaaa-7bbb-8ccc-123456789abc.jsonl",
              "codex/rollout-legacy.jsonl"],
    "openai-chat": ["openai_chat/support.jsonl"],
    "openai-responses": ["openai_responses/weather.jsonl"],
    "anthropic": ["anthropic/messages.jsonl"],
}
DOCS = {
    "openai-chat": ["openai_chat/support.json", "openai_chat/acme__pages-42.traj.json",
                    "openai_chat/tau-bench-results.json"],
    "openai-responses": ["openai_responses/weather.json"],
    "anthropic": ["anthropic/request.json"],
    # a single simulation (read whole); a results file streams: tests/test_format_tau2.py
    "tau2-bench": ["tau2/simulation-text.json"],
    "cline": ["cline/saoudrizwan.claude-dev/tasks/1772614800000/api_conversation_history.json",
              "cline/kilocode.kilo-code/tasks/1772800000000/ui_messages.json"],
}
LIMIT = 4096  # the line limit while fuzzing, so "enormous" stays cheap to write
BREAKING = ("truncate", "bad_bytes", "enormous", "too_deep")
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@contextmanager
def line_limit(n: int):
    saved = common.MAX_LINE_BYTES
    common.MAX_LINE_BYTES = n
    try:
        yield
    finally:
        common.MAX_LINE_BYTES = saved


DEEP = "\x00deep\x00"  # stands for a deep value in _swap; spliced in as bytes by _damage


def _nested(depth: int) -> bytes:
    """Legal JSON nested `depth` levels (orjson.dumps itself stops at 255)."""
    return b'{"k": [' * depth + b'"bottom"' + b"]}" * depth


def _swap(draw, value):
    """`value` with one randomly chosen sub-value replaced by a value of any type."""
    if isinstance(value, dict | list) and value and draw(st.booleans()):
        if isinstance(value, dict):
            key = draw(st.sampled_from(sorted(value)))
            return {**value, key: _swap(draw, value[key])}
        i = draw(st.integers(0, len(value) - 1))
        return [*value[:i], _swap(draw, value[i]), *value[i + 1:]]
    if draw(st.integers(0, 9)) == 0:
        return DEEP
    return draw(json_values)


def _check_stream(items: list, path: Path) -> list[ReadError]:
    """The contract every reader keeps: events only inside a session, errors name the file."""
    started = False
    errors = []
    for item in items:
        if isinstance(item, SessionStart):
            started = True
        elif isinstance(item, ReadError):
            assert item.path == str(path) and item.message
            assert item.line is None or item.line >= 1
            errors.append(item)
        else:
            assert isinstance(item, UserTurn | Prose | Batch | Answers | Retry), item
            assert started, f"{type(item).__name__} before any SessionStart"
    return errors


def _damage(draw, raw: bytes, kind: str) -> bytes:
    if kind == "truncate":
        return raw[: draw(st.integers(1, len(raw) - 1))]
    if kind == "bad_bytes":
        at = draw(st.integers(0, len(raw)))
        return raw[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"])) + raw[at:]
    if kind == "enormous":
        return b'{"type": "user", "blob": "' + b"A" * (LIMIT * draw(st.integers(1, 4))) + b'"}'
    if kind == "too_deep":
        n = draw(st.integers(1025, 5000))
        return b"[" * n + b"]" * n
    out = orjson.dumps(_swap(draw, orjson.loads(raw)))
    return out.replace(orjson.dumps(DEEP), _nested(draw(st.integers(100, 500))))


@SETTINGS
@given(data=st.data())
def test_damaged_jsonl_lines(tmp_path_factory, data):
    fmt = data.draw(st.sampled_from(sorted(JSONL)))
    source = FIX / data.draw(st.sampled_from(JSONL[fmt]))
    lines = source.read_bytes().splitlines()
    damaged: dict[int, str] = {}
    candidates = [n for n, line in enumerate(lines) if len(line) > 2]
    picks = data.draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=3, unique=True))
    for i in picks:
        kind = data.draw(st.sampled_from((*BREAKING, "wrong_type", "wrong_type")))
        lines[i] = _damage(data.draw, lines[i], kind)
        damaged[i + 1] = kind
    path = tmp_path_factory.mktemp("fuzz") / source.name
    path.write_bytes(b"\n".join(lines) + b"\n")
    with line_limit(LIMIT):
        items = list(read(path, format=fmt))
    errors = _check_stream(items, path)
    # A line that is not JSON is reported, at its own line: never silently dropped.
    reported = {e.line for e in errors}
    for line, kind in damaged.items():
        if kind in BREAKING:
            assert line in reported, f"{kind} line {line} of {source.name} dropped silently"


@SETTINGS
@given(data=st.data())
def test_damaged_json_documents(tmp_path_factory, data):
    fmt = data.draw(st.sampled_from(sorted(DOCS)))
    source = FIX / data.draw(st.sampled_from(DOCS[fmt]))
    raw = orjson.dumps(orjson.loads(source.read_bytes()), option=orjson.OPT_INDENT_2)
    kind = data.draw(st.sampled_from(("truncate", "bad_bytes", "wrong_type", "wrong_type")))
    broken = _damage(data.draw, raw, kind)
    path = tmp_path_factory.mktemp("fuzz") / source.name
    path.write_bytes(broken)
    items = list(read(path, format=fmt))
    errors = _check_stream(items, path)
    if kind in BREAKING:
        try:
            orjson.loads(broken)
        except orjson.JSONDecodeError:
            assert len(items) == 1 and len(errors) == 1, "a broken document is one clear error"
            assert errors[0].line is not None


@SETTINGS
@given(value=json_values)
def test_any_json_document_is_read_or_refused_cleanly(tmp_path_factory, value):
    path = tmp_path_factory.mktemp("fuzz") / "doc.json"
    path.write_bytes(orjson.dumps(value))
    for fmt in DOCS:
        _check_stream(list(read(path, format=fmt)), path)
    path.write_bytes(orjson.dumps(value) + b"\n" + orjson.dumps(value) + b"\n")
    for fmt in JSONL:
        _check_stream(list(read(path, format=fmt)), path)


def test_deeply_nested_line_message(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_bytes(b'{"role": "user", "content": "hi"}\n' + b"[" * 2000 + b"]" * 2000 + b"\n")
    errors = [i for i in read(path, format="openai-chat") if isinstance(i, ReadError)]
    assert len(errors) == 1 and errors[0].line == 2
    assert errors[0].message == "JSON nested too deeply (more than 1024 levels)"


def _all_fixtures() -> list[tuple[str, str]]:
    return sorted({(fmt, rel) for table in (JSONL, DOCS) for fmt, rels in table.items() for rel in rels})


def test_undamaged_fixtures_yield_sessions_calls_and_answers():
    """What the fuzz tests damage reads as sessions, calls and answers when intact: a reader that
    yields nothing (and so never raises) fails here."""
    for fmt, rel in _all_fixtures():
        items = list(read(FIX / rel, format=fmt))
        assert not [i for i in items if isinstance(i, ReadError)], rel
        kinds = {type(i) for i in items}
        assert {SessionStart, Batch, Answers} <= kinds, (rel, kinds)
