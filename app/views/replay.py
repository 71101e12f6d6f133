"""Replay: single-step one detector over one run, with its parameters editable.

Deep link: ?session=ID&run=IDX&policy=POLICY_ID_OR_SPEC&step=SEQ (step = the event's seq).
The detector is driven by loopledger.replay's Replayer kept in st.session_state, so a click moves the
cursor from where it is (snapshots for stepping back) instead of replaying from the start.
Transcript text reaches the screen only through app.safe (st.text / st.code / st.dataframe).
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st
from loopledger import vocab
from loopledger.analysis import explain
from loopledger.analysis.replay_table import state_summary
from loopledger.app import charts_replay as charts
from loopledger.app import data, safe, when, words
from loopledger.app import replay_view as rv
from loopledger.detectors import registry
from loopledger.detectors.policy import DEFAULT_SPECS, INT, NAMES, OPT_INT, PARAMS, TEXT, PolicySpec
from loopledger.events import Answers, Batch, Prose, Retry, UserTurn, text_digest
from loopledger.ledger import read
from loopledger.ledger.store import load_events
from loopledger.replay import Replayer

STATE_HELP = {
    "count": "identical batches in a row; changed answers reset it to 1",
    "total": "identical batches in this run; never reset by answers (the ceiling counts these)",
    "effective_max": "the limit that applies to this batch: max_observation_steps for a read-only (observation) "
                     "batch, max_strikes otherwise; count above it halts",
    "ceiling": "the most identical batches allowed in one run even when answers keep changing: "
               "max(max_observation_steps, max_strikes); total above it halts (unless exempt)",
    "observation": "every call's name contains an observation_tools pattern (read-only batch)",
    "exempt": "an observation batch under a read-only allowance that is not costly: the ceiling does not apply",
    "costly": "a browser navigate / click / fetch_webpage call: never exempt from the ceiling",
    "signature": "the batch's identity: each call's tool and argument hash, sorted",
    "answers": "hash of the last answers of this batch (unchanged answers make a strike)",
    "result": "what the last answers were judged: repeated (a strike), changed (progress), not comparable",
}
ENDED = {"success": "succeeded", "submitted": "submitted", "failure": "failed"}
TRANSCRIPT_WINDOW = 40  # events shown up to the cursor; the slider reaches the rest
PLAY_SECONDS = 0.7
SNAPSHOTS = 96  # cursor snapshots per session replay (see _full)
LINK_KEYS = ("session", "run", "policy", "step")


def _conn():
    return data.connect()


@st.cache_resource(max_entries=8, show_spinner=False)
def _events(db_url: str, session_id: int, updated_at: float | None, n_events: int) -> list:
    # Keyed by the session's version: a growing session (live worker) gets its new events.
    # cache_resource, not cache_data: events are immutable, and unpickling 10k of them per click
    # would cost more than the step itself.
    with data.reader(db_url).connect() as conn:
        return load_events(conn, session_id)


@st.cache_resource(max_entries=16, show_spinner=False)
def _full(db_url: str, session_id: int, updated_at: float | None, n_events: int, spec_text: str) -> Replayer:
    # One pass of the engine per session version and spec: its steps feed the counter chart and the
    # "next warning/block/halt" jumps, its snapshots every viewer's cursor (Replayer.fork), so
    # opening a run does not replay the session a second time to place the cursor.
    events = _events(db_url, session_id, updated_at, n_events)
    # About SNAPSHOTS snapshots whatever the length: each is a deep copy (600 of them doubled a 20k-call
    # session's replay), and a step back re-steps at most len/SNAPSHOTS events from the nearest one.
    rp = Replayer(events, spec_text, snapshot_every=max(64, len(events) // SNAPSHOTS))
    rp.jump_to(len(rp))
    return rp


def _all_steps(db_url: str, session_id: int, updated_at: float | None, n_events: int, spec_text: str) -> list:
    return _full(db_url, session_id, updated_at, n_events, spec_text).steps


@st.cache_resource(max_entries=8, show_spinner=False)
def _calls_before(db_url: str, session_id: int, updated_at: float | None, n_events: int) -> list[int]:
    return rv.calls_before(_events(db_url, session_id, updated_at, n_events))


@st.cache_resource(max_entries=16, show_spinner=False)
def _verdicts(db_url: str, session_id: int, updated_at: float | None, n_events: int, spec_text: str) -> dict:
    return rv.verdict_index(_all_steps(db_url, session_id, updated_at, n_events, spec_text))


@st.cache_resource(max_entries=16, show_spinner=False)
def _counters_spec(db_url: str, session_id: int, updated_at: float | None, n_events: int, spec_text: str,
                   first: int, last: int) -> dict:
    # Per run and policy, not per click: only the cursor rule changes when the cursor moves.
    steps = _all_steps(db_url, session_id, updated_at, n_events, spec_text)
    return charts.counters_spec(charts.counter_rows(steps[first:last + 1]))


def _spec_of(value: str | None, policies: list[dict[str, Any]]) -> PolicySpec | None:
    """A policy id from the ledger, or a spec string (`window:threshold=4`) of a registered
    detector, or None. Neither a link nor a stored policy names a module to import: a
    `module:factory` plugin is reachable only once registered in this process."""
    if not value:
        return None
    try:
        for p in policies:
            if p["id"] == value:
                return PolicySpec(p["detector"], json.loads(p["params"]))
        if value.strip().partition(":")[0].strip() not in registry.names():
            return None
        return PolicySpec.parse(value)
    except ValueError:  # ConfigError: a bad spec, or a stored plugin that is not installed here
        return None


def _detector_names(policies: list[dict[str, Any]]) -> list[str]:
    """Every registered detector, then stored policies' detectors registered here (looked up,
    never imported: registry.get)."""
    out = list(registry.names())
    for p in policies:
        if p["detector"] not in out:
            try:
                registry.get(p["detector"])
            except ValueError:
                continue
            out.append(p["detector"])
    return out


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _apply_link(policies: list[dict[str, Any]]) -> list[str]:
    """A new deep link (first load, or a link followed inside this browser session) wins.
    Returns the link's values that could not be used."""
    link = {k: st.query_params.get(k) for k in LINK_KEYS}
    if st.session_state.get("rp_link") == link:
        return []
    st.session_state.rp_link = link
    if _int(link["session"]) is not None:
        st.session_state.rp_session = _int(link["session"])
        st.session_state.pop("rp_run", None)
    if _int(link["run"]) is not None:
        st.session_state.rp_run = _int(link["run"])
    spec = _spec_of(link["policy"], policies)
    if spec is not None:
        st.session_state.rp_spec = spec
        st.session_state.rp_detector = spec.detector
    bad = [f"{k}={link[k]}" for k in LINK_KEYS if link[k] and (
        (k == "policy" and spec is None) or (k != "policy" and _int(link[k]) is None))]
    # The linked step wins over "a new run starts at its first step" (see below).
    st.session_state.rp_scope = None
    if _int(link["step"]) is not None:
        st.session_state.rp_step = _int(link["step"])
    else:
        st.session_state.pop("rp_step", None)
    return bad


