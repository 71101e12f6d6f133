"""What `loopledger score` does: the guard leaderboard in the terminal (ingest/cli.py parses flags).

Stored policies are read from the ledger (their first halts and saved counts, through the read
model); `--policy` specs are replayed on the labelled sessions' stored events by the replay
engine, as recheck and sweep do, without storing anything. Both are scored by loopledger.analysis.scoring.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from loopledger.analysis import crossval, families, pricing, scoring
from loopledger.cli.commands import EXIT_OK, EXIT_USAGE, reading
from loopledger.detectors.policy import DEFAULT_SPECS, PolicySpec
from loopledger.ledger import read, read_cost, store
from loopledger.replay import replay, tally
from rich.console import Console
from rich.table import Table
from rich.text import Text
from sqlalchemy.engine import Connection

# Piped or captured (CI logs, files, tests) the table keeps its natural width: not cut to 80 columns.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 10_000)
err = Console(stderr=True, highlight=False, soft_wrap=True)

HEADERS = {"policy": "policy", "loops": "loops", "caught": "caught", "early": "early", "missed": "missed",
           "normal": "normal", "false_halts": "false halts", "precision": "prec.", "precision_ci": "prec. 95% CI",
           "recall": "recall", "recall_ci": "recall 95% CI", "flagged": "flagged inside",
           "saved": "calls saved", "lost": "calls lost", "tokens_saved": "tokens saved", "usd_saved": "$ saved",
           "into_loop": "calls into loop"}


def replay_judged(conn: Connection, specs: Sequence[PolicySpec]) -> list[scoring.Judged]:
    """Each spec replayed on every session labelled loop or normal (events from the ledger)."""
    out_rows: list[scoring.Judged] = []
    for lab in read.scored_labels(conn).itertuples(index=False):
        sid = int(lab.session_id)
        events = store.load_events(conn, sid)
        first = None if lab.loop_first is None or lab.loop_first != lab.loop_first else int(lab.loop_first)
        last = None if lab.loop_last is None or lab.loop_last != lab.loop_last else int(lab.loop_last)
        for spec in specs:
            steps = list(replay(events, spec))
            out_rows.append(scoring.judge_replay(spec.id, sid, lab.label, first, last, events, steps,
                                                 tally(steps).saved))
    return out_rows


def judged_policies(conn: Connection, specs: Sequence[PolicySpec] = ()) -> tuple[list[scoring.Judged],
                                                                                list[tuple[str, str]]]:
    """Every stored policy's judged rows, then every spec not stored replayed; and (id, label) in order."""
    pols = read.policies(conn)
    order = list(zip(pols["id"], pols["label"], strict=True))
    judged = read.judged_rows(read.judged(conn))
    stored = {pid for pid, _ in order}
    extra = [s for s in dict.fromkeys(specs) if s.id not in stored]
    if extra:
        order += [(s.id, f"{s.label} (replayed)") for s in extra]
        judged += replay_judged(conn, extra)
    return judged, order


def leaderboard(conn: Connection, specs: Sequence[PolicySpec] = ()) -> list[scoring.PolicyScore]:
    """Every stored policy, then every spec not stored, scored against the ledger's labels."""
    judged, order = judged_policies(conn, specs)
    return scoring.score(judged, order)


def session_families(conn: Connection) -> dict[int, str]:
    """Each labelled session's family (coding agents, harnesses, other), told by its format and agent."""
    frame = read.labelled_sources(conn)
    return {int(r.session_id): families.family(r.format, r.agent) for r in frame.itertuples(index=False)}


def cross_validated(conn: Connection, judged: list[scoring.Judged], order: Sequence[tuple[str, str]],
                    group_by: str) -> tuple[list[tuple[str, crossval.CrossValidated]], int]:
    """The leaderboard's choices scored by grouped cross-validation (crossval.leaderboard_choices),
    and the number of groups."""
    frame = read.labelled_sources(conn)
    groups = {int(r.session_id): crossval.group_of(r.path, r.format, group_by) for r in frame.itertuples(index=False)}
    rows = crossval.leaderboard_choices(judged, order, groups, [s.id for s in DEFAULT_SPECS], session_families(conn))
    return rows, crossval.group_count(groups, judged)


