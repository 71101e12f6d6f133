"""Guard leaderboard: every stored policy side by side, scored against the labelled sessions.

Deep links: ./leaderboard?policy=ID&cell=COLUMN lists the sessions behind one number (each opens
Replay at the policy's halt); ./leaderboard?a=ID&b=ID lists the sessions where two policies
disagree; &sort=COLUMN orders the table. The scoring rule is loopledger.analysis.scoring's, the numbers
come from the read model (read.judged: one small row per policy × labelled session), so this
page, `loopledger score` and the bench table cannot disagree. Label-dependent reads are uncached:
a label saved here shows at once. Policy labels and transcript text appear only in tables,
charts and st.text (app.safe).
"""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd
import streamlit as st
from loopledger.analysis import crossval, families, scoring
from loopledger.app import (
    charts_scores,
    cost_view,
    data,
    enforce_form,
    nav,
    safe,
    score_table,
    team_view,
    when,
    words,
)
from loopledger.app import replay_view as rv
from loopledger.app.label_form import label_form
from loopledger.detectors.policy import DEFAULT_SPECS
from loopledger.ledger import read
from loopledger.live import enforce

COLUMN_TITLES = {c: title for c, (title, _) in score_table.COUNTS.items()}
OUTCOME_WORDS = {scoring.CAUGHT: "caught", scoring.EARLY: "halted early", scoring.MISSED: "missed",
                 scoring.FALSE_HALT: "false halt", scoring.CLEAN: "clean"}
LIST_LIMIT = 500  # sessions listed behind one number


def cell_link(policy_id: str, column: str, n: int) -> str:
    """The link behind one number; it ends in the number, which the table shows as the link's text."""
    return "./leaderboard?" + urlencode({"policy": policy_id, "cell": column, "n": n})


def _call(n: int | None) -> str:
    """A 1-based session call number as every page writes it: "call #10" ("—": never halted)."""
    return when.MISSING if n is None else f"call #{n}"


def _replay_link(j: scoring.Judged) -> str:
    return rv.replay_link(j.session_id, j.halt_run, j.policy_id, j.halt_seq)


def session_rows(judged: list[scoring.Judged], brief: pd.DataFrame) -> pd.DataFrame:
    """One row per judged session: what it is, where the policy halted, links to Replay and Session."""
    info = {int(r.id): r for r in brief.itertuples(index=False)}
    rows = []
    for j in judged:
        b = info.get(j.session_id)
        rows.append({"session": j.session_id, "key": b.key if b else "", "title": b.title if b else "",
                     "label": j.label, "loop calls": scoring.format_loop_calls(j.first, j.last),
                     "outcome": OUTCOME_WORDS[j.outcome], "halt at call": _call(j.halt_at),
                     "calls into loop": when.number(j.into_loop, "{:d}"),
                     "replay": _replay_link(j), "session page": f"./session?session={j.session_id}"})
    return pd.DataFrame(rows, columns=["session", "key", "title", "label", "loop calls", "outcome", "halt at call",
                                       "calls into loop", "replay", "session page"])


LINKS = {"replay": st.column_config.LinkColumn("replay", display_text="open in Replay"),
         "session page": st.column_config.LinkColumn("session page", display_text="open session")}


def _drill(policy_id: str, cell: str, by_policy: dict[str, list[scoring.Judged]], names: dict[str, str]) -> None:
    if policy_id not in names or cell not in scoring.COUNT_COLUMNS:
        st.warning("That link names no stored policy or no column of the leaderboard; showing the table.")
        return
    wanted = scoring.cell_outcomes(cell)
    rows = [j for j in by_policy.get(policy_id, []) if j.outcome in wanted][:LIST_LIMIT]
    st.subheader(f"The sessions behind {COLUMN_TITLES[cell]}: {len(rows)}")
    safe.text(f"policy: {names[policy_id]}")
    brief = data.fresh("sessions_brief", [j.session_id for j in rows])
    table = session_rows(rows, brief)
    safe.table(table, key="lb_cell_rows", column_config=LINKS | {
        "title": st.column_config.TextColumn("title", width="medium")})
    if len(rows):
        # The same links as buttons: a table cell is awkward to hit, a button is not.
        c1, c2 = st.columns([3, 1])
        pick = c1.selectbox("Open a session", range(len(rows)), key="lb_cell_pick",
                            format_func=lambda i: f"session #{rows[i].session_id}: {OUTCOME_WORDS[rows[i].outcome]}"
                            + (f" at {_call(rows[i].halt_at)}" if rows[i].halt_at else ""))
        nav.same_tab_link(c2, "Replay at the halt" if rows[pick].halt_at else "Replay", table.iloc[pick]["replay"])
        label_form([j.session_id for j in rows], "lb_cell")
    st.page_link("views/leaderboard.py", label="Back to the whole leaderboard")


