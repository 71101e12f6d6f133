"""Fill a ledger directly through the schema: N sessions, about M tool calls, realistic shapes.

Used by the page benchmark (10k sessions / 1M calls) and, with small N, by the dashboard tests.
It does not read transcripts or run detectors: verdicts come from a cheap synthetic stand-in
(each default-looking policy trips at its own repetition count) so that guards disagree the way
real ones do, and every derived table (session_stats, run_outcomes) is consistent with the
checks written. Deterministic for a given seed.

    python -m bench.gen_ledger ledger.sqlite --sessions 10000 --calls 1000000
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import random
import time
from dataclasses import dataclass

from loopledger import vocab
from loopledger.events import text_digest
from loopledger.ledger import schema
from loopledger.ledger.engine import make_engine, resolve_url
from sqlalchemy import insert

FORMATS = ("claude-code", "codex-cli", "openai-chat", "anthropic-messages", "gemini-cli",
           "swe-agent", "openhands", "atif")
TOOLS = ("Bash", "Read", "Edit", "Grep", "Glob", "Write", "browser_navigate", "browser_click",
         "fetch_webpage", "run_tests", "list_dir", "search_code")
TOOL_WEIGHTS = (30, 25, 12, 10, 5, 4, 3, 3, 2, 3, 2, 1)
# Marker text the safe-rendering tests look for: it must stay inert wherever it is shown.
HOSTILE = '<script>window.__pwned=1</script> ![x](http://127.0.0.1:9/pwn.png) <img src=x onerror="window.__pwned=2">'
EPOCH = dt.datetime(2026, 10, 1, tzinfo=dt.UTC)
CHUNK = 20_000


@dataclass(frozen=True)
class SynthPolicy:
    """A policy row plus the synthetic trip points the generator uses for it."""

    id: str
    detector: str
    label: str
    params: str
    per_call: bool
    warn_at: int | None  # repetition count that warns (None: never)
    block_at: int | None
    halt_at: int | None


def default_policies() -> list[SynthPolicy]:
    """The default set: one policy per detector. Ids/labels come from the real specs when present."""
    trips = {  # detector → (per_call, warn_at, block_at, halt_at) on a run of identical calls
        "run-length": (False, None, None, 3),
        "ladder": (True, 2, 3, 4),
        "window": (True, None, None, 3),
        "stagnation": (False, None, None, None),
        "cycle": (True, None, None, None),
    }
    specs = {}
    try:
        from loopledger.detectors.policy import BUILTIN_SPECS  # every built-in detector at its defaults

        specs = {s.detector: s for s in BUILTIN_SPECS}
    except Exception:  # noqa: BLE001 - any import failure means: not there yet, use our own rows
        specs = {}
    fallback = {
        "run-length": {"max_observation_steps": 15, "max_strikes": 2, "observation_patterns": []},
        "ladder": {"block_at": 3, "halt_at": 4, "warn_at": 2},
        "window": {"threshold": 3, "window": 8},
        "stagnation": {"max_steps": 5},
        "cycle": {"halt_repeats": 4, "max_period": 6, "warn_repeats": 3},
    }
    out = []
    for det, (per_call, w, b, h) in trips.items():
        spec = specs.get(det)
        if spec is not None:
            params = json.dumps(spec.params, sort_keys=True, separators=(",", ":"))
            out.append(SynthPolicy(spec.id, det, spec.label, params, per_call, w, b, h))
            continue
        params = json.dumps(fallback[det], sort_keys=True, separators=(",", ":"))
        canon = json.dumps({"detector": det, "params": fallback[det]}, sort_keys=True, separators=(",", ":"))
        pid = hashlib.sha256(canon.encode()).hexdigest()[:16]
        label = det + " " + " ".join(f"{k}={v}" for k, v in fallback[det].items() if v != [])
        out.append(SynthPolicy(pid, det, label, params, per_call, w, b, h))
    return out


def create_schema(url: str) -> None:
    """Migrations when they exist (the one way schemas change), else the Core metadata."""
    try:
        from loopledger.ledger import migrate  # lands with the ledger issue

        migrate.upgrade(url)
        return
    except ImportError:
        pass
    eng = make_engine(url)
    schema.metadata.create_all(eng)
    eng.dispose()


class _Rows:
    """Buffered bulk inserts: one executemany per table per CHUNK rows."""

    def __init__(self, conn):
        self.conn = conn
        self.buf: dict[str, list[dict]] = {}
        self.pending = 0

    def add(self, table, row: dict) -> None:
        self.buf.setdefault(table.name, []).append(row)
        self.pending += 1

    def maybe_flush(self) -> None:
        # Called between sessions only, so every child row's parent is in the same flush.
        if self.pending >= CHUNK:
            self.flush()

    def flush(self) -> None:
        for name in _ORDER:
            rows = self.buf.get(name)
            if rows:
                self.conn.execute(insert(schema.metadata.tables[name]), rows)
                self.buf[name] = []
        self.pending = 0


# Parents before children so foreign keys hold at every flush.
_ORDER = ("sources", "sessions", "runs", "events", "calls", "checks", "results", "session_stats",
          "run_outcomes", "ingest_errors")


def _iso(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _plan_run(rng: random.Random, n_calls: int) -> list[tuple[str, str]]:
    """A run's calls as (tool, args JSON): mostly varied work, sometimes a loop or a cycle."""
    calls: list[tuple[str, str]] = []
    loop_kind = rng.choices(("none", "repeat", "cycle"), weights=(70, 22, 8))[0]
    loop_at = rng.randrange(max(1, n_calls)) if loop_kind != "none" else -1
    while len(calls) < n_calls:
        if len(calls) == loop_at:
            tool = rng.choices(TOOLS, TOOL_WEIGHTS)[0]
            if loop_kind == "repeat":
                args = json.dumps({"cmd": f"make test -k t{rng.randrange(50)}"}, separators=(",", ":"))
                calls.extend([(tool, args)] * rng.randint(2, 9))
            else:
                a = (tool, json.dumps({"path": f"src/a{rng.randrange(9)}.py"}, separators=(",", ":")))
                b = ("Read", json.dumps({"path": f"src/b{rng.randrange(9)}.py"}, separators=(",", ":")))
                calls.extend([a, b] * rng.randint(2, 5))
            continue
        tool = rng.choices(TOOLS, TOOL_WEIGHTS)[0]
        calls.append((tool, json.dumps({"path": f"src/m{rng.randrange(400)}.py", "n": rng.randrange(999)},
                                       separators=(",", ":"))))
    return calls[: max(n_calls, 1)]