def _write_link(session_id: int, run_idx: int, spec: PolicySpec, stored_ids: set[str], step: int) -> None:
    link = {"session": str(session_id), "run": str(run_idx),
            "policy": spec.id if spec.id in stored_ids else spec.text, "step": str(step)}
    st.session_state.rp_link = link
    st.query_params.update(link)


def _replayer(session: rv.SessionRow, spec: PolicySpec) -> Replayer:
    """The Replayer for this session version and spec, kept across reruns."""
    key = (session.id, session.updated_at, session.n_events, spec.id)
    if st.session_state.get("rp_key") != key:
        old = st.session_state.get("rp_replayer")
        rp = _full(data.url(), session.id, session.updated_at, session.n_events, spec.text).fork()
        if old is not None:
            rp.jump_to(min(old.position, len(rp)))
        st.session_state.rp_replayer = rp
        st.session_state.rp_key = key
    return st.session_state.rp_replayer


# ── page: choose session, run, detector ──────────────────────────────────────────────────────

st.title("Replay")
st.caption("Step a loop guard through one run and watch its state change. Edit its parameters and step again.")

with _conn() as conn:
    policies = rv.list_policies(conn)
    bad_link = _apply_link(policies)
    sessions = rv.list_sessions(conn, limit=500)
    wanted = st.session_state.get("rp_session")
    if wanted is not None and all(s.id != wanted for s in sessions):
        linked = rv.get_session(conn, wanted)
        sessions = ([linked] if linked else []) + sessions