def family_cv_tables(rows: Sequence[tuple[str, crossval.CrossValidated]], labels: dict[str, str]) -> list[Table]:
    """Per family, each cross-validated choice in the user's currency, in sample beside held out."""
    present = [f for f in families.FAMILIES if any(f in cv.in_sample_by for _, cv in rows)]
    tables = []
    for fam in present:
        table = Table(title=f"Cross-validated, {fam}: in the user's currency (calls: session-bootstrap 95% "
                            "intervals; sessions: Wilson)", title_justify="left")
        for head in ("choice", *(f"in sample: {h}" for h in crossval.CURRENCY_HEADS),
                     *(f"held out: {h}" for h in crossval.CURRENCY_HEADS)):
            table.add_column(head, overflow="fold")
        for name, cv in rows:
            table.add_row(Text(name), *cv.in_sample_by.get(fam, crossval.Tally()).currency_cells(),
                          *cv.held_out_by.get(fam, crossval.Tally()).currency_cells())
        tables.append(table)
    return tables


def family_tables(judged: Sequence[scoring.Judged], ranked: Sequence[scoring.PolicyScore],
                  fams: dict[int, str]) -> list[Table]:
    """Per family, each policy (in the leaderboard's order) in the user's currency, in sample."""
    by_family = crossval.family_tallies(judged, [s.policy_id for s in ranked], fams)
    tables = []
    for fam, tallies in by_family.items():
        first = next(iter(tallies.values()), crossval.Tally())
        table = Table(title=f"{fam}: {first.loops} loop and {first.normal} normal session(s), in the user's currency "
                            "(calls: session-bootstrap 95% intervals; sessions: Wilson)", title_justify="left")
        for head in ("policy", *crossval.CURRENCY_HEADS):
            table.add_column(head, overflow="fold")
        for s in ranked:
            table.add_row(Text(s.policy), *tallies[s.policy_id].currency_cells())
        tables.append(table)
    return tables


def cv_table(rows: Sequence[tuple[str, crossval.CrossValidated]], labels: dict[str, str], n_groups: int,
             group_by: str) -> Table:
    table = Table(title=f"Cross-validated: one {group_by} of {n_groups} held out at a time, the choice made on the "
                        "others (sessions; 95% intervals)", title_justify="left")
    for head in ("choice", "chosen on every session", "in sample: loops halted inside", "normal halted",
                 "normal warned", "held out: loops halted inside", "normal halted", "normal warned"):
        table.add_column(head, overflow="fold")
    for name, cv in rows:
        table.add_row(Text(name), Text(labels.get(cv.chosen, str(cv.chosen))), *cv.in_sample.cells(),
                      *cv.held_out.cells())
    return table


Saved = dict[str, tuple[str, str]]  # policy id -> (tokens saved, $ saved) as read_cost.saved_text says


def saved_spend(conn: Connection) -> Saved:
    """What each stored policy's halts saved on the labelled sessions (tokens, dollars); a policy
    replayed with --policy is not stored, so its spend saved is unknown."""
    frame = read_cost.saved_on_labelled(conn)
    return {r["policy_id"]: read_cost.saved_text(r) for _, r in frame.iterrows()}


def table_of(scores: Sequence[scoring.PolicyScore], totals: dict[str, int], spend: Saved | None = None) -> Table:
    title = (f"Guard leaderboard over {totals['loop']} loop and {totals['normal']} normal labelled session(s) "
             f"({totals['unclear']} unclear left out)")
    table = Table(title=title, title_justify="left")
    for key, head in HEADERS.items():
        # Numbers never wrap; the policy's label and the list of catches do, in a narrow terminal.
        wraps = key in ("policy", "into_loop")
        table.add_column(head, justify="left" if wraps else "right", no_wrap=not wraps,
                         min_width=24 if key == "policy" else None if wraps else len(head))
    for s in scores:
        first, *rest = cells(s, spend)
        table.add_row(Text(first), *rest)
    return table