def _verdict(p: SynthPolicy, rep: int, cyc: int) -> str:
    """The synthetic stand-in: `rep` identical calls in a row, `cyc` A-B repetitions so far."""
    count = cyc if p.detector == "cycle" else rep
    halt_at, warn_at = p.halt_at, p.warn_at
    if p.detector == "cycle":
        warn_at, halt_at = 3, 4
    if halt_at is not None and count >= halt_at:
        return vocab.HALT
    if p.block_at is not None and count >= p.block_at:
        return vocab.BLOCK
    if warn_at is not None and count >= warn_at:
        return vocab.WARN
    return vocab.ALLOW


def generate(url: str, sessions: int, calls: int, *, seed: int = 7, hostile: bool = False,
             quarantined: int | None = None, big: int = 0) -> dict:
    """Fill `url` (an empty ledger; tables are created) and return what was written.

    `big` > 0 gives the last session that many of the calls (a long-running agent session:
    the Session page's worst case); the others share the rest.
    """
    create_schema(url)
    rng = random.Random(seed)
    pols = default_policies()
    eng = make_engine(url)
    written = {"sessions": 0, "calls": 0, "checks": 0, "halts": 0, "errors": 0}
    n_quarantined = quarantined if quarantined is not None else max(1, sessions // 50)
    with eng.begin() as conn:
        conn.execute(insert(schema.policies), [
            {"id": p.id, "detector": p.detector, "params": p.params, "label": p.label, "is_default": True,
             "created_at": EPOCH.timestamp()} for p in pols])
        rows = _Rows(conn)
        budget = calls - big if big and sessions > 1 else calls
        for s in range(1, sessions + 1):
            fmt = FORMATS[rng.randrange(len(FORMATS))]
            started = EPOCH + dt.timedelta(seconds=rng.randrange(60 * 86400))
            left = sessions - s + 1
            if big and s == sessions and sessions > 1:
                budget += big
            n = budget // left if s < sessions else budget
            n = max(1, int(n * rng.uniform(0.3, 1.7))) if s < sessions else max(1, n)
            n = min(n, max(1, budget - (left - 1)))
            budget -= n
            status = "quarantined" if s <= n_quarantined else "ok"
            title = f"Fix flaky test in module {rng.randrange(300)}"
            if hostile and s == 1:
                title = "hostile " + HOSTILE
            path = f"/home/dev/.agents/{fmt}/proj{s % 37}/{s:06d}-{rng.getrandbits(32):08x}.jsonl"
            rows.add(schema.sources, {"id": s, "path": path, "format": fmt, "size": n * 900, "mtime": started.timestamp(),
                                      "content_hash": f"{s:064x}", "byte_offset": n * 900, "status": status,
                                      "ingested_at": started.timestamp() + 3600})
            if status == "quarantined":
                line = rng.randint(2, 40)
                rows.add(schema.ingest_errors, {"source_id": s, "line": line,
                                                "message": "invalid JSON: Expecting ',' delimiter",
                                                "excerpt": '{"type":"assistant","message":{"content":[{', "created_at": started.timestamp()})
                written["errors"] += 1
            n_runs = min(n, rng.choices((1, 2, 3, 4, 6), weights=(40, 25, 15, 10, 10))[0])
            split = sorted(rng.sample(range(1, n), n_runs - 1)) if n_runs > 1 else []
            bounds = [0, *split, n]
            seq = 0
            t = started
            stats = {p.id: dict.fromkeys(("runs", "calls", "strikes", "warnings", "blocks", "halts", "saved",
                                          "halted_runs"), 0) | {"first_halt_seq": None} for p in pols}
            for r in range(n_runs):
                plan = _plan_run(rng, bounds[r + 1] - bounds[r])
                first_seq = seq
                user_text = f"Please fix the failing tests in module {rng.randrange(300)}"
                if hostile and s == 1 and r == 0:
                    user_text += " user said " + HOSTILE
                rows.add(schema.events, {"session_id": s, "seq": seq, "run_idx": r, "kind": vocab.KIND_USER,
                                         "text": user_text, "text_hash": text_digest(user_text), "ts": _iso(t), "line": seq + 1})
                seq += 1
                halted_at: dict[str, tuple[int, int]] = {}
                outcome = {p.id: {"warnings": 0, "blocks": 0, "strikes": 0, "saved": 0} for p in pols}
                prev_key, rep, cyc, streak, hist = None, 0, 0, 0, []
                i = 0
                while i < len(plan):
                    width = 1 if rng.random() < 0.85 or i + 1 >= len(plan) else 2
                    batch = plan[i: i + width]
                    i += width
                    if rng.random() < 0.15:
                        prose = "Let me look at the failing test output again."
                        rows.add(schema.events, {"session_id": s, "seq": seq, "run_idx": r, "kind": vocab.KIND_PROSE,
                                                 "text": prose, "text_hash": text_digest(prose), "ts": _iso(t), "line": seq + 1})
                        seq += 1
                    t += dt.timedelta(seconds=rng.randint(2, 40))
                    bseq = seq
                    rows.add(schema.events, {"session_id": s, "seq": bseq, "run_idx": r, "kind": vocab.KIND_BATCH,
                                             "text": "", "text_hash": None, "ts": _iso(t), "line": bseq + 1})
                    aseq = bseq + 1
                    seq += 2
                    batch_rep = 0
                    for idx, (tool, args) in enumerate(batch):
                        key = (tool, args)
                        rep = rep + 1 if key == prev_key else 1
                        hist.append(key)
                        alternating = len(hist) >= 3 and hist[-1] == hist[-3] and hist[-1] != hist[-2]
                        streak = streak + 1 if alternating else 0
                        cyc = (streak + 2) // 2 if streak else 0  # A-B repetitions ending here
                        prev_key = key
                        batch_rep = max(batch_rep, rep)
                        looping = rep > 1 or cyc > 0
                        answer = "ok: 3 passed" if not looping else "FAILED tests/test_x.py::test_y - AssertionError"
                        if hostile and s == 1 and r == 0 and idx == 0 and bseq <= 3:
                            # Every transcript text a page shows: the answer, the tool's name, its
                            # arguments (the key above was taken first, so the verdicts stay put).
                            answer = "tool said " + HOSTILE
                            tool = "hostile_tool " + HOSTILE
                            args = json.dumps({"arg said": HOSTILE}, separators=(",", ":"))
                        is_err = looping and rng.random() < 0.5
                        rows.add(schema.calls, {"session_id": s, "seq": bseq, "idx": idx, "run_idx": r,
                                                "call_id": f"call_{s}_{bseq}_{idx}", "tool": tool, "args": args,
                                                "args_hash": text_digest(args), "args_malformed": False, "answer": answer,
                                                "answer_hash": text_digest(answer), "answer_len": len(answer),
                                                "is_error": is_err, "answer_seq": aseq, "answer_ts": _iso(t)})
                        written["calls"] += 1
                        for p in pols:
                            if not p.per_call:
                                continue
                            v = vocab.AFTER_HALT if p.id in halted_at else _verdict(p, rep, cyc)
                            _record(rows, p, s, r, bseq, idx, v, rep, 1, outcome, halted_at, written)
                    for p in pols:
                        if p.per_call or p.detector == "stagnation":
                            continue
                        v = vocab.AFTER_HALT if p.id in halted_at else _verdict(p, batch_rep, 0)
                        _record(rows, p, s, r, bseq, schema.BATCH_LEVEL, v, batch_rep, len(batch), outcome,
                                halted_at, written)
                        res = vocab.REPEATED if batch_rep > 1 else vocab.NOT_COMPARABLE
                        if v != vocab.AFTER_HALT:
                            rows.add(schema.results, {"session_id": s, "policy_id": p.id, "seq": bseq,
                                                      "idx": schema.BATCH_LEVEL, "outcome": res})
                            outcome[p.id]["strikes"] += res == vocab.REPEATED
                    rows.add(schema.events, {"session_id": s, "seq": aseq, "run_idx": r, "kind": vocab.KIND_ANSWERS,
                                             "text": None, "text_hash": None, "ts": _iso(t), "line": aseq + 1})
                rows.add(schema.runs, {"session_id": s, "idx": r, "first_seq": first_seq, "last_seq": seq - 1,
                                       "n_calls": len(plan), "started_at": _iso(started), "user_text": user_text})
                for p in pols:
                    o, st = outcome[p.id], stats[p.id]
                    halt = halted_at.get(p.id)
                    word = (vocab.HALTED if halt else vocab.BLOCKED if o["blocks"] else
                            vocab.WARNED if o["warnings"] else vocab.CLEAN)
                    rows.add(schema.run_outcomes, {"session_id": s, "run_idx": r, "policy_id": p.id, "outcome": word,
                                                   "halt_seq": halt[0] if halt else None,
                                                   "halt_idx": halt[1] if halt else None, **o})
                    st["runs"] += 1
                    st["calls"] += len(plan)
                    for k in ("strikes", "warnings", "blocks", "saved"):
                        st[k] += o[k]
                    if halt:
                        st["halts"] += 1
                        st["halted_runs"] += 1
                        if st["first_halt_seq"] is None:
                            st["first_halt_seq"] = halt[0]
            for p in pols:
                rows.add(schema.session_stats, {"session_id": s, "policy_id": p.id, **stats[p.id]})
            rows.add(schema.sessions, {"id": s, "source_id": s, "key": "0", "format": fmt, "title": title,
                                       "agent": fmt.split("-")[0], "model": rng.choice(("claude-sonnet-4", "gpt-5", "gemini-2.5-pro")),
                                       "started_at": _iso(started), "ended_at": None, "n_runs": n_runs, "n_calls": n,
                                       "n_events": seq, "updated_at": started.timestamp()})
            written["sessions"] += 1
            rows.maybe_flush()
        rows.flush()
    eng.dispose()
    return written


def _record(rows, p, s, r, seq, idx, verdict, count, covered, outcome, halted_at, written) -> None:
    rows.add(schema.checks, {"session_id": s, "policy_id": p.id, "seq": seq, "idx": idx, "run_idx": r,
                             "verdict": verdict, "count": count, "total": count, "threshold": p.halt_at,
                             "reason": "repeated_tool_calls" if verdict in (vocab.WARN, vocab.BLOCK, vocab.HALT) else None})
    written["checks"] += 1
    o = outcome[p.id]
    if verdict == vocab.WARN:
        o["warnings"] += 1
    elif verdict == vocab.BLOCK:
        o["blocks"] += 1
    elif verdict == vocab.HALT:
        halted_at[p.id] = (seq, idx)
        written["halts"] += 1
    elif verdict == vocab.AFTER_HALT:
        o["saved"] += covered  # the calls this check covers would not have run


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gen_ledger", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db", help="SQLite path or SQLAlchemy URL of an empty ledger")
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--hostile", action="store_true", help="put inert-rendering test text in session 1")
    ap.add_argument("--big", type=int, default=0, help="calls given to the last session (a long session)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    out = generate(resolve_url(args.db), args.sessions, args.calls, seed=args.seed, hostile=args.hostile,
                   big=args.big)
    print(f"{out} in {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
