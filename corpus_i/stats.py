#!/usr/bin/env python3
"""Independent per-session tool-call statistics for the corpus2 holdout transcripts.

Written from the formats' public documentation / the files themselves, not from the project's
readers. For every session in a file it extracts the ordered list of tool calls as
(tool name, canonical JSON of the arguments) and reports:

  calls    number of tool calls
  run      longest run of identical consecutive calls (and the 1-based index where it starts)
  top      the most repeated (tool, args) in the session and its count
  abab     positions i where call[i] == call[i-2] != call[i-1]
  win15    the largest count of one identical call inside any window of 15 calls

Usage:
  stats.py FILE...              one line per session
  stats.py --calls FILE [KEY]   list the calls of a file (or one session) with result snippets
  stats.py --json FILE...       machine-readable

Formats (sniffed from content):
  claude-code   Claude Code session JSONL: tool_use blocks in type=assistant lines (deduplicated by
                block id); results = tool_result blocks in type=user lines. Key: sessionId.
  codex         Codex CLI rollout JSONL: response_item payloads (or legacy bare items) of type
                function_call / custom_tool_call / local_shell_call; arguments parsed as JSON.
                Key: session_meta id.
  openai-chat   {messages:[...]} / [...] OpenAI chat messages, assistant.tool_calls[].function;
                mini-swe-agent v1 (no tool_calls) falls back to ```bash blocks in assistant text.
  tau-bench     list of {task_id, trial, traj:[chat messages]}: one session per record,
                key task-<id>.trial-<n>.
  swe-agent     .traj {trajectory:[{action, observation}]}: tool = first word of the action,
                args = the whole action string (stripped).
  openhands     output.jsonl (one instance per line, key instance_id) or a JSON list of events;
                agent actions other than message/system/recall/think/finish/change_agent_state/
                condensation; args minus thought / security_risk / confirmation fields.
  gemini        Gemini CLI chat {sessionId, messages:[{type:'gemini', toolCalls:[{name,args}]}]}
  atif          ATIF {schema_version: 'ATIF-v1.x', steps:[{tool_calls:[{function_name, arguments}]}]}
  cline         Cline/Roo api_conversation_history.json (Anthropic messages, tool_use blocks or
                XML tool tags in assistant text) / ui_messages.json (say|ask tool/command).
  aider         .aider.chat.history.md: one `edit` per file per assistant reply (SEARCH/REPLACE
                blocks) and one `shell` per fenced bash/sh block; `# aider chat started at`
                opens a session (keys 1, 2, ...). (corpus_i) A reply ends at aider's quoted
                "> Tokens:" line; the answer of an edit is "applied" or "failed: <aider's
                message>"; a reflection retry (the model's answer to a failed match) is a new
                reply, so each attempt is its own call; aider's echo of the failed blocks is
                skipped.
  tau2-bench    (corpus4) results dict {simulations:[{task_id, trial, messages}]}: one session per
                simulation, key task-<id>.trial-<n>; chat messages read as openai-chat.
  opencode      (corpus4) `opencode export` JSON {info:{id}, messages:[{info, parts}]}: a call is a
                part of type tool (name = tool, args = state.input, result = state.output /
                state.error). Key: info.id. UTF-16 files (BOM) are decoded before sniffing.
"""
from __future__ import annotations

import json
import re
import sys
from collections import Counter

DROP_OH_ARGS = {"thought", "security_risk", "confirmation_state", "is_confirmed", "hidden",
                "blocking", "wait_for_response", "image_urls", "file_urls", "is_input",
                "is_static", "cwd", "impl_source", "kernel_init_code", "include_extra",
                "keep_prompt", "reset", "timeout", "translated_ipython_code"}
OH_NON_TOOLS = {"message", "system", "recall", "think", "finish", "change_agent_state",
                "condensation", "condensation_request", "null", "agent_state_changed", "",
                None}


def canon(args) -> str:
    if isinstance(args, str):
        s = args.strip()
        try:
            args = json.loads(s)
        except Exception:
            return s
    if isinstance(args, dict):
        args = {k: (v.strip() if isinstance(v, str) else v) for k, v in args.items()}
    return json.dumps(args, sort_keys=True, ensure_ascii=False)


