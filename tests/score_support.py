"""A small labelled ledger whose leaderboard is worked out by hand (not a test module).

Six tau-bench-shaped sessions in one file, ingested by the real worker under two policies chosen
for rules simple enough to count on paper:
- WINDOW = window:window=8,threshold=3 halts the 3rd call with the same tool and arguments
  among the last 8 calls;
- LADDER = ladder:…halt_at=4 halts the 4th identical call in a row (every tool here mutates).
After a halt the run's later calls are "saved". X = the same failing `edit`, Y = the same
`write_file`, T = the same `run_tests`, lower-case letters are distinct `note` calls.

    session  calls (1-based)          label           WINDOW halts at      LADDER halts at
    task-1   a b X X X X c            loop 3-6        5: caught, 3 in,     6: caught, 4 in,
                                                      saves 2 (6, 7)       saves 1 (7)
    task-2   Y a Y Y X X X X          loop 5-8        4: early (Y's 3rd),  8: caught, 4 in,
                                                      saves 4 (5-8)        saves 0
    task-3   a X b X c X d            loop 2-6        6: caught, 5 in,     never: missed
                                                      saves 1 (7)
    task-4   a b c d                  normal          never: clean         never: clean
    task-5   a T b T c T              normal          6: false halt        never: clean
    task-6   X X X X                  unclear         (left out)           (left out)

    WINDOW: loops 3, caught 2, early 1, missed 0, normal 2, false halts 1, halted 4 →
            precision 2/4 = 0.50, recall 2/3 = 0.67, calls into loop 3 and 5
    LADDER: loops 3, caught 2, early 0, missed 1, normal 2, false halts 0, halted 2 →
            precision 1.00, recall 0.67, calls into loop 4 and 4

"saves" above is the ledger's count (the run's calls after the halt). The score counts the calls
saved *inside the labelled loop* (up to its last call) of the 4 + 4 + 5 = 13 calls spent inside
loops, and the calls a false halt cost a normal session (4 + 6 = 10 calls in all):

    WINDOW: task-1 halted at 5 of 3-6 saves 6 (1); task-2's early halt saves none of its loop;
            task-3 halted on its loop's last call saves none → 1/13. task-5 halted on its last
            call loses none → 0/10. Flagged inside (window halts without warning): tasks 1, 3 → 2/3.
    LADDER: halted on the last call of both loops it catches → 0/13; no false halt → 0/10.
            Flagged inside: it warns on the 2nd identical call in a row — task-1 at call 4
            (inside 3-6); task-2 at call 4, the 2nd Y, before its loop 5-8; task-3 never → 1/3.
"""

from __future__ import annotations

import json
from pathlib import Path

from loopledger.detectors.policy import PolicySpec

WINDOW = PolicySpec.parse("window:window=8,threshold=3")
LADDER = PolicySpec.parse("ladder:warn_at=2,block_at=3,halt_at=4,read_only_warn_at=2,read_only_block_at=3,"
                          "read_only_halt_at=4")
FILE = "scored/tau-mini.json"

SESSIONS = {
    1: "a b X X X X c",
    2: "Y a Y Y X X X X",
    3: "a X b X c X d",
    4: "a b c d",
    5: "a T b T c T",
    6: "X X X X",
}
CALLS = {"X": ("edit", {"path": "app.py", "old": "x", "new": "y"}, "Error: old string not found"),
         "Y": ("write_file", {"path": "out.txt", "text": "hi"}, "Error: read-only file system"),
         "T": ("run_tests", {"cmd": "pytest -q"}, None)}

LABELS_CSV = f"""file,session_key,label,loop_calls,reason
{FILE},task-1.trial-0,loop,3-6,"edit x4, same error"
{FILE},task-2.trial-0,loop,5-8,edit x4 after two write_file retries
{FILE},task-3.trial-0,loop,2-6,"edit, note, edit, note, edit: same error each time"
{FILE},task-4.trial-0,normal,,no repeats
{FILE},task-5.trial-0,normal,,edit/test cycle; the tests' output changes
{FILE},task-6.trial-0,unclear,,too short to say
"""

