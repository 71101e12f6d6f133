"""`loopledger hook claude-code | gemini-cli | codex`: one hook event on stdin, the enforced policy's
answer on stdout in the agent's own hook format, every decision in the ledger.

Claude Code (hooks reference, code.claude.com/docs/en/hooks): input carries `session_id`,
`transcript_path`, `cwd`, `hook_event_name`, plus `tool_name`, `tool_input`, `tool_use_id`
(PreToolUse), `tool_response` (PostToolUse), `error` (PostToolUseFailure), `prompt`
(UserPromptSubmit), `source` (SessionStart).
- PreToolUse: allow → no output; block → hookSpecificOutput.permissionDecision "deny" with the
  reason the model reads; halt → the same deny plus `"continue": false` and a stopReason. Claude
  Code (2.1.197, its bundled code) does not stop for that on a denied call: it only fills in the
  call's result, and the agent goes on.
- PostToolBatch (tool_calls [{tool_name, tool_input, tool_use_id, tool_response}], once per
  batch before the next model request): a batch holding a halted call → `{"continue": false,
  "stopReason"}`, which ends the turn (terminal_reason "hook_stopped"; the UI shows the reason;
  the conversation is kept). Anything else → no output.
- PostToolUse / PostToolUseFailure: the answer is recorded; a warned call gets its notice as
  hookSpecificOutput.additionalContext.
- UserPromptSubmit: a run boundary. SessionStart: the session is registered.

Gemini CLI (docs/hooks/reference.md in google-gemini/gemini-cli): `BeforeTool` (tool_name,
tool_input; no call id) answers `{"decision": "deny", "reason": …}` to refuse, plus
`"continue": false, "stopReason"` to halt; `AfterTool` (tool_response {llmContent,
returnDisplay, error}; read through formats.gemini.tool_result, as the session file's reader
reads the same result) gets hookSpecificOutput.additionalContext for a warning; `BeforeAgent`
(prompt) is a run boundary; an allow prints `{}` (its stdout must be JSON).

Codex CLI (loopledger.live.codex): Claude Code's field names and answers, except that a refusal
carries no `continue`/`stopReason` (Codex rejects them on PreToolUse and runs the call) and a
halted `codex exec` run is interrupted instead.

Never in the agent's way: malformed input, a missing ledger, a busy database (waited for once per
tool call: loopledger.live.busy_marks), an enforced stored policy whose detector is not registered
here (a ledger row never names code to import: loopledger.live.enforce.NotRegistered), no
decision within the deadline (loopledger.live.deadline) or any internal error allows the call (exit 0, nothing refused) and says why in one line of the
log file ($LOOPLEDGER_HOOK_LOG, default ~/.local/state/loopledger/hook.log).

Flags: the hook command's flags are the CLI's (`loopledger hook claude-code --help`). Only the
plain shapes of them (loopledger.live.hook_flags) are read here, before the CLI is imported;
anything else (a typo such as `--dbx`) is left to the CLI's own parser (loopledger.entry), whose
error ends the hook with status 1 — a non-blocking hook error to both agents, which run the call
(status 2 would refuse it) — after one line in the log.

Speed: this module is imported by loopledger.entry before typer, rich, pandas or SQLAlchemy are
(a SQLite ledger is written with the stdlib sqlite3; see loopledger.live.db).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from loopledger import folders
from loopledger.live import busy_marks
from loopledger.live.hook_flags import parse_flags

AGENTS = ("claude-code", "gemini-cli", "codex")
ENV_LOG = "LOOPLEDGER_HOOK_LOG"


def default_log() -> str:
    return folders.state_dir("hook.log")


def log(path: str | None, agent: str, message: str, redact: bool = True) -> None:
    """One line per problem, secrets redacted (a message may quote the event), in a file only its
    owner reads (0600; its folder 0700 when we create it); a log that cannot be written is not
    the agent's problem either. `redact=False`: a message of our own words only (the deadline's,
    written from its signal handler, which must not import: the import it interrupted may be
    redaction's own, half done)."""
    if redact:
        from loopledger.redact import redact_text

        message = redact_text(message)
    try:
        path = path or os.environ.get(ENV_LOG) or default_log()
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        # One line however many the message has (a driver's error adds CONTEXT/DETAIL lines).
        text = " | ".join(part for part in message.splitlines() if part.strip())
        line = f"{stamp} pid={os.getpid()} {agent}: {text}\n".encode("utf-8", "replace")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError:
        pass