def text_of(content) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for c in content:
            if isinstance(c, dict):
                out.append(str(c.get("text") or c.get("content") or c.get("output") or ""))
            else:
                out.append(str(c))
        return "\n".join(out)
    if isinstance(content, dict):
        return str(content.get("text") or content.get("content") or content.get("output") or content)
    return str(content)


class Session:
    def __init__(self, key):
        self.key = str(key)
        self.calls: list[tuple[str, str]] = []
        self.results: list[str] = []
        self._by_id: dict[str, int] = {}

    def add(self, name, args, cid=None, result=None):
        if cid is not None and cid in self._by_id:
            return
        self.calls.append((str(name), canon(args)))
        self.results.append(result if result is not None else "")
        if cid is not None:
            self._by_id[cid] = len(self.calls) - 1

    def result(self, cid, text):
        i = self._by_id.get(cid)
        if i is not None:
            self.results[i] = text


# ---------------------------------------------------------------- readers

def utf8_bytes(raw: bytes) -> bytes:
    # corpus4: UTF-16 files (BOM FF FE / FE FF, e.g. PowerShell `>` redirection) are decoded before sniffing
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return raw.decode("utf-16", "replace").encode("utf-8")
    return raw


def read_jsonl(path):
    out = []
    with open(path, "rb") as fh:
        for raw in utf8_bytes(fh.read()).split(b"\n"):  # corpus4: UTF-16 decoded first
            raw = raw.strip()
            if not raw:
                continue
            try:
                out.append(json.loads(raw))
            except Exception:
                pass
    return out


def r_claude(recs):
    key = next((r.get("sessionId") for r in recs if r.get("sessionId")), "0")
    s = Session(key)
    for r in recs:
        msg = r.get("message") or {}
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        if r.get("type") == "assistant":
            for b in content:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    s.add(b.get("name"), b.get("input") or {}, b.get("id"))
        elif r.get("type") == "user":
            for b in content:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    s.result(b.get("tool_use_id"), text_of(b.get("content")))
    return [s]


def r_codex(recs):
    key = "0"
    for r in recs:
        if r.get("type") == "session_meta":
            key = (r.get("payload") or {}).get("id") or key
            break
        if "id" in r and "timestamp" in r and "type" not in r:
            key = r["id"]
            break
    s = Session(key)
    for r in recs:
        p = r.get("payload") if r.get("type") == "response_item" else r
        if not isinstance(p, dict):
            continue
        t = p.get("type")
        if t == "function_call":
            s.add(p.get("name"), p.get("arguments"), p.get("call_id") or p.get("id"))
        elif t == "custom_tool_call":
            s.add(p.get("name"), p.get("input"), p.get("call_id") or p.get("id"))
        elif t == "local_shell_call":
            s.add("local_shell", (p.get("action") or {}), p.get("call_id") or p.get("id"))
        elif t in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            out = p.get("output")
            if isinstance(out, dict):
                out = out.get("content") or json.dumps(out)
            s.result(p.get("call_id"), text_of(out))
    return [s]


BASH_BLOCK = re.compile(r"```(?:bash|sh)\s*\n(.*?)```", re.S)


def chat_session(key, messages):
    s = Session(key)
    any_tool_calls = any(isinstance(m, dict) and m.get("tool_calls") for m in messages)
    pending = []
    unanswered = []  # corpus4: calls still without a result, oldest first
    for m in messages:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role == "assistant" and any_tool_calls:
            for tc in m.get("tool_calls") or []:
                f = tc.get("function") or tc
                n_before = len(s.calls)  # corpus4
                s.add(f.get("name"), f.get("arguments"), tc.get("id"))
                if len(s.calls) > n_before:  # corpus4
                    unanswered.append(len(s.calls) - 1)
        elif role == "assistant":
            blocks = BASH_BLOCK.findall(text_of(m.get("content")))
            if blocks:
                s.add("bash", {"command": blocks[0].strip()})
                pending = [len(s.calls) - 1]
        elif role == "tool":
            # corpus4: the call id may be in `id` (tau2-bench); a tool message without any call id
            # (avaljotsingh / Madhav-Kanda tau-bench forks) fills the oldest call still without a result
            cid = m.get("tool_call_id") or m.get("id")
            if cid is None:
                if unanswered:
                    s.results[unanswered.pop(0)] = text_of(m.get("content"))
            else:
                s.result(cid, text_of(m.get("content")))
                if s._by_id.get(cid) in unanswered:
                    unanswered.remove(s._by_id[cid])
        elif role == "user" and not any_tool_calls and pending:
            s.results[pending[0]] = text_of(m.get("content"))
            pending = []
    return s


