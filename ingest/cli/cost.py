"""What `loopledger cost` does: what the stored sessions spent, and what each stored policy's
halts would have saved (tokens, dollars, wall time), read from the ledger (ledger/read_cost.py).

Prices were computed at ingest from genai-prices' offline table; the table version is printed.
A turn the table cannot price, or a session whose transcript reports no usage, is unknown:
never counted as 0 (totals it leaves out say "≥").
"""

from __future__ import annotations

import sys

from loopledger.analysis import pricing
from loopledger.cli.commands import EXIT_OK, reading
from loopledger.ledger import read_cost
from rich.console import Console
from rich.table import Table
from rich.text import Text

out = Console(highlight=False, width=None if sys.stdout.isatty() else 10_000)


def summary_lines(total: dict) -> list[str]:
    """The spend headline, one fact a line."""
    lines = [f"spend: {pricing.usd_text(total['usd'], total['unpriced'])} over {total['turns']:,} model turn(s) "
             f"in {total['sessions']} session(s)"]
    if total["turns"]:
        lines.append(f"tokens: {total['tokens']:,} ({total['input_tokens']:,} input, of which "
                     f"{total['cache_read_tokens']:,} cache reads and {total['cache_write_tokens']:,} cache writes; "
                     f"{total['output_tokens']:,} output)")
    if total["unpriced"]:
        lines.append(f"unpriced: {total['unpriced']} turn(s) whose model the price table does not know")
    if total["no_usage"]:
        lines.append(f"no usage reported: {total['no_usage']} session(s) (their spend is unknown)")
    lines.append("prices: " + (", ".join(total["priced_with"]) or "none computed"))
    return lines


def saved_table(frame) -> Table:
    table = Table(title="What each policy's halts would have saved (spend after the halt in each halted run)",
                  title_justify="left")
    for head in ("policy", "halted runs", "calls saved", "tokens saved", "$ saved", "time in loops"):
        table.add_column(head, justify="left" if head == "policy" else "right", no_wrap=head != "policy")
    for _, r in frame.iterrows():
        tokens, usd = read_cost.saved_text(r)
        table.add_row(Text(str(r["policy"])), str(r["halted_runs"]), str(r["calls_saved"]), tokens, usd,
                      pricing.seconds_text(r["loop_seconds"]) if r["halted_runs"] else "0s")
    return table


def run_cost(db: str | None) -> int:
    with reading(db) as conn:
        total = read_cost.total_spend(conn)
        saved = read_cost.saved_by_policy(conn)
    for line in summary_lines(total):
        out.print(Text(line))
    out.print(saved_table(saved))
    return EXIT_OK
