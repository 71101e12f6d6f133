"""Why a guard warned, blocked or halted, in words a person reads: one sentence per check.

Pure functions, no database and no Streamlit: the Session, Replay and Compare pages (and any CLI)
build their "Why" text here, from the numbers the detector itself stored on the check
(count, total, threshold, reason). One sentence builder per detector name, registered in
EXPLAINERS; a detector nobody registered (a plugin, a detector added later) gets the generic
sentence, built from the same four numbers, so a new detector never breaks a page.

What the numbers mean per detector is documented in loopledger.detectors.policy; the words here
follow it. Positions are written for people as **call #N**, 1-based over the session (what labels,
the leaderboard and the CLI count: loopledger.analysis.scoring.call_position), one number only:
"call #12" — never `-1` (a batch-level check is its batch); the line of the source file is added
only where a person opens the file.
The sentences are plain text: the pages show them with st.text, so they carry no markdown.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from loopledger.detectors.words import COMMAND_CHARS, SHELL_TOOLS, tool_words  # noqa: F401 — the pages name calls through here

NO_LIMIT = "no limit"  # the one word the dashboard uses for a parameter set to none
BATCH_LEVEL = -1


@dataclass(frozen=True, slots=True)
class Why:
    """One check as the explainers see it (NaN/None-safe: built by `why()`)."""

    detector: str
    verdict: str
    count: int | None = None
    total: int | None = None
    threshold: int | None = None
    reason: str = ""
    tool: str = ""  # the call's tool, or the batch's tools joined with ", "; "" for prose


Explainer = Callable[[Why], str]
EXPLAINERS: dict[str, Explainer] = {}


def register(detector: str, fn: Explainer) -> Explainer:
    """Give `detector` its own sentence (a plugin may call this; the generic one is the fallback)."""
    EXPLAINERS[detector] = fn
    return fn


def _int(v: Any) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else int(f)


def _str(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return str(v)


def why(detector: Any, verdict: Any, count: Any = None, total: Any = None, threshold: Any = None,
        reason: Any = "", tool: Any = "") -> Why:
    return Why(_str(detector), _str(verdict), _int(count), _int(total), _int(threshold), _str(reason), _str(tool))


def sentence(detector: Any, verdict: Any, count: Any = None, total: Any = None, threshold: Any = None,
             reason: Any = "", tool: Any = "") -> str:
    """The sentence for one check. Never raises: a broken explainer falls back to the generic one."""
    w = why(detector, verdict, count, total, threshold, reason, tool)
    fn = EXPLAINERS.get(w.detector)
    if fn is not None:
        try:
            return fn(w)
        except Exception:  # noqa: BLE001 - an explainer bug must not take a page down
            pass
    return generic(w)


def _subject(w: Why) -> str:
    return f"{w.tool} — " if w.tool else ""


def _limit(w: Why, word: str = "at") -> str:
    return "" if w.threshold is None else f"; {w.verdict}s {word} {w.threshold}"


def generic(w: Why) -> str:
    """Any detector: what it said, its own reason, and its numbers."""
    nums = [f"{name} {v}" for name, v in (("count", w.count), ("total", w.total), ("threshold", w.threshold))
            if v is not None]
    said = w.verdict or "a check"
    text = f"{_subject(w)}{w.detector or 'a guard'} said {said}"
    if w.reason:
        text += f": {w.reason}"
    return text + (f" ({', '.join(nums)})" if nums else "")


def _run_length(w: Why) -> str:
    if w.verdict != "halt":
        return generic(w)
    if "ceiling" in w.reason:
        m = re.search(r"ceiling (\d+)", w.reason)
        ceiling = m.group(1) if m else w.threshold
        return (f"{_subject(w)}the same batch {w.total} times in this run; its answers kept changing, "
                f"but at most {ceiling} are allowed in one run")
    return (f"{_subject(w)}the same batch {w.count} times in a row with unchanged answers; "
            f"at most {w.threshold} allowed")


def _ladder(w: Why) -> str:
    m = re.search(r"\((read-only|mutating)\)", w.reason)
    kind = f" ({m.group(1)} tool)" if m else ""
    if w.verdict in ("warn", "block", "halt"):
        return (f"{_subject(w)}the same call with the same arguments {w.count} times in a row{kind}"
                f"{_limit(w)}")
    return generic(w)


def _window(w: Why) -> str:
    m = re.search(r"last (\d+) calls", w.reason)
    span = f"the last {m.group(1)} calls" if m else "the window"
    if w.verdict == "halt":
        return f"{_subject(w)}the same call {w.count} times among {span}; halts at {w.threshold}"
    return generic(w)


def _cycle(w: Why) -> str:
    if w.verdict not in ("warn", "halt"):
        return generic(w)
    pattern, _, rest = w.reason.partition(": ")
    if pattern.startswith("period "):  # an older ledger's reason: "period 2 ×3: edit → test"
        pattern = rest
    shown = pattern or f"a pattern of {w.total} calls"
    return (f"{shown} — the same {w.total} calls repeated {w.count} times in a row with unchanged answers"
            f"{_limit(w)}")


def _stagnation(w: Why) -> str:
    if w.verdict != "halt":
        return generic(w)
    m = re.search(r"last (\d+) prose", w.reason)
    span = f" in the last {m.group(1)} replies" if m else ""
    return f"the same reply {w.count} times{span}; at most {w.threshold} allowed"


def _times(n: int) -> str:
    return "once" if n == 1 else "twice" if n == 2 else f"{n} times"


def _progress(w: Why) -> str:
    """progress says what repeated and how often in its own reason (what the model read too);
    its count is the attempt this call would be, its threshold the attempt that rule halts at
    (none for a wait, judged by how long it waited). A reason from an older ledger names its
    threshold in brackets ([halt_at], [ok_halt_at] …): read as it was written."""
    if w.verdict not in ("warn", "halt") or w.count is None:
        return generic(w)
    m = re.search(r"\[(\w+(?: \+ 1)?)\]", w.reason)
    if m is None:
        if not w.reason:
            return generic(w)
        if w.threshold is None:
            return w.reason
        if w.verdict == "halt":
            return f"{w.reason}; stopped before attempt {w.count}"
        return f"{w.reason}; attempt {w.threshold} will be stopped"
    earlier = max(w.count - 1, 0)
    if "same failure" in w.reason:
        what = (f"the same failure {_times(earlier)} before in a row, whatever the arguments: "
                f"this is attempt {w.count}")
    elif "retried" in w.reason or "same error" in w.reason:
        what = (f"the same error {_times(earlier)} before, each time retried without addressing it: "
                f"this is attempt {w.count}")
    else:
        what = (f"the same call with the same arguments got the same answer {_times(earlier)} before: "
                f"this is attempt {w.count}")
    if w.threshold is None:
        return f"{_subject(w)}{what}"
    return f"{_subject(w)}{what}; halts at attempt {w.threshold} ({m.group(1)} = {w.threshold})"


for _name, _fn in (("run-length", _run_length), ("progress", _progress), ("ladder", _ladder), ("window", _window), ("cycle", _cycle),
                   ("stagnation", _stagnation)):
    register(_name, _fn)


# ── positions ─────────────────────────────────────────────────────────────────────────────────


def call_ref(number: Any, seq: Any = None, line: Any = None, unit: str = "line") -> str:
    """"call #12": the one number a call has on every page. `line` (its line, or its message or
    record in a JSON document — `unit`, from loopledger.formats.positions) is added only where a
    person opens the source file: "call #12 (line 37)". No call number (a prose turn): the line,
    else the step, alone."""
    n, s, ln = _int(number), _int(seq), _int(line)
    where = f"{unit} {ln}" if ln is not None else ""
    if n is None:
        return where or (f"step {s}" if s is not None else "—")
    return f"call #{n}" + (f" ({where})" if where else "")


def run_ref(idx: Any) -> str:
    """A run as people count it, from 1 like calls: "run #1" is the session's first run (idx 0,
    as links and the ledger number it); "run #?" for no run."""
    i = _int(idx)
    return "run #?" if i is None or i < 0 else f"run #{i + 1}"


def call_list(numbers: Iterable[Any], limit: int = 12) -> str:
    """"calls #4, #7 and #10" (1-based session call numbers)."""
    items = [f"#{_int(n)}" for n in numbers if _int(n) is not None]
    if not items:
        return ""
    more = len(items) - limit
    items = items[:limit]
    word = "call" if len(items) == 1 and more <= 0 else "calls"
    text = items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
    return f"{word} {text}" + (f" (and {more} more)" if more > 0 else "")


def position(seq: Any, idx: Any = None) -> str:
    """Where a check or call is, in words: "step 13", "step 13 call 2", "step 13 (whole batch)"."""
    s, i = _int(seq), _int(idx)
    if s is None:
        return "—"
    if i is None or i == 0:
        return f"step {s}"
    if i == BATCH_LEVEL:
        return f"step {s} (whole batch)"
    return f"step {s} call {i}"


def positions(calls: Iterable[tuple[int, int]], limit: int = 12) -> str:
    """"steps 101, 103, 105 and 107" for a list of (seq, idx)."""
    items = [position(s, i).removeprefix("step ") for s, i in calls]
    if not items:
        return ""
    more = len(items) - limit
    items = items[:limit]
    word = "step" if len(items) == 1 and more <= 0 else "steps"
    text = items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
    return f"{word} {text}" + (f" (and {more} more)" if more > 0 else "")


@dataclass(frozen=True, slots=True)
class CallRow:
    """One call of a run, as the repeat finder needs it (in run order)."""

    seq: int
    idx: int
    tool: str
    args_hash: str
    answer_hash: str | None = None


def repeated_calls(detector: str, calls: Sequence[CallRow], halt_seq: int, halt_idx: int | None,
                   count: int | None = None, total: int | None = None) -> list[tuple[int, int]]:
    """The calls that make up the repeat a check judged, oldest first, ending at the check.

    Batch-level checks (run-length): the back-to-back batches with the same set of calls.
    `cycle`: the last count × period calls. Any other detector: the earlier calls of the run with
    the same tool and arguments (the last `count` of them when the detector counted them).
    Prose checks (stagnation) have no calls: [].
    """
    upto = [c for c in calls if (c.seq, c.idx) <= (halt_seq, halt_idx if halt_idx not in (None, BATCH_LEVEL)
                                                    else 1 << 30)]
    if not upto or upto[-1].seq != halt_seq:
        return []
    if halt_idx in (None, BATCH_LEVEL):
        batches: dict[int, list[CallRow]] = {}
        for c in upto:
            batches.setdefault(c.seq, []).append(c)
        order = list(batches)
        sig = lambda b: sorted((c.tool, c.args_hash) for c in batches[b])  # noqa: E731
        want = sig(order[-1])
        chosen = []
        for b in reversed(order):
            if sig(b) != want:
                break
            chosen.append(b)
        if total:
            chosen = chosen[:total]
        return [(c.seq, c.idx) for b in reversed(chosen) for c in batches[b]]
    if detector == "cycle" and count and total:
        return [(c.seq, c.idx) for c in upto[-count * total:]]
    last = upto[-1]
    same = [(c.seq, c.idx) for c in upto if (c.tool, c.args_hash) == (last.tool, last.args_hash)]
    if len(same) < 2 and count and count > 1:
        # A retry whose arguments moved (progress: the same error again): the tool's last calls.
        same = [(c.seq, c.idx) for c in upto if c.tool == last.tool]
    return same[-count:] if count else same


def identical_marks(calls: Sequence[CallRow], numbers: dict[tuple[int, int], int] | None = None
                    ) -> dict[tuple[int, int], tuple[str, str]]:
    """(seq, idx) → ("arguments identical to call #N", "answer identical to call #N") for calls
    that repeat an earlier call of the run (first occurrence named: by its session call number
    when `numbers` has it, else by its step); "" where not repeated."""
    numbers = numbers or {}

    def name(seq: int, idx: int) -> str:
        n = numbers.get((seq, idx))
        return f"call #{n}" if n is not None else position(seq, idx)

    first_args: dict[tuple[str, str], tuple[int, int]] = {}
    first_answer: dict[tuple[str, str], tuple[int, int]] = {}
    out: dict[tuple[int, int], tuple[str, str]] = {}
    for c in calls:
        key = (c.tool, c.args_hash)
        a = first_args.setdefault(key, (c.seq, c.idx))
        args_mark = f"arguments identical to {name(*a)}" if a != (c.seq, c.idx) else ""
        ans_mark = ""
        if c.answer_hash:
            akey = (c.tool, c.answer_hash)
            b = first_answer.setdefault(akey, (c.seq, c.idx))
            ans_mark = f"answer identical to {name(*b)}" if b != (c.seq, c.idx) else ""
        if args_mark or ans_mark:
            out[(c.seq, c.idx)] = (args_mark, ans_mark)
    return out


def param_value(value: Any) -> str:
    """A parameter value as the dashboard writes it: none → NO_LIMIT, lists joined with |."""
    if value is None:
        return NO_LIMIT
    if isinstance(value, list | tuple):
        return "|".join(map(str, value)) or "(empty)"
    return str(value)


def short_setting(values: dict[str, Any]) -> str:
    """`strikes=3` style: only the given (swept) parameters, common prefixes shortened."""
    return " ".join(f"{_short_name(k)}={param_value(v)}" for k, v in values.items())


def _short_name(name: str) -> str:
    for prefix in ("max_", "read_only_"):
        if name.startswith(prefix) and len(name) > len(prefix):
            return ("ro_" if prefix == "read_only_" else "") + name[len(prefix):]
    return name