def r_tau(doc):
    out = []
    for rec in doc:
        key = f"task-{rec.get('task_id')}.trial-{rec.get('trial', 0)}"
        out.append(chat_session(key, rec.get("traj") or []))
    return out


def r_tau2(doc):
    # corpus4: tau2-bench results file {simulations: [{task_id, trial, messages}]}
    out = []
    for sim in doc.get("simulations") or []:
        if not isinstance(sim, dict):
            continue
        key = f"task-{sim.get('task_id')}.trial-{sim.get('trial', 0)}"
        out.append(chat_session(key, sim.get("messages") or []))
    return out


def r_swe(doc):
    s = Session((doc.get("info") or {}).get("instance_id") or "0")
    for st in doc.get("trajectory") or []:
        a = (st.get("action") or "").strip()
        if not a:
            continue
        s.calls.append((a.split()[0] if a.split() else a, a))
        s.results.append(str(st.get("observation") or ""))
    return [s]


def oh_events(key, events):
    s = Session(key)
    for ev in events:
        if not isinstance(ev, dict):
            continue
        act = ev.get("action")
        if act is not None and ev.get("source", "agent") == "agent" and act not in OH_NON_TOOLS:
            args = ev.get("args")
            if args is None:  # old flat format
                args = {k: v for k, v in ev.items() if k not in ("action", "id", "timestamp", "source", "message", "observation")}
            args = {k: v for k, v in args.items() if k not in DROP_OH_ARGS}
            s.add(act, args, ev.get("id"))
        elif ev.get("observation") is not None and "cause" in ev:
            s.result(ev.get("cause"), str(ev.get("content") or ev.get("message") or ""))
    return s


def r_openhands(recs):
    return [oh_events(r.get("instance_id") or f"line-{i}", r.get("history") or [])
            for i, r in enumerate(recs, 1)]


def r_gemini(doc):
    s = Session(doc.get("sessionId") or "0")
    for m in doc.get("messages") or []:
        for tc in m.get("toolCalls") or []:
            res = tc.get("result")
            s.add(tc.get("name"), tc.get("args") or {}, tc.get("id"),
                  json.dumps(res)[:2000] if res is not None else "")
    return [s]


def r_gemini_checkpoint(doc):
    s = Session("0")
    for c in doc:
        for p in c.get("parts") or []:
            if "functionCall" in p:
                fc = p["functionCall"]
                s.add(fc.get("name"), fc.get("args") or {}, fc.get("id"))
            elif "functionResponse" in p:
                fr = p["functionResponse"]
                s.result(fr.get("id"), json.dumps(fr.get("response"))[:2000])
    return [s]


def r_atif(doc):
    s = Session(doc.get("session_id") or "0")
    for st in doc.get("steps") or []:
        obs = {}
        for r in ((st.get("observation") or {}).get("results") or []):
            obs[r.get("source_call_id")] = text_of(r.get("content"))
        for tc in st.get("tool_calls") or []:
            cid = tc.get("tool_call_id")
            s.add(tc.get("function_name"), tc.get("arguments") or {}, cid, obs.get(cid, ""))
    return [s]


def r_opencode(doc):
    # corpus4: OpenCode `opencode export` JSON {info, messages: [{info, parts}]}; a call is a part of
    # type "tool": name = tool, args = state.input, result = state.output (or state.error)
    s = Session((doc.get("info") or {}).get("id") or "0")
    for m in doc.get("messages") or []:
        if not isinstance(m, dict):
            continue
        for p in m.get("parts") or []:
            if not isinstance(p, dict) or p.get("type") != "tool":
                continue
            st = p.get("state") or {}
            res = st.get("output")
            if res is None:
                res = st.get("error")
            s.add(p.get("tool"), st.get("input") or {}, p.get("callID") or p.get("id"),
                  text_of(res) if res is not None else "")
    return [s]


