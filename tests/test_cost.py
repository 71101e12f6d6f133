"""What loops cost: token usage kept from real Claude Code transcripts, priced by genai-prices,
spend after a halt, `loopledger cost`, and the Sessions / Session pages showing it.

Expected values never come from LoopLedger's readers or pricing: token totals are summed here
with plain json parsing, prices asked of genai_prices directly, spend after a halt summed from
the hand-written fixture's own numbers.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import genai_prices
import pytest
import sqlalchemy as sa
from app_support import app, ledger_env, metrics
from loopledger.ledger.engine import make_engine

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "claude-code-jsonl"
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/corpus/claude-code-jsonl")
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"{CORPUS} is absent")


def _ingest(folder: Path, db: Path) -> str:
    url = f"sqlite:///{db}"
    subprocess.run([sys.executable, "-m", "loopledger", "ingest", str(folder), "--db", url], check=True,
                   capture_output=True, text=True, timeout=300)
    return url


def _messages(path: Path) -> dict[str, dict]:
    """Each assistant message of a Claude Code file ONCE (by message.id), with its usage (last
    line), model and timestamp (first line), read with plain json: the independent side."""
    out: dict[str, dict] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(raw)
        msg = rec.get("message") if rec.get("type") == "assistant" else None
        if not isinstance(msg, dict) or not msg.get("usage") or msg.get("model") == "<synthetic>" or rec.get("isMeta"):
            continue
        m = out.setdefault(msg["id"], {"model": msg["model"], "ts": rec["timestamp"], "lines": 0})
        # The last line's usage: Claude Code repeats it on every line, and newer versions write
        # the final output count only on the message's last line (earlier ones carry the count
        # at the start of streaming).
        m["usage"] = msg["usage"]
        m["lines"] += 1
    return out


def _input(u: dict) -> int:
    return u["input_tokens"] + u.get("cache_creation_input_tokens", 0) + u.get("cache_read_input_tokens", 0)


@pytest.fixture(scope="module")
def corpus_ledger(tmp_path_factory):
    if not CORPUS.is_dir():
        pytest.skip(f"{CORPUS} is absent")
    return _ingest(CORPUS, tmp_path_factory.mktemp("cost") / "corpus.sqlite")


def _rows(url: str, sql: str, **params):
    eng = make_engine(url, readonly=True)
    try:
        with eng.connect() as conn:
            return conn.execute(sa.text(sql), params).all()
    finally:
        eng.dispose()


@needs_corpus
def test_claude_code_repeats_a_messages_usage_on_every_content_block_line():
    # Why the ledger must count a message once: the same usage is written on each of its lines.
    msgs = {k: v for f in CORPUS.glob("*.jsonl") for k, v in _messages(f).items()}
    assert any(m["lines"] > 1 for m in msgs.values())


@needs_corpus
def test_ledger_token_totals_match_the_transcripts_summed_once_per_message(corpus_ledger):
    for path in sorted(CORPUS.glob("*.jsonl")):
        msgs = _messages(path)
        want_in = sum(_input(m["usage"]) for m in msgs.values())
        want_out = sum(m["usage"]["output_tokens"] for m in msgs.values())
        want_read = sum(m["usage"].get("cache_read_input_tokens", 0) for m in msgs.values())
        want_write = sum(m["usage"].get("cache_creation_input_tokens", 0) for m in msgs.values())
        naive_out = sum(m["usage"]["output_tokens"] * m["lines"] for m in msgs.values())
        (got,) = _rows(corpus_ledger, "SELECT count(*), sum(u.input_tokens), sum(u.output_tokens), "
                       "sum(u.cache_read_tokens), sum(u.cache_write_tokens) FROM turn_usage u "
                       "JOIN sessions s ON s.id = u.session_id JOIN sources src ON src.id = s.source_id "
                       "WHERE src.path LIKE :p", p="%/" + path.name)  # however the folder was reached
        assert tuple(got) == (len(msgs), want_in, want_out, want_read, want_write), path.name
        if any(m["lines"] > 1 for m in msgs.values()):
            assert naive_out > want_out  # summing every line would have counted them again


@needs_corpus
def test_priced_total_matches_genai_prices_called_directly(corpus_ledger):
    want = 0.0
    for path in CORPUS.glob("*.jsonl"):
        for m in _messages(path).values():
            u = m["usage"]
            hour = (u.get("cache_creation") or {}).get("ephemeral_1h_input_tokens") or None
            usage = genai_prices.Usage(input_tokens=_input(u), output_tokens=u["output_tokens"],
                                       cache_read_tokens=u.get("cache_read_input_tokens") or None,
                                       cache_write_tokens=u.get("cache_creation_input_tokens") or None,
                                       cache_write_1h_tokens=hour)
            when = dt.datetime.fromisoformat(m["ts"][:10]).replace(hour=12, tzinfo=dt.UTC)
            want += float(genai_prices.calc_price(usage, m["model"], provider_id="anthropic",
                                                  genai_request_timestamp=when).total_price)
    ((got, unpriced, versions),) = _rows(corpus_ledger, "SELECT sum(usd), sum(usd IS NULL), "
                                         "group_concat(DISTINCT priced_with) FROM turn_usage")
    assert unpriced == 0
    assert got == pytest.approx(want, rel=1e-9)
    assert versions == f"genai-prices {genai_prices.__version__}"


# ── a hand-written session: a loop whose spend after the halt is known ────────────────────────
# Claude Code's session JSONL shape (one `assistant` line per content block, sharing message.id
# and repeating message.usage; `user` lines carry tool_result blocks), as
# ingest/formats/claude_code.py documents it and the corpus files above show.

SESSION = "0b4c1f9e-1111-4222-8333-944445555666"


def _line(kind: str, n: int, message: dict, ts: str) -> str:
    return json.dumps({"type": kind, "sessionId": SESSION, "uuid": f"u{kind}{n}", "parentUuid": None,
                       "isSidechain": False, "timestamp": ts, "message": message})


def _fixture(path: Path, model: str, turns: int = 8) -> list[dict]:
    """`turns` messages each running the same Bash command (a loop), with known usage; returns
    each message's usage in order."""
    lines, usages = [_line("user", 0, {"role": "user", "content": "fix the build"}, "2026-01-05T10:00:00.000Z")], []
    for i in range(turns):
        u = {"input_tokens": 10 + i, "cache_creation_input_tokens": 100 * i, "cache_read_input_tokens": 1000 + i,
             "output_tokens": 20 + i}
        usages.append(u)
        ts = f"2026-01-05T10:{i + 1:02d}:00.000Z"
        msg = {"id": f"msg_{i}", "role": "assistant", "model": model, "usage": u}
        lines.append(_line("assistant", i, msg | {"content": [{"type": "text", "text": "trying again"}]}, ts))
        lines.append(_line("assistant", 100 + i, msg | {"content": [
            {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": "make"}}]}, ts))
        lines.append(_line("user", i + 1, {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "error: missing header", "is_error": True}]},
            ts))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return usages


@pytest.fixture(scope="module")
def loop_ledger(tmp_path_factory):
    root = tmp_path_factory.mktemp("loop")
    (root / "logs").mkdir()
    usages = _fixture(root / "logs" / f"{SESSION}.jsonl", "claude-sonnet-4-5-20250929")
    return _ingest(root / "logs", root / "ledger.sqlite"), usages


def test_spend_after_a_halt_is_the_turns_after_the_halting_batch(loop_ledger):
    from loopledger.ledger import read_cost

    url, usages = loop_ledger
    halts = _rows(url, "SELECT o.policy_id, o.halt_seq, o.saved FROM run_outcomes o WHERE o.outcome = 'halted'")
    assert halts, "the repeated failing command must halt some default policy"
    seqs = [s for (s,) in _rows(url, "SELECT seq FROM events WHERE kind = 'batch' ORDER BY seq")]
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        saved = read_cost.saved_by_policy(conn).set_index("policy_id")
    eng.dispose()
    assert any(calls for _, _, calls in halts), "some halt must leave turns after it"
    for pid, halt_seq, calls_saved in halts:
        after = [usages[i] for i, seq in enumerate(seqs) if seq > halt_seq]
        assert len(after) == calls_saved  # one call per message here
        assert saved.loc[pid, "tokens_saved"] == sum(_input(u) + u["output_tokens"] for u in after)
        assert saved.loc[pid, "turns_saved"] == len(after)
        # 1 minute between messages: wall time from the halting batch to the run's last line.
        assert saved.loc[pid, "loop_seconds"] == pytest.approx(60.0 * len(after))


def test_cost_command_prints_spend_and_what_each_halt_saved(loop_ledger):
    url, usages = loop_ledger
    out = subprocess.run([sys.executable, "-m", "loopledger", "cost", "--db", url], check=True,
                         capture_output=True, text=True).stdout
    tokens = sum(_input(u) + u["output_tokens"] for u in usages)
    assert f"over {len(usages)} model turn(s) in 1 session(s)" in out
    assert f"tokens: {tokens:,}" in out
    assert f"prices: genai-prices {genai_prices.__version__}" in out
    assert "$ saved" in out and "time in loops" in out


def test_unpriced_model_is_unknown_never_zero(tmp_path):
    (tmp_path / "logs").mkdir()
    _fixture(tmp_path / "logs" / f"{SESSION}.jsonl", "claude-imaginary-9", turns=3)
    url = _ingest(tmp_path / "logs", tmp_path / "ledger.sqlite")
    rows = _rows(url, "SELECT usd, priced_with, price_note FROM turn_usage")
    assert len(rows) == 3 and all(usd is None and pw is None and "claude-imaginary-9" in note
                                  for usd, pw, note in rows)
    out = subprocess.run([sys.executable, "-m", "loopledger", "cost", "--db", url], check=True,
                         capture_output=True, text=True).stdout
    assert "spend: unknown over 3 model turn(s)" in out and "$0.00 over" not in out
    assert "unpriced: 3 turn(s)" in out
    with ledger_env(url):
        at = app("views/session.py", session="1")
        assert not at.exception
        assert metrics(at)["Spend"] == "unknown"
        at = app()
        assert not at.exception
        assert metrics(at)["Spend"] == "unknown"


@needs_corpus
def test_sessions_and_session_pages_show_the_spend(corpus_ledger):
    from loopledger.analysis.pricing import usd_text

    ((total,),) = _rows(corpus_ledger, "SELECT sum(usd) FROM turn_usage")
    ((sid, s_usd, s_tokens, s_turns),) = _rows(
        corpus_ledger, "SELECT session_id, sum(usd), sum(input_tokens + output_tokens), count(*) FROM turn_usage "
        "GROUP BY session_id ORDER BY count(*) DESC LIMIT 1")
    with ledger_env(corpus_ledger):
        at = app()
        assert not at.exception
        m = metrics(at)
        assert m["Spend"] == usd_text(total) and m["Spend"].startswith("$")
        assert m["Sessions without usage"] == "0"
        at = app("views/session.py", session=str(sid))
        assert not at.exception
        m = metrics(at)
        assert m["Spend"] == usd_text(s_usd)
        assert m["Tokens"] == f"{s_tokens:,}"
        assert m["Model turns"] == str(s_turns)


# ── other readers keep usage where their transcripts carry it ─────────────────────────────────


def test_otlp_chat_span_usage_rides_on_the_tool_call_it_asked_for(tmp_path):
    # GenAI semantic conventions (gen_ai.usage.input_tokens / output_tokens, gen_ai.response.model);
    # spans built with the OTLP JSON helpers of tests/test_format_otlp.py.
    from loopledger.events import Batch
    from loopledger.formats import read
    from test_format_otlp import T1, agent, kv, request, span, tool

    chat = span(T1, "c000000000000001", "chat gpt-4o", 1, "a000000000000001",
                [("gen_ai.operation.name", "chat"), ("gen_ai.request.model", "gpt-4o"),
                 ("gen_ai.response.model", "gpt-4o-2024-08-06"), ("gen_ai.provider.name", "openai"),
                 ("gen_ai.usage.input_tokens", 1200), ("gen_ai.usage.output_tokens", 35),
                 ("gen_ai.usage.cache_read.input_tokens", 1024)])
    assert kv("x", 1)["value"] == {"intValue": "1"}  # int64 as OTLP JSON writes it
    doc = request(agent(T1, 0, "conv-1"), chat, tool(T1, "b000000000000001", 2, "lookup", {"q": 1}, "ok"))
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(doc))
    (batch,) = [it for it in read(path) if isinstance(it, Batch)]
    u = batch.usage
    assert (u.model, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.provider) == (
        "gpt-4o-2024-08-06", 1200, 35, 1024, "openai")


def test_gemini_cli_message_tokens_become_usage(tmp_path):
    # gemini-cli ChatRecordingService: a `gemini` message's tokens {input, output, cached,
    # thoughts, tool, total} and model; thinking tokens are billed as output.
    from loopledger.events import Batch, Prose
    from loopledger.formats import read

    doc = {"sessionId": "s-1", "projectHash": "p", "startTime": "2026-01-05T10:00:00.000Z", "messages": [
        {"id": "m1", "timestamp": "2026-01-05T10:00:00.000Z", "type": "user", "content": "hi"},
        {"id": "m2", "timestamp": "2026-01-05T10:00:05.000Z", "type": "gemini", "content": "hello there",
         "model": "gemini-2.5-pro", "tokens": {"input": 900, "output": 40, "cached": 512, "thoughts": 60,
                                               "tool": 0, "total": 1000}}]}
    path = tmp_path / "session-2026-01-05T10-00-s1.json"
    path.write_text(json.dumps(doc))
    (prose,) = [it for it in read(path) if isinstance(it, Prose | Batch)]
    u = prose.usage
    assert (u.model, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.provider) == (
        "gemini-2.5-pro", 900, 100, 512, "google")


def _tokens_of_last(usages: list[dict], n: int) -> int:
    """Tokens of the fixture's last n messages: one call each, so n calls saved = these turns."""
    return sum(_input(u) + u["output_tokens"] for u in usages[len(usages) - n:]) if n else 0


def test_compare_shows_tokens_and_dollars_saved_beside_calls_saved(loop_ledger):
    url, usages = loop_ledger
    with ledger_env(url):
        at = app("views/compare.py")
        at.button(key="cp_run").click().run()
        assert not at.exception, at.exception
        table = next(d.value for d in at.dataframe if "$ saved" in d.value.columns)
        assert len(table) and list(table.columns).index("$ saved") == list(table.columns).index("tokens saved") + 1
        for row in table.itertuples(index=False):
            saved = int(row.saved)
            assert row[list(table.columns).index("tokens saved")] == f"{_tokens_of_last(usages, saved):,}"
            assert row[list(table.columns).index("$ saved")].startswith("$")
        assert any(int(x) > 0 for x in table["saved"])


def test_leaderboard_and_score_show_spend_saved_on_the_labelled_sessions(loop_ledger, tmp_path):
    import shutil

    url, usages = loop_ledger
    db = tmp_path / "labelled.sqlite"
    shutil.copy(url.removeprefix("sqlite:///"), db)
    url = f"sqlite:///{db}"
    eng = make_engine(url)
    with eng.begin() as conn:
        conn.execute(sa.text("INSERT INTO labels (session_id, run_idx, label, loop_first, loop_last, labelled_by) "
                             "VALUES (1, -1, 'loop', 2, 8, 'imported')"))
    eng.dispose()
    saved = dict(_rows(url, "SELECT p.label, coalesce(sum(o.saved), 0) FROM policies p "
                       "LEFT JOIN run_outcomes o ON o.policy_id = p.id GROUP BY p.label"))
    with ledger_env(url):
        at = app("views/leaderboard.py")
        assert not at.exception, at.exception
        table = next(d.value for d in at.dataframe if "$ saved" in d.value.columns)
        for row in table.to_dict("records"):
            assert row["tokens saved"] == f"{_tokens_of_last(usages, saved[row['policy']]):,}"
    out = subprocess.run([sys.executable, "-m", "loopledger", "score", "--db", url, "--format", "csv"], check=True,
                         capture_output=True, text=True).stdout
    import csv
    import io

    for r in csv.DictReader(io.StringIO(out)):
        assert r["tokens_saved"] == f"{_tokens_of_last(usages, saved[r['policy']]):,}"
        assert r["usd_saved"].startswith("$")


CODEX = CORPUS.parent / "codex-rollout-jsonl"


@pytest.mark.skipif(not CODEX.is_dir(), reason=f"{CODEX} is absent")
def test_codex_turn_usage_adds_up_to_the_rollouts_final_total():
    # Codex's own running total (the last token_count's total_token_usage), read with plain json.
    from loopledger.events import Batch, Prose
    from loopledger.formats import codex

    for path in CODEX.glob("*.jsonl"):
        final = None
        for raw in path.read_text(encoding="utf-8").splitlines():
            p = json.loads(raw).get("payload") or {}
            if p.get("type") == "token_count" and p.get("info"):
                final = p["info"]["total_token_usage"]
        if final is None:
            continue
        for items in (codex.read(path), codex.read_from(path)):
            got = [it.usage for it in items if isinstance(it, Batch | Prose) and it.usage]
            assert sum(u.input_tokens for u in got) == final["input_tokens"], path.name
            assert sum(u.output_tokens for u in got) == final["output_tokens"], path.name
            assert sum(u.cache_read_tokens or 0 for u in got) == final["cached_input_tokens"], path.name


def test_an_appended_session_keeps_the_same_usage_rows_as_a_whole_read(tmp_path):
    (tmp_path / "whole").mkdir()
    (tmp_path / "grown").mkdir()
    name = f"{SESSION}.jsonl"
    _fixture(tmp_path / "whole" / name, "claude-sonnet-4-5-20250929")
    lines = (tmp_path / "whole" / name).read_text().splitlines(keepends=True)
    grown = tmp_path / "grown" / name
    grown.write_text("".join(lines[:11]))  # cut inside a message: its lines continue after the append
    url = _ingest(tmp_path / "grown", tmp_path / "grown.sqlite")
    assert _rows(url, "SELECT count(*) FROM turn_usage")[0][0] > 0
    with grown.open("a") as fh:
        fh.write("".join(lines[11:]))
    _ingest(tmp_path / "grown", tmp_path / "grown.sqlite")
    whole = _ingest(tmp_path / "whole", tmp_path / "whole.sqlite")
    sql = ("SELECT seq, run_idx, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, usd "
           "FROM turn_usage ORDER BY seq")
    assert _rows(url, sql) == _rows(whole, sql) and len(_rows(whole, sql)) == 8


def test_session_page_shades_the_spend_after_the_runs_first_halt(loop_ledger):
    from app_support import charts

    url, usages = loop_ledger
    ((first_halt,),) = _rows(url, "SELECT min(halt_seq) FROM run_outcomes WHERE outcome = 'halted' AND run_idx = 0")
    with ledger_env(url):
        at = app("views/session.py", session="1")
        assert not at.exception, at.exception
        # The chart's datasets come as one frame (app_support.charts): bars have tokens, the band a start.
        (frame,) = [d for spec, d in charts(at) if "tokens" in d.columns and "start" in d.columns]
        bars, band = frame[frame["tokens"].notna()], frame[frame["start"].notna()]
        assert [int(x) for x in bars["tokens"]] == [_input(u) + u["output_tokens"] for u in usages]
        assert list(band["start"]) == [first_halt + 0.5]
        m = metrics(at)
        assert m["Tokens"] == f"{sum(_input(u) + u['output_tokens'] for u in usages):,}"
        assert m["Spend"].startswith("$")


MINI = sorted((CORPUS.parent / "openai-chat-tool-calls").glob("mini-swe-agent-*.traj.json"))


@pytest.mark.skipif(not MINI, reason="no mini-swe-agent trajectories in ../shared/corpus")
def test_openai_chat_usage_from_mini_swe_agent_responses_is_kept_per_turn():
    # mini-swe-agent keeps each chat completion beside its message (extra.response.usage).
    from loopledger.events import Batch, Prose
    from loopledger.formats import read

    for path in MINI:
        doc = json.loads(path.read_text(encoding="utf-8"))
        want = [m["extra"]["response"]["usage"] for m in doc["messages"]
                if m.get("role") == "assistant" and isinstance((m.get("extra") or {}).get("response"), dict)
                and m["extra"]["response"].get("usage")]
        got = [it.usage for it in read(path) if isinstance(it, Batch | Prose) and it.usage]
        assert [(u.input_tokens, u.output_tokens) for u in got] == [
            (w["prompt_tokens"], w["completion_tokens"]) for w in want], path.name
