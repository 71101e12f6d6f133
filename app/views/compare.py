"""Compare: sweep one detector's parameter (or two, for a heatmap) over a set of sessions.

Every number comes from loopledger.analysis.sweep, which only adds up what loopledger.replay reports, so Compare
cannot disagree with the worker or the Replay page. What a sweep replays is kept per session
version and setting by the server (app/sweep_jobs.py): a live worker appending to a session makes
a new version, swept again; everything else is drawn from what was swept before.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st
from loopledger import vocab
from loopledger.analysis import explain, scoring, sweep
from loopledger.analysis.outcome import ENDED_WELL
from loopledger.app import charts_replay as charts
from loopledger.app import (
    cost_view,
    data,
    enforce_form,
    filters,
    nav,
    safe,
    score_table,
    sweep_jobs,
    when,
    words,
)
from loopledger.app import replay_view as rv
from loopledger.detectors.policy import DEFAULT_SPECS, NAMES, PARAMS, TEXT, PolicySpec
from loopledger.ledger import read, store, team

MAX_HEATMAP_SESSIONS = 60  # rows of the sessions × settings heatmap (most-halted first)
# A first view sweeps at most this many events × settings (a replay step each: the first pass of the
# default sweep renders in 0.35-0.6 s on the 10k-session bench ledger, BENCHMARKS.md), never fewer than
# FIRST_PASS_MIN events; the rest of the selection is swept in the background (see below).
FIRST_PASS_WORK = 36_000
FIRST_PASS_MIN = 1_000


def _conn():
    return data.connect()


def _load_and_sweep(db_url: str, versions, grid: sweep.Grid, cache: sweep.TallyCache | None) -> sweep.SweepResult:
    bar = st.progress(0.0, text="Loading sessions…")
    sessions = []
    with data.reader(db_url).connect() as conn:
        for i, (sid, updated, _) in enumerate(versions, 1):
            sessions.append(sweep.SessionEvents(sid, store.load_events(conn, sid), updated))
            if i % 50 == 0 or i == len(versions):
                bar.progress(0.2 * i / len(versions), text=f"Loaded {i}/{len(versions)} sessions")

    def tick(done: int, total: int, label: str) -> None:
        bar.progress(0.2 + 0.8 * done / total, text=f"Replayed {done}/{total} sessions under every setting")

    result = sweep.sweep(sessions, grid, progress=tick, cache=cache)
    bar.empty()
    return result


@st.cache_data(max_entries=8, show_spinner=False)
def _sweep(db_url: str, versions: tuple[tuple[int, float | None, int], ...], detector: str,
           axes: tuple[tuple[str, tuple], ...]) -> sweep.SweepResult:
    """A sweep too big for the server's tally cache, swept whole (on request) and kept as one."""
    # `versions` (id, updated_at, n_events) is in the key so a grown session is swept again.
    return _load_and_sweep(db_url, versions, sweep.make_grid(detector, [sweep.Axis(p, v) for p, v in axes]), None)


def _swept(versions, grid: sweep.Grid) -> sweep.SweepResult:
    """The sweep of these sessions from the server's tally cache, replaying (behind a progress
    bar) only the (session version, setting) pairs it lacks."""
    cache = sweep_jobs.tallies(data.url())
    todo = sweep.missing(versions, grid, cache)
    if todo:
        _load_and_sweep(data.url(), todo, grid, cache)
    done = sweep.fold(versions, grid, cache)
    # Pairs evicted meanwhile (another sweep filled the cache): this one replayed whole.
    return done if done is not None else _load_and_sweep(data.url(), versions, grid, None)


@st.fragment(run_every=1.0)
def _rest_of_the_sweep(key: tuple) -> None:
    """How far the background job sweeping the rest of the selection is; once it is done, the
    page is drawn again, over every selected session (from the cache)."""
    job = sweep_jobs.get(key)
    if job is not None and job.error is not None:
        st.error("The rest of the selection could not be swept; the figures stay those of the first pass:")
        safe.text(job.error)
        return
    if job is None or not job.running:
        st.rerun()
    st.progress(job.done / max(1, job.total), text=f"Sweeping the other {job.total} sessions in the background: "
                                                    f"{job.done} done")


ENDED = {"success": "succeeded", "submitted": "submitted", "failure": "failed"}


