"""Issue 27 on the receiver: spans without ids are refused with a 400 naming the field (points
4), and one span whose result is a hostile web page neither freezes the receiver nor delays
another exporter or /health (point 1). Outcomes only: every request is answered, under a test
timeout that kills a receiver that hangs; no time is compared."""

from __future__ import annotations

import json
import threading
import urllib.request

import pytest
from loopledger import receive, worker
from loopledger.ledger import schema as s
from sqlalchemy import func, select

from bench.gen_hostile import adversarial
from tests import test_receive
from tests.test_receive import WINDOW, _served, calls_of, post, request, tool_span

ledger, manual = test_receive.ledger, test_receive.manual  # its fixtures: a migrated ledger, a receiver


def _spooled_lines(spool) -> int:
    return sum(len(f.read_bytes().splitlines()) for f in spool.iterdir()) if spool.exists() else 0


@pytest.mark.parametrize("drop", ["traceId", "spanId", "both", "zeros"])
def test_point_4_spans_without_ids_get_a_400_naming_the_field_and_nothing_is_stored(manual, ledger, tmp_path, drop):
    url, rec = manual
    spans = [tool_span("noids", i) for i in range(3)]  # three distinct spans
    for sp in spans:
        if drop == "zeros":
            sp["traceId"], sp["spanId"] = "0" * 32, "0" * 16
        else:
            for name in (("traceId", "spanId") if drop == "both" else (drop,)):
                del sp[name]
    status, answer = post(url, request(spans), "application/json")
    assert status == 400, answer
    missing = "spanId" if drop == "spanId" else "traceId"
    assert f"no {missing}" in answer["message"] and "span 0" in answer["message"], answer
    assert _spooled_lines(tmp_path / "spool") == 0
    # The same spans with their ids are taken, all three, and the receiver serves on.
    status, _ = post(url, request([tool_span("noids", i) for i in range(3)]), "application/json")
    assert status == 200
    rec.flush()
    assert calls_of(ledger) == [("noids", f"call_noids_{i}") for i in range(3)]


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=120) as r:
        return r.status


@pytest.mark.timeout(120)
def test_point_1_a_hostile_web_page_as_a_span_result_freezes_neither_the_receiver_nor_its_other_clients(
        manual, ledger):
    """Issue 27: the 200 KB page (`…admin@example.com … https://example.com` + `a-` * 100,000) as
    one span's gen_ai.tool.call.result took the receiver 43 s, /health 42 s and another
    exporter's small span 61 s. Here all three are answered (the test is killed if not), the
    page's span is stored whole and the small span beside it."""
    url, rec = manual
    pages = adversarial(200_000)
    page = pages["web-page"] + "\nsecret: Bearer " + "Zm9vYmFyYmF6cXV4cXV1eA" * 2
    results: dict[str, int] = {}

    def send_page():
        results["page"] = post(url, request([tool_span("web", 0, "WebFetch", '{"url": "https://x"}', page)]),
                               "application/json")[0]

    t = threading.Thread(target=send_page)
    t.start()
    results["health"] = _get(f"{url}/health")
    results["small"] = post(url, request([tool_span("small", 0)]), "application/json")[0]
    t.join()
    for name in ("url-dots", "key-prefixes", "nested-escapes", "aws-quotes"):
        results[name] = post(url, request([tool_span(f"adv-{name}", 0, "WebFetch", "{}", pages[name])]),
                             "application/json")[0]
    assert set(results.values()) == {200}, results
    rec.flush()
    keys = {k for k, _ in calls_of(ledger)}
    assert {"web", "small", "adv-url-dots", "adv-key-prefixes"} <= keys
    with ledger.connect() as conn:
        stored = conn.execute(select(func.max(s.calls.c.answer_len))).scalar()
    assert stored and stored > 1000  # the page was judged and stored (capped), not dropped
    spool = "".join(f.read_text() for f in (rec.spool).iterdir())
    assert "Zm9vYmFyYmF6cXV4cXV1eA" not in spool and "[REDACTED:bearer-token]" in spool
    assert json.loads(urllib.request.urlopen(f"{url}/health", timeout=30).read())["ok"] is True


@pytest.mark.timeout(180)
def test_point_2_a_request_past_the_ack_deadline_is_a_503_with_one_logged_line_and_the_receiver_serves_on(
        ledger, tmp_path, caplog):
    """A 16 MiB body of adversarial results, with a deadline (50 ms) no such body is decoded,
    redacted and fsync'd within: not acknowledged (503, retry), one line logged; a small span
    right after is acknowledged."""
    import logging

    texts = list(adversarial(60_000).values())
    spans, size, i = [], 0, 0
    while size < 13 * 1024 * 1024:  # JSON escaping adds some: the body stays under 16 MiB
        text = texts[i % len(texts)]
        spans.append(tool_span("big", i, "WebFetch", "{}", text))
        size += len(text) + 600
        i += 1
    body = request(spans)
    assert len(body) <= 16 * 1024 * 1024
    rec = receive.Receiver(ledger, tmp_path / "spool", worker.Options(specs=[WINDOW]), flush_interval=None)
    with caplog.at_level(logging.WARNING, logger="loopledger.receive"), \
            _served(rec, max_body=16 * 1024 * 1024, ack_deadline=0.05) as (url, _):
        status, answer = post(url, body, "application/json")
        assert status == 503 and "not acknowledged within" in answer["message"], (status, answer)
        # The receiver serves on: a small span is acknowledged, as an exporter's retries would
        # have it once the big body's decoding (still running, its result dropped) is over.
        statuses = []
        while not statuses or statuses[-1] != 200:
            statuses.append(post(url, request([tool_span("after", 0)]), "application/json")[0])
            assert set(statuses) <= {200, 503} and len(statuses) < 1000, statuses
        assert json.loads(urllib.request.urlopen(f"{url}/health", timeout=60).read())["ok"] is True
    lines = [r.getMessage() for r in caplog.records if "not acknowledged" in r.getMessage()]
    assert f"{len(body)} bytes" in lines[0] and "deadline" in lines[0], lines  # the big one's line
    assert len(lines) == len(statuses), lines  # and one per retry answered 503
