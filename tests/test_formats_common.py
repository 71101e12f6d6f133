"""The helpers every reader shares: streaming JSONL, whole documents, content and arguments."""

from __future__ import annotations

import orjson
import pytest
from loopledger.events import ReadError
from loopledger.formats._common import (
    JSONL,
    content_text,
    first_line,
    head_records,
    iter_jsonl,
    load_json,
    parse_args,
    records_or_document,
    title_of,
)


def test_iter_jsonl_yields_values_and_errors_with_file_and_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a": 1}\n\n   \n{"b": \n[1, 2]\n"x"\n')
    out = list(iter_jsonl(path))
    assert [line for line, _ in out] == [1, 4, 5, 6]
    assert out[0][1] == {"a": 1}
    err = out[1][1]
    assert isinstance(err, ReadError)
    assert err.path == str(path) and err.line == 4
    assert str(err).startswith(f"{path}:4: invalid JSON")
    # orjson's "line 1 column …" would contradict the file line: it is replaced by a character
    assert "line 1" not in err.message and "character" in err.message
    assert err.excerpt.startswith('{"b":')
    assert out[2][1] == [1, 2] and out[3][1] == "x"


def test_iter_jsonl_names_the_bad_byte_of_non_utf8_lines(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a": "ok"}\n{"a": "caf\xe9"}\n{"a": 2}\n')
    out = list(iter_jsonl(path))
    assert out[0][1] == {"a": "ok"} and out[2][1] == {"a": 2}
    err = out[1][1]
    assert isinstance(err, ReadError) and err.line == 2
    assert err.message == "not valid UTF-8: byte 0xe9 at offset 10"


def test_iter_jsonl_skips_an_enormous_line_without_losing_the_next(tmp_path):
    path = tmp_path / "t.jsonl"
    big = b'{"blob": "' + b"x" * 50_000 + b'"}'
    path.write_bytes(b'{"n": 1}\n' + big + b'\n{"n": 3}\n')
    out = list(iter_jsonl(path, max_line_bytes=1000))
    assert [line for line, _ in out] == [1, 2, 3]
    assert out[0][1] == {"n": 1} and out[2][1] == {"n": 3}
    err = out[1][1]
    assert isinstance(err, ReadError)
    assert f"line too long ({len(big) + 1} bytes; the limit is 1000 bytes)" in err.message
    assert len(err.excerpt) <= 201


def test_iter_jsonl_enormous_last_line_without_newline(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"n": 1}\n' + b"y" * 5000)
    out = list(iter_jsonl(path, max_line_bytes=100))
    assert len(out) == 2 and isinstance(out[1][1], ReadError) and "5000 bytes" in out[1][1].message


def test_iter_jsonl_deep_nesting_is_a_clear_error(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"[" * 3000 + b"]" * 3000 + b"\n" + b'{"ok": true}\n')
    out = list(iter_jsonl(path))
    assert isinstance(out[0][1], ReadError)
    assert out[0][1].message == "JSON nested too deeply (more than 1024 levels)"
    assert out[1][1] == {"ok": True}


def test_iter_jsonl_strips_a_utf8_bom(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\n')
    assert list(iter_jsonl(path)) == [(1, {"a": 1})]


def test_load_json_reports_the_failing_line(tmp_path):
    path = tmp_path / "doc.json"
    path.write_text('[\n  {"role": "user"},\n  {"role": \n]\n')
    err = load_json(path)
    assert isinstance(err, ReadError) and err.line == 4 and err.message.startswith("invalid JSON")
    good = tmp_path / "good.json"
    good.write_text('{"messages": []}')
    assert load_json(good) == {"messages": []}


def test_load_json_non_utf8_and_size_limit(tmp_path):
    path = tmp_path / "doc.json"
    path.write_bytes(b'[\n"a",\n"\xff"\n]')
    err = load_json(path)
    assert isinstance(err, ReadError) and err.line == 3 and "byte 0xff" in err.message
    big = tmp_path / "big.json"
    big.write_text("[" + "1," * 100 + "1]")
    err = load_json(big, max_bytes=50)
    assert isinstance(err, ReadError) and "too large" in err.message
    missing = load_json(tmp_path / "nope.json")
    assert isinstance(missing, ReadError) and "cannot read file" in missing.message


@pytest.mark.parametrize("content, expected", [
    (None, ""),
    ("plain", "plain"),
    ([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "a\nb"),
    ([{"type": "image", "source": {}}], "[image]"),
    ([{"type": "input_text", "text": "hi"}, "raw"], "hi\nraw"),
    ({"type": "text", "text": "one block"}, "one block"),
    ([{"type": "tool_result", "content": [{"type": "text", "text": "inner"}]}], "inner"),
    (42, "42"),
])
def test_content_text(content, expected):
    assert content_text(content) == expected


def test_parse_args_keeps_malformed_raw_and_flags_it():
    assert parse_args('{"path": "a.py"}') == ({"path": "a.py"}, False)
    assert parse_args('{"path": "a.py"') == ('{"path": "a.py"', True)
    assert parse_args(None) == (None, False)
    assert parse_args("  ") == (None, False)
    assert parse_args({"already": "parsed"}) == ({"already": "parsed"}, False)
    deep = "[" * 2000 + "]" * 2000
    assert parse_args(deep) == (deep, True)


def test_head_records_ignores_a_truncated_last_line():
    head = orjson.dumps({"a": 1}) + b"\nnot json\n" + orjson.dumps({"b": 2}) + b'\n{"c": '
    assert head_records(head) == [{"a": 1}, {"b": 2}]
    assert head_records(b"") == []


def test_first_line_tells_jsonl_from_a_pretty_document(tmp_path):
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_text('\n{"role": "user"}\n{"role": "assistant"}\n')
    assert first_line(jsonl) == {"role": "user"}
    doc = tmp_path / "a.json"
    doc.write_text('[\n {"role": "user"}\n]\n')
    assert first_line(doc) is None


def test_title_of():
    assert title_of("\n  Fix the build  \nmore") == "Fix the build"
    assert title_of("<pr_description>\nConsider this") == "Consider this"
    assert title_of("x" * 300, limit=10) == "x" * 9 + "…"
    assert title_of("") == ""


def test_records_or_document(tmp_path):
    def is_msg(v):
        return isinstance(v, dict) and "role" in v

    jsonl = tmp_path / "a.jsonl"
    jsonl.write_text('{"role": "user"}\n{"role": "assistant"}\n')
    assert records_or_document(jsonl, is_msg) is JSONL
    pretty = tmp_path / "pretty.json"
    # the last element sits alone on a line and parses: the bare "[" still says "document"
    pretty.write_text('[\n{"role": "user"},\n{"role": "assistant"}\n]\n')
    assert records_or_document(pretty, is_msg) == [{"role": "user"}, {"role": "assistant"}]
    one_line = tmp_path / "one.json"
    one_line.write_text('{"messages": [{"role": "user"}]}')
    assert records_or_document(one_line, is_msg) == {"messages": [{"role": "user"}]}
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text('{"ro\n{"role": "user"}\n')  # a broken first line: still JSONL
    assert records_or_document(damaged, is_msg) is JSONL
    broken_doc = tmp_path / "broken.json"
    broken_doc.write_text('[\n{"role": "user"},\n')
    err = records_or_document(broken_doc, is_msg)
    assert isinstance(err, ReadError) and err.line == 3


def test_records_or_document_probes_a_conversation_line_over_a_megabyte(tmp_path):
    """One conversation per line, a line of 2 MB (a long session): JSONL, not one broken document."""
    def is_conv(v):
        return isinstance(v, dict) and isinstance(v.get("messages"), list)

    long_line = orjson.dumps({"messages": [{"role": "tool", "content": "x" * 2_000_000}]})
    assert len(long_line) > 2_000_000
    p = tmp_path / "conversations.jsonl"
    p.write_bytes(long_line + b"\n" + orjson.dumps({"messages": []}) + b"\n")
    assert records_or_document(p, is_conv) is JSONL


def test_a_line_longer_than_the_probe_is_read_as_one_document(tmp_path, monkeypatch):
    """A one-line document past the probe's line limit is not probed piece by piece: it is the
    document (parsed whole), as a line of records would not be."""
    from loopledger.formats import _common

    monkeypatch.setattr(_common, "_PROBE_LINE_BYTES", 100)
    doc = [{"role": "user", "content": "y" * 300}]
    p = tmp_path / "one_line.json"
    p.write_bytes(orjson.dumps(doc))
    assert records_or_document(p, lambda v: isinstance(v, dict) and "role" in v) == doc