CLINE_TAG = re.compile(r"<(execute_command|read_file|write_to_file|replace_in_file|apply_diff|search_files|"
                       r"list_files|list_code_definition_names|browser_action|use_mcp_tool|access_mcp_resource|"
                       r"ask_followup_question|attempt_completion|new_task|insert_content|search_and_replace|"
                       r"switch_mode|codebase_search|fetch_instructions|plan_mode_respond|update_todo_list|"
                       r"web_fetch|load_mcp_documentation)>(.*?)</\1>", re.S)
DROP_CLINE = {"content", "diff", "task_progress", "requires_approval"}


def r_cline_api(doc):
    s = Session("0")
    for m in doc:
        if m.get("role") != "assistant":
            continue
        content = m.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        for b in blocks:
            if b.get("type") == "tool_use":
                s.add(b.get("name"), b.get("input") or {}, b.get("id"))
            elif b.get("type") == "text":
                for name, body in CLINE_TAG.findall(b.get("text") or ""):
                    params = dict(re.findall(r"<(\w+)>(.*?)</\1>", body, re.S))
                    params = {k: v for k, v in params.items() if k not in DROP_CLINE}
                    s.add(name, params)
    return [s]


def r_cline_ui(doc):
    s = Session("0")
    for m in doc:
        kind = m.get("say") or m.get("ask")
        if kind in ("tool", "use_mcp_server"):
            try:
                t = json.loads(m.get("text") or "{}")
            except Exception:
                t = {"text": m.get("text")}
            t = {k: v for k, v in t.items() if k not in ("content", "diff")}
            s.add(t.get("tool") or t.get("toolName") or kind, t)
        elif kind == "command":
            s.add("command", {"command": m.get("text")})
        elif kind in ("command_output", "mcp_server_response") and s.calls:
            s.results[-1] = (s.results[-1] + (m.get("text") or ""))[:4000]
    return [s]


STARTED = re.compile(r"^# aider chat started at ")
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)\s*$")
HEAD = re.compile(r"^<{5,9} (SEARCH|ORIGINAL)\s*$")
TAIL = re.compile(r"^>{5,9} (REPLACE|UPDATED)\s*$")
NOMATCH = re.compile(r"^## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in (.+?)\s*$")