if bad_link:
    # Link values come from a URL anyone can write: shown as plain text, never as markdown.
    st.warning("Parts of the link were not understood and were ignored (a policy is a stored policy id or a "
               "spec like window:threshold=4; session, run and step are numbers):")
    safe.text("  ".join(bad_link))
if not sessions:
    st.info("The ledger has no sessions yet. Ingest some transcripts first (loopledger ingest PATH).")
    st.stop()
by_id = {s.id: s for s in sessions}
if st.session_state.get("rp_session") not in by_id:
    if st.session_state.get("rp_session") is not None:
        st.warning(f"There is no session #{st.session_state.rp_session} in this ledger; showing the latest one.")
    st.session_state.rp_session = sessions[0].id

c1, c2, c3 = st.columns([3, 3, 2])
session_id = c1.selectbox("Session", list(by_id), key="rp_session", format_func=lambda i: by_id[i].name)
with _conn() as conn:
    session = rv.get_session(conn, session_id)  # re-read every rerun: a live worker may append
    runs = rv.list_runs(conn, session_id)
if session is None or session.n_events == 0:
    st.info("This session has no events yet.")
    st.stop()

run_bounds = {r["idx"]: (r["first_seq"], min(r["last_seq"], session.n_events - 1)) for r in runs} \
    or {0: (0, session.n_events - 1)}
run_text = {r["idx"]: " ".join((r.get("user_text") or "").split())[:60] for r in runs}

# The detector first (drawn in the third column): the run picker marks the runs it halts.
detectors = _detector_names(policies)
if "rp_spec" not in st.session_state:
    # Without a link: the default set's first detector, what ingest judged the session with.
    st.session_state.rp_spec = DEFAULT_SPECS[0] if DEFAULT_SPECS[0].detector in detectors else PolicySpec(detectors[0])
if st.session_state.rp_spec.detector not in detectors:
    detectors.append(st.session_state.rp_spec.detector)
if st.session_state.get("rp_detector") not in detectors:
    st.session_state.rp_detector = st.session_state.rp_spec.detector
detector = c3.selectbox("Detector", detectors, key="rp_detector")
if st.session_state.rp_spec.detector != detector:
    st.session_state.rp_spec = PolicySpec(detector)
spec: PolicySpec = st.session_state.rp_spec
all_steps = _all_steps(data.url(), session.id, session.updated_at, session.n_events, spec.text)
halt_at = rv.halts_by_run(all_steps)  # run → its first halt's step, under this spec

if st.session_state.get("rp_run") not in run_bounds:
    st.session_state.rp_run = next(iter(run_bounds))
# The picker's labels name this spec's halts, so the widget is one per spec: a browser holding the
# old label ("halts at step 179") would otherwise send it back after Apply, match no option and
# fall to run 0. rp_run is the page's run; the widget follows it and writes it back on a pick.
run_key = f"rp_run_pick_{spec.id}"
st.session_state[run_key] = st.session_state.rp_run
calls_before = _calls_before(data.url(), session.id, session.updated_at, session.n_events)


def _picked_run() -> None:
    st.session_state.rp_run = st.session_state[run_key]


run_idx = c2.selectbox("Run", list(run_bounds), key=run_key, on_change=_picked_run,
                       help="“halts at call #…” marks the runs this policy halts",
                       format_func=lambda i: (f"{explain.run_ref(i)} — halts at {rv.call_ref(calls_before, halt_at[i])}: "
                                              if i in halt_at else f"{explain.run_ref(i)}: ") + run_text.get(i, ""))
