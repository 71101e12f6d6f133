"""The one table of guard scores: the guard leaderboard's rows and Compare's per-setting scores,
built from scoring.PolicyScore the same way, so both pages show the same unit under the same
names. Pure (no Streamlit, no database): a page adds columns (cost, cross-validated scores) to
the frame it returns and draws it with column_config().

The unit is the session, as labels are given: each count is of labelled sessions, and each
column's title and help say so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
from loopledger.analysis import scoring
from loopledger.app import when

UNIT = "sessions"
# Each count column: its title and its help, naming the unit.
COUNTS = {
    "loops": ("loop sessions", "labelled sessions with a loop this policy judged"),
    scoring.CAUGHT: ("caught", "loop sessions whose first halt fell inside the labelled loop"),
    scoring.EARLY: ("early", "loop sessions halted before the loop began (it stopped good work)"),
    scoring.MISSED: ("missed", "loop sessions not halted, or halted after the loop"),
    scoring.NORMAL: ("normal sessions", "labelled sessions without a loop this policy judged"),
    "false_halts": ("false halts", "normal sessions this policy halted"),
}
CAPTION = ("Every count is of labelled sessions (a label judges a whole session): precision = caught / "
           "sessions halted, recall = caught / loop sessions, each with its Wilson 95% interval.")


def score_rows(ranked: Sequence[scoring.PolicyScore], link: Callable[[str, str, int], str] | None = None
               ) -> pd.DataFrame:
    """One row per policy, in the order given. `link(policy_id, column, n)`: each count becomes
    the link to its sessions (the leaderboard); without it, the plain number (Compare)."""
    rows = []
    for s in ranked:
        r = s.row()
        row = {"policy": s.policy}
        for col in scoring.COUNT_COLUMNS:
            row[col] = link(s.policy_id, col, r[col]) if link else r[col]
        # A score with nothing to score (no halt: no precision) reads "—", never None.
        row |= {"precision": when.number(s.precision), "precision 95% CI": scoring.interval_text(s.precision_interval),
                "recall": when.number(s.recall), "recall 95% CI": scoring.interval_text(s.recall_interval),
                "saved": scoring.share_text(s.saved, s.loop_calls), "into loop (median)": when.number(s.into_loop_median, "{:g}"),
                "into loop (each catch)": ", ".join(map(str, sorted(s.into_loop))), "policy_id": s.policy_id}
        rows.append(row)
    return pd.DataFrame(rows, columns=["policy", *scoring.COUNT_COLUMNS, "precision", "precision 95% CI", "recall",
                                       "recall 95% CI", "saved", "into loop (median)", "into loop (each catch)",
                                       "policy_id"])


def titles() -> dict[str, tuple[str, str]]:
    """column → (title, help) for every column score_rows makes that people read by another name."""
    return COUNTS | {
        "precision": ("precision", "caught / sessions halted (loop and normal ones)"),
        "recall": ("recall", "caught / loop sessions"),
        "saved": ("calls saved", "calls spent inside the labelled loops that the first halts saved (those after "
                  "the halt, up to the loop's last call), of all the calls spent inside them"),
        "flagged": ("flagged inside", "loop sessions whose first warn, block or halt fell inside the labelled loop"),
        "lost": ("calls lost", "calls normal sessions made after a false halt, of all their calls"),
        "into loop (median)": ("calls into the loop (median)", "calls into the labelled loop when a catch came"),
        "into loop (each catch)": ("calls into the loop (each catch)", "one number per caught session"),
    }