# ── the agents' formats ──────────────────────────────────────────────────────────────────────


def _answer_text(agent: str, response: Any, tool: str = "") -> tuple[str, bool]:
    """(text, is_error) of a tool's result as the hook receives it."""
    from loopledger.live.session import _text

    if agent == "gemini-cli" and isinstance(response, dict):
        # Read as the session file's reader reads the same result (formats.gemini.tool_result),
        # so a live verdict is the verdict a replay of the session gives.
        from loopledger.formats.gemini import result_text, tool_result

        error = response.get("error")
        content = response.get("llmContent", response.get("returnDisplay"))
        text = result_text(content) if isinstance(content, str | list | dict) else _text(content)
        if error:  # the model is sent (and the session file records) the error's message alone
            err = error.get("message") if isinstance(error, dict) else error
            text = _text(err) or text
        return tool_result(tool, text, bool(error))
    if isinstance(response, dict):
        if "stdout" in response or "stderr" in response:  # Bash
            parts = [p for p in (response.get("stdout"), response.get("stderr")) if isinstance(p, str) and p]
            return "\n".join(parts), bool(response.get("is_error") or response.get("interrupted"))
        return _text(response), bool(response.get("is_error") or response.get("isError"))
    if isinstance(response, list):  # MCP content blocks
        texts = [b.get("text") for b in response if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return ("\n".join(texts) if texts else _text(response)), False
    return _text(response), False


def _deny(agent: str, event: str, d: Any) -> dict[str, Any]:
    reason = d.message()
    if agent == "gemini-cli":
        out: dict[str, Any] = {"decision": "deny", "reason": reason}
    else:
        out = {"hookSpecificOutput": {"hookEventName": event, "permissionDecision": "deny",
                                      "permissionDecisionReason": reason}}
    if d.stops and agent == "codex":
        out["systemMessage"] = reason  # the person's line; Codex refuses continue/stopReason here
    elif d.stops:
        out = {"continue": False, "stopReason": reason, **out}
    return out


def _context(event: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


CALL_EVENTS = {"claude-code": ("PreToolUse",), "gemini-cli": ("BeforeTool",), "codex": ("PreToolUse",)}
BATCH_EVENTS = {"claude-code": ("PostToolBatch",), "gemini-cli": (), "codex": ()}
ANSWER_EVENTS = {"claude-code": ("PostToolUse", "PostToolUseFailure"), "gemini-cli": ("AfterTool",),
                 "codex": ("PostToolUse",)}
USER_EVENTS = {"claude-code": ("UserPromptSubmit",), "gemini-cli": ("BeforeAgent",), "codex": ("UserPromptSubmit",)}
START_EVENTS = ("SessionStart",)


class HookInputError(ValueError):
    pass


def parse(raw: bytes) -> dict[str, Any]:
    import orjson

    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        from loopledger.redact import excerpt

        # excerpt redacts before it cuts, so a key straddling the cut is not half-logged.
        raise HookInputError(f"stdin is not JSON ({exc}): {excerpt(raw)}") from None
    if not isinstance(payload, dict):
        raise HookInputError(f"stdin is a JSON {type(payload).__name__}, not an object")
    for name in ("session_id", "hook_event_name"):
        if not isinstance(payload.get(name), str) or not payload[name]:
            raise HookInputError(f"the event has no {name}")
    return payload


def handle(agent: str, payload: dict[str, Any], db: str | None, started: float,
           redelivered_after: float | None = None, deadline: float | None = None,
           agent_pid: int | None = None) -> dict[str, Any] | None:
    """The output for one event (None: say nothing), the decision written to the ledger.
    `redelivered_after`: this event was handed to a resident at that time, which died before
    answering: if it stored the event, its decision is answered and nothing stored again.
    `deadline` (a time.time() value): every wait for the ledger ends before it. `agent_pid`: the
    hook's parent (Codex: a halted `codex exec` is interrupted once the decision is committed)."""
    from loopledger.live import db as live_db
    from loopledger.live import deadline as due

    event = payload["hook_event_name"]
    kind = ("call" if event in CALL_EVENTS[agent] else "answer" if event in ANSWER_EVENTS[agent]
            else "user" if event in USER_EVENTS[agent] else "start" if event in START_EVENTS
            else "batch" if event in BATCH_EVENTS[agent] else None)
    if kind is None:
        return None  # an event we were not installed for: nothing to judge
    session = payload["session_id"]
    transcript = payload.get("transcript_path") if isinstance(payload.get("transcript_path"), str) else None
    # A busy ledger costs a tool call one wait in all (loopledger.live.busy_marks): a later event
    # of a call that already waited in vain tries once, without waiting.
    calls = busy_marks.calls_of(agent, kind, payload)
    again = kind in ("answer", "batch") and busy_marks.waited(agent, session, calls)
    last = kind == "batch" or (kind == "answer" and not BATCH_EVENTS[agent])  # the call's last event
    wait = 0.0 if again else due.wait_s(deadline, live_db.HOOK_BUSY_TIMEOUT_S)
    try:
        out, stopping = _decide(agent, kind, event, payload, db, session, transcript, started, redelivered_after,
                                wait, deadline)
    except Exception as exc:
        if not live_db.is_busy(exc):
            raise
        if again:
            raise live_db.LedgerBusy("the ledger is busy (another writer keeps it locked), and this call already waited "
                                     "for it at an earlier event: not waited for again") from None
        if not last:
            busy_marks.note(agent, session, calls)
        raise live_db.LedgerBusy(f"the ledger is busy: another writer kept it locked past the {wait:g} s wait "
                                 f"(${live_db.ENV_BUSY})") from None
    finally:
        if again and last:
            busy_marks.clear(agent, session, calls)
    if stopping and agent == "codex":
        from loopledger.live.codex import interrupt

        interrupt(agent_pid, out.get("systemMessage") if out else None)
    return out


def _decide(agent: str, kind: str, event: str, payload: dict[str, Any], db: str | None, session: str,
            transcript: str | None, started: float, redelivered_after: float | None, wait: float,
            deadline: float | None) -> tuple[dict[str, Any] | None, bool]:
    """One event's transaction: (the output, whether the agent must stop)."""
    from loopledger.live import db as live_db
    from loopledger.live import deadline as due
    from loopledger.live import session as live

    conn = live_db.open_db(db, busy_timeout_s=wait, connect_timeout_s=due.wait_s(deadline, live_db.CONNECT_TIMEOUT_S))
    stopping = False
    try:
        conn.begin_write()
        sid = live.attach(conn, agent, session, transcript)
        conn.lock_session(sid)
        out: dict[str, Any] | None = None
        if kind == "call":
            d = _on_call(conn, sid, agent, payload, started, redelivered_after)
            if d.refused:
                out = _deny(agent, event, d)
            stopping = d.stops
        elif kind == "answer":
            d = _on_answer(conn, sid, agent, payload, redelivered_after)
            if d is not None and d.verdict == "warn":
                out = _context(event, d.message())
        elif kind == "batch":
            out = _stop_after(conn, sid, payload.get("tool_calls"))
        elif kind == "user":
            prompt = payload.get("prompt")
            state = live.load(conn, sid)
            state.user(prompt if isinstance(prompt, str) else "")
            live.save(conn, sid, state, agent)
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    finally:
        conn.close()
    return out, stopping


def _on_call(conn: Any, sid: int, agent: str, payload: dict[str, Any], started: float,
             redelivered_after: float | None) -> Any:
    """The decision on a call (judged and saved; a redelivered call's stored one when it has one)."""
    from loopledger.live import session as live

    tool = payload.get("tool_name")
    if not isinstance(tool, str) or not tool:
        raise HookInputError(f"{payload['hook_event_name']} without tool_name")
    if redelivered_after is not None:
        seq = live.recorded_since(conn, sid, redelivered_after, live.KIND_CALL, _call_id(payload),
                                  tool=tool, args=payload.get("tool_input"))
        if seq is not None and (d := live.decision_at(conn, sid, seq)) is not None:
            return d
    state = live.load(conn, sid)
    d = state.call(tool, payload.get("tool_input"), _call_id(payload), started=started)
    live.save(conn, sid, state, agent)
    return d


def _on_answer(conn: Any, sid: int, agent: str, payload: dict[str, Any], redelivered_after: float | None) -> Any:
    """An answer kept in the session's state (result-aware policies judge it); the decision on its call."""
    from loopledger.live import session as live

    call_id = _call_id(payload)
    if payload["hook_event_name"] == "PostToolUseFailure":
        text, is_error = live._text(payload.get("error")), True
    elif agent == "codex":
        from loopledger.live.codex import answer_of

        text, is_error = answer_of(payload.get("tool_response"))
    else:
        tool = payload.get("tool_name")
        text, is_error = _answer_text(agent, payload.get("tool_response"), tool if isinstance(tool, str) else "")
    if redelivered_after is None or live.recorded_since(conn, sid, redelivered_after, live.KIND_ANSWER,
                                                        call_id, text=text, is_error=is_error) is None:
        state = live.load(conn, sid)
        state.answer(call_id, text, is_error)
        live.save(conn, sid, state, agent)
    return live.decision_of(conn, sid, call_id, payload.get("tool_name"))


def _stop_after(conn: Any, sid: int, calls: Any) -> dict[str, Any] | None:
    """Claude Code's PostToolBatch: a batch holding a halted call ends the turn. (Claude Code
    ignores `continue: false` on a denied PreToolUse; after the batch it ends the run,
    terminal_reason "hook_stopped", and shows the stopReason.)"""
    from loopledger.live import session as live

    for call in calls if isinstance(calls, list) else []:
        call_id = call.get("tool_use_id") if isinstance(call, dict) else None
        if not isinstance(call_id, str) or not call_id:
            continue
        d = live.decision_of(conn, sid, call_id)
        if d is not None and d.stops:
            return {"continue": False, "stopReason": d.message()}
    return None


def _call_id(payload: dict[str, Any]) -> str | None:
    value = payload.get("tool_use_id")
    return value if isinstance(value, str) and value else None


def expired(agent: str, argv: list[str]) -> None:
    """No decision by the deadline (loopledger.live.deadline): the agent's "allow" on stdout and
    one line in the log; the caller ends the process."""
    from loopledger.live import deadline as due

    opts = parse_flags(argv) or {}
    log(opts.get("log"), agent, f"allowed without judging: no decision within the {due.seconds():g} s deadline "
        f"(${due.ENV})", redact=False)
    if agent == "gemini-cli":
        os.write(1, b"{}\n")  # Gemini CLI parses stdout as JSON: an empty object allows


def run(agent: str, argv: list[str], stdin: Any = None, stdout: Any = None,
        redelivered_after: float | None = None, deadline: float | None = None, stderr: Any = None) -> int:
    """The whole hook process: read, decide, answer; exit status 0 (1 when the flags cannot be
    read: see the module's docstring). `redelivered_after`, `deadline`: see handle."""
    from loopledger.live import deadline as due

    started = time.perf_counter()
    deadline = deadline if deadline is not None else due.at()
    opts = parse_flags(argv)
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout
    if opts is None:
        message = f"cannot read the flags {' '.join(argv)!r} (see `loopledger hook {agent} --help`)"
        log(None, agent, f"allowed without judging: {message}")
        print(f"loopledger hook {agent}: {message}", file=stderr or sys.stderr)
        return 1
    out: dict[str, Any] | None = None
    try:
        payload = parse(stdin.read())
        pid = int(opts["agent_pid"]) if agent == "codex" and (opts.get("agent_pid") or "").isdigit() else None
        out = handle(agent, payload, opts["db"], started, redelivered_after, deadline, pid)
    except Exception as exc:  # noqa: BLE001  (the agent goes on; the log says why)
        # Decided (allow): the deadline's alarm must neither cut into this line nor add its own
        # after it (one line per call); its backstop still ends a process stuck writing it.
        due.silence()
        log(opts["log"], agent, f"allowed without judging: {_reason(exc)}")
        out = None
    due.disarm()  # answering now: the deadline's own "allow" must not follow this one
    if out is None and agent == "gemini-cli":
        out = {}  # Gemini CLI parses stdout as JSON: an empty object allows
    if out is not None:
        import orjson

        stdout.write(orjson.dumps(out).decode() + "\n")
        stdout.flush()
    return 0


def _reason(exc: Exception) -> str:
    """The log's words for why a call was not judged (one line, as people read it)."""
    from loopledger.live import db as live_db

    if isinstance(exc, live_db.LedgerUnavailable | live_db.LedgerBusy):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