first, last = run_bounds[run_idx]
words.tab_title(f"Replay #{session_id} {explain.run_ref(run_idx)}")
if st.session_state.get("rp_scope") != (session_id, run_idx):
    # Another session or run was picked: start at its first step (a deep link set its own).
    if st.session_state.get("rp_scope") is not None or "rp_step" not in st.session_state:
        st.session_state.rp_step = first
    st.session_state.rp_scope = (session_id, run_idx)

with st.form("rp_params"):
    params = PARAMS[detector]
    cols = st.columns(min(4, len(params)))
    raw: dict[str, Any] = {}
    for i, p in enumerate(params):
        value = spec.params[p.name]
        with cols[i % len(cols)]:
            if p.kind == NAMES:
                raw[p.name] = st.text_input(p.name, value="|".join(value), help=p.help + " (separate with |)",
                                            key=f"rp_p_{detector}_{p.name}_{spec.id}")
            elif p.kind == TEXT:
                raw[p.name] = st.text_input(p.name, value=str(value), help=p.help,
                                            key=f"rp_p_{detector}_{p.name}_{spec.id}")
            elif p.kind == OPT_INT:
                raw[p.name] = st.text_input(p.name, value=explain.param_value(value),
                                            help=p.help + f" (a number, or “{explain.NO_LIMIT}”)",
                                            key=f"rp_p_{detector}_{p.name}_{spec.id}")
                if raw[p.name].strip().lower() == explain.NO_LIMIT:
                    raw[p.name] = "none"
            elif p.kind == INT:
                raw[p.name] = st.number_input(p.name, value=int(value), step=1, help=p.help,
                                              key=f"rp_p_{detector}_{p.name}_{spec.id}")
            else:  # a yes/no or decimal parameter: written as the spec grammar reads it
                shown = ("true" if value else "false") if isinstance(value, bool) else str(value)
                raw[p.name] = st.text_input(p.name, value=shown, help=p.help,
                                            key=f"rp_p_{detector}_{p.name}_{spec.id}")
    if st.form_submit_button("Apply parameters"):
        try:
            new = PolicySpec(detector, raw)
        except ValueError as exc:  # ConfigError names the field and the rule it broke
            st.error("Not applied:")
            safe.text(str(exc))  # it quotes the values typed (or prefilled from a link)
            new = None
        if new is not None and new.id == spec.id:
            # Applied already (Enter in a parameter submits the form): the message Enter brought stays;
            # without one, say what is applied and where it halts.
            said = st.session_state.get("rp_changed")
            if not (said and said[1] == new.id):
                st.session_state.rp_changed = (rv.applied_already(rv.spec_label(new), halt_at, run_idx,
                                                                  lambda seq: rv.call_ref(calls_before, seq)), new.id)
            st.rerun()
        elif new is not None:
            new_steps = _all_steps(data.url(), session.id, session.updated_at, session.n_events, new.text)
            # Said once, right after Apply: where the halt went (or that it is gone, and where the next one is).
            st.session_state.rp_changed = (rv.halt_change(halt_at, rv.halts_by_run(new_steps), run_idx,
                                                          lambda seq: rv.call_ref(calls_before, seq)), new.id)
            st.session_state.rp_spec = spec = new
            st.rerun()
with _conn() as conn:
    ending = read.session_endings(conn, [session_id]).get(session_id)
if ending is not None and ending[2] == run_idx:
    # Next to the halts: would the guard have cut off a run that went on to succeed?
    safe.text(f"This run ended: {ENDED.get(ending[0], ending[0])}" + (f" — {ending[1]}" if ending[1] else "")
              + (f"; this policy halts it at {rv.call_ref(calls_before, halt_at[run_idx])}" if run_idx in halt_at
                 else ""))
changed = st.session_state.get("rp_changed")
if changed and changed[1] == spec.id:
    st.info(changed[0], icon=":material/compare_arrows:")

stored_ids = {p["id"] for p in policies}
stored_same_detector = [p for p in policies if p["detector"] == detector]
# The label holds whatever a link said (e.g. observation_tools=![x](http://…)): plain text only.
safe.text(f"Replaying: {rv.spec_label(spec)}" + (" (stored in the ledger)" if spec.id in stored_ids else
                                                 " (not stored: verdicts computed here)"))

