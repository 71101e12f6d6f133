"""Enforce on live agents: the one form behind Compare's and the guard leaderboard's button.

A person picks a setting from a list that says what each would do (it is ordered by the page:
best score first, or the detector's default first); it is ADDED to what is enforced now (the
default set, until one is chosen) unless the person deliberately picks the second choice, to
REPLACE it; the sentence above the button says which before pressing, and says what is enforced
once pressed (the page is drawn again with the new setting: nothing reads the old one).
The write goes through app.data.enforce (loopledger.live.enforce, as the signed-in user: only an
owner may, checked in the writing transaction); setting labels are spec text, shown as plain text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
import streamlit as st
from loopledger.app import data, safe
from loopledger.detectors.policy import PolicySpec, default_set_words
from loopledger.ledger import read_live, team
from loopledger.live import enforce

REPLACE, ADD = "replace", "add"
# Adding first, the default: one setting never silently drops the rest of the enforced set.
HOW = {ADD: "add it to what is enforced now", REPLACE: "replace what is enforced now with it alone"}
BUTTON = {ADD: "Add it to the enforced set", REPLACE: "Replace the enforced set with it"}


@dataclass(frozen=True)
class Choice:
    key: str  # what the page knows it by (a policy id, a setting's label)
    spec: PolicySpec | None  # None: its detector is not registered here (it cannot be enforced)
    name: str  # short, for the list and the button
    effect: str  # "halts 12 of 80 sessions", for the list and the button


def _current() -> tuple[tuple[PolicySpec, ...], bool] | None:
    """(what is enforced now, whether a person chose it), or None when it cannot be read here."""
    try:
        with data.connect() as conn:
            chosen = enforce.enforced_specs(conn)
    except (enforce.NotRegistered, sa.exc.SQLAlchemyError):
        return None
    return (chosen, True) if chosen else (enforce.LIVE_DEFAULT, False)


def now_words(current: tuple[tuple[PolicySpec, ...], bool] | None) -> str:
    """What is enforced now, named as the form says it ("the default set (progress, …)")."""
    if current is None:
        return "the enforced setting"
    specs, chosen = current
    if not chosen:
        return f"the default set ({default_set_words()})"
    return ("the enforced set: " if len(specs) > 1 else "the enforced policy ") + " + ".join(sp.label for sp in specs)


def plan(choice: Choice, how: str, current: tuple[tuple[PolicySpec, ...], bool] | None) -> tuple[str, list]:
    """(what pressing will do, in a sentence; the specs it will enforce) — pure."""
    if choice.spec is None:
        return f"{choice.name} cannot be enforced here: its detector is not registered in this process.", []
    now = now_words(current)
    if how == ADD and current is not None:
        if choice.spec in current[0]:
            return f"{choice.name} is enforced already ({now}): nothing to add.", []
        specs = list(dict.fromkeys([*current[0], choice.spec]))
        return (f"Enforcing adds {choice.name} to {now}: each live call then gets the most severe verdict of any of "
                f"them ({len(specs)} policies).", specs)
    return (f"Enforcing replaces {now} with {choice.name} alone: live agents are then judged by it and nothing "
            "else.", [choice.spec])


def form(key: str, choices: Sequence[Choice], origin: str, on_done: Callable[[], None] | None = None) -> None:
    """The list, replace-or-add, the sentence saying which, the button, and what is enforced now."""
    st.subheader("Enforce on live agents")
    st.caption("The hooks (`loopledger hook install claude-code`), `loopledger guard` and Policy.enforced(db) "
               "judge live agents with the enforced setting.")
    done = st.session_state.pop(f"{key}_done", None)  # said once, on the run after a press
    try:
        with data.connect() as conn:
            label_now = read_live.enforced_label(conn)
    except sa.exc.SQLAlchemyError:
        label_now = None
    safe.text("Enforced now: " + (label_now or f"the default set ({default_set_words()})"))
    by_key = {c.key: c for c in choices}
    e1, e2 = st.columns([3, 2])
    # Nothing preselected: what live agents may do changes only when a person picks a setting.
    picked = e1.selectbox("Setting to enforce", list(by_key), index=None, key=f"{key}_sel",
                          placeholder="pick a setting", format_func=lambda k: f"{by_key[k].name} — {by_key[k].effect}")
    how = e2.radio("Enforcing it will", list(HOW), format_func=HOW.get, key=f"{key}_how", horizontal=False)
    current = _current()
    choice = by_key.get(picked)
    specs: list = []
    if choice is None:
        label = "Enforce (pick a setting first)"
        safe.text(f"Pick a setting: enforcing it adds it to {now_words(current)} (or, if you choose, replaces it).")
    else:
        sentence, specs = plan(choice, how, current)
        safe.text(sentence)  # said before the button is pressed; spec text: plain text
        # No setting name in a button (a label renders markdown; a name is spec text): the sentence above says it.
        label = BUTTON[how] + f": {choice.effect}"
    if st.button(label, key=f"{key}_go", disabled=not specs, type="primary"):
        try:
            data.enforce(specs, origin=origin)  # as the signed-in user: an owner's (team.Forbidden)
        except team.Forbidden as exc:
            safe.text(f"Not enforced: {exc}")
        else:
            if on_done is not None:
                on_done()
            # Drawn again at once: the sentence above the button and "Enforced now" read the new set.
            st.session_state[f"{key}_done"] = True
            st.rerun()
    if done:
        st.success("Enforced: live agents are judged by it from their next call.")
