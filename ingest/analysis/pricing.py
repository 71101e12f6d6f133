"""What a model turn cost, from genai-prices' offline price table: LoopLedger never writes a price.

`price(usage, ts)` looks the turn's model up in the table genai-prices ships (no network: its
auto-update is never started), at the turn's date (prices change; the table keeps their history),
with cache reads and writes priced as the provider prices them. A turn without usage, or whose
model the table does not know, is unpriced: `usd` is None, shown as unknown, never 0.
`PRICED_WITH` names the table's version; the ledger stores it beside every computed price.
genai-prices is imported on the first price asked for, not with this module: most commands that
import the ledger's store never price a turn, and the table takes longer to load than they run.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version

from loopledger.events import TurnUsage


def __getattr__(name: str) -> str:
    if name == "PRICED_WITH":
        return _priced_with()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _priced_with() -> str:
    return f"genai-prices {version('genai-prices')}"


@dataclass(frozen=True, slots=True)
class Price:
    usd: float | None  # None: unpriced
    model: str | None = None  # the price table's model id the turn matched
    note: str = ""  # why unpriced


NO_USAGE = Price(None, None, "no usage in the transcript")


def _day(ts: str | None) -> str | None:
    return ts[:10] if ts and len(ts) >= 10 and ts[4] == "-" and ts[7] == "-" else None


def price(usage: TurnUsage | None, ts: str | None = None) -> Price:
    """The turn's price in USD at its date (`ts`, ISO 8601; today's prices without one)."""
    if usage is None or not usage.known:
        return NO_USAGE
    if not usage.model:
        return Price(None, None, "no model named")
    return _price(usage.model, usage.provider, usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
                  usage.cache_write_tokens, usage.cache_write_1h_tokens, _day(ts))


@functools.lru_cache(maxsize=8192)
def _price(model: str, provider: str | None, inp: int | None, out: int | None, read: int | None,
           write: int | None, write_1h: int | None, day: str | None) -> Price:
    counts = {"input_tokens": inp, "output_tokens": out, "cache_read_tokens": read,
              "cache_write_tokens": write, "cache_write_1h_tokens": write_1h}
    when = None
    if day:
        try:
            when = datetime.fromisoformat(day).replace(hour=12, tzinfo=UTC)
        except ValueError:
            when = None
    import genai_prices

    try:
        calc = genai_prices.calc_price(genai_prices.Usage(**{k: v for k, v in counts.items() if v}),
                                       model_ref=model, provider_id=provider, genai_request_timestamp=when)
    except LookupError:
        return Price(None, None, f"{model!r} is not in {_priced_with()}")
    except ValueError as e:  # usage the table cannot price (e.g. more cache reads than input)
        return Price(None, None, f"{model!r}: {e}")
    return Price(float(calc.total_price), calc.model.id)


UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Saved:
    """Spend after the halts of some runs: tokens, usd (None: nothing priced), turns, unpriced
    turns, and halted runs in sessions that reported no usage (their share is unknown)."""

    tokens: int = 0
    usd: float | None = None
    turns: int = 0
    unpriced: int = 0
    unknown_runs: int = 0
    halted_runs: int = 0


def spend_after(halts: Iterable[tuple[int, int, int]], turns: Iterable[tuple[int, int, int, int, float | None]],
                with_usage: set[int]) -> Saved:
    """What the turns after each halt cost: `halts` = (session, run, halt seq); `turns` =
    (session, run, seq, tokens, usd) of every model turn with usage; `with_usage` = the
    sessions that reported usage at all. The same rule as ledger/read_cost.py (seq > halt seq,
    same run), for halts that were replayed, not stored (Compare's sweep)."""
    at = {(sid, run): seq for sid, run, seq in halts}
    tokens = n = unpriced = 0
    usd: float | None = None
    for sid, run, seq, tok, cost in turns:
        halt = at.get((sid, run))
        if halt is None or seq <= halt:
            continue
        n += 1
        tokens += tok or 0
        if cost is None:
            unpriced += 1
        else:
            usd = (usd or 0.0) + cost
    unknown = sum(1 for sid, _ in at if sid not in with_usage)
    return Saved(tokens, usd, n, unpriced, unknown, len(at))


def saved_texts(s: Saved) -> tuple[str, str]:
    """(tokens saved, $ saved) for people: as read_cost.saved_text says it for stored policies."""
    if s.halted_runs == 0 or (s.turns == 0 and not s.unknown_runs):
        return "0", "$0.00"
    if s.turns == 0:
        return UNKNOWN, UNKNOWN
    tokens = tokens_text(s.tokens)
    return (f"≥ {tokens}" if s.unknown_runs else tokens), usd_text(s.usd, s.unpriced or s.unknown_runs)


def usd_text(usd: float | None, unpriced: int = 0) -> str:
    """A spend for people: "$1.23"; "unknown" when nothing was priced; "≥ $1.23" when some turns
    were not (their share is unknown, so the sum is a lower bound)."""
    if usd is None or usd != usd:  # None or NaN (a pandas cell)
        return UNKNOWN
    text = f"${usd:,.2f}" if abs(usd) >= 0.995 or usd == 0 else f"${usd:.4f}"
    return f"≥ {text}" if unpriced else text


def tokens_text(tokens: int | None, turns: int | None = None) -> str:
    """Tokens for people: "1,234,567"; "unknown" without any turn that reported usage."""
    if tokens is None or tokens != tokens or turns == 0:
        return UNKNOWN
    return f"{int(tokens):,}"


def seconds_text(seconds: float | None) -> str:
    if seconds is None or seconds != seconds:
        return UNKNOWN
    s = int(round(seconds))
    return f"{s // 3600}h {s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m {s % 60:02d}s" if s >= 60 else f"{s}s"