rp = _replayer(session, spec)
events = rp.events
# The cached index the cursor's "next warning/block" reads too: one pass over the steps, not two.
halts_all = _verdicts(data.url(), session.id, session.updated_at, session.n_events, spec.text).get(vocab.HALT, [])
run_of = {s.seq: s.run for s in all_steps}


# ── the cursor: controls, transcript, state, verdict, chart ──────────────────────────────────


def _set_step(value: int | None) -> None:
    if value is not None:
        st.session_state.rp_step = max(first, min(last, value))


def _state_panel(state: dict[str, Any], step_results: list[tuple[int, Any]]) -> None:
    """The detector's counters and buffers at the cursor, per detector."""
    st.caption(f"{explain.run_ref(state.get('run'))} · " + ("halted: the run's later steps are after_halt until the next user turn"
                                               if state.get("halted") else "not halted"))
    m = st.columns(4)
    if detector == "run-length":
        m[0].metric("count", state.get("count", 0), help=STATE_HELP["count"])
        m[1].metric("total", state.get("total", 0), help=STATE_HELP["total"])
        m[2].metric("effective max", state.get("effective_max", "—"), help=STATE_HELP["effective_max"])
        m[3].metric("ceiling", state.get("ceiling", "—"), help=STATE_HELP["ceiling"])
        # Before the run's first batch the flags are unknown: "—", as every empty cell (never None).
        flags = {k: when.MISSING if state.get(k) is None else ("yes" if state.get(k) else "no")
                 for k in ("observation", "exempt", "costly")}
        st.dataframe(pd.DataFrame([flags]), hide_index=True, key="rp_flags", column_config={
            k: st.column_config.TextColumn(k, help=STATE_HELP[k]) for k in flags})
        if state.get("inside_word"):
            st.warning("Read-only here only through a pattern inside a word (seed 000's substring rule; "
                       "match=name-parts would not count it):")
            safe.text("  ".join(f"{name}: '{pat}' inside it" for name, pat in state["inside_word"].items()))
        last_result = next((r.outcome for _, r in reversed(step_results)), None)
        safe.table(pd.DataFrame([{"signature": state.get("signature") or "—",
                                  "last answers hash": state.get("answers") or "—",
                                  "last result verdict": last_result or "—"}]), column_config={
            "signature": st.column_config.TextColumn("signature", help=STATE_HELP["signature"]),
            "last answers hash": st.column_config.TextColumn("last answers hash", help=STATE_HELP["answers"]),
            "last result verdict": st.column_config.TextColumn("last result verdict", help=STATE_HELP["result"])})
    elif detector == "ladder":
        m[0].metric("count", state.get("count", 0), help="identical calls in a row (same tool, same arguments)")
        m[1].metric("warn at", state.get("warn_at", "—"), help="this many in a row warns (for this tool's class)")
        m[2].metric("block at", state.get("block_at", "—"), help="this many in a row refuses the call")
        m[3].metric("halt at", state.get("halt_at", "—"), help="this many in a row ends the run")
        safe.table(pd.DataFrame([{"tool": state.get("tool") or "—", "args hash": state.get("args_hash") or "—",
                                  "class": state.get("class") or "—", "next call would": state.get("next") or "—"}]),
                   column_config={"class": st.column_config.TextColumn("class", help="read-only or mutating: "
                                                                       "each class has its own thresholds"),
                                  "next call would": st.column_config.TextColumn(
                                      "next call would", help="the verdict if the same call came again")})
    elif detector == "window":
        buf = state.get("buffer", [])
        m[0].metric("buffered", f"{len(buf)} / {state.get('window')}", help="calls remembered / window size")
        m[1].metric("threshold", state.get("threshold"), help="occurrences of one call in the window that halt")
        m[2].metric("top count", max((b["count"] for b in buf), default=0),
                    help="occurrences of the most repeated call in the window now")
        safe.table(pd.DataFrame(buf, columns=["tool", "args", "count"]))
    elif detector == "cycle":
        m[0].metric("period", state.get("period", 0), help="length of the repeating pattern of calls (0: none)")
        m[1].metric("repeats", state.get("repeats", 0), help="back-to-back repetitions of the pattern so far")
        m[2].metric("warn at", state.get("warn_repeats"), help="repetitions that warn")
        m[3].metric("halt at", state.get("halt_repeats"), help="repetitions that halt")
        safe.text("pattern: " + " → ".join(state.get("pattern") or []) if state.get("pattern") else "pattern: —")
        safe.table(pd.DataFrame(state.get("history", []), columns=["tool", "args hash", "answer hash"]))
    elif detector == "stagnation":
        m[0].metric("recorded prose turns", f"{state.get('recorded', 0)} / {state.get('window')}",
                    help="prose replies remembered / how many are looked back over (4 × max steps)")
        m[1].metric("max steps", state.get("max_steps"), help="times one reply may recur before the halt")
        texts = {text_digest(e.text)[:12]: e.text for e in events[first:rp.position] if isinstance(e, Prose) and e.text}
        safe.table(pd.DataFrame([{"count": t["count"], "text": rv.clip(texts.get(t["text_hash"], t["text_hash"]), 200)}
                                 for t in state.get("top", [])], columns=["count", "text"]))
    else:  # progress, openhands, gemini-cli, roo, kilo, a plugin: its state in words (as `loopledger replay` says it)
        safe.text(state_summary(detector, state) or "—")
        st.caption("This detector's state fields, as it reports them:")
    with st.expander("Raw state"):
        st.json(state, expanded=False)


