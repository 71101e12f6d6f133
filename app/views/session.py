"""Session: one session's runs under every policy, why each halt happened, its timeline, and the
transcript from the first call of the repeat.

Deep link: ./session?session=ID&run=IDX[&step=SEQ]. The run picker writes `run` back to the URL so
the page can be shared as it is. Transcript text (title, path, prompts, tool names, arguments,
answers, prose) goes through app.safe only: st.text / st.code / st.dataframe — the "Why"
sentences too, since they carry tool names.
"""

from __future__ import annotations

import pandas as pd
import sqlalchemy as sa
import streamlit as st
from loopledger import vocab
from loopledger.analysis import explain, scoring
from loopledger.app import charts, cost_view, data, nav, safe, when, words
from loopledger.app import session_view as sv
from loopledger.detectors.policy import PolicySpec
from loopledger.detectors.run_length import SUBSTRING, inside_word
from loopledger.formats import positions
from loopledger.ledger import read, read_live

CONTEXT = 6  # events shown before and after the focused step
MAX_EXCERPT = 60  # events in one excerpt; a longer repeat shows its start and its end
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
    cols = st.columns(5)
    cols[0].metric("Runs", head["n_runs"], help=charts.MEASURE_HELP["runs"])
    cols[1].metric("Tool calls", head["n_calls"], help=charts.MEASURE_HELP["calls"])
    cols[2].metric("Duration", _duration(head["duration_s"]))
    cols[3].metric("Halts", len(halts), help=charts.MEASURE_HELP["halts_per_policy"])
    cols[4].metric("Halted runs", halts["run_idx"].nunique(), help="runs at least one policy halted")
    ending = sv.ending_text(head)
    if ending:
        safe.text(ending)
    info = {"format": head["format"], "agent": head["agent"], "model": head["model"],
            "started": when.moment(head["started_at"]), "ended": when.moment(head["ended_at"]), "status": head["status"]}
    # An unknown value is a dash, as everywhere on the dashboard (never None / null). The source file
    # has a row of its own, the page's width: beside six other columns a long path cut the table off.
    safe.table(pd.DataFrame([{k: "—" if v is None else v for k, v in info.items()}]), key="session_header")
    safe.table(pd.DataFrame([{"source file": words.shown_path(head["path"]) or "—"}]), key="session_source",
               width="stretch")


def _set_run(run: int, step: int | None = None) -> None:
    """Switch the page to `run` (a callback: runs before the picker is drawn)."""
    sid = st.query_params.get("session")
    st.session_state["run_pick"] = run
    st.session_state["run_pick_for"] = (sid, run)
    st.query_params["run"] = str(run)
    if step is not None:
        st.session_state[f"focus_{sid}_{run}"] = step


def _set_session(target: tuple[int, int] | None) -> None:
    """Open another session at one of its runs (a callback: the URL changes, the page reruns)."""
    if target is not None:
        st.query_params["session"] = str(target[0])
        st.query_params["run"] = str(target[1])


def _goto_run(run: int, step: int | None = None) -> None:
    """Open `run` from below the picker (it is drawn already): through the URL, then rerun."""
    st.query_params["run"] = str(run)
    if step is not None:
        st.session_state[f"focus_{st.query_params.get('session')}_{run}"] = step
    st.rerun()


def _pick_run(n_runs: int, halts: pd.DataFrame) -> int:
    wanted = _int_param("run")
    if wanted is None or not 0 <= wanted < n_runs:
        # No run asked for: the most halted run, where the investigation usually starts.
        wanted = sv.most_halted_run(halts)
        wanted = 0 if wanted is None else wanted
    sid = st.query_params.get("session")
    if st.session_state.get("run_pick_for") != (sid, wanted):
        st.session_state["run_pick"] = wanted
        st.session_state["run_pick_for"] = (sid, wanted)
    by_run = sv.halted_by(halts)
    halted = sorted(by_run)
    c1, c2, c3, c4 = st.columns([4, 2, 2, 3])
    run = c1.selectbox("Run", range(n_runs), key="run_pick", format_func=lambda r: sv.run_choice(r, by_run),
                       help="“halted by …” marks the runs a policy halted")
    prev_h, next_h = sv.neighbours(halted, int(run))
    # Past this session's last (or first) halted run: the next halted session, in the Sessions order.
    sid_i = int(sid)
    prev_s = None if prev_h is not None else data.q("neighbour_halted_session", sid_i, False)
    next_s = None if next_h is not None else data.q("neighbour_halted_session", sid_i, True)
    c2.button("◀ Previous halted run", on_click=_set_run if prev_h is not None else _set_session,
              args=(prev_h,) if prev_h is not None else (prev_s,), disabled=prev_h is None and prev_s is None,
              key="prev_halted", help=sv.where_to(prev_h, prev_s))
    c3.button("Next halted run ▶", on_click=_set_run if next_h is not None else _set_session,
              args=(next_h,) if next_h is not None else (next_s,), disabled=next_h is None and next_s is None,
              key="next_halted", help=sv.where_to(next_h, next_s))
    c4.caption(f"{len(halted)} of {n_runs} runs halted" + (f" · this is halted run {halted.index(int(run)) + 1}"
                                                           if int(run) in by_run else ""))
    if str(run) != st.query_params.get("run"):
        st.query_params["run"] = str(run)
        st.session_state["run_pick_for"] = (sid, run)
    return int(run)