TOP = 3  # the policies whose splits pick the sessions to label next


def _label_next(ranked: list[scoring.PolicyScore], names: dict[str, str]) -> None:
    """Unlabelled sessions the top policies split on (scoring.label_next), with the label form."""
    top = tuple(s.policy_id for s in ranked[:TOP])
    halts = data.fresh("unlabelled_halts", top)
    picks = scoring.label_next(halts.itertuples(index=False, name=None), top, LIST_LIMIT)
    if not picks:
        st.caption("No unlabelled session splits the top policies: a new label would move them alike.")
        return
    st.caption("Unlabelled sessions where some of the top policies halt and others do not: whatever the label, "
               "it moves their scores apart (the intervals above narrow where it counts).")
    brief = data.fresh("sessions_brief", [p.session_id for p in picks])
    info = {int(r.id): r for r in brief.itertuples(index=False)}
    rows = [{"session": p.session_id, "key": info[p.session_id].key if p.session_id in info else "",
             "title": info[p.session_id].title if p.session_id in info else "",
             "calls": info[p.session_id].n_calls if p.session_id in info else None,
             "halted by": "; ".join(names.get(x, x) for x in p.halting),
             "not halted by": "; ".join(names.get(x, x) for x in p.quiet),
             "session page": f"./session?session={p.session_id}"} for p in picks]
    safe.table(pd.DataFrame(rows), key="lb_next", column_config={
        "title": st.column_config.TextColumn("title", width="medium"),
        "session page": st.column_config.LinkColumn("session page", display_text="open session")})
    label_form([p.session_id for p in picks], "lb_next")


def _disagree(a: str, b: str, by_policy: dict[str, list[scoring.Judged]], names: dict[str, str]) -> None:
    pairs = scoring.disagreements(by_policy.get(a, []), by_policy.get(b, []))
    st.subheader(f"Sessions where they disagree: {len(pairs)}")
    if not pairs:
        st.caption("Both policies did the same on every labelled session they both judged.")
        return
    brief = data.fresh("sessions_brief", [x.session_id for x, _ in pairs[:LIST_LIMIT]])
    info = {int(r.id): r for r in brief.itertuples(index=False)}
    rows = [{"session": x.session_id, "key": info[x.session_id].key if x.session_id in info else "",
             "label": x.label, "loop calls": scoring.format_loop_calls(x.first, x.last),
             "A": OUTCOME_WORDS[x.outcome], "A halts at": _call(x.halt_at),
             "B": OUTCOME_WORDS[y.outcome], "B halts at": _call(y.halt_at),
             "replay A": _replay_link(x), "replay B": _replay_link(y)} for x, y in pairs[:LIST_LIMIT]]
    safe.table(pd.DataFrame(rows), key="lb_disagree", column_config={
        "replay A": st.column_config.LinkColumn("replay A", display_text="open in Replay"),
        "replay B": st.column_config.LinkColumn("replay B", display_text="open in Replay")})
    label_form([x.session_id for x, _ in pairs], "lb_disagree")


def _label_counts(totals: dict) -> None:
    cols = st.columns(5)
    for col, (key, title) in zip(cols, (("loop", "Loop sessions"), ("normal", "Normal sessions"),
                                        ("unclear", "Unclear sessions"), ("imported", "Imported labels"),
                                        ("dashboard", "Dashboard labels")), strict=True):
        col.metric(title, totals[key])