def _show_event(seq: int, ev: Any) -> None:
    where = rv.after_call(calls_before[seq])  # calls by their one number; other events by the call before them
    if isinstance(ev, UserTurn):
        st.caption(f"user ({where})")
        safe.text(rv.clip(ev.text))
    elif isinstance(ev, Prose):
        st.caption(f"assistant ({where})")
        safe.text(rv.clip(ev.text))
    elif isinstance(ev, Retry):
        st.caption(f"provider retry ({where})")
        safe.text(rv.clip(ev.text))
    elif isinstance(ev, Batch):
        first_call = calls_before[seq] + 1
        st.caption(explain.call_list(range(first_call, first_call + len(ev.calls))).capitalize()
                   + f": the assistant calls {len(ev.calls)} tool(s)")
        if ev.text:
            safe.text(rv.clip(ev.text))
        for i, c in enumerate(ev.calls):
            safe.code(f"call #{first_call + i}: {c.name}  {rv.args_text(c.args)}")
    elif isinstance(ev, Answers):
        st.caption(f"{len(ev.answers)} answer(s) ({where})")
        for a in ev.answers:
            safe.text(("[error] " if a.is_error else "") + rv.clip(a.text, 600))


def _goto_halt(seq: int | None) -> None:
    """A halt anywhere in the session: another run's halt switches the run, then the page reruns."""
    if seq is None:
        return
    run = run_of.get(seq, run_idx)
    if run != run_idx:
        st.session_state.rp_run = run
        st.session_state.rp_scope = None  # keep the step set here, not the new run's first step
        st.session_state.rp_step = seq
        st.session_state.rp_app_rerun = True  # a fragment button reruns the fragment only
    else:
        _set_step(seq)


@st.cache_resource(max_entries=16, show_spinner=False)
def _stops(db_url: str, session_id: int, updated_at: float | None, n_events: int, spec_text: str) -> list[int]:
    # Where Forward / Back / Play stop: calls and checked steps (replay_view.stops), per policy.
    steps = _all_steps(db_url, session_id, updated_at, n_events, spec_text)
    return rv.stops(_events(db_url, session_id, updated_at, n_events), steps)


def _where(seq: int | None) -> str:
    """A halt's place for a button's help: its call, and its run when it is another."""
    if seq is None:
        return "no halt"
    other = run_of.get(seq, run_idx) != run_idx
    return rv.call_ref(calls_before, seq) + (f" in {explain.run_ref(run_of[seq])}" if other else "")


