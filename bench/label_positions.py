"""Label positions counted by another reader, moved onto our readers' calls.

A labelled set may give its loops as positions in its own reader's call list (the released
sets' `stats.py --calls FILE KEY`), which can count calls differently from ours: our readers
add `harness_error` calls where a harness refused a reply, read each failed aider edit as a call,
drop a tool call a log wrote twice. `map_span` moves a 1-based FIRST-LAST span from their list
onto ours by aligning the two lists of (tool name, canonical arguments) with a sequence
alignment: calls of the same id first where both lists carry the transcript's call ids, then
(difflib) calls equal in name and arguments, then, in the stretches between, calls of the same
name. Our calls are compared as stats.py writes them (`as_theirs`: its name for the tool, only
the arguments it keeps), with the outcome where stats.py gives one ("failed: ..." / "applied",
its aider reader), and a reply's calls in its order (its aider reader lists a reply's shell
blocks before its edits). Its aider reader keys the sessions of a history that begins with a
blank line from 2 (`key_offset`): aider's Nth session is its N+1.
A position with a partner maps to it; one without maps to just after the partner of the call
before it (FIRST) or just before the partner of the call after it
(LAST), so our calls between two aligned ones that lie inside the span stay inside it; a span
from their first call starts at our first, one to their last call ends at our last (a harness's
refusals after the model's last action are calls of ours, none of theirs); and a LAST that
aligns extends over our calls of its tool right after it that align with none of theirs (a
reader that counts a repeated call once beside ours that counts each).

    python -m bench.label_positions FOLDER ...   the alignment report: every labelled session,
                                                 found by our readers or not, its calls beside
                                                 stats.py's, and each loop span in both lists
"""

from __future__ import annotations

import argparse
import csv
import difflib
import importlib.util
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from loopledger.analysis import scoring
from loopledger.analysis.replay_table import sessions_of
from loopledger.events import Answers, Batch
from loopledger.formats import read

Key = tuple[str, str]  # (tool name, canonical JSON of the arguments)


def canon(args: Any) -> str:
    """Arguments as stats.py writes them: a JSON string parsed, top-level strings stripped, keys
    sorted (so the same call from two readers compares equal)."""
    if isinstance(args, str):
        text = args.strip()
        try:
            args = json.loads(text)
        except ValueError:
            return text
    if isinstance(args, dict):
        args = {k: (v.strip() if isinstance(v, str) else v) for k, v in args.items()}
    return json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)


def call_keys(events: Sequence[Any]) -> list[Key]:
    """Our reader's calls of one session, in call-position order."""
    return [(c.name, canon(c.args)) for e in events if isinstance(e, Batch) for c in e.calls]


def call_ids(events: Sequence[Any]) -> list[str | None]:
    """Our reader's call ids of one session, in call-position order."""
    return [c.id for e in events if isinstance(e, Batch) for c in e.calls]


def call_batches(events: Sequence[Any]) -> list[int]:
    """The reply (batch) each of our calls is in, numbered from 0, in call-position order."""
    return [n for n, e in enumerate(e for e in events if isinstance(e, Batch)) for _ in e.calls]


def call_failed(events: Sequence[Any]) -> list[bool | None]:
    """Whether each of our calls failed to take effect (None: unanswered): answered as an
    error, unless the error says aider applied it ("Applied edit to F", then the lint report
    naming F: stats.py says "applied" for that edit)."""
    answered = {a.call_id: a.is_error and "Applied edit to " not in a.text
                for e in events if isinstance(e, Answers) for a in e.answers}
    return [answered.get(c.id) for e in events if isinstance(e, Batch) for c in e.calls]