def board_table(ranked: list[scoring.PolicyScore], spend: dict[str, tuple[str, str]]) -> pd.DataFrame:
    """The leaderboard's table, pure: score_table's rows (each count a link to its sessions) with
    loops flagged inside before the calls saved, calls lost after them, then tokens and $ saved
    (`spend`: cost_view.saved_spend_on_labelled). More columns (cross-validated scores) join this
    frame the same way."""
    rows = cost_view.with_saved_spend(score_table.score_rows(ranked, cell_link), spend)
    at = list(rows.columns).index("saved")
    rows.insert(at, "flagged", [f"{s.flagged}/{s.loops}" for s in ranked])
    rows.insert(at + 2, "lost", [scoring.share_text(s.lost, s.normal_calls) for s in ranked])
    return rows


FAMILY_COLUMNS = ("policy", *crossval.CURRENCY_HEADS)


def family_frames(judged: list[scoring.Judged], ranked: list[scoring.PolicyScore],
                  fams: dict[int, str]) -> dict[str, pd.DataFrame]:
    """Per family present (coding agents, harnesses, other), each policy in the leaderboard's
    order in the user's currency, in sample (pure: crossval.family_tallies)."""
    out = {}
    for fam, tallies in crossval.family_tallies(judged, [s.policy_id for s in ranked], fams).items():
        out[fam] = pd.DataFrame([(s.policy, *tallies[s.policy_id].currency_cells()) for s in ranked],
                                columns=list(FAMILY_COLUMNS))
    return out


def _families(judged: list[scoring.Judged], ranked: list[scoring.PolicyScore], fams: dict[int, str]) -> None:
    st.subheader("In the user's currency, per family")
    st.caption("Coding agents (Claude Code, Codex CLI, Copilot CLI, Cline/Roo/Kilo, Aider, OpenCode, Gemini CLI) "
               "and harnesses (tau-bench, tau2-bench, mini-swe-agent, OpenHands, SWE-agent, plain OpenAI/Anthropic "
               "logs) loop differently: each is scored apart. Calls saved: the calls inside labelled loops after "
               "the halt, up to the loop's last call, of all calls spent inside loops; calls lost: the calls a "
               "normal session made after a false halt. Calls have a session-bootstrap 95% interval, sessions "
               "a Wilson one.")
    for fam, frame in family_frames(judged, ranked, fams).items():
        safe.text(fam)
        safe.table(frame, key=f"lb_family_{fam}", column_config={
            "policy": st.column_config.TextColumn("policy", width="medium")})


def _board(ranked: list[scoring.PolicyScore], names: dict[str, str]) -> None:
    """The table, the same links as a picker and a button, and the outcome bars."""
    rows = board_table(ranked, cost_view.saved_spend_on_labelled())
    heads = score_table.titles()
    link_cols = {c: st.column_config.LinkColumn(heads[c][0], help=heads[c][1], display_text=r"n=(\d+)$")
                 for c in scoring.COUNT_COLUMNS}
    text_cols = {c: st.column_config.TextColumn(heads[c][0], help=heads[c][1])
                 for c in ("precision", "recall", "flagged", "saved", "lost", "into loop (median)",
                           "into loop (each catch)")}
    safe.table(rows.drop(columns=["policy_id"]), key="lb_table", column_config=link_cols | text_cols | {
        # Pinned: the columns past 1400 px scroll beside it, the policy they belong to stays in view.
        "policy": st.column_config.TextColumn("policy", width=200, pinned=True)})
    st.caption(score_table.CAPTION)
    # The same links as a picker and a button: a table cell is awkward to hit, a button is not.
    by_id = {s.policy_id: s for s in ranked}
    o1, o2, o3 = st.columns([3, 2, 1])
    pick = o1.selectbox("Sessions of policy", list(by_id), format_func=names.get, key="lb_open_policy")
    cell = o2.selectbox("Behind the number", scoring.COUNT_COLUMNS, key="lb_open_cell",
                        format_func=lambda c: f"{COLUMN_TITLES[c]}: {by_id[pick].row()[c]}")
    o3.link_button("Open these sessions", cell_link(pick, cell, by_id[pick].row()[cell]))
    bars = pd.DataFrame([{"policy": s.policy, **{p: s.row()[p] for p in charts_scores.PARTS},
                          **{f"link_{p}": cell_link(s.policy_id, p, s.row()[p]) for p in charts_scores.PARTS}}
                         for s in ranked])
    st.altair_chart(charts_scores.outcome_bars(bars), key="lb_chart")