def _label_form(session_id: int, run_idx: int) -> None:
    """Label the picked flipped run here (the same write as the Session page's form)."""
    with st.form(f"cp_label_{session_id}_{run_idx}"):
        choice = st.radio(f"Label session {session_id} (from {explain.run_ref(run_idx)})", read.LABELS, index=None,
                          horizontal=True, key="cp_label")
        if st.form_submit_button("Save label"):
            if choice is None:
                st.warning("Choose a label first.")
            else:
                try:
                    data.save_label(session_id, run_idx, choice, "")
                    st.success(f"Labelled session {session_id} {choice}.")
                except ValueError as exc:
                    st.error(f"Not saved: {exc}")


# The parameter a first sweep of each detector moves: its halt threshold, the one that decides
# what it halts (progress' `window` only bounds its memory: six settings of it read the same).
SWEEP_FIRST = {"run-length": "max_strikes", "stagnation": "max_steps", "ladder": "halt_at", "window": "threshold",
               "cycle": "halt_repeats", "progress": "halt_at", "openhands": "action_observation",
               "gemini-cli": "repeats", "roo": "limit", "kilo": "threshold"}


def _default_range(detector: str, name: str) -> str:
    """Six values around the parameter's default, never below its minimum, for this detector's
    own parameter (widget keys carry detector and parameter, so a switch never keeps another's)."""
    p = next(p for p in PARAMS[detector] if p.name == name)
    d = p.default if isinstance(p.default, int) else p.minimum + 2
    lo = max(p.minimum, d - 2)
    return f"{lo}..{lo + 5}"


words.tab_title("Compare")
st.title("Compare settings")
st.caption("What would each setting have halted, how many calls would it have saved, and which runs flip?")

# ── which sessions: the sidebar's filters, the same as on Sessions ───────────────────────────
flt = filters.sidebar("compare", policies=False)
s1, s2 = st.columns([4, 1])
limit = int(s2.number_input("At most", 1, 20_000, 500, step=100, key="cp_limit",
                            help="the newest sessions that match the filters"))
chosen = data.q("sessions_page", flt, "id", True, limit)  # the newest `limit` sessions
session_ids = [int(i) for i in chosen["id"]]
with s1:
    # The filters may quote what a person typed: plain text.
    safe.text(f"{len(session_ids)} session(s) selected: "
              + (f"those the sidebar's filters match ({filters.describe(flt)})" if filters.describe(flt)
                 else "every session (no filter in the sidebar)") + (f", the newest {limit}" if len(session_ids) == limit
                                                                     else "") + ".")

# ── what to sweep ────────────────────────────────────────────────────────────────────────────
# The default set's first detector first: what ingest runs when nothing is configured.
detectors = list(dict.fromkeys([DEFAULT_SPECS[0].detector, *PARAMS]))
c1, c2, c3, c4, c5 = st.columns([2, 2, 2, 2, 2])
detector = c1.selectbox("Detector", detectors, key="cp_detector")
numeric = [p.name for p in PARAMS[detector] if p.kind not in (NAMES, TEXT)]
if not numeric:
    st.info("This detector has no numeric parameter to sweep.")
    st.stop()
first_param = SWEEP_FIRST.get(detector)
param = c2.selectbox("Parameter", numeric, key=f"cp_param_{detector}",
                     index=numeric.index(first_param) if first_param in numeric else 0)
rng = c3.text_input("Range", _default_range(detector, param), key=f"cp_range_{detector}_{param}",
                    help="2..6, 2..12:2 or 3,5,8")
param2 = c4.selectbox("Second parameter", ["(none)", *[n for n in numeric if n != param]],
                      key=f"cp_param2_{detector}")
rng2 = c5.text_input("Range 2", _default_range(detector, param2) if param2 != "(none)" else "",
                     key=f"cp_range2_{detector}_{param2}", disabled=param2 == "(none)")

if st.button("Run sweep", type="primary", key="cp_run"):
    st.session_state.cp_request = (detector, param, rng, param2, rng2)
request = st.session_state.get("cp_request")
if request is None:
    st.info("Choose a detector, a parameter and its range, then run the sweep.")
    st.stop()
if not session_ids:
    st.warning("No session matches the filters.")
    st.stop()

detector, param, rng, param2, rng2 = request
try:
    axes = [sweep.parse_axis(f"{param}={rng}")]
    if param2 != "(none)":
        axes.append(sweep.parse_axis(f"{param2}={rng2}"))
    grid = sweep.make_grid(detector, axes)