def _slid() -> None:
    _set_step(rv.seq_of_call(calls_before, int(st.session_state.rp_call)))


def _controls(cur: int, stop_seqs: list[int]) -> None:
    """Back / Forward (from call to call: an answer or a user turn has nothing to judge), the next
    warning, block and halt, and the slider over the run's calls."""
    index = _verdicts(data.url(), session.id, session.updated_at, session.n_events, spec.text)
    nxt = {v: rv.next_seq_with(index, cur, v, last) for v in (vocab.WARN, vocab.BLOCK, vocab.HALT)}
    back, fwd = rv.next_stop(stop_seqs, cur, first, last, forward=False), rv.next_stop(stop_seqs, cur, first, last)
    prev_halt = rv.neighbour_halt(halts_all, cur, forward=False)
    next_halt = rv.neighbour_halt(halts_all, cur, forward=True)
    b = st.columns(7)
    b[0].button("◀ Back", on_click=_set_step, args=(back,), disabled=back is None, key="rp_back",
                help="to the previous call (answers are read with their calls)")
    b[1].button("Forward ▶", on_click=_set_step, args=(fwd,), disabled=fwd is None, key="rp_fwd",
                help="to the next call the guard judges (answers are read with their calls)")
    b[2].button("Next warning", on_click=_set_step, args=(nxt[vocab.WARN],), disabled=nxt[vocab.WARN] is None,
                key="rp_next_warn")
    b[3].button("Next block", on_click=_set_step, args=(nxt[vocab.BLOCK],), disabled=nxt[vocab.BLOCK] is None,
                key="rp_next_block")
    b[4].button("◀ Previous halt", on_click=_goto_halt, args=(prev_halt,), disabled=prev_halt is None,
                key="rp_prev_halt", help=f"across every run of the session: {_where(prev_halt)}")
    b[5].button("Next halt ▶", on_click=_goto_halt, args=(next_halt,), disabled=next_halt is None,
                key="rp_next_halt", help=f"across every run of the session: {_where(next_halt)}")
    lo_call, hi_call = calls_before[first] + 1, calls_before[last] + (len(events[last].calls)
                                                                      if isinstance(events[last], Batch) else 0)
    if hi_call > lo_call:
        # In calls, as the buttons: the cursor's call, and a move lands on the batch holding the call picked.
        st.session_state.rp_call = min(hi_call, max(lo_call, rv.call_at(calls_before, events, cur)))
        st.slider("Call", min_value=lo_call, max_value=hi_call, key="rp_call", on_change=_slid,
                  help="the run's calls, numbered over the session as every page numbers them")


_KIND_WORD = {UserTurn: "user message", Prose: "assistant reply", Retry: "provider retry", Answers: "answers"}


def _transcript_panel(cur: int) -> None:
    """The cursor's step first, in its own box; the run before it below, the most recent first,
    so the current call is what the panel opens on."""
    st.subheader(f"Transcript, {explain.run_ref(run_idx)}, at " + (rv.call_ref(calls_before, cur)
                 if isinstance(events[cur], Batch) else f"the {_KIND_WORD.get(type(events[cur]), 'event')} "
                 + rv.after_call(calls_before[cur])))
    with st.container(border=True):
        st.caption("▶ at the cursor")
        _show_event(cur, events[cur])
    lo = max(first, cur - TRANSCRIPT_WINDOW + 1)
    # Earlier steps as one plain-text block (one element, not dozens), newest first.
    earlier = [line for seq in range(cur - 1, lo - 1, -1)
               for line in rv.event_lines(seq, events[seq], before=calls_before[seq])]
    if earlier:
        st.caption("Before it in this run, the most recent first:")
        safe.code("\n".join(earlier))
    if lo > first:
        st.caption(f"{lo - first} earlier event(s) of this run not shown; move the slider back to see them.")