def align(theirs: Sequence[Key], ours: Sequence[Key], their_ids: Sequence[str | None] | None = None,
          our_ids: Sequence[str | None] | None = None) -> list[int | None]:
    """For each of their calls (0-based), the index of our call it is, or None. Where both lists
    carry call ids, a call of theirs is our first call of the same id (in order: the ids are the
    transcript's own); the stretches between are aligned by name and arguments, then by name."""
    partner: list[int | None] = [None] * len(theirs)
    if their_ids and our_ids:
        first_of: dict[str, int] = {}
        for j, cid in enumerate(our_ids):
            if cid is not None:
                first_of.setdefault(cid, j)
        after = -1
        for i, cid in enumerate(their_ids):
            j = first_of.get(cid) if cid is not None else None
            if j is not None and j > after:
                partner[i], after = j, j

    def match(t0: int, t1: int, o0: int, o1: int, key: Callable[[Key], Any]) -> list[tuple[int, int, int]]:
        blocks = difflib.SequenceMatcher(None, [key(k) for k in theirs[t0:t1]], [key(k) for k in ours[o0:o1]],
                                         autojunk=False).get_matching_blocks()
        return [(t0 + a, o0 + b, n) for a, b, n in blocks if n]

    def fill(t0: int, t1: int, o0: int, o1: int) -> None:
        """Align their calls t0..t1-1 with ours o0..o1-1: equal calls, then equal names between."""
        if t1 <= t0 or o1 <= o0:
            return
        exact = match(t0, t1, o0, o1, lambda k: k)
        for a, b, n in exact:
            for i in range(n):
                partner[a + i] = b + i
        bounds = [(t0, o0)] + [(a + n, b + n) for a, b, n in exact]
        ends = [(a, b) for a, b, _ in exact] + [(t1, o1)]
        for (s0, p0), (s1, p1) in zip(bounds, ends, strict=True):
            if s1 > s0 and p1 > p0:
                for a, b, n in match(s0, s1, p0, p1, lambda k: k[0]):
                    for i in range(n):
                        partner[a + i] = b + i

    anchors = [(i, p) for i, p in enumerate(partner) if p is not None]
    prev = (-1, -1)
    for i, p in [*anchors, (len(theirs), len(ours))]:
        fill(prev[0] + 1, i, prev[1] + 1, p)
        prev = (i, p)
    return partner


# A tool our reader names otherwise than stats.py does: our aider reader's `run` is its `shell`.
_THEIR_NAME = {"run": "shell"}


def as_theirs(theirs: Sequence[Key], ours: Sequence[Key]) -> list[Key]:
    """Our calls as stats.py writes them, so that the same call compares equal: named as it
    names the tool (where it has that name and not ours), and with only the arguments it keeps
    for that tool where it keeps fewer (its aider reader writes an edit as {"path"}, ours adds
    the edits)."""
    names = {n for n, _ in theirs}
    fields: dict[str, set[str]] = {}
    for n, a in theirs:
        args = _parsed(a)
        fields.setdefault(n, set()).update(args if isinstance(args, dict) else ())
    out: list[Key] = []
    for n, a in ours:
        name = _THEIR_NAME.get(n, n) if n not in names and _THEIR_NAME.get(n) in names else n
        args = _parsed(a)
        keep = fields.get(name)
        if keep and isinstance(args, dict) and keep < set(args):
            a = canon({k: v for k, v in args.items() if k in keep})
        out.append((name, a))
    return out


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def with_outcomes(theirs: Sequence[Key], ours: Sequence[Key], their_failed: Sequence[bool | None] | None,
                  our_failed: Sequence[bool | None] | None) -> tuple[list[Key], list[Key]]:
    """Both lists with each call's outcome in its arguments, for the tools stats.py gives an
    outcome ("failed: ..." / "applied", its aider reader): a run of one edit sent again and again
    then aligns where it failed, not wherever the run slides to."""
    if not their_failed or not our_failed:
        return list(theirs), list(ours)
    judged = {n for (n, _), f in zip(theirs, their_failed, strict=True) if f is not None}
    if not judged:
        return list(theirs), list(ours)

    def marked(calls: Sequence[Key], failed: Sequence[bool | None]) -> list[Key]:
        return [(n, f"{a} {'failed' if f else 'ok' if f is not None else '-'}") if n in judged else (n, a)
                for (n, a), f in zip(calls, failed, strict=True)]
    return marked(theirs, their_failed), marked(ours, our_failed)