def r_aider(text):
    # corpus_i: every LLM reply is its own set of calls. Aider ends a reply with a quoted
    # "> Tokens: ..." line, then quotes its own verdict: "> Applied edit to F" (answer "applied") or
    # "> # N SEARCH/REPLACE block(s) failed to match!" / "> The LLM did not conform to the edit
    # format." (answer "failed: ..."), followed by an unquoted echo of the failed blocks that is
    # aider's message to the model, not the model's edit: that echo is skipped. The reflection the
    # model sends back (no "####" user line between) is then read as a new reply, so a block sent
    # again and again is one failed `edit` call per attempt (the corpus2 reader merged the
    # attempts into one reply and read the echo as a second edit).
    sessions = []
    cur = None
    reply = []
    pending = []  # (index in cur.calls, file) of the last reply's edits still without a verdict
    skip = ""     # "echo" while inside aider's unquoted echo of failed blocks, "tail" just after it
    nomatch = set()  # files named in the echo ("... failed to exactly match lines in FILE")

    def flush():
        nonlocal reply, pending
        lines, reply = reply, []
        if cur is None or not any(ln.strip() for ln in lines):
            return
        pending = []
        files_seen = []
        i = 0
        prev_nonblank = ""
        while i < len(lines):
            ln = lines[i]
            if HEAD.match(ln):
                fname = prev_nonblank.strip().strip("`").strip()
                if fname.startswith("```"):
                    fname = ""
                if fname and fname not in files_seen:
                    files_seen.append(fname)
                while i < len(lines) and not TAIL.match(lines[i]):
                    i += 1
            else:
                m = FENCE.match(ln)
                if m and m.group(2) in ("bash", "sh", "shell", "console", "zsh"):
                    j = i + 1
                    body = []
                    while j < len(lines) and not lines[j].startswith(m.group(1)):
                        body.append(lines[j])
                        j += 1
                    if not any(HEAD.match(b) for b in body):
                        cur.calls.append(("shell", canon({"command": "\n".join(body).strip()})))
                        cur.results.append("")
                        i = j
                elif ln.strip() and not ln.startswith("```"):
                    prev_nonblank = ln
            i += 1
        for f in files_seen:
            cur.calls.append(("edit", canon({"path": f})))
            cur.results.append("")
            pending.append((len(cur.calls) - 1, f))

    for ln in text.splitlines():
        if STARTED.match(ln):
            flush()
            pending = []
            skip = ""
            cur = Session(str(len(sessions) + 1))
            sessions.append(cur)
            continue
        if cur is None:
            cur = Session("1")
            sessions.append(cur)
        if ln.startswith("####"):
            flush()
            pending = []
            skip = ""
            continue
        if ln.startswith("> ") or ln == ">":
            skip = ""
            body = ln[2:].strip()
            m = re.match(r"Applied edit to (.+?)\s*$", body)
            failed = ("failed to match" in body or "did not conform to the edit format" in body
                      or body.startswith("Failed to apply edit"))
            if body.startswith("Tokens:") or m or failed:
                flush()
            if m:
                f = m.group(1).strip()
                hit = [k for k, pf in pending if pf == f]
                if hit:
                    cur.results[hit[0]] = "applied"
                else:
                    cur.calls.append(("edit", canon({"path": f})))
                    cur.results.append("applied")
            elif failed:
                for k, _ in pending:
                    if cur.results[k] != "applied":
                        cur.results[k] = ("failed: " + body) if not cur.results[k] else cur.results[k] + " / " + body
                if "failed to match" in body:
                    skip = "echo"
                    nomatch = set()
            continue
        if skip == "echo":
            # the echo names each file whose block failed; the reply's other blocks were applied
            m = NOMATCH.match(ln)
            if m:
                nomatch.add(m.group(1).strip().replace("\\", "/"))
            if ln.startswith("The SEARCH section must exactly match"):
                skip = "tail"
                if nomatch:
                    for k, pf in pending:
                        if pf.replace("\\", "/") not in nomatch and cur.results[k].startswith("failed"):
                            cur.results[k] = "applied (its block matched; another block of the reply failed)"
            continue
        if skip == "tail":
            if not ln.strip() or ln.startswith(("# The other", "Don't re-send", "Just reply with fixed")):
                continue
            skip = ""
        reply.append(ln)
    flush()
    return sessions


# ---------------------------------------------------------------- dispatch