def _verdict_panel(step: Any, cur: int, state: dict[str, Any]) -> None:
    """The verdict at the cursor, each loud check in words, the results judged here, the state."""
    verdicts = [c.verdict for c in step.checks] if step else []
    worst = max(verdicts, key=lambda v: ("", vocab.ALLOW, vocab.AFTER_HALT, vocab.WARN, vocab.BLOCK,
                                          vocab.HALT).index(v) if v in vocab.VERDICTS else 0, default=None)
    st.metric("Verdict at this call", worst or "no check")
    if step is not None and step.checks:
        rows = rv.checks_table(step, events[cur])
        table = pd.DataFrame(rows).drop(columns=["reason"])
        for col in ("count", "total", "threshold"):  # a number the detector did not give: "—", not None
            table[col] = [when.MISSING if v is None or pd.isna(v) else str(int(v)) for v in table[col]]
        safe.table(table, key="rp_checks")
        # Why, in words: whole sentences under the table, never a cut-off cell.
        for row in rows:
            if row["verdict"] in (vocab.WARN, vocab.BLOCK, vocab.HALT):
                safe.text(f"{row['verdict']}: " + explain.sentence(detector, row["verdict"], row["count"],
                                                                    row["total"], row["threshold"], row["reason"],
                                                                    row["tool"]))
    if step is not None and step.results:
        safe.table(pd.DataFrame([{"judged call": rv.call_ref(calls_before, r.seq, r.idx), "result": r.outcome}
                                 for r in step.results]))
    st.subheader("Detector state")
    _state_panel(state, [(s.seq, r) for s in rp.steps[first:] for r in s.results])


def _beside_stored() -> None:
    """The stored policy of this detector (this one, else its default), step by step beside the live one."""
    stored = next((p for p in stored_same_detector if p["id"] == spec.id), None) or \
        next((p for p in stored_same_detector if p["is_default"]), None) or \
        (stored_same_detector[0] if stored_same_detector else None)
    if stored is None or stored["id"] == spec.id:
        return
    st.subheader("Live verdicts beside the stored ones")
    safe.text(f"stored policy: {stored['label']}")
    with _conn() as conn:
        rows = rv.live_vs_stored(all_steps, rv.stored_checks(conn, session.id, stored["id"]), first, last,
                                 calls_before)
    if rows:
        safe.table(pd.DataFrame(rows))
    else:
        st.caption("Both say allow at every call of this run.")


def cursor_view() -> None:
    if st.session_state.pop("rp_app_rerun", False):
        st.rerun(scope="app")
    with _conn() as conn:
        now = rv.get_session(conn, session.id)
    if now is not None and (now.updated_at, now.n_events) != (session.updated_at, session.n_events):
        # A live worker appended to this session (e.g. while playing): rebuild from the top.
        st.rerun(scope="app")
    stop_seqs = _stops(data.url(), session.id, session.updated_at, session.n_events, spec.text)
    if st.session_state.get("rp_play"):
        # Each run while playing is one tick (run_every), call to call; at the end, playing stops.
        ahead = rv.next_stop(stop_seqs, st.session_state.get("rp_step", first - 1), first, last)
        if ahead is None:
            st.session_state.rp_stop = True
            st.rerun(scope="app")
        _set_step(ahead)
    if st.session_state.get("rp_step") is None or not first <= st.session_state.rp_step <= last:
        _set_step(st.session_state.get("rp_step", first))
    _controls(st.session_state.rp_step, stop_seqs)
    cur = st.session_state.rp_step

    step = rp.jump_to(cur + 1)  # forward from where it is; back from the nearest snapshot
    _write_link(session.id, run_idx, spec, stored_ids, cur)
    left, right = st.columns([3, 2])
    with left:
        _transcript_panel(cur)
    with right:
        _verdict_panel(step, cur, rp.state())
    chart = _counters_spec(data.url(), session.id, session.updated_at, session.n_events, spec.text, first, last)
    st.vega_lite_chart(charts.with_cursor(chart, cur), width="stretch", key="rp_counters")
    _beside_stored()


if st.session_state.pop("rp_stop", False):
    st.session_state.rp_play = False
st.toggle("Play", key="rp_play", help=f"Advance one call every {PLAY_SECONDS:.1f} s")
st.fragment(cursor_view, run_every=PLAY_SECONDS if st.session_state.get("rp_play") else None)()