def _halt_call(sid: int, seq: int, idx: int, numbers: dict[tuple[int, int], tuple[int, int]],
               unit: str) -> tuple[str, str]:
    """(where, tool words) of a halting check: "call #12", the one number a call has on every page,
    and the tool as a person names it (a shell call by its command). A batch-level check is its
    batch's first call; a check on a prose turn has no call and is named by where the transcript
    holds it ("line 37", or "message 12" of a JSON document: `unit`, loopledger.formats.positions)."""
    row = data.q("transcript", sid, seq, seq)
    line = row["line"].iloc[0] if len(row) else None
    num = numbers.get((seq, max(idx, 0)))
    where = explain.call_ref(num[0], seq) if num else explain.call_ref(None, seq, line, unit)
    calls = row[row["idx"].notna()] if len(row) else row
    if idx == explain.BATCH_LEVEL or not len(calls):
        return where, ""
    one = calls[calls["idx"] == idx]
    return where, explain.tool_words(one["tool"].iloc[0], one["args"].iloc[0]) if len(one) else ""


def _why(sid: int, run: int, run_halts: pd.DataFrame, ending: str, unit: str) -> dict | None:
    """The Why box: one sentence per halt of this run, then every call its verdict rests on, by
    call number and linked, in whatever run they are (a multi-turn retry's earlier attempts too).
    Returns the first halt's repeat (first seq, halt seq) for the transcript excerpt."""
    st.subheader(f"Why {explain.run_ref(run)} halted" if len(run_halts) else explain.run_ref(run).capitalize())
    if not len(run_halts):
        st.write("No policy halted this run.")
        return None
    upto = data.q("calls_upto", sid, int(run_halts["halt_seq"].max()))
    calls = sv.call_rows(upto)
    numbers = {(int(s), int(i)): (int(n), int(r)) for s, i, n, r in
               zip(upto["seq"], upto["idx"], upto["n"], upto["run_idx"], strict=True)}
    first = None
    with st.container(border=True, key="why_box"):
        for h in run_halts.itertuples(index=False):
            seq, idx = int(h.halt_seq), int(h.halt_idx)
            where, tool = _halt_call(sid, seq, idx, numbers, unit)
            text = explain.sentence(h.detector, vocab.HALT, h.count, h.total, h.threshold, h.reason, tool or h.tool)
            safe.text(f"{h.detector} halted at {where}: {text}")
            rep = explain.repeated_calls(h.detector, calls, seq, idx, explain._int(h.count), explain._int(h.total))
            if rep:
                # A batch-level guard repeats whole batches: name each batch by its first call.
                shown = list(dict.fromkeys((s, 0) for s, _ in rep)) if idx == explain.BATCH_LEVEL else rep
                # Links carry numbers only (never transcript text): safe as markdown.
                st.markdown("rests on " + sv.call_links(sid, shown, numbers, run), help=sv.CALL_LINKS_HELP)
            if first is None:
                first = {"start": rep[0][0] if rep else seq, "halt": seq, "policy_id": h.policy_id}
        if ending:  # next to the halts: would a guard have cut off a run that went on to succeed?
            safe.text(ending)
    link = sv.replay_link(sid, run, first["policy_id"], first["halt"])
    nav.same_tab_link(st, "Replay this run at the halt", link)
    return first