CV_COLUMNS = ("choice", "chosen on every session", "in sample: loops halted inside", "in sample: normal halted",
              "in sample: normal warned", "held out: loops halted inside", "held out: normal halted",
              "held out: normal warned")
HOLD_OUT = {"folder": "project folder", "agent": "agent (format)", "file": "file"}


def cv_frame(rows: list[tuple[str, crossval.CrossValidated]], names: dict[str, str]) -> pd.DataFrame:
    """The cross-validated choices as a table (pure): each with in-sample and held-out figures,
    sessions counted, each with its Wilson 95% interval."""
    names = {**names, crossval.DEFAULT_SET: crossval.DEFAULT_SET}
    return pd.DataFrame([(name, names.get(cv.chosen, str(cv.chosen)), *cv.in_sample.cells(), *cv.held_out.cells())
                         for name, cv in rows], columns=list(CV_COLUMNS))


def cv_family_frames(rows: list[tuple[str, crossval.CrossValidated]], names: dict[str, str]
                     ) -> dict[str, pd.DataFrame]:
    """Per family present, each cross-validated choice in the user's currency, in sample beside
    held out (pure)."""
    names = {**names, crossval.DEFAULT_SET: crossval.DEFAULT_SET}
    present = [f for f in families.FAMILIES if any(f in cv.in_sample_by for _, cv in rows)]
    heads = ["choice", "chosen on every session", *(f"in sample: {h}" for h in crossval.CURRENCY_HEADS),
             *(f"held out: {h}" for h in crossval.CURRENCY_HEADS)]
    return {fam: pd.DataFrame([(name, names.get(cv.chosen, str(cv.chosen)),
                                *cv.in_sample_by.get(fam, crossval.Tally()).currency_cells(),
                                *cv.held_out_by.get(fam, crossval.Tally()).currency_cells())
                               for name, cv in rows], columns=heads) for fam in present}


def session_families(frame: pd.DataFrame) -> dict[int, str]:
    """labelled_sources' rows → session id → family (loopledger.analysis.families)."""
    return {int(r.session_id): families.family(r.format, r.agent) for r in frame.itertuples(index=False)}


def _cross_validated(judged: list[scoring.Judged], names: dict[str, str]) -> None:
    st.subheader("What to expect on sessions nobody tuned on")
    st.caption("The table above scores each setting on the very sessions you would choose it by, which "
               "flatters the one that fits them. Here each choice is made again with one group of sessions "
               "held out, and scored on that group; the held-out figures, pooled, are what to expect on the "
               "next project. The choice puts precision first: fewest false halts, then most loops caught.")
    by = st.radio("Hold out one", list(HOLD_OUT), horizontal=True, key="lb_cv_by", format_func=HOLD_OUT.get)
    frame = data.fresh("labelled_sources")
    groups = {int(r.session_id): crossval.group_of(r.path, r.format, by) for r in frame.itertuples(index=False)}
    n = crossval.group_count(groups, judged)
    if n < 2:
        st.info(f"The labelled sessions come from {n} {HOLD_OUT[by]}: there is nothing to hold out. "
                "Hold out one file instead, or label sessions from another project.")
        return
    fams = session_families(frame)
    rows = crossval.leaderboard_choices(judged, list(names.items()), groups, [s.id for s in DEFAULT_SPECS], fams)
    st.caption(f"{n} groups, one {HOLD_OUT[by]} held out at a time.")
    safe.table(cv_frame(rows, names), key="lb_cv")
    for fam, table in cv_family_frames(rows, names).items():
        safe.text(f"{fam}, in the user's currency")
        safe.table(table, key=f"lb_cv_family_{fam}")


def _two_policies(ids: list[str], by_policy: dict[str, list[scoring.Judged]], names: dict[str, str]) -> None:
    st.subheader("Where two policies disagree")
    params = st.query_params
    a0 = params.get("a") if params.get("a") in ids else ids[0]
    b0 = params.get("b") if params.get("b") in ids else ids[min(1, len(ids) - 1)]
    c1, c2 = st.columns(2)
    a = c1.selectbox("Policy A", ids, index=ids.index(a0), format_func=names.get, key="lb_a")
    b = c2.selectbox("Policy B", ids, index=ids.index(b0), format_func=names.get, key="lb_b")
    if a == b:
        st.caption("Choose two different policies.")
    else:
        _disagree(a, b, by_policy, names)


