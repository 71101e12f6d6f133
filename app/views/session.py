"""Session: one session's runs under every policy, its timeline, and the transcript around a halt.

Deep link: ./session?session=ID&run=IDX. The run picker writes `run` back to the URL so the page
can be shared as it is. Transcript text (title, path, prompts, tool names, arguments, answers,
prose) goes through app.safe only: st.text / st.code / st.dataframe.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd
import sqlalchemy as sa
import streamlit as st
from loopledger import scoring, vocab
from loopledger.app import charts, data, safe
from loopledger.detectors.policy import PolicySpec
from loopledger.detectors.run_length import SUBSTRING, inside_word
from loopledger.ledger import read, read_live

CONTEXT = 6  # events shown before and after the focused step
RUN_LENGTH_DEFAULT = PolicySpec("run-length")
TIMELINE_ROWS = 6000  # checks drawn at most; a bigger session is drawn one run at a time
LIVE_REFRESH_S = 1  # enforced decisions re-read this often: a live decision shows within 2 s


def _int_param(name: str) -> int | None:
    try:
        return int(st.query_params.get(name, ""))
    except ValueError:
        return None


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h {m:02d}m" if h else f"{m}m {s:02d}s"


def _header(head: dict, halts: pd.DataFrame) -> None:
    st.header(f"Session #{head['id']}")
    safe.text(head["title"] or "(untitled)")
    cols = st.columns(4)
    cols[0].metric("Runs", head["n_runs"])
    cols[1].metric("Tool calls", head["n_calls"])
    cols[2].metric("Duration", _duration(head["duration_s"]))
    cols[3].metric("Halted runs", halts["run_idx"].nunique())
    safe.table(pd.DataFrame([{"format": head["format"], "source file": head["path"], "agent": head["agent"],
                              "model": head["model"],
                              "started": head["started_at"], "ended": head["ended_at"], "status": head["status"]}]),
               key="session_header")


def _pick_run(n_runs: int, halts: pd.DataFrame) -> int:
    wanted = _int_param("run")
    if wanted is None or not 0 <= wanted < n_runs:
        # No run asked for: open the first halted run, where the investigation usually starts.
        wanted = int(halts["run_idx"].iloc[0]) if len(halts) else 0
    if st.session_state.get("run_pick_for") != (st.query_params.get("session"), wanted):
        st.session_state["run_pick"] = wanted
        st.session_state["run_pick_for"] = (st.query_params.get("session"), wanted)
    run = st.selectbox("Run", range(n_runs), key="run_pick", format_func=lambda r: f"run {r}")
    if str(run) != st.query_params.get("run"):
        st.query_params["run"] = str(run)
        st.session_state["run_pick_for"] = (st.query_params.get("session"), run)
    return int(run)


def _verdict_notes(tl: pd.DataFrame) -> dict[tuple[int, int], str]:
    """(seq, idx) → "policy: verdict; …" for every check that said more than allow."""
    loud = tl[tl["verdict"] != vocab.ALLOW]
    notes: dict[tuple[int, int], list[str]] = {}
    for seq, idx, pol, verdict in zip(loud["seq"], loud["idx"], loud["policy"], loud["verdict"], strict=True):
        notes.setdefault((int(seq), int(idx)), []).append(f"{pol.split(' ')[0]}: {verdict}")
    return {k: "; ".join(v) for k, v in notes.items()}


def _read_only_by_accident(tool: str) -> str:
    """A note when run-length (at its defaults: seed 000's substring rule) counts this tool as
    read-only only through a pattern inside a word (`read` in `reply_to_thread`)."""
    pattern = inside_word(tool, RUN_LENGTH_DEFAULT.params["observation_tools"])
    if pattern is None or RUN_LENGTH_DEFAULT.params["match"] != SUBSTRING:
        return ""
    return f"run-length counts it read-only only through '{pattern}' inside a word (match=name-parts would not)"


def _transcript(rows: pd.DataFrame, notes: dict, halt_seqs: set[int]) -> None:
    for row in rows.itertuples(index=False):
        where = f"[step {row.seq}]" + (f" line {int(row.line)}" if pd.notna(row.line) else "")
        if row.kind == vocab.KIND_BATCH and pd.notna(row.idx):
            mark = "▶ HALTING BATCH  " if row.seq in halt_seqs else ""
            note = notes.get((int(row.seq), int(row.idx)), "") or notes.get((int(row.seq), -1), "")
            accident = _read_only_by_accident(str(row.tool))
            safe.text(f"{mark}{where} call {int(row.idx)}: {row.tool}" + (f"   ⟨{note}⟩" if note else "")
                      + (f"   ⟨{accident}⟩" if accident else ""))
            safe.code(row.args, language="json")
            if row.answer is not None and not (isinstance(row.answer, float) and pd.isna(row.answer)):
                safe.text("answer" + (" (error)" if row.is_error else "") + ":")
                safe.code(row.answer)
            else:
                safe.text("answer: (none recorded)")
        elif row.kind == vocab.KIND_ANSWERS:
            continue  # answers are shown under their calls
        else:
            # A prose turn can be where a policy halts too (stagnation).
            mark = "▶ HALTED HERE  " if row.seq in halt_seqs else ""
            note = notes.get((int(row.seq), -1), "")
            safe.text(f"{mark}{where} {row.kind}:" + (f"   ⟨{note}⟩" if note else ""))
            safe.code(row.text)


def _labels(session_id: int, run: int) -> None:
    labels = data.fresh("run_labels", session_id)
    with st.form(f"label_{session_id}_{run}"):
        st.write("Label this session (used by the guard leaderboard and by Compare):")
        current = labels["label"].iloc[0] if len(labels) else read.LABELS[0]
        current = current if current in read.LABELS else read.LABELS[0]
        choice = st.radio("Label", read.LABELS, index=read.LABELS.index(current), horizontal=True, key="label_choice")
        loop_calls = st.text_input("Loop calls (FIRST-LAST, 1-based; empty: this run's calls)", key="label_loop_calls")
        note = st.text_input("Reason", value="" if not len(labels) or pd.isna(labels["note"].iloc[0])
                             else labels["note"].iloc[0], key="label_note")
        if st.form_submit_button("Save label"):
            try:
                rng = scoring.parse_loop_calls(loop_calls) if choice == scoring.LOOP else None
                data.save_label(session_id, run, choice, note, *(rng or (None, None)))
                st.success("Saved.")
            except ValueError as exc:
                st.error(f"Not saved: {exc}")
            labels = data.fresh("run_labels", session_id)
    if len(labels):
        safe.table(labels, key="labels_table")


@st.fragment(run_every=LIVE_REFRESH_S)
def _enforced(session_id: int) -> None:
    """What a hook or `loopledger guard` enforced in this session, beside the replayed verdict of
    the same policy on the same call (read uncached: it must move while the agent runs)."""
    try:
        with data.connect() as conn:
            df = read_live.enforced(conn, session_id)
    except sa.exc.SQLAlchemyError:
        return  # a ledger from before live enforcement: nothing was enforced in it
    if not len(df):
        return
    st.subheader("Enforced on the live agent")
    st.caption(f"{len(df)} decision(s) a hook or guard made, newest first; 'replayed' is the same policy's "
               f"verdict on the same call in the transcript. Refreshes every {LIVE_REFRESH_S} s.")
    safe.table(df, key="enforced_table")


def main() -> None:
    sid = _int_param("session")
    if sid is None:
        st.header("Session")
        st.info("Pick a session on the Sessions page (or open ./session?session=ID).")
        st.page_link("views/sessions.py", label="Go to Sessions")
        return
    head = data.q("session_header", sid)
    if head is None:
        st.header("Session")
        st.error(f"No session #{sid} in this ledger.")
        return
    halts = data.q("halts", sid)
    _header(head, halts)

    st.subheader("Runs × policies")
    long = data.q("run_outcomes", sid)
    safe.table(read.outcome_matrix(long), key="outcomes")
    _enforced(sid)

    if head["n_runs"] == 0:
        return
    run = _pick_run(head["n_runs"], halts)
    bounds = data.q("run_bounds", sid, run) or (0, head["n_events"])

    st.subheader("Timeline")
    whole = head["n_calls"] * max(1, long["policy_id"].nunique()) <= TIMELINE_ROWS
    only_run = st.toggle("This run only", value=not whole, key="timeline_run_only")
    tl = data.q("timeline", sid, run if only_run else None, TIMELINE_ROWS)
    if len(tl):
        st.altair_chart(charts.timeline(tl), key="timeline_chart")
    if len(tl) >= TIMELINE_ROWS:
        st.caption(f"Only the first {TIMELINE_ROWS:,} checks are drawn; switch to this run only to see the rest.")

    st.subheader(f"Run {run}: transcript")
    run_halts = halts[halts["run_idx"] == run]
    halt_seqs = {int(s) for s in run_halts["halt_seq"]}
    first_halt = int(run_halts["halt_seq"].min()) if len(run_halts) else None
    focus_key = f"focus_{sid}_{run}"
    if focus_key not in st.session_state:
        st.session_state[focus_key] = first_halt if first_halt is not None else bounds[0]

    def jump() -> None:
        st.session_state[focus_key] = first_halt

    c1, c2, c3 = st.columns([1, 1, 2])
    c1.button("Jump to halt", on_click=jump, disabled=first_halt is None, key="jump_halt")
    focus = int(c2.number_input("Around step", bounds[0], bounds[1], key=focus_key))
    if len(run_halts):
        h = run_halts.iloc[0]
        link = "./replay?" + urlencode({"session": sid, "run": run, "policy": h["policy_id"], "step": int(h["halt_seq"])})
        c3.link_button("Replay this run at the halt", link)
        safe.table(run_halts[["policy", "halt_seq", "halt_idx"]].rename(columns={"halt_seq": "step", "halt_idx": "call"}),
                   key="run_halts")
    else:
        c3.write("No policy halted this run.")
    rows = data.q("transcript", sid, max(bounds[0], focus - CONTEXT), min(bounds[1], focus + CONTEXT))
    run_tl = tl[tl["run_idx"] == run] if len(tl) else tl
    _transcript(rows, _verdict_notes(run_tl) if len(run_tl) else {}, halt_seqs)

    st.subheader("Label")
    _labels(sid, run)


main()