def their_order(theirs: Sequence[Key], ours: Sequence[Key], batches: Sequence[int] | None) -> list[int]:
    """Our call positions (0-based) in the order stats.py lists them: its aider reader lists a
    reply's shell blocks before its edits, ours its edits (applied first) before the commands
    (`run`, its `shell`); elsewhere our own order."""
    order = list(range(len(ours)))
    names = {n for n, _ in theirs}
    if batches is None or "run" in names or "shell" not in names or not any(n == "run" for n, _ in ours):
        return order
    return sorted(order, key=lambda i: (batches[i], ours[i][0] != "run"))


def map_span(theirs: Sequence[Key], ours: Sequence[Key], first: int, last: int,
             their_ids: Sequence[str | None] | None = None,
             our_ids: Sequence[str | None] | None = None,
             their_failed: Sequence[bool | None] | None = None,
             our_failed: Sequence[bool | None] | None = None,
             our_batches: Sequence[int] | None = None) -> tuple[int, int] | None:
    """Their 1-based span FIRST-LAST as a span of our calls; None when we have no call in it.
    Where both readers say which calls failed (`their_failed`, `our_failed`: None unknown),
    calls are equal only with the same outcome; given the reply of each of our calls
    (`our_batches`), a reply's calls are compared in the order stats.py lists them."""
    order = their_order(theirs, ours, our_batches)
    if order != list(range(len(ours))):
        def pick(seq: Sequence[Any] | None) -> list[Any] | None:
            return None if seq is None else [seq[i] for i in order]

        span = map_span(theirs, pick(ours) or [], first, last, their_ids, pick(our_ids), their_failed, pick(our_failed))
        if span is None:
            return None
        inside = order[span[0] - 1:span[1]]
        return min(inside) + 1, max(inside) + 1
    ours = as_theirs(theirs, ours)
    theirs, ours = with_outcomes(theirs, ours, their_failed, our_failed)
    if list(theirs) == list(ours):
        return first, last
    if not ours:
        return None
    partner = align(theirs, ours, their_ids, our_ids)
    first, last = max(1, first), min(last, len(theirs))
    if first > last:
        return None
    f = partner[first - 1]
    if f is None:  # just after the partner of the nearest aligned call before it
        before = next((p for p in reversed(partner[:first - 1]) if p is not None), -1)
        f = before + 1
    if first == 1:
        f = 0  # a loop from their first call starts at ours
    lst = partner[last - 1]
    if last == len(theirs):
        lst = len(ours) - 1  # a loop to their last call runs to our last (our calls after it have no partner)
    elif lst is None:  # just before the partner of the nearest aligned call after it
        after = next((p for p in partner[last:] if p is not None), len(ours))
        lst = after - 1
    else:  # our calls right after it, of its tool and aligned with none of theirs: the same call
        # counted more finely (each failed attempt of an aider edit theirs counts once)
        aligned = {p for p in partner if p is not None}
        while lst + 1 < len(ours) and lst + 1 not in aligned and ours[lst + 1][0] == ours[lst][0]:
            lst += 1
    f, lst = min(f, len(ours) - 1), max(lst, 0)
    if lst < f:
        return None
    return f + 1, lst + 1


def load_stats(folder: Path) -> ModuleType | None:
    """The folder's stats.py (the reader its positions were taken from), imported; None: none."""
    path = folder / "stats.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(f"labelled_stats_{abs(hash(str(folder)))}", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def their_calls(stats: ModuleType, path: Path) -> dict[str, tuple[list[Key], list[str | None]]] | None:
    """session key → stats.py's calls for `path` and their ids where it kept them (None: stats.py
    cannot read the file)."""
    try:
        _fmt, sessions = stats.load(str(path))
    except Exception:  # noqa: BLE001 - an independent script's failure means "no positions of its own"
        return None
    out = {}
    for s in sessions:
        ids: list[str | None] = [None] * len(s.calls)
        for cid, i in (getattr(s, "_by_id", None) or {}).items():  # stats.py's id → call index
            if isinstance(i, int) and 0 <= i < len(ids):
                ids[i] = str(cid)
        out[str(s.key)] = ([(str(n), str(a)) for n, a in s.calls], ids)
    return out