# Wilson 95% intervals, by hand (z = 1.959964, z² = 3.841459; bounds = (p + z²/2n ∓ z·√(p(1−p)/n +
# z²/4n²)) / (1 + z²/n)):
#   2/4: p 0.5, 1 + z²/n = 1.960365, p + z²/2n = 0.980182, z·√(0.0625 + 0.060023) = 0.686052
#        → (0.294130 / 1.960365, 1.666234 / 1.960365) = (0.150, 0.850)
#   2/3: p 0.6667, 1 + z²/n = 2.280486, p + z²/2n = 1.306910, z·√(0.074074 + 0.106707) = 0.833345
#        → (0.473565 / 2.280486, 2.140255 / 2.280486) = (0.208, 0.939)
#   2/2: p 1, the lower bound is n / (n + z²) = 2 / 5.841459 = 0.342, the upper 1

# (loops, caught, early, missed, normal, false halts, precision, recall, calls saved inside loops,
# calls into loop)
EXPECTED = {
    WINDOW.id: (3, 2, 1, 0, 2, 1, "0.50", "0.67", 1, "4 (3, 5)"),
    LADDER.id: (3, 2, 0, 1, 2, 0, "1.00", "0.67", 0, "4 (4, 4)"),
}
LOOP_CALLS, NORMAL_CALLS = 13, 10
# (calls lost, loops flagged inside)
CURRENCY = {WINDOW.id: (0, 2), LADDER.id: (0, 1)}
# (precision interval, recall interval), as the tables print them
INTERVALS = {
    WINDOW.id: ("[0.15, 0.85]", "[0.21, 0.94]"),  # precision 2/4, recall 2/3
    LADDER.id: ("[0.34, 1.00]", "[0.21, 0.94]"),  # precision 2/2, recall 2/3
}


def _record(task: int, pattern: str) -> dict:
    traj: list[dict] = [{"role": "system", "content": "You are an agent."},
                        {"role": "user", "content": f"Task {task}: fix app.py"}]
    for i, name in enumerate(pattern.split(), 1):
        if name in CALLS:
            tool, args, answer = CALLS[name]
            # run_tests answers change every time (progress); the failing writes answer the same.
            answer = answer or f"{i} passed, {9 - i} failed"
        else:
            tool, args, answer = "note", {"text": f"{name}-{i}"}, "ok"
        cid = f"call_{task}_{i}"
        traj.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}]})
        traj.append({"role": "tool", "tool_call_id": cid, "name": tool, "content": answer})
    traj.append({"role": "assistant", "content": "Done."})
    return {"task_id": task, "trial": 0, "reward": 0.0, "info": {}, "traj": traj}


def write_transcripts(root: Path) -> Path:
    path = root / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([_record(task, p) for task, p in SESSIONS.items()]), encoding="utf-8")
    return path


def build(root: Path, url: str | None = None, specs=(WINDOW, LADDER)) -> tuple[str, Path]:
    """Ingest the transcripts under `specs` only (WINDOW and LADDER), import the labels into the
    ledger at `url` (default: a SQLite file under root); (ledger URL, CSV path)."""
    from loopledger import worker
    from loopledger.ledger import labels, migrate
    from loopledger.ledger.engine import make_engine

    transcripts = write_transcripts(root / "transcripts")
    csv_path = root / "labels.csv"
    csv_path.write_text(LABELS_CSV, encoding="utf-8")
    url = url or f"sqlite:///{root / 'ledger.sqlite'}"
    engine = make_engine(url)
    try:
        migrate.upgrade(engine)
        opts = worker.Options(specs=list(specs), default_ids=frozenset(s.id for s in specs))
        totals = worker.ingest_paths(engine, [transcripts], opts)
        assert totals.sessions == 6 and totals.quarantined == 0, totals
        with engine.begin() as conn:
            report = labels.import_file(conn, csv_path)
        assert report.labelled == 6 and not report.problems, report.messages
    finally:
        engine.dispose()
    return url, csv_path