def _matrix(long: pd.DataFrame, halts: pd.DataFrame) -> None:
    st.subheader("Runs × policies")
    pols = data.q("policies")
    # A default policy is named by its detector alone (its parameters are the defaults): short headers.
    names = {lb: det if dflt else lb for lb, det, dflt in zip(pols["label"], pols["detector"], pols["is_default"],
                                                             strict=True)}
    matrix = sv.outcome_matrix(long, halts).rename(columns=names)
    only = st.toggle("Halted runs only", value=bool(len(halts)) and len(matrix) > 20, key="halted_only",
                     help="Keep the runs some policy halted. Policies that halted something come first.")
    shown = matrix[matrix["halted by"] != ""] if only else matrix
    runs = [int(r) for r in shown["run"]]
    # Runs counted from 1, as calls are (the link's run= stays the ledger's index).
    shown = shown.assign(run=[explain.run_ref(r).removeprefix("run ") for r in runs])
    # Any cell of a row opens its run (single-cell), as its checkbox does (single-row).
    event = safe.table(shown, key="outcomes", on_select="rerun", selection_mode=["single-row", "single-cell"],
                       height=min(400, 38 + 35 * len(shown)),
                       column_config={"run": st.column_config.TextColumn("run", pinned=True),
                                      "halted by": st.column_config.TextColumn("halted by", pinned=True)})
    row = safe.clicked_row(event)
    picked = runs[row] if row is not None and row < len(runs) else None
    # A row click opens that run (once: the selection stays set across reruns).
    if picked is not None and st.session_state.get("_row_applied") != (st.query_params.get("session"), picked):
        st.session_state["_row_applied"] = (st.query_params.get("session"), picked)
        if picked != st.session_state.get("run_pick"):
            _goto_run(picked)
    st.caption("Click any cell of a row to open that run. Cells: clean · warned · blocked · halted.")


def _timeline(sid: int, head: dict, run: int, bounds: tuple[int, int], n_policies: int) -> pd.DataFrame:
    st.subheader("Timeline")
    whole_fits = head["n_calls"] * max(1, n_policies) <= TIMELINE_ROWS
    only_run = st.toggle("This run only", value=True, key="timeline_run_only", disabled=not whole_fits,
                         help="On: the chart spans this run's calls. Off: the whole session.")
    tl = data.q("timeline", sid, run if only_run else None, TIMELINE_ROWS)
    if len(tl):
        tl = sv.number_timeline(sv.with_why(tl), data.q("calls_before", sid, int(tl["seq"].min())))
        # The run's calls, from just before its first to just after its last (prose sits at N.5).
        calls = (data.q("calls_before", sid, bounds[0]) + 0.5, data.q("calls_before", sid, bounds[1] + 1) + 0.5)
        chart = charts.timeline(tl, domain=calls if only_run and calls[1] > calls[0] else None)
        event = st.altair_chart(chart, key="timeline_chart", on_select="rerun", selection_mode="mark_pick")
        sel = sv.picked_mark(event)
        if sel is not None and st.session_state.get("_mark_applied") != sel:
            st.session_state["_mark_applied"] = sel
            seq, sel_run = sel
            if sel_run != run:
                _goto_run(sel_run, seq)
            st.session_state[f"focus_{sid}_{run}"] = seq
    if len(tl) >= TIMELINE_ROWS:
        st.caption(f"Only the first {TIMELINE_ROWS:,} checks are drawn; switch to this run only to see the rest.")
    return tl[tl["run_idx"] == run] if len(tl) else tl


def _read_only_by_accident(tool: str) -> str:
    """A note when run-length (at its defaults: seed 000's substring rule) counts this tool as
    read-only only through a pattern inside a word (`read` in `reply_to_thread`)."""
    pattern = inside_word(tool, RUN_LENGTH_DEFAULT.params["observation_tools"])
    if pattern is None or RUN_LENGTH_DEFAULT.params["match"] != SUBSTRING:
        return ""
    return f"run-length counts it read-only only through '{pattern}' inside a word (match=name-parts would not)"


_KIND = {vocab.KIND_USER: "user", vocab.KIND_PROSE: "assistant", vocab.KIND_RETRY: "provider retry"}