def key_offset(theirs: dict[str, tuple[list[Key], list[str | None]]] | None, ours: dict[str, Any]) -> int:
    """How many sessions stats.py numbers before our first: 1 where it counts the lines before
    a file's first `# aider chat started at` line as a session of their own (aider writes a blank
    line before each start line, so a history file begins with one): keys 1..n+1 beside our
    1..n, its "1" without a call. 0 otherwise."""
    if not theirs or not ours:
        return 0
    if list(theirs) != [str(i) for i in range(1, len(theirs) + 1)] or list(ours) != [str(i) for i in range(1, len(ours) + 1)]:
        return 0
    return 1 if len(theirs) == len(ours) + 1 and not theirs["1"][0] else 0


def their_failed(stats: ModuleType, path: Path) -> dict[str, list[bool | None]]:
    """session key → whether stats.py answered each call "failed: ..." (True), "applied ..."
    (False) or otherwise (None: it gives no outcome for that call)."""
    try:
        _fmt, sessions = stats.load(str(path))
    except Exception:  # noqa: BLE001 - as their_calls
        return {}
    return {str(s.key): [True if str(r).startswith("failed") else False if str(r).startswith("applied") else None
                         for r in getattr(s, "results", [None] * len(s.calls))] for s in sessions}


def session_for(key: str, ours: dict[str, Any], offset: int = 0) -> str | None:
    """Our session a label's key names: the same key (less `offset`, see key_offset), or, where
    the file holds one session on our side, that one (stats.py keys a single-session file "0";
    our readers by its id or name)."""
    if offset and key.isdigit() and str(int(key) - offset) in ours:
        return str(int(key) - offset)
    if key in ours:
        return key
    return next(iter(ours)) if len(ours) == 1 else None


def report(folder: Path) -> list[dict[str, Any]]:
    """One row per labelled session of `folder` (files present): found by our readers, calls on
    both sides, the loop span on both sides."""
    stats = load_stats(folder)
    with open(folder / "labels.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    cache: dict[str, tuple[Any, dict[str, tuple[list[Key], list[str | None], list[bool | None], list[int]]], Any]] = {}
    out = []
    for r in rows:
        path = folder / r["file"]
        if not path.exists():
            continue
        if r["file"] not in cache:
            ours = {str(getattr(info, "key", None)): (call_keys(events), call_ids(events), call_failed(events),
                                                      call_batches(events))
                    for info, events, _ in sessions_of(read(path), path)}
            cache[r["file"]] = (their_calls(stats, path) if stats else None, ours,
                                their_failed(stats, path) if stats else {})
        theirs_by_key, ours, failed = cache[r["file"]]
        key = session_for(r["session_key"], ours, key_offset(theirs_by_key, ours))
        theirs = (theirs_by_key or {}).get(r["session_key"])
        span = scoring.parse_loop_calls(r.get("loop_calls"))
        mapped = None
        if span and key is not None:
            mapped = (map_span(theirs[0], ours[key][0], *span, theirs[1], ours[key][1],
                               failed.get(r["session_key"]), ours[key][2], ours[key][3])
                      if theirs is not None else span)
        out.append({"folder": folder.name, "file": r["file"], "key": r["session_key"], "our_key": key,
                    "label": r["label"], "stats_calls": None if theirs is None else len(theirs[0]),
                    "our_calls": None if key is None else len(ours[key][0]),
                    "span": scoring.format_loop_calls(*(span or (None, None))),
                    "our_span": scoring.format_loop_calls(*(mapped or (None, None)))})
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args(argv)
    print("| set | file | session | label | found | stats.py calls | our calls | loop (stats.py) | loop (ours) |")
    print("|---|---|---|---|---|---:|---:|---|---|")
    for folder in args.folders:
        for r in report(folder):
            found = "no" if r["our_key"] is None else "yes" if r["our_key"] == r["key"] else f"as {r['our_key']}"
            stats_calls = "—" if r["stats_calls"] is None else r["stats_calls"]
            print(f"| {r['folder']} | `{r['file']}` | {r['key'][:24]} | {r['label']} | {found} | {stats_calls} "
                  f"| {r['our_calls'] if r['our_calls'] is not None else '—'} | {r['span']} | {r['our_span']} |")


if __name__ == "__main__":
    main()