def _enforce(ranked: list[scoring.PolicyScore], names: dict[str, str]) -> None:
    """The shared enforce form, the policies best first, each saying what it caught and halts."""
    per = data.q("per_policy", read.SessionFilter())
    halted = dict(zip(per["policy_id"], per["sessions_halted"], strict=True))
    n = int(data.q("headline", read.SessionFilter())["sessions"])
    with data.connect() as conn:
        pols = rv.list_policies(conn)
    specs = {}
    for p in pols:
        try:
            specs[p["id"]] = enforce.spec_of_row(p["detector"], p["params"])
        except enforce.NotRegistered:  # a stored module:factory: looked up, never imported
            specs[p["id"]] = None
    enforce_form.form("lb_enforce", [enforce_form.Choice(
        s.policy_id, specs.get(s.policy_id), names.get(s.policy_id, s.policy_id),
        f"caught {s.caught} of {s.loops} loop sessions, {s.false_halts} false halts; "
        f"halts {int(halted.get(s.policy_id, 0)):,} of {n:,} sessions") for s in ranked], origin="leaderboard")


def _who_labelled() -> None:
    st.subheader("Who labelled what")
    by = st.radio("Labelled by", ("all", "imported", "dashboard"), horizontal=True, key="lb_by")
    labels = data.fresh("label_list", "" if by == "all" else by)
    if not len(labels):
        st.caption("No labels yet.")
        return
    labels.insert(0, "open", [f"./session?session={int(i)}" for i in labels["session_id"]])
    labels["labelled_at"] = when.moments(labels["labelled_at"])
    labels["loop_calls"] = [c or when.MISSING for c in labels["loop_calls"]]
    labels["path"] = [words.shown_path(x) for x in labels["path"]]
    safe.table(labels, key="lb_labels", column_config={
        "open": st.column_config.LinkColumn("open", display_text="open"),
        **words.column_titles(labels.columns)})


def main() -> None:
    words.tab_title("Guard leaderboard")
    st.header("Guard leaderboard")
    st.caption("Each stored policy scored against people's labels, session by session: a halt inside the "
               "labelled loop is caught, before it early (it stopped good work), after it or none missed; any "
               "halt on a normal session is a false halt. Unclear sessions are left out. Every number opens its "
               "sessions. Precision and recall come with their Wilson 95% intervals: how much so few labels can tell.")
    totals = data.fresh("label_totals")
    _label_counts(totals)
    pols = data.q("policies")
    names = dict(zip(pols["id"], pols["label"], strict=True))
    judged = read.judged_rows(data.fresh("judged"))
    by_policy: dict[str, list[scoring.Judged]] = {}
    for j in judged:
        by_policy.setdefault(j.policy_id, []).append(j)

    params = st.query_params
    if params.get("policy") or params.get("cell"):
        _drill(params.get("policy", ""), params.get("cell", ""), by_policy, names)
        return
    if not totals["loop"] + totals["normal"]:
        st.info("No session is labelled loop or normal yet. Import labels with "
                "`loopledger labels import FILE.csv`, or label sessions from a list of runs.")
    elif not names:
        st.info("The ledger has no policies yet: ingest transcripts first.")
    else:
        sort_from_link = params.get("sort")
        if sort_from_link in scoring.SORTABLE and "lb_sort" not in st.session_state:
            st.session_state.lb_sort = sort_from_link
        sort = st.selectbox("Sort by", scoring.SORTABLE, key="lb_sort", format_func=words.title,
                            help="rank: precision first — fewest false halts, then most loops caught, fewest early halts.")
        ranked = scoring.rank(scoring.score(judged, list(names.items())), sort)
        _board(ranked, names)
        _families(judged, ranked, session_families(data.fresh("labelled_sources")))
        _cross_validated(judged, names)
        _two_policies([s.policy_id for s in ranked], by_policy, names)
        st.subheader("Label next")
        _label_next(ranked, names)
        _enforce(scoring.rank(ranked), names)  # best first, whatever the table's order
        team_view.enforcement_history()
    _who_labelled()

main()