def _transcript(rows: pd.DataFrame, notes: dict, halt_seqs: set[int], marks: dict, unit: str) -> None:
    for row in rows.itertuples(index=False):
        if row.kind == "gap":
            safe.text(f"… {int(row.seq)} steps not shown …")
            continue
        # The line (or message, record) of the source file: this is where a person opens the file.
        where = f"{unit} {int(row.line)}" if pd.notna(row.line) else ""
        if row.kind == vocab.KIND_BATCH and pd.notna(row.idx):
            key = (int(row.seq), int(row.idx))
            mark = "▶ halted here · " if row.seq in halt_seqs else ""
            note = notes.get(key, "")
            same_args, same_answer = marks.get(key, ("", ""))
            accident = _read_only_by_accident(str(row.tool))
            safe.text(f"{mark}call #{int(row.n)}" + (f" ({where})" if where else "") + f": {row.tool}" + (f"   ⟨{same_args}⟩" if same_args else "")
                      + (f"   ⟨{note}⟩" if note else "") + (f"   ⟨{accident}⟩" if accident else ""))
            safe.code(row.args, language="json")
            if row.answer is not None and not (isinstance(row.answer, float) and pd.isna(row.answer)):
                safe.text("answer" + (" (error)" if row.is_error else "") + (f" ⟨{same_answer}⟩" if same_answer else "")
                          + ":")
                safe.code(row.answer)
            else:
                safe.text("answer: (none recorded)")
        elif row.kind == vocab.KIND_ANSWERS:
            continue  # answers are shown under their calls
        else:
            # A prose turn can be where a policy halts too (stagnation).
            mark = "▶ halted here · " if row.seq in halt_seqs else ""
            note = notes.get((int(row.seq), explain.BATCH_LEVEL), "")
            safe.text(f"{mark}{_KIND.get(row.kind, row.kind)}" + (f" ({where})" if where else "") + ":"
                      + (f"   ⟨{note}⟩" if note else ""))
            safe.code(row.text)


def _labels(session_id: int, run: int) -> None:
    labels = data.fresh("run_labels", session_id)
    by = next((c for c in ("who", "labelled_by", "by") if c in labels.columns), None)
    if len(labels):
        name = labels[by].iloc[0] if by else None
        # A badge renders markdown: only plain name characters of who labelled it reach it.
        name = "".join(ch for ch in name if ch.isalnum() or ch in " .@-")[:40] if isinstance(name, str) else ""
        who = f" by {name}" if name.strip() else ""
        st.badge(f"labelled {labels['label'].iloc[0]}{who}", icon=":material/label:", color="green")
    else:
        st.badge("not labelled yet", icon=":material/label_off:", color="gray")
    with st.form(f"label_{session_id}_{run}"):
        st.write("Label this session (used by the guard leaderboard and by Compare):")
        current = labels["label"].iloc[0] if len(labels) else None
        # No pre-selected value: a saved label must never be confused with an untouched default.
        choice = st.radio("Label", read.LABELS, index=read.LABELS.index(current) if current in read.LABELS else None,
                          horizontal=True, key=f"label_choice_{session_id}_{run}")
        loop_calls = st.text_input("Loop calls (FIRST-LAST, 1-based; empty: this run's calls)", key="label_loop_calls")
        note = st.text_input("Reason", value="" if not len(labels) or pd.isna(labels["note"].iloc[0])
                             else labels["note"].iloc[0], key=f"label_note_{session_id}_{run}")
        if st.form_submit_button("Save label"):
            if choice is None:
                st.warning("Choose loop, normal or unclear first.")
            else:
                try:
                    rng = scoring.parse_loop_calls(loop_calls) if choice == scoring.LOOP else None
                    data.save_label(session_id, run, choice, note, *(rng or (None, None)))
                    st.success("Saved.")
                except ValueError as exc:
                    st.error(f"Not saved: {exc}")
                labels = data.fresh("run_labels", session_id)
    if len(labels):
        safe.table(sv.label_rows(labels), key="labels_table")