except ValueError as exc:
    st.error("Cannot sweep:")
    safe.text(str(exc))  # it quotes the values typed: plain text, never markdown
    st.stop()
n_points = len(sweep.grid_points(grid))
if n_points > 400:
    st.error(f"{n_points} settings is too many for one sweep; narrow the ranges (at most 400).")
    st.stop()

with _conn() as conn:
    versions = tuple(rv.session_versions(conn, session_ids))
    labelled = set(rv.session_labels(conn, session_ids))
# A first view sweeps a bounded first pass (labelled sessions first, then the newest that fit), so the
# page answers within its budget; the rest is swept in the background and said so. The pass is fixed by the
# ledger alone (event counts), never by how fast this machine is: the same view, the same cache key.
order = {sid: i for i, sid in enumerate(session_ids)}
sizes = sorted(((sid, n) for sid, _, n in versions), key=lambda x: order[x[0]])
whole = (request, tuple(session_ids))
first_ids = set(sweep.first_pass(sizes, labelled, max(FIRST_PASS_MIN, FIRST_PASS_WORK // n_points)))
# Kept per (session version, setting) by the server when it fits (sweep_jobs.MAX_TALLIES): a whole
# selection swept once, by the background job or an earlier view, is drawn from it at once.
cacheable = len(versions) * n_points <= sweep_jobs.MAX_TALLIES
result = sweep.fold(versions, grid, sweep_jobs.tallies(data.url())) if cacheable else None
partial = result is None and len(first_ids) < len(versions) and st.session_state.get("cp_whole") != whole
swept_versions = tuple(v for v in versions if v[0] in first_ids) if partial else versions
if result is None:
    result = _swept(swept_versions, grid) if cacheable else \
        _sweep(data.url(), swept_versions, detector, tuple((a.param, a.values) for a in grid.axes))
swept_ids = result.session_ids  # every total, flip and score below is over these sessions
job_key = None
if partial:
    n_all, n_done = sum(n for _, n in sizes), sum(n for sid, n in sizes if sid in first_ids)
    p1, p2 = st.columns([4, 1])
    rest = (" The other sessions are being swept in the background; the page redraws with all of them when "
            "they are done." if cacheable else "")
    p1.warning(f"First pass: swept {len(swept_ids)} of the {len(session_ids)} selected sessions "
               f"({n_done:,} of {n_all:,} events): the labelled ones first, then the newest that fit. "
               "Every figure below is over these sessions only." + rest, icon=":material/hourglass_top:")
    if cacheable:
        job_key, _ = sweep_jobs.start(data.reader(data.url()), data.url(), grid, versions,
                                      sweep.missing(versions, grid, sweep_jobs.tallies(data.url())))
        with p1:
            _rest_of_the_sweep(job_key)
    elif p2.button(f"Sweep all {len(session_ids)} sessions", key="cp_all", type="primary"):
        st.session_state.cp_whole = whole
        st.rerun()
if st.session_state.get("cp_job") not in (None, job_key):
    sweep_jobs.cancel(st.session_state.cp_job)  # another sweep is wanted now
st.session_state.cp_job = job_key
with _conn() as conn:
    endings = read.session_endings(conn, swept_ids)
valid = [s for s in result.settings if s.error is None]
two = len(grid.axes) == 2
axis_names = [a.param for a in grid.axes]
short = {s.label: explain.short_setting(dict(zip(axis_names, s.values, strict=True))) for s in valid}
ended_well = {sid for sid, (status, _, _) in endings.items() if status in ENDED_WELL}


def _first_halts(s: sweep.Setting) -> dict[int, tuple[int, int]]:
    """session → (run, seq) of this setting's first halt."""
    out: dict[int, tuple[int, int]] = {}
    for (sid, run), row in s.runs.items():
        if row.outcome == vocab.HALTED and row.halt_seq is not None and (sid not in out or row.halt_seq < out[sid][1]):
            out[sid] = (run, row.halt_seq)
    return out


first_halts = {s.label: _first_halts(s) for s in valid}


def _cell_link(s: sweep.Setting, sid: int | None) -> str:
    """Replay of `sid` under this setting, at its first halt (or the session's start)."""
    if sid is None:
        return ""
    run, seq = first_halts[s.label].get(sid, (None, None))
    return rv.replay_link(sid, run, s.spec.text, seq)


# ── totals against the setting ───────────────────────────────────────────────────────────────
st.subheader("Halts, warnings and calls saved per setting")
rows = sweep.totals_rows(result)
for r, s in zip(rows, result.settings, strict=True):
    if s.error is None:
        r["setting"] = short[s.label]
        r["sessions halted"] = s.sessions_halted  # the unit labels and the leaderboard count
        r["halted, later succeeded"] = sweep.halted_then_succeeded(s, ended_well)
        fh = first_halts[s.label]
        r["link"] = _cell_link(s, min(fh) if fh else (swept_ids[0] if swept_ids else None))
    else:
        r["setting"] = explain.short_setting(dict(zip(axis_names, s.values, strict=True)))
if two:
    h1, h2 = st.columns(2)
    h1.altair_chart(charts.grid_heatmap(rows, param, param2, "halts"), key="cp_grid_halts")
    h2.altair_chart(charts.grid_heatmap(rows, param, param2, "saved"), key="cp_grid_saved")
    st.caption("Numbers in the cells; colour follows their order, so middle settings differ too. "
               "Click a cell to replay the first session that setting halts.")
else:
    st.altair_chart(charts.sweep_lines_chart(rows, param), key="cp_lines")
    flat = charts.zero_metrics(rows, ("halts", "saved", "warnings"))
    if flat:
        st.caption(f"No chart of {' or '.join(words.title(m) for m in flat)}: 0 under every setting "
                   "on these sessions.")
cost_view.add_sweep_spend(rows, result.settings, swept_ids)  # $ and tokens saved (app/cost_view.py)
totals = pd.DataFrame(rows).drop(columns=["link"], errors="ignore")
# The unit labels and the leaderboard count first, beside the setting.
totals = totals[[*axis_names, "setting", *(["sessions halted"] if "sessions halted" in totals else []),
                 *[c for c in totals.columns if c not in (*axis_names, "setting", "sessions halted")]]]
if totals["error"].isna().all():
    totals = totals.drop(columns=["error"])  # skipped settings are said below; no column of None
else:
    totals["error"] = totals["error"].fillna("")
    # A skipped setting has no totals: "—", never a literal None.
    for col in totals.columns:
        if col not in axis_names and col not in ("setting", "error") and totals[col].isna().any():
            totals[col] = [when.MISSING if pd.isna(v) else f"{int(v):,}" for v in totals[col]]
for name in axis_names:
    if totals[name].isna().any():  # an unset limit reads "no limit", never None/null
        totals[name] = [explain.param_value(None if pd.isna(v) else int(v)) for v in totals[name]]
# Only columns that say something (a table wider than the page was cut off at 1400 px): a measure 0
# under every setting is left out, and the runs every setting replayed are said once below.
same = {c: int(totals[c].iloc[0]) for c in ("runs",)
        if c in totals and pd.api.types.is_numeric_dtype(totals[c]) and totals[c].nunique() == 1}
flat_cols = [c for c in ("strikes", "blocks", "warnings") if c in totals and pd.api.types.is_numeric_dtype(totals[c])
             and not totals[c].any()]
totals = totals.drop(columns=[*same, *flat_cols])
safe.table(totals, key="cp_totals", column_config={
    **words.column_titles(totals.columns),
    "sessions halted": st.column_config.NumberColumn("sessions halted", help="sessions this setting halts at all"),
    "halted, later succeeded": st.column_config.NumberColumn(
        "halted, later succeeded", help="sessions whose transcript ends in success or a submission "
        "(tau-bench reward, SWE-agent / OpenHands exit status, a CTF flag) where this setting halted a run"),
    "saved": st.column_config.NumberColumn("calls saved", help="tool calls the halts would have skipped"),
    "halts": st.column_config.NumberColumn("halts", help="halted runs, one per run this setting halted"),
})
st.caption((f"Every setting replayed the same {same['runs']:,} runs. " if same else "")
           + (f"No {', '.join(flat_cols[:-1]) + ' or ' if len(flat_cols) > 1 else ''}{flat_cols[-1]} under any "
              "setting (no column for them). " if flat_cols else "")
           + f"{len(endings)} of {len(swept_ids)} swept sessions record how they ended "
           f"({len(ended_well)} succeeded or submitted).")
for s in result.settings:
    if s.error:
        # Inert text: the error quotes user-typed values.
        safe.text(f"Skipped {explain.short_setting(dict(zip(axis_names, s.values, strict=True)))}: {s.error}")

if not valid:
    st.stop()

# ── when each session first halts ────────────────────────────────────────────────────────────
st.subheader("First halt per session and setting")
fh_rows = sweep.first_halt_rows(result)
halted_any = {r["session_id"] for r in fh_rows if r["first_halt_seq"] is not None}
shown = set(sorted(halted_any)[:MAX_HEATMAP_SESSIONS])
by_label = {s.label: s for s in valid}
if shown:
    cells = [{"session_id": r["session_id"], "setting": short[r["setting"]], "first_halt_at": r["first_halt_at"],
              "first_halt_seq": r["first_halt_seq"], "link": _cell_link(by_label[r["setting"]], r["session_id"])}
             for r in fh_rows if r["session_id"] in shown]
    st.altair_chart(charts.first_halt_heatmap(cells, [short[s.label] for s in valid]), key="cp_first_halt")
    st.caption("Each cell: the call (#N over the session) where that setting first halts the session; grey: never. "
               "Click any cell to replay that session under that setting.")
    if len(halted_any) > len(shown):
        st.caption(f"Showing {len(shown)} of {len(halted_any)} sessions that halt under some setting.")
else:
    st.caption("No setting halts any selected session.")

# ── runs that flip ───────────────────────────────────────────────────────────────────────────
st.subheader("Runs whose outcome flips between two settings")
live_spec = PolicySpec(detector)  # the detector at its defaults: what ingest runs and stores
with _conn() as conn:
    live_runs = rv.stored_runs(conn, live_spec.id, swept_ids)
live = sweep.Setting((), live_spec, runs={k: sweep.RunRow(o, h, sv) for k, (o, h, sv) in live_runs.items()}) \
    if live_runs is not None else None
# The detector at its defaults, as ingest stored its verdicts: not what live agents are judged by
# (that is the enforced set, below), so never called "live".
LIVE = f"stored default ({rv.spec_label(live_spec).removeprefix(detector + ' ')})"
choices = ([LIVE] if live is not None else []) + [short[s.label] for s in valid]
setting_of = {short[s.label]: s for s in valid} | ({LIVE: live} if live is not None else {})
a_col, b_col = st.columns(2)
a_label = a_col.selectbox("Setting A", choices, index=0, key="cp_flip_a",
                          help="the stored default: the detector at its defaults, as ingest stored its verdicts")
b_default = next((i for i in range(len(choices) - 1, -1, -1)
                  if choices[i] != LIVE and setting_of[choices[i]].spec.id != live_spec.id), len(choices) - 1)
b_label = b_col.selectbox("Setting B", choices, index=b_default, key="cp_flip_b")
sa_, sb_ = setting_of[a_label], setting_of[b_label]
flips = sweep.flipped(sa_, sb_)
if flips:
    def _halt(sid: int, v):
        # call #N over the session, as labels and the leaderboard number calls (cached count per step).
        return "—" if v is None else explain.call_ref(data.q("calls_before", sid, int(v)) + 1, int(v))

    table = pd.DataFrame([{
        "session": f.session_id, "run": explain.run_ref(f.run_idx).removeprefix("run "), "A": f.outcome_a,
        "B": f.outcome_b,
        "A halts at": _halt(f.session_id, f.halt_seq_a), "B halts at": _halt(f.session_id, f.halt_seq_b),
        "ended": ENDED.get(endings.get(f.session_id, (None,))[0], "—"),
        # Land on this setting's halt, else on the other's: the step where the two part ways.
        "replay A": rv.replay_link(f.session_id, f.run_idx, sa_.spec.text,
                                   f.halt_seq_a if f.halt_seq_a is not None else f.halt_seq_b),
        "replay B": rv.replay_link(f.session_id, f.run_idx, sb_.spec.text,
                                   f.halt_seq_b if f.halt_seq_b is not None else f.halt_seq_a),
    } for f in flips])
    safe.table(table, key="cp_flips", column_config={
        "replay A": st.column_config.LinkColumn("replay A", display_text="open in Replay"),
        "replay B": st.column_config.LinkColumn("replay B", display_text="open in Replay"),
        "ended": st.column_config.TextColumn("ended", help="how the session's transcript says it ended"),
    })
    # The same links as plain buttons: a table cell is awkward to hit, a button is not.
    o1, o2, o3 = st.columns([3, 1, 1])
    pick = o1.selectbox("Open a flipped run", range(len(flips)), key="cp_flip_pick", format_func=lambda i: (
        f"session {flips[i].session_id} {explain.run_ref(flips[i].run_idx)}: {flips[i].outcome_a} → "
        f"{flips[i].outcome_b}"))
    nav.same_tab_link(o2, "Replay under A", table.iloc[pick]["replay A"])
    nav.same_tab_link(o3, "Replay under B", table.iloc[pick]["replay B"])
    _label_form(flips[pick].session_id, flips[pick].run_idx)
else:
    st.caption("No run changes outcome between these two settings.")

# ── precision and recall against labels ──────────────────────────────────────────────────────
st.subheader("Precision and recall against labelled sessions")
with _conn() as conn:
    session_labels = rv.session_labels(conn, swept_ids)
scores = sweep.session_scores(result, session_labels, short)
if any(sc.loops + sc.normal for sc in scores):
    # The guard leaderboard's rule and unit (app/score_table.py): a stored policy and the same setting
    # here read the same numbers.
    st.altair_chart(charts.pr_chart(score_table.score_rows(scores)), key="cp_pr")
    shown = score_table.score_rows(scores).drop(columns=["policy_id"]).rename(columns={"policy": "setting"})
    heads = score_table.titles()
    safe.table(shown, key="cp_scores", column_config={
        c: st.column_config.Column(heads[c][0], help=heads[c][1]) for c in shown.columns if c in heads})
    n_scored = sum(1 for lb, _, _ in session_labels.values() if lb != scoring.UNCLEAR)
    st.caption(f"{n_scored} labelled session(s) among the {len(swept_ids)} swept. " + score_table.CAPTION)
else:
    st.caption("No swept session is labelled loop or normal yet (label sessions on the Session page, below the "
               "flip list, or with `loopledger labels import`).")

# ── save ─────────────────────────────────────────────────────────────────────────────────────
st.subheader("Save as policies")
labels = [s.label for s in valid]
to_save = st.multiselect("Settings to store as policies (computed over every session in the ledger)",
                         labels, default=[], key="cp_save_sel", format_func=lambda lb: short.get(lb, lb))
if st.button("Save as policies", disabled=not to_save, key="cp_save"):
    specs = [valid[labels.index(lb)].spec for lb in to_save]
    with _conn() as conn:
        every = store.session_ids(conn)
    bar = st.progress(0.0, text="Saving…")
    try:
        n = data.save_policies(specs, every, progress=lambda d, t, _: bar.progress(d / t, text=f"Session {d}/{t}"))
    except team.Forbidden as exc:  # a labeller's or an owner's: the write itself says no
        bar.empty()
        safe.text(f"Not saved: {exc}")
    else:
        bar.empty()
        st.success(f"Stored {n} polic{'y' if n == 1 else 'ies'} over {len(every)} session(s).")

# ── enforce ──────────────────────────────────────────────────────────────────────────────────


def _enforce_order(settings: list[sweep.Setting]) -> list[sweep.Setting]:
    """Best first: by the leaderboard's rank when sessions are labelled; otherwise the detector's
    default setting first, then the fewest sessions halted (the mildest), never `strikes=0` on top."""
    if any(sc.loops + sc.normal for sc in scores):
        order = [sc.policy_id for sc in scoring.rank(scores)]
        return sorted(settings, key=lambda st_: order.index(st_.spec.id))
    return sorted(settings, key=lambda st_: (st_.spec.id != live_spec.id, st_.sessions_halted, st_.totals["halts"]))


def _effect(st_: sweep.Setting) -> str:
    words_ = f"halts {st_.sessions_halted:,} of {len(swept_ids):,} swept sessions, saves {st_.totals['saved']:,} calls"
    sc = next((x for x in scores if x.policy_id == st_.spec.id), None)
    if sc is not None and sc.loops + sc.normal:
        words_ = f"caught {sc.caught} of {sc.loops} loop sessions, {sc.false_halts} false halts; " + words_
    return words_


enforce_form.form("cp_enforce", [enforce_form.Choice(st_.label, st_.spec, short.get(st_.label, st_.label), _effect(st_))
                                 for st_ in _enforce_order(valid)], origin="compare")
