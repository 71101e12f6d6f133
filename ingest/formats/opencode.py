"""OpenCode (sst/opencode, now anomalyco/opencode) sessions, in the two shapes it leaves them:

- `opencode export [sessionID]` (packages/opencode/src/cli/cmd/export.ts): one JSON document
  {info: Session.Info, messages: [{info: Message, parts: [Part]}], todos}. Redirected by
  PowerShell (`opencode export > s.json`) it is UTF-16 with a BOM; both are read.
- Its local JSON storage (~/.local/share/opencode/storage, layout as json-migration.ts reads
  it): `session/<projectID>/<sessionID>.json` (Session.Info), `message/<sessionID>/<messageID>
  .json` (Message info), `part/<messageID>/<partID>.json` (Part). A session is the folder-set of
  those files; the session file stands for it (`unit_of`), and `members` names every file whose
  change is a change of the session, so `watch` follows a running session.
- Its SQLite database (OpenCode 1.x, checked with 1.18.33: ~/.local/share/opencode/opencode.db,
  or $OPENCODE_DB): tables `session` (one row a session), `message` and `part` (id, session /
  message id, `data`: the same Message / Part JSON without its ids). Every session of the file is
  read, oldest first; the database and its write-ahead log are its members (OpenCode writes the
  log, and folds it into the file only now and then), so `watch` follows running sessions. Any
  SQLite file is taken for this format; one without those tables is a ReadError saying so.

Messages and parts as session/message-v2.ts defines them: a user message is a UserTurn (its
text parts, synthetic ones left out: those are OpenCode's own additions); an assistant message
is one or more steps (`step-start` parts split them), each step's `tool` parts one Batch (id =
callID, name = tool, args = state.input) followed by Answers for the parts that finished
(status "completed" → state.output; "error" → state.error, is_error); a step with text and no
tools is Prose; a `retry` part is a Retry. A call OpenCode could not repair is rerouted to its
`invalid` tool (tool/invalid.ts: input {tool, error}, answered "The arguments provided to the
tool are invalid: …"): the model's call never ran, so it is an `invalid` call, named as OpenCode
names it (vocab.OPENCODE_INVALID, judged as a harness refusal), answered by an error. A notice LoopLedger's OpenCode plugin appended to a result (a `<loopledger_notice>`
block at its end: a live warning) is taken off again, so a replay judges the answer the live
guard judged.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from loopledger.events import (
    Answer,
    Answers,
    Batch,
    Call,
    Item,
    Prose,
    ReadError,
    Retry,
    SessionInfo,
    SessionStart,
    UserTurn,
)
from loopledger.formats._common import (
    MAX_DOC_BYTES,
    as_text,
    bad,
    iso_utc,
    json_error_message,
    load_json,
    str_or_none,
    title_of,
)
from loopledger.vocab import OPENCODE_INVALID

NAME = "opencode"
DESCRIPTION = "OpenCode session (`opencode export` JSON, UTF-8 or UTF-16; or its storage/ session files)"

_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_UTF8_BOM = b"\xef\xbb\xbf"
_SESSION_ID = re.compile(r'"id"\s*:\s*"ses_')
_EXPORT = re.compile(r'"messages"\s*:\s*\[')
_STORAGE_SESSION = re.compile(r'"projectID"\s*:')
_SQLITE = b"SQLite format 3\x00"
# What LoopLedger's OpenCode plugin appends to a warned call's result (loopledger/live/opencode_plugin.js).
_NOTICE = re.compile(r"\n\n<loopledger_notice>\n.*\n</loopledger_notice>\Z", re.S)


def _text(head: bytes) -> str:
    """The head as text whatever its encoding (a UTF-16 head cut mid-character loses only it)."""
    if head.startswith(_UTF16_BOMS):
        return head[: len(head) // 2 * 2].decode("utf-16", "replace").lstrip("\ufeff").lstrip()
    if head.startswith(_UTF8_BOM):
        head = head[len(_UTF8_BOM):]
    return head.decode("utf-8", "replace").lstrip()


def sniff(head: bytes) -> bool:
    if head.startswith(_SQLITE):
        # OpenCode's database: its schema may not be in the file yet (it sits in the WAL until a
        # checkpoint), so any SQLite file is taken, and `read` says when it is not OpenCode's.
        return True
    text = _text(head)
    if not text.startswith("{") or not _SESSION_ID.search(text):
        return False
    # an export ({"info": {"id": "ses_…"}, "messages": [...]}), else a storage session file
    return bool(_EXPORT.search(text) or _STORAGE_SESSION.search(text))


# ── storage: a session is its session file, its message files and their part files ───────────


def _storage_root(session_file: Path) -> Path | None:
    """`storage/` for `storage/session/<projectID>/<sessionID>.json`, else None."""
    if (session_file.suffix == ".json" and session_file.name.startswith("ses_")
            and session_file.parent.parent.name == "session"):
        return session_file.parent.parent.parent
    return None


def _session_file(root: Path, session_id: str) -> Path | None:
    found = sorted((root / "session").glob(f"*/{session_id}.json")) if session_id.startswith("ses_") else []
    return found[0] if found else None


def unit_of(path: Path) -> Path | None:
    """The session file standing for any file of an OpenCode storage session (the session file
    itself, one of its messages, one of their parts); None for any other file."""
    if path.suffix != ".json":
        return None
    kind, parent = path.parent.parent.name, path.parent.name
    root = path.parent.parent.parent
    if kind == "session" and path.name.startswith("ses_"):
        return path
    if kind == "message" and parent.startswith("ses_") and path.name.startswith("msg_"):
        return _session_file(root, parent)
    if kind == "part" and parent.startswith("msg_") and path.name.startswith("prt_"):
        return _session_of_message(root, parent, path)
    return None


_SESSION_OF_MESSAGE: dict[tuple[Path, str], Path] = {}  # found once per message, not per part


def _session_of_message(root: Path, message_id: str, part_file: Path) -> Path | None:
    """The session file of a message, from one of its part files (a part names its session:
    partBase); cached, since discovery and watch ask for every part file of a message."""
    found = _SESSION_OF_MESSAGE.get((root, message_id))
    if found is not None and found.exists():
        return found
    part = load_json(part_file)
    sid = part.get("sessionID") if isinstance(part, dict) else None
    if not isinstance(sid, str):  # its message's folder says the same, slower
        files = sorted((root / "message").glob(f"*/{message_id}.json"))
        sid = files[0].parent.name if files else ""
    found = _session_file(root, sid)
    if found is not None:
        if len(_SESSION_OF_MESSAGE) > 100_000:
            _SESSION_OF_MESSAGE.clear()
        _SESSION_OF_MESSAGE[(root, message_id)] = found
    return found


def _message_files(root: Path, session_id: str) -> list[Path]:
    folder = root / "message" / session_id
    return sorted(folder.glob("msg_*.json")) if folder.is_dir() else []


def _part_files(root: Path, message_id: str) -> list[Path]:
    folder = root / "part" / message_id
    return sorted(folder.glob("prt_*.json")) if folder.is_dir() else []


def _is_db(path: Path) -> bool:
    return path.suffix == ".db" and path.name.startswith("opencode")


def members(path: Path) -> list[Path]:
    """Every file a storage session is made of (session, messages, parts), the unit first: a
    change to any of them is a change of the session. A database: itself and its write-ahead
    log. An export is just itself."""
    if _is_db(path):
        return [path, path.with_name(path.name + "-wal")]
    root = _storage_root(path)
    if root is None:
        return [path]
    out = [path]
    for msg in _message_files(root, path.stem):
        out.append(msg)
        out.extend(_part_files(root, msg.stem))
    return out


def default_roots() -> list[Path]:
    """Where OpenCode keeps its storage (xdg-basedir's data dir: $XDG_DATA_HOME, else
    ~/.local/share, on every platform), whether or not it exists. Its session, message and
    part folders are watched, not the rest of storage/ (projects, todos, diffs are not sessions)."""
    data = Path(os.environ.get("XDG_DATA_HOME") or "~/.local/share").expanduser() / "opencode"
    storage = data / "storage"
    return [storage / "session", storage / "message", storage / "part", database(data)]


def database(data: Path) -> Path:
    """OpenCode's database in its data folder, as OpenCode chooses it: $OPENCODE_DB (absolute, or
    in the data folder), else opencode.db (the release channel npm installs)."""
    env = os.environ.get("OPENCODE_DB")
    return Path(env) if env and os.path.isabs(env) else data / (env or "opencode.db")


# ── reading ──────────────────────────────────────────────────────────────────────────────────


def _load(path: Path) -> Any:
    """The JSON document at `path` (UTF-8, with or without a BOM, or UTF-16 with one), or a
    ReadError naming the file and line."""
    try:
        with open(path, "rb") as fh:
            start = fh.read(2)
    except OSError as exc:
        return bad(path, None, f"cannot read file: {exc.strerror or exc}")
    if not start.startswith(_UTF16_BOMS):
        return load_json(path)
    try:
        size = path.stat().st_size
        if size > MAX_DOC_BYTES:
            return bad(path, None, f"JSON document too large ({size} bytes; the limit is {MAX_DOC_BYTES})")
        text = path.read_bytes().decode("utf-16")
    except OSError as exc:
        return bad(path, None, f"cannot read file: {exc.strerror or exc}")
    except UnicodeDecodeError as exc:
        return bad(path, None, f"starts with a UTF-16 byte order mark but is not valid UTF-16 ({exc.reason} "
                   f"at byte {exc.start})")
    raw = text.lstrip("\ufeff").encode("utf-8", "surrogatepass")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        pos = max(0, min(exc.pos, len(raw)))
        line = raw.count(b"\n", 0, pos) + 1
        start_at = raw.rfind(b"\n", 0, pos) + 1
        return bad(path, line, json_error_message(raw, exc), raw[start_at:start_at + 400])


def _ms(value: Any) -> str | None:
    return iso_utc(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _time(obj: Any, key: str) -> str | None:
    t = obj.get("time") if isinstance(obj, dict) else None
    return _ms(t.get(key)) if isinstance(t, dict) else None


def _info(session: dict, messages: list) -> SessionInfo:
    model = None
    for m in messages:
        info = m.get("info") if isinstance(m, dict) else None
        if isinstance(info, dict) and info.get("role") == "assistant" and info.get("modelID"):
            provider = str_or_none(info.get("providerID"))
            model = f"{provider}/{info['modelID']}" if provider else str_or_none(info["modelID"])
            break
    meta = {k: session[k] for k in ("version", "directory", "projectID") if isinstance(session.get(k), str)}
    return SessionInfo(str(session.get("id")), NAME, title_of(as_text(session.get("title") or "")), "opencode",
                       model, _time(session, "created"), str_or_none(session.get("parentID")), meta)


def _user(parts: list, ts: str | None, line: int) -> list[Item]:
    texts = [p.get("text") for p in parts if isinstance(p, dict) and p.get("type") == "text"
             and isinstance(p.get("text"), str) and not p.get("synthetic") and not p.get("ignored")]
    files = [p for p in parts if isinstance(p, dict) and p.get("type") == "file"]
    if not texts and not files:
        return []  # only OpenCode's own parts (compaction, synthetic text): not the person
    return [UserTurn("\n".join(texts), ts, line)]


def _tool(part: dict) -> tuple[Call, Answer | None]:
    state = part.get("state") if isinstance(part.get("state"), dict) else {}
    call_id = str_or_none(part.get("callID")) or str_or_none(part.get("id"))
    args = state.get("input")
    name = str_or_none(part.get("tool")) or "unknown"
    if name == "invalid":
        tool = args.get("tool") if isinstance(args, dict) else None
        call = Call(call_id, OPENCODE_INVALID, {"reason": "invalid_tool_call", "tool": str_or_none(tool)})
    else:
        call = Call(call_id, name, args if args is not None else {})
    status = state.get("status")
    end = _time(state, "end")
    if status == "completed":
        # a bash command that exited non-zero completed as a tool but failed as a command
        meta = state.get("metadata") if isinstance(state.get("metadata"), dict) else {}
        code = meta.get("exit")
        failed = name == "invalid" or (isinstance(code, int) and not isinstance(code, bool) and code != 0)
        return call, Answer(call_id, _NOTICE.sub("", as_text(state.get("output") or "")), failed, end)
    if status == "error":
        return call, Answer(call_id, as_text(state.get("error") or ""), True, end)
    return call, None  # pending / running: not answered (yet)


def _assistant(parts: list, ts: str | None, line: int) -> Iterator[Item]:
    """One Batch (or Prose) per step, each Batch followed by the answers that came back."""
    texts: list[str] = []
    calls: list[Call] = []
    answers: list[Answer] = []
    started: list[str] = []  # when the step's first text or tool began (the message's time else)

    def flush() -> Iterator[Item]:
        text, at = "\n".join(texts), (started[0] if started else ts)
        if calls:
            yield Batch(tuple(calls), text, at, line)
            if answers:
                yield Answers(tuple(answers), line)
        elif text.strip():
            yield Prose(text, at, line)
        for pending in (texts, calls, answers, started):
            pending.clear()

    for part in parts:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("step-start", "step-finish"):
            yield from flush()
        elif kind == "text" and isinstance(part.get("text"), str) and not part.get("synthetic"):
            texts.append(part["text"])
            started.extend(t for t in [_time(part, "start")] if t and not started)
        elif kind == "tool":
            state = part.get("state")
            started.extend(t for t in [_time(state, "start")] if t and not started)
            call, answer = _tool(part)
            calls.append(call)
            if answer is not None:
                answers.append(answer)
        elif kind == "retry":
            err = part.get("error")
            data = err.get("data") if isinstance(err, dict) else None
            why = (data.get("message") if isinstance(data, dict) else None) or as_text(err)[:200]
            yield Retry(f"retry (attempt {part.get('attempt')}): {why}", _time(part, "created"), line)
    yield from flush()


def _events(path: Path, session: dict, messages: list) -> Iterator[Item]:
    yield SessionStart(_info(session, messages), 1)
    for n, m in enumerate(messages, 1):
        info = m.get("info") if isinstance(m, dict) else None
        parts = m.get("parts") if isinstance(m, dict) else None
        if not isinstance(info, dict) or not isinstance(parts, list):
            yield bad(path, n, "expected a message {\"info\": {...}, \"parts\": [...]}", m)
            continue
        role, ts = info.get("role"), _time(info, "created")
        if role == "user":
            yield from _user(parts, ts, n)
        elif role == "assistant":
            yield from _assistant(parts, ts, n)
        else:
            yield bad(path, n, f"unknown message role {role!r}", info)


def _id_order(doc: Any) -> tuple:
    created = doc.get("time", {}).get("created") if isinstance(doc.get("time"), dict) else None
    return (created if isinstance(created, int | float) else 0, str(doc.get("id", "")))


def _stored(path: Path, session: dict) -> Iterator[Item]:
    """A storage session: its messages in creation order (ids ascend with time), each with its
    parts in id order, as OpenCode itself hydrates them."""
    root = _storage_root(path)
    messages: list[dict] = []
    errors: list[ReadError] = []
    for msg_file in _message_files(root, path.stem) if root is not None else []:
        info = load_json(msg_file)
        if isinstance(info, ReadError) or not isinstance(info, dict):
            errors.append(info if isinstance(info, ReadError) else bad(msg_file, 1, "expected a message object", info))
            continue
        parts = []
        for part_file in _part_files(root, msg_file.stem):
            part = load_json(part_file)
            if isinstance(part, dict):
                parts.append(part)
            else:
                errors.append(part if isinstance(part, ReadError) else bad(part_file, 1, "expected a part object", part))
        parts.sort(key=lambda p: str(p.get("id", "")))
        messages.append({"info": info, "parts": parts})
    messages.sort(key=lambda m: _id_order(m["info"]))
    yield from errors
    yield from _events(path, session, messages)


def _database(path: Path) -> Iterator[Item]:
    """Every session of an OpenCode database, oldest first, each with its messages in creation
    order and their parts in id order (as OpenCode hydrates them); opened read-only, its
    write-ahead log included, so what a running OpenCode committed is read."""
    try:
        db = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        yield bad(path, None, f"cannot open the SQLite database: {exc}")
        return
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"session", "message", "part"} <= tables:
            yield bad(path, None, "an SQLite database without OpenCode's session, message and part tables "
                      "(not an OpenCode database; pass --format to read it as another format)")
            return
        sessions = db.execute("SELECT id, project_id, parent_id, directory, title, version, time_created "
                              "FROM session ORDER BY time_created, id").fetchall()
        for sid, project, parent, directory, title, version, created in sessions:
            info = {"id": sid, "projectID": project, "parentID": parent, "directory": directory, "title": title,
                    "version": version, "time": {"created": created}}
            yield from _events(path, info, list(_db_messages(path, db, sid)))
    except sqlite3.Error as exc:
        yield bad(path, None, f"cannot read the OpenCode database: {exc}")
    finally:
        db.close()


def _db_messages(path: Path, db: sqlite3.Connection, session_id: str) -> Iterator[dict]:
    parts: dict[str, list[dict]] = {}
    for pid, mid, data in db.execute("SELECT id, message_id, data FROM part WHERE session_id = ? ORDER BY id",
                                     (session_id,)):
        part = _row_json(data)
        parts.setdefault(mid, []).append({**part, "id": pid, "messageID": mid, "sessionID": session_id})
    for mid, data in db.execute("SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id",
                                (session_id,)):
        yield {"info": {**_row_json(data), "id": mid, "sessionID": session_id}, "parts": parts.get(mid, [])}


def _row_json(data: Any) -> dict:
    try:
        value = orjson.loads(data)
    except (orjson.JSONDecodeError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


def read(path: Path | str) -> Iterator[Item]:
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            is_sqlite = fh.read(len(_SQLITE)) == _SQLITE
    except OSError:
        is_sqlite = False
    if is_sqlite:
        yield from _database(path)
        return
    doc = _load(path)
    if isinstance(doc, ReadError):
        yield doc
    elif isinstance(doc, dict) and isinstance(doc.get("info"), dict) and isinstance(doc.get("messages"), list):
        yield from _events(path, doc["info"], doc["messages"])
    elif isinstance(doc, dict) and isinstance(doc.get("id"), str) and doc["id"].startswith("ses_"):
        yield from _stored(path, doc)
    else:
        yield bad(path, 1, "expected an `opencode export` document {\"info\", \"messages\"} or a "
                  f"storage session file {{\"id\": \"ses_…\"}}, got {type(doc).__name__}")