@st.fragment(run_every=LIVE_REFRESH_S)
def _enforced(session_id: int) -> None:
    """What a hook or `loopledger guard` enforced in this session, beside the replayed verdict of
    the same policy on the same call (read uncached: it must move while the agent runs)."""
    try:
        with data.connect() as conn:
            df = read_live.enforced(conn, session_id)
            now = read_live.enforced_label(conn) if len(df) else None
    except sa.exc.SQLAlchemyError:
        return  # a ledger from before live enforcement: nothing was enforced in it
    if not len(df):
        return
    st.subheader("Enforced on the live agent")
    st.caption(f"{len(df)} decision(s) a hook or guard made, newest first; 'replayed' is the same policy's "
               f"verdict on the same call in the transcript. Refreshes every {LIVE_REFRESH_S} s. Enforced now:")
    safe.text(now or "the default set (the one ingest judges with), until a setting is enforced")
    if "when" in df:
        df = df.assign(when=when.moments(df["when"]))
    safe.table(df, key="enforced_table")


def main() -> None:
    sid = _int_param("session")
    words.tab_title(f"Session #{sid}" if sid is not None else "Session")
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
    halts = data.q("halt_details", sid)
    _header(head, halts)
    _enforced(sid)  # what a hook or guard enforced on the live agent, beside the replayed verdicts
    if head["n_runs"] == 0:
        return
    long = data.q("run_outcomes", sid)

    run = _pick_run(head["n_runs"], halts)
    bounds = data.q("run_bounds", sid, run) or (0, head["n_events"])
    run_halts = halts[halts["run_idx"] == run]
    unit = positions.word(head["format"], head["path"])  # line, or message / record of a JSON document
    repeat = _why(sid, run, run_halts, sv.ending_text(head, run), unit)

    _matrix(long, halts)
    cost_view.session_cost(sid, run, run_halts, bounds)  # what it cost, per run and per call (app/cost_view.py)
    run_tl = _timeline(sid, head, run, bounds, long["policy_id"].nunique())

    st.subheader(f"{explain.run_ref(run).capitalize()}: transcript")
    halt_seqs = {int(s) for s in run_halts["halt_seq"]}
    focus_key = f"focus_{sid}_{run}"
    if focus_key not in st.session_state:
        linked = _int_param("step")
        st.session_state[focus_key] = linked if linked is not None and bounds[0] <= linked <= bounds[1] else \
            repeat["halt"] if repeat else bounds[0]

    def jump() -> None:
        st.session_state[focus_key] = repeat["halt"]

    c1, c2, _ = st.columns([1, 1, 2])
    c1.button("Jump to halt", on_click=jump, disabled=repeat is None, key="jump_halt")
    # Moved in calls, as every page numbers them; the page keeps the event it stands on (focus_key).
    first_call, last_call = data.q("calls_before", sid, bounds[0]) + 1, data.q("calls_before", sid, bounds[1] + 1)
    call_key = f"around_{sid}_{run}"

    def to_call() -> None:
        seq = data.q("seq_of_call", sid, int(st.session_state[call_key]))
        if seq is not None:
            st.session_state[focus_key] = int(seq)

    if last_call >= first_call:
        here = data.q("calls_before", sid, int(st.session_state[focus_key])) + 1
        st.session_state[call_key] = min(last_call, max(first_call, here))
        c2.number_input("Around call #", first_call, last_call, key=call_key, on_change=to_call,
                        help="the transcript around this call of the run")
    focus = int(st.session_state[focus_key])
    if repeat and focus == repeat["halt"]:
        # From the first call of the repeat, so the whole loop is read, not its last steps only.
        ranges = sv.excerpt_ranges(repeat["start"], min(bounds[1], focus + CONTEXT), MAX_EXCERPT)
        st.caption(f"From the first repeated call (call #{data.q('calls_before', sid, repeat['start']) + 1}) to "
                   f"{CONTEXT} events after the halt.")
    else:
        ranges = [(max(bounds[0], focus - CONTEXT), min(bounds[1], focus + CONTEXT))]
    # Each call numbered as labels and the leaderboard number it: call #N over the session.
    rows = sv.join_excerpts([sv.number_calls(data.q("transcript", sid, lo, hi), data.q("calls_before", sid, lo))
                             for lo, hi in ranges], ranges)
    notes = sv.verdict_notes(run_tl) if len(run_tl) else {}
    # "identical to step N": against the calls shown (the excerpt starts at the repeat's first call).
    numbers = {(int(r.seq), int(r.idx)): int(r.n) for r in rows.itertuples(index=False)
               if "n" in rows and pd.notna(r.n)} if len(rows) else {}
    _transcript(rows, notes, halt_seqs, explain.identical_marks(sv.shown_calls(rows), numbers), unit)

    st.subheader("Label")
    _labels(sid, run)


main()
