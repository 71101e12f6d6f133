"""The sniffers' shortcuts decide as the plain readings they replace, on every real file here
and on cut, BOM-led and blank-line heads of them: JSONL records parsed only as far as a sniffer
looks (claude_code, codex), and Gemini's multi-line log-record search skipped when no "$" can
start one."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from loopledger.formats import SNIFF_BYTES, claude_code, codex, gemini
from loopledger.formats._common import head_records, head_text, iter_head_records

ROOT = Path(__file__).parent.parent
_BOM = b"\xef\xbb\xbf"


def _real_heads() -> list[bytes]:
    files = [p for base in ("tests/fixtures", "sample_data") for p in sorted((ROOT / base).rglob("*"))
             if p.is_file() and p.suffix in (".jsonl", ".json", ".md", ".txt", ".yaml", ".traj", "")]
    heads = []
    for p in files:
        with open(p, "rb") as fh:
            heads.append(fh.read(SNIFF_BYTES))
    return heads


HEADS = _real_heads()


def _variants(head: bytes) -> list[bytes]:
    """The head, cut mid-line and after its first lines, BOM-led, with blank lines between."""
    first_lines = b"\n".join(head.split(b"\n")[:3])
    return [head, head[: len(head) // 2], head[:200], first_lines, _BOM + head, b"\n\n  \n" + head,
            head.replace(b"\n", b"\n\n", 4), b""]


def _old_head_records(head: bytes, limit: int) -> list:
    if head.startswith(_BOM):
        head = head[len(_BOM):]
    out: list = []
    for line in head.split(b"\n"):
        if not line.strip():
            continue
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue
        if len(out) >= limit:
            break
    return out


def _old_claude_code(head: bytes) -> bool:
    recs = _old_head_records(head, 32)
    evidence = False
    for rec in recs:
        if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
            return False
        kind = rec["type"]
        if kind in ("user", "assistant"):
            return isinstance(rec.get("message"), dict) and any(
                k in rec for k in ("sessionId", "parentUuid", "isSidechain"))
        if kind in claude_code.LINE_TYPES or "sessionId" in rec:
            evidence = evidence or any(k in rec for k in claude_code._METADATA_EVIDENCE)
    if evidence:
        return True
    return not recs and head.lstrip().startswith(b"{") and all(
        k in head for k in (b'"parentUuid"', b'"sessionId"', b'"isSidechain"'))


def _old_codex(head: bytes) -> bool:
    recs = _old_head_records(head, 3)
    if not recs:
        return bool(codex._META_HEAD.match(head.lstrip()))
    if not isinstance(recs[0], dict):
        return False
    first = recs[0]
    if first.get("type") in codex._ENVELOPES and "payload" in first:
        return True
    return ("id" in first and "timestamp" in first and "type" not in first and "role" not in first
            and ("instructions" in first or "git" in first))


def _old_gemini(head: bytes) -> bool:
    text = head_text(head)
    if not text.startswith("{"):
        return False
    return bool(gemini._SESSION.search(text) and gemini._PROJECT.search(text)) or bool(
        gemini._LOG_RECORD.search(text))


def test_there_are_real_files_of_each_shortcut_format():
    assert len(HEADS) > 50
    assert any(claude_code.sniff(h) for h in HEADS)
    assert any(codex.sniff(h) for h in HEADS)
    assert any(gemini.sniff(h) and gemini._LOG_RECORD.search(head_text(h)) for h in HEADS)


@pytest.mark.parametrize("limit", [1, 3, 8, 32])
def test_head_records_as_before(limit):
    for head in HEADS:
        for h in _variants(head):
            assert head_records(h, limit) == _old_head_records(h, limit)
            assert list(iter_head_records(h))[:limit] == _old_head_records(h, limit)


def test_sniffers_decide_as_before_on_real_files():
    for head in HEADS:
        for h in _variants(head):
            assert claude_code.sniff(h) == _old_claude_code(h)
            assert codex.sniff(h) == _old_codex(h)
            assert gemini.sniff(h) == _old_gemini(h)


def test_gemini_log_record_without_session_keys():
    # Only the "$" line makes it Gemini's: the shortcut must not skip it.
    head = b'{"$set": {"sessionId": "x"}}\n{"type": "user"}\n'
    assert gemini.sniff(head) and _old_gemini(head)
    assert not gemini.sniff(b'{"a": "$ set"}\n{"$sets": 1}\n')
    assert re.search(r"\$", head_text(head))