def cells(s: scoring.PolicyScore, spend: Saved | None = None) -> list[str]:
    r = s.row()
    tokens, usd = (spend or {}).get(s.policy_id, (pricing.UNKNOWN, pricing.UNKNOWN))
    return [s.policy, *[str(r[c]) for c in scoring.COUNT_COLUMNS], scoring.ratio(s.precision),
            scoring.interval_text(s.precision_interval), scoring.ratio(s.recall),
            scoring.interval_text(s.recall_interval), f"{s.flagged}/{s.loops}", scoring.share_text(s.saved, s.loop_calls),
            scoring.share_text(s.lost, s.normal_calls), tokens, usd, scoring.into_loop_text(s.into_loop)]


def markdown_table(scores: Sequence[scoring.PolicyScore], spend: Saved | None = None) -> str:
    """The same table as Markdown (BENCHMARKS.md); `|` in a policy label is escaped."""
    head = "| " + " | ".join(HEADERS.values()) + " |"
    rule = "|" + "|".join("---" if k == "policy" else "---:" for k in HEADERS) + "|"
    rows = ["| " + " | ".join(c.replace("|", "\\|") for c in cells(s, spend)) + " |" for s in scores]
    return "\n".join([head, rule, *rows]) + "\n"


FORMATS = ("table", "markdown", "csv")


def run_score(db: str | None, policy: Sequence[str], sort: str = "rank", fmt: str = "table", cv: bool = False,
              group_by: str = "folder") -> int:
    try:
        if group_by not in crossval.GROUP_BY:
            raise ValueError(f"--group-by {group_by!r}: expected one of {', '.join(crossval.GROUP_BY)}")
        specs = [PolicySpec.parse(p, trusted=True) for p in policy]
        if sort not in scoring.SORTABLE:
            raise ValueError(f"--sort {sort!r}: expected one of {', '.join(scoring.SORTABLE)}")
        if fmt not in FORMATS:
            raise ValueError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    except ValueError as exc:
        err.print(Text(f"error: {exc}", style="red"))
        return EXIT_USAGE
    with reading(db) as conn:
        totals = read.label_totals(conn)
        judged, order = judged_policies(conn, specs)
        scores = scoring.score(judged, order)
        spend = saved_spend(conn)
        fams = session_families(conn)
        cv_rows, n_groups = cross_validated(conn, judged, order, group_by) if cv else ([], 0)
    if not totals["loop"] + totals["normal"]:
        err.print(Text("no session is labelled loop or normal yet: import labels with "
                       "`loopledger labels import FILE.csv`, or label runs on the dashboard", style="yellow"))
    ranked = scoring.rank(scores, sort)
    if fmt == "markdown":
        sys.stdout.write(markdown_table(ranked, spend))
    elif fmt == "csv":
        import csv

        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(["policy_id", *HEADERS])
        w.writerows([s.policy_id, *cells(s, spend)] for s in ranked)
    else:
        out.print(table_of(ranked, totals, spend))
        for table in family_tables(judged, ranked, fams):
            out.print(table)
    if cv:
        if n_groups < 2:
            err.print(Text(f"cross-validation needs labelled sessions from two {group_by}s or more (found {n_groups}): "
                           "try --group-by file to hold out one file at a time", style="yellow"))
        else:
            labels = {**dict(order), crossval.DEFAULT_SET: crossval.DEFAULT_SET}
            out.print(cv_table(cv_rows, labels, n_groups, group_by))
            for table in family_cv_tables(cv_rows, labels):
                out.print(table)
    return EXIT_OK