def load(path):
    raw = utf8_bytes(open(path, "rb").read())  # corpus4: UTF-16 decoded before sniffing
    head = raw[:65536].decode("utf-8", "replace").lstrip("\ufeff").lstrip()
    if path.endswith(".md") or head.startswith("# aider") or head.startswith("---"):
        return "aider", r_aider(raw.decode("utf-8", "replace"))
    try:
        doc = json.loads(raw.decode("utf-8", "replace").lstrip("\ufeff"))
    except ValueError:
        doc = None
    if doc is None and head.startswith("{"):
        recs = read_jsonl(path)
        if recs:
            if any(isinstance(r.get("history"), list) for r in recs[:3]):
                return "openhands", r_openhands(recs)
            if any(r.get("type") in ("session_meta", "response_item", "turn_context") or
                   r.get("record_type") == "state" for r in recs[:50]):
                return "codex", r_codex(recs)
            if any(r.get("type") in ("assistant", "user") and "message" in r for r in recs):
                return "claude-code", r_claude(recs)
            if any(r.get("type") in ("function_call", "message", "reasoning") for r in recs[:50]):
                return "codex", r_codex(recs)
    if isinstance(doc, dict) and doc.get("type") in ("session_meta", "user", "assistant", "summary"):
        recs = read_jsonl(path)
        return ("codex", r_codex(recs)) if doc.get("type") == "session_meta" else ("claude-code", r_claude(recs))
    if isinstance(doc, dict):
        if isinstance(doc.get("simulations"), list):  # corpus4: tau2-bench results file
            return "tau2-bench", r_tau2(doc)
        if (isinstance(doc.get("info"), dict) and isinstance(doc.get("messages"), list)  # corpus4: opencode export
                and any(isinstance(m, dict) and isinstance(m.get("parts"), list) and isinstance(m.get("info"), dict)
                        for m in doc["messages"][:5])):
            return "opencode", r_opencode(doc)
        if str(doc.get("schema_version", "")).startswith("ATIF"):
            return "atif", r_atif(doc)
        if "trajectory" in doc and isinstance(doc["trajectory"], list):
            return "swe-agent", r_swe(doc)
        if "messages" in doc and ("sessionId" in doc or "projectHash" in doc):
            return "gemini", r_gemini(doc)
        if "messages" in doc:
            meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
            key = ((doc.get("info") or {}).get("instance_id") or doc.get("instance_id")
                   or meta.get("session_id") or (meta.get("session_meta") or {}).get("session_id") or "0")
            return "openai-chat", [chat_session(key, doc["messages"])]
        if "history" in doc:
            return "openhands", [oh_events(doc.get("instance_id") or "0", doc["history"])]
    if isinstance(doc, list) and doc:
        d0 = doc[0] if isinstance(doc[0], dict) else {}
        if "traj" in d0 and "task_id" in d0:
            return "tau-bench", r_tau(doc)
        if "ts" in d0 and ("say" in d0 or "ask" in d0):
            return "cline-ui", r_cline_ui(doc)
        if "parts" in d0 and "role" in d0:
            return "gemini-checkpoint", r_gemini_checkpoint(doc)
        if "role" in d0 and any(isinstance(m, dict) and m.get("tool_calls") for m in doc):
            return "openai-chat", [chat_session("0", doc)]
        if "role" in d0:
            return "cline-api", r_cline_api(doc)
        if "action" in d0 or "observation" in d0 or any("action" in e for e in doc[:20] if isinstance(e, dict)):
            return "openhands", [oh_events("0", doc)]
    raise ValueError(f"{path}: unknown format")


def stats(s: Session):
    calls = s.calls
    n = len(calls)
    best_run, best_at, run = (1 if n else 0), (1 if n else 0), 1
    for i in range(1, n):
        run = run + 1 if calls[i] == calls[i - 1] else 1
        if run > best_run:
            best_run, best_at = run, i - run + 2
    cnt = Counter(calls)
    top, topn = (cnt.most_common(1)[0] if cnt else ((None, None), 0))
    abab = sum(1 for i in range(2, n) if calls[i] == calls[i - 2] != calls[i - 1])
    win = 0
    for i in range(n):
        c = Counter(calls[i:i + 15])
        win = max(win, c.most_common(1)[0][1])
    return {"key": s.key, "calls": n, "run": best_run, "run_at": best_at, "top_tool": top[0],
            "top_args": top[1], "top_n": topn, "abab": abab, "win15": win,
            "tools": Counter(c[0] for c in calls).most_common(8)}


def main(argv):
    if argv and argv[0] == "--calls":
        fmt, sessions = load(argv[1])
        for s in sessions:
            if len(argv) > 2 and s.key != argv[2]:
                continue
            print(f"## session {s.key} ({fmt}, {len(s.calls)} calls)")
            for i, ((name, args), res) in enumerate(zip(s.calls, s.results, strict=False), 1):
                r = " ".join(str(res).split())[:160]
                print(f"{i:4d} {name} {args[:220]}\n       -> {r}")
        return
    as_json = argv and argv[0] == "--json"
    files = argv[1:] if as_json else argv
    out = []
    for f in files:
        try:
            fmt, sessions = load(f)
        except Exception as exc:  # noqa: BLE001
            print(f"{f}: {exc}", file=sys.stderr)
            continue
        for s in sessions:
            st = stats(s)
            st.update(file=f, format=fmt)
            out.append(st)
            if not as_json:
                print(f"{f}\t{fmt}\t{st['key']}\tcalls={st['calls']}\trun={st['run']}@{st['run_at']}\t"
                      f"top={st['top_n']}x {st['top_tool']} {str(st['top_args'])[:90]}\tabab={st['abab']}\twin15={st['win15']}")
    if as_json:
        json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
