"""Labels at scale: read a labels CSV into the ledger, write the ledger's labels out as one.

The format is `../shared/corpus/labels.csv`'s: `file, session_key, label, loop_calls, reason`
(export adds `labelled_by, labelled_at`, which import ignores). A row finds its session by
- `file`: a suffix of the ingested source's path, whole path components only
  (`tau-bench.json` matches `/data/runs/tau-bench.json`, not `/data/my-tau-bench.json`);
- `session_key`: the session's key in the ledger (tau-bench `task-13.trial-0`, an OpenHands
  instance id, a Claude Code session id, …). A file holding one session also answers to `0` and
  `1` (people number a lone session either way), and a key the reader prefixed
  (`group/KEY`, `group:KEY`) answers to its last part when that is unambiguous.
The same file ingested under two paths gets the label on both. Rows that match nothing, or carry
a bad label or range, are reported as FILE:LINE and skipped; the others are stored.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import sqlalchemy as sa
from loopledger.analysis import scoring
from loopledger.ledger import read
from loopledger.ledger import schema as t
from sqlalchemy.engine import Connection

REQUIRED = ("file", "session_key", "label")
COLUMNS = ("file", "session_key", "label", "loop_calls", "reason")
EXPORT_COLUMNS = (*COLUMNS, "labelled_by", "labelled_at")
LONE_SESSION_KEYS = ("0", "1")
KEY_SEPARATORS = ("/", ":", "#")


class LabelFileError(ValueError):
    """The file as a whole cannot be read as labels (missing columns, not text)."""


@dataclass(frozen=True, slots=True)
class LabelRow:
    line: int  # where the row starts in the file, 1-based (the header is line 1)
    file: str
    session_key: str
    label: str
    first: int | None
    last: int | None
    reason: str


@dataclass(slots=True)
class ImportReport:
    rows: int = 0  # data rows read
    labelled: int = 0  # sessions given a label
    replaced_dashboard: int = 0  # of those, sessions whose label a person had set in the dashboard
    problems: list[tuple[int, str]] = field(default_factory=list)  # (line, "FILE:LINE: why") per skipped row

    @property
    def messages(self) -> list[str]:
        return [m for _, m in sorted(self.problems)]


# ── reading the CSV ────────────────────────────────────────────────────────────────────────────


def parse(text: TextIO, name: str) -> tuple[list[LabelRow], list[tuple[int, str]]]:
    """The rows of a labels CSV, and (line, "name:line: why") for each row that cannot be a label."""
    reader = csv.reader(text)
    try:
        header = next(reader)
    except StopIteration:
        raise LabelFileError(f"{name}:1: empty file; expected the header {','.join(COLUMNS)}") from None
    except csv.Error as exc:
        raise LabelFileError(f"{name}:1: {exc}") from None
    cols = [h.strip().lower().lstrip("\ufeff") for h in header]
    missing = [c for c in REQUIRED if c not in cols]
    if missing:
        raise LabelFileError(f"{name}:1: missing column(s) {', '.join(missing)}; the header must name "
                             f"{','.join(COLUMNS)} (loop_calls and reason may be left out)")
    at = {c: cols.index(c) for c in COLUMNS if c in cols}
    rows: list[LabelRow] = []
    problems: list[tuple[int, str]] = []
    line = reader.line_num + 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problems.append((line, f"{name}:{line}: {exc}"))
            break
        start, line = line, reader.line_num + 1
        if not any(c.strip() for c in cells):
            continue

        def cell(col: str, cells: list[str] = cells) -> str:
            i = at.get(col)
            return cells[i].strip() if i is not None and i < len(cells) else ""

        try:
            if not cell("file") or not cell("session_key"):
                raise ValueError("file and session_key must not be empty")
            label = scoring.normalize_label(cell("label"))
            rng = scoring.parse_loop_calls(cell("loop_calls"))
            first, last = rng if rng else (None, None)
            scoring.check_label(label, first, last)
        except ValueError as exc:
            problems.append((start, f"{name}:{start}: {exc}"))
            continue
        i = at.get("reason")
        reason = cells[i] if i is not None and i < len(cells) else ""
        rows.append(LabelRow(start, cell("file"), cell("session_key"), label, first, last, reason))
    return rows, problems


# ── finding the sessions ───────────────────────────────────────────────────────────────────────


def _norm(path: str) -> str:
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def path_matches(source_path: str, file: str) -> bool:
    """`file` is `source_path` or its tail, in whole path components."""
    s, f = _norm(source_path), _norm(file)
    return s == f or s.endswith("/" + f.lstrip("/"))


class Matcher:
    """Finds a row's sessions; reads each source's sessions once (the ledger's files, not its calls)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.sources = [(int(i), p) for i, p in conn.execute(sa.select(t.sources.c.id, t.sources.c.path))]
        self._sessions: dict[int, list[tuple[int, str, int]]] = {}

    def sessions_of(self, source_id: int) -> list[tuple[int, str, int]]:
        if source_id not in self._sessions:
            s = t.sessions.c
            self._sessions[source_id] = [(int(i), k, int(n or 0)) for i, k, n in self.conn.execute(
                sa.select(s.id, s.key, s.n_calls).where(s.source_id == source_id).order_by(s.id))]
        return self._sessions[source_id]

    def find(self, file: str, key: str) -> list[tuple[int, int]]:
        """(session id, its call count) of every session the row names; ValueError says why none."""
        sources = [(i, p) for i, p in self.sources if path_matches(p, file)]
        if not sources:
            raise ValueError(f"no ingested file ends with {file!r} (ingest it first, or fix the path)")
        found: list[tuple[int, int]] = []
        for source_id, _path in sources:
            hit = self._key(self.sessions_of(source_id), key)
            if hit is not None:
                found.append(hit)
        if not found:
            keys = sorted({k for sid, _ in sources for _, k, _ in self.sessions_of(sid)})
            shown = ", ".join(keys[:6]) + (f", … ({len(keys)} in all)" if len(keys) > 6 else "")
            raise ValueError(f"no session {key!r} in {sources[0][1]}" + (f" (its sessions: {shown})" if keys else
                                                                        " (it holds no session)"))
        return found

    @staticmethod
    def _key(sessions: list[tuple[int, str, int]], key: str) -> tuple[int, int] | None:
        for sid, k, n in sessions:
            if k == key:
                return sid, n
        if len(sessions) == 1 and key in LONE_SESSION_KEYS:
            return sessions[0][0], sessions[0][2]
        tails = [(sid, n) for sid, k, n in sessions if any(k.endswith(sep + key) for sep in KEY_SEPARATORS)]
        return tails[0] if len(tails) == 1 else None


# ── import and export ──────────────────────────────────────────────────────────────────────────


def import_rows(conn: Connection, rows: Iterable[LabelRow], name: str,
                labelled_by: str = scoring.IMPORTED, by_user: str | None = None) -> ImportReport:
    """Store each row's label on its session(s), in the caller's transaction (a later row for the
    same session wins, as a later click does)."""
    report = ImportReport()
    matcher = Matcher(conn)
    lb = t.labels.c
    for row in rows:
        report.rows += 1
        try:
            found = matcher.find(row.file, row.session_key)
            for _sid, n_calls in found:
                scoring.check_label(row.label, row.first, row.last, n_calls)
        except ValueError as exc:
            report.problems.append((row.line, f"{name}:{row.line}: {exc}"))
            continue
        for sid, _ in found:
            before = conn.execute(sa.select(lb.labelled_by).where(lb.session_id == sid)).scalar()
            if before == scoring.DASHBOARD:
                report.replaced_dashboard += 1
            read.write_label(conn, sid, t.SESSION_LEVEL, row.label, row.reason, row.first, row.last, labelled_by,
                             by_user=by_user)
            report.labelled += 1
    return report


def import_file(conn: Connection, path: Path, by_user: str | None = None) -> ImportReport:
    """Parse and store a labels CSV (LabelFileError: the file is not one); `by_user`: who imports."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            rows, problems = parse(fh, str(path))
    except UnicodeDecodeError as exc:
        raise LabelFileError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    report = import_rows(conn, rows, str(path), by_user=by_user)
    report.rows += len(problems)
    report.problems = problems + report.problems
    return report


def export_rows(conn: Connection, full_paths: bool = False) -> list[dict[str, str]]:
    """Every label as a CSV row, in source path and session order. `file` is the path relative to
    the folder all ingested files share (the corpus' own form), or the full path."""
    lb, s, src = t.labels.c, t.sessions.c, t.sources.c
    root = "" if full_paths else common_root([p for (p,) in conn.execute(sa.select(src.path))])
    q = (sa.select(src.path, s.key, lb.label, lb.loop_first, lb.loop_last, lb.note, lb.labelled_by, lb.created_at)
         .select_from(t.labels.join(t.sessions, s.id == lb.session_id).join(t.sources, src.id == s.source_id))
         .order_by(src.path, s.id))
    out = []
    for r in conn.execute(q).mappings():
        path = _norm(r["path"])
        out.append({"file": path[len(root):] if root and path.startswith(root) else path,
                    "session_key": r["key"], "label": r["label"],
                    "loop_calls": scoring.format_loop_calls(r["loop_first"], r["loop_last"]),
                    "reason": r["note"] or "", "labelled_by": r["labelled_by"],
                    "labelled_at": _iso(r["created_at"])})
    return out


def common_root(paths: list[str]) -> str:
    """The folder (ending in /) every path lies under, or "" when they share none."""
    dirs = [_norm(os.path.dirname(p)) for p in paths]
    if not dirs:
        return ""
    try:
        root = os.path.commonpath(dirs).replace("\\", "/")
    except ValueError:  # mixed absolute and relative, or different drives
        return ""
    return root.rstrip("/") + "/" if root else ""


def _iso(ts: float | None) -> str:
    return "" if ts is None else dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="seconds")


def write_csv(rows: Iterable[dict[str, str]], out: TextIO) -> int:
    # CRLF, as RFC 4180 has it: Python's writer quotes a field only for the characters of its line
    # terminator, so with "\n" alone a reason holding a bare "\r" would be written unquoted and
    # could not be read back.
    w = csv.DictWriter(out, fieldnames=EXPORT_COLUMNS, lineterminator="\r\n")
    w.writeheader()
    n = 0
    for row in rows:
        w.writerow(row)
        n += 1
    return n


def to_csv(rows: Iterable[dict[str, str]]) -> str:
    buf = io.StringIO()
    write_csv(rows, buf)
    return buf.getvalue()
