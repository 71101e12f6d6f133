"""Renderers for IDE extensions and agent harnesses: a Cline task folder, an OpenHands V1
conversation folder, OpenHands event lists, ATIF trajectories, SWE-agent `.traj` files and
tau2-bench results files."""

from __future__ import annotations

import json
from typing import Any

from script import C, Ids, Script, dumps

CLINE_ENV = ("<environment_details>\n# VSCode Visible Files\n{file}\n\n# VSCode Open Tabs\n{file}\n\n"
             "# Current Time\n{time}\n\n# Current Mode\nACT MODE\n</environment_details>")


# Cline's ui names for its tools (ClineSayTool.tool); commands and MCP have their own kinds.
CLINE_UI_TOOL = {"read_file": "readFile", "replace_in_file": "editedExistingFile",
                 "write_to_file": "newFileCreated", "list_files": "listFilesRecursive",
                 "search_files": "searchFiles"}


def cline_task(s: Script, *, model: str, retries_before: dict[int, int] | None = None
               ) -> tuple[list[dict], list[dict], dict]:
    """A Cline task folder, older XML tool protocol (one tool per message): the API history
    (assistant text with <tool> tags, `[tool for 'x'] Result:` answers, environment details),
    the panel's ui messages (ts in ms, conversationHistoryIndex, api_req_retried before the
    requests in `retries_before`: request number → retries) and task_metadata.json."""
    ids = Ids(s.name, s.start, step_s=2.5)
    retries_before = retries_before or {}
    api: list[dict] = []
    ui: list[dict] = []
    requests = 0

    def ms() -> int:
        ids.tick()
        return int(ids.t.timestamp() * 1000)

    def say(kind: str, text: str | None = None, ask: bool = False, **kw: Any) -> None:
        msg = {"ts": ms(), "type": "ask" if ask else "say", ("ask" if ask else "say"): kind}
        if text is not None:
            msg["text"] = text
        ui.append({**msg, **kw, "conversationHistoryIndex": len(api) - 1})

    def request() -> None:
        nonlocal requests
        requests += 1
        say("api_req_started", dumps({"request": "…", "tokensIn": 8120 + 37 * requests,
                                      "tokensOut": 212, "cacheReads": 7168, "cost": 0.0091}))
        for _ in range(retries_before.get(requests, 0)):
            say("api_req_retried")

    def env(path: str) -> dict:
        return {"type": "text", "text": CLINE_ENV.format(file=path, time=ids.t.strftime("%m/%d/%Y, %I:%M:%S %p (UTC)"))}

    pending: list[dict] = []
    last_file = "README.md"
    for ev in s.events:
        if ev[0] == "user":
            if not api:
                say("task", ev[1])
                api.append({"role": "user", "content": [{"type": "text", "text": f"<task>\n{ev[1]}\n</task>"}, env(last_file)]})
            else:
                say("user_feedback", ev[1])
                pending.append({"type": "text", "text": f"<feedback>\n{ev[1]}\n</feedback>"})
                api.append({"role": "user", "content": [*pending, env(last_file)]})
                pending = []
            request()
        elif ev[0] == "prose":
            say("completion_result", ev[1])
            api.append({"role": "assistant", "content": [{"type": "text", "text": f"<attempt_completion>\n<result>\n{ev[1]}\n</result>\n</attempt_completion>"}]})
        else:
            _, text, calls = ev
            (c,) = calls  # Cline runs one tool per message
            params = "".join(f"<{k}>{v}</{k}>\n" for k, v in c.args.items())
            body = (f"<thinking>\n{text}\n</thinking>\n\n" if text else "") + f"<{c.name}>\n{params}</{c.name}>"
            if text:
                say("text", text)
            api.append({"role": "assistant", "content": [{"type": "text", "text": body}]})
            subject = c.args.get("path") or c.args.get("command") or ""
            last_file = c.args.get("path", last_file)
            if c.name == "execute_command":
                say("command", c.args["command"])
                say("command_output", c.answer)
            else:
                spec = {"tool": CLINE_UI_TOOL.get(c.name, c.name), **{k: v for k, v in c.args.items() if k != "diff"}}
                say("tool", dumps(spec))
                if c.error:
                    say("error", c.answer)
            answer = (f"The tool execution failed with the following error:\n<error>\n{c.answer}\n</error>"
                      if c.error else c.answer)
            api.append({"role": "user", "content": [
                {"type": "text", "text": f"[{c.name} for '{subject}'] Result:"},
                {"type": "text", "text": answer}, env(last_file)]})
            request()
    meta = {"files_in_context": [{"path": last_file, "record_state": "active", "record_source": "cline_edited",
                                  "cline_read_date": ui[0]["ts"], "cline_edit_date": ui[-1]["ts"], "user_edit_date": None}],
            "model_usage": [{"ts": ui[0]["ts"], "model_id": model, "model_provider_id": "anthropic", "mode": "act"}]}
    return api, ui, meta


def openhands_v1_conversation(s: Script, *, conversation_id: str, model: str) -> tuple[dict, list[dict]]:
    """An OpenHands V1 (software-agent-sdk) conversation folder: base_state.json and one event
    per file (SystemPromptEvent, MessageEvent, ActionEvent with tool_call, ObservationEvent)."""
    ids = Ids(s.name, s.start, step_s=2.0)
    state = {"id": conversation_id, "agent": {"kind": "Agent", "llm": {"model": model, "usage_id": "agent"},
                                              "tools": [{"name": "terminal"}, {"name": "file_editor"}]},
             "workspace": {"kind": "LocalWorkspace", "working_dir": "/workspace/project"},
             "max_iterations": 500, "stuck_detection": True, "execution_status": "finished",
             "confirmation_policy": {"kind": "NeverConfirm"}}
    events: list[dict] = []

    def event(kind: str, source: str, **kw: Any) -> dict:
        ids.tick()
        row = {"id": ids.uuid(), "timestamp": ids.t.replace(tzinfo=None).isoformat(), "source": source, "kind": kind, **kw}
        events.append(row)
        return row

    event("SystemPromptEvent", "agent", system_prompt={"type": "text", "text": "You are OpenHands agent, a helpful AI assistant."},
          tools=[{"title": "terminal"}, {"title": "file_editor"}])
    for ev in s.events:
        if ev[0] == "user":
            event("MessageEvent", "user", llm_message={"role": "user", "content": [{"type": "text", "text": ev[1]}]})
        elif ev[0] == "prose":
            event("MessageEvent", "agent", llm_message={"role": "assistant", "content": [{"type": "text", "text": ev[1]}]})
        else:
            _, text, calls = ev
            rid = "chatcmpl-" + ids.hex(20)
            actions = []
            for n, c in enumerate(calls):
                cid = "toolu_01" + ids.hex(22)
                kind = "TerminalAction" if c.name == "terminal" else "FileEditorAction"
                actions.append((cid, c, event("ActionEvent", "agent",
                    thought=[{"type": "text", "text": text}] if text and n == 0 else [],
                    action={"kind": kind, **c.args}, tool_name=c.name, tool_call_id=cid,
                    tool_call={"id": cid, "name": c.name, "arguments": json.dumps(c.args), "origin": "completion"},
                    llm_response_id=rid, security_risk="LOW")))
            for cid, c, act in actions:
                obs = {"kind": "TerminalObservation" if c.name == "terminal" else "FileEditorObservation",
                       "content": [{"type": "text", "text": c.answer}], "is_error": c.error}
                if c.name == "terminal":
                    obs["exit_code"] = 1 if c.error else 0
                event("ObservationEvent", "environment", tool_name=c.name, tool_call_id=cid, action_id=act["id"], observation=obs)
    return state, events


def atif_trajectory(s: Script, *, session_id: str, agent: str, version: str, model: str,
                    metrics: bool = True) -> dict:
    ids = Ids(s.name, s.start, step_s=6.0)
    steps: list[dict] = []
    for ev in s.events:
        step: dict[str, Any] = {"step_id": len(steps) + 1, "timestamp": ids.tick()}
        if ev[0] == "user":
            step.update(source="user", message=ev[1])
        elif ev[0] == "prose":
            step.update(source="agent", model_name=model, message=ev[1])
        else:
            _, text, calls = ev
            tcs = [{"tool_call_id": "call_" + ids.hex(16 if metrics else 8), "function_name": c.name,
                    "arguments": c.args} for c in calls]
            step.update(source="agent", message=text, tool_calls=tcs,
                        observation={"results": [
                            {"source_call_id": t["tool_call_id"], "content": c.answer}
                            for t, c in zip(tcs, calls, strict=True)]})
            if metrics:
                step["model_name"] = model
                step["metrics"] = {"prompt_tokens": 6100 + 90 * len(steps),
                                   "completion_tokens": 61, "cached_tokens": 5200}
        steps.append(step)
    return {"schema_version": "ATIF-v1.4", "session_id": session_id,
            "agent": {"name": agent, "version": version, "model_name": model, "extra": {}},
            "steps": steps,
            "final_metrics": {"total_steps": len(steps)}}


def swe_agent_traj(s: Script, *, system: str, instance: str) -> dict:
    """SWE-agent .traj: trajectory[] of {action, observation, …} plus the chat `history`.

    Only the command string is stored: the reader names the tool after its first word."""
    traj: list[dict] = []
    history: list[dict] = [{"role": "system", "content": system, "agent": "main"}]
    for ev in s.events:
        if ev[0] == "user":
            history.append({"role": "user", "content": ev[1], "agent": "main"})
        elif ev[0] == "prose":
            history.append({"role": "assistant", "content": ev[1], "thought": ev[1],
                            "action": "", "agent": "main"})
        else:
            _, text, calls = ev
            (c,) = calls  # SWE-agent issues one command per turn
            cmd = c.args["command"]
            response = f"{text}\n\n```\n{cmd}\n```"
            traj.append({"action": cmd, "observation": c.answer, "response": response,
                         "thought": text, "execution_time": 0.41,
                         "state": {"open_file": "/testbed/src/parsedate/core.py",
                                   "working_dir": "/testbed"}})
            history.append({"role": "assistant", "content": response, "thought": text,
                            "action": cmd, "agent": "main"})
            history.append({"role": "user", "content": c.answer + "\n(Open file: /testbed/src/"
                            "parsedate/core.py)\n(Current directory: /testbed)\nbash-$",
                            "agent": "main"})
    return {"environment": "swe_main", "trajectory": traj, "history": history,
            "info": {"exit_status": "submitted (exit_cost)", "submission": None,
                     "model_stats": {"instance_cost": 1.84, "tokens_sent": 512330,
                                     "tokens_received": 6120, "api_calls": len(traj)},
                     "instance_id": instance}}


def openhands_events(s: Script, *, model: str) -> list[dict]:
    """OpenHands saved trajectory: the event stream (actions + observations linked by cause)."""
    ids = Ids(s.name, s.start, step_s=5.0)
    out: list[dict] = []

    def ev(**kw: Any) -> dict:
        row = {"id": len(out), "timestamp": ids.tick(), **kw}
        out.append(row)
        return row

    ev(source="environment", message="", observation="agent_state_changed", content="",
       extras={"agent_state": "loading"})
    for e in s.events:
        if e[0] == "user":
            ev(source="user", message=e[1], action="message",
               args={"content": e[1], "image_urls": [], "wait_for_response": False})
            ev(source="environment", message="", observation="agent_state_changed", content="",
               extras={"agent_state": "running"})
        elif e[0] == "prose":
            ev(source="agent", message=e[1], action="message",
               args={"content": e[1], "image_urls": None, "wait_for_response": False})
        else:
            _, text, calls = e
            resp_id = "chatcmpl-" + ids.uuid()
            tcs = [(c, "toolu_01" + ids.hex(22)) for c in calls]
            model_response = {"id": resp_id, "model": model, "object": "chat.completion",
                              "choices": [{"finish_reason": "tool_calls", "index": 0, "message": {
                                  "content": text, "role": "assistant", "tool_calls": [
                                      {"index": i, "function": {"name": c.name,
                                                                "arguments": json.dumps(c.args)},
                                       "id": tid, "type": "function"}
                                      for i, (c, tid) in enumerate(tcs)]}}]}
            for c, tid in tcs:
                meta = {"function_name": c.name, "tool_call_id": tid,
                        "model_response": model_response, "total_calls_in_response": len(tcs)}
                if c.name == "str_replace_editor" and c.args.get("command") == "view":
                    # OpenHands records a view as a FileReadAction / FileReadObservation.
                    path = c.args["path"]
                    act = ev(source="agent", message=f"Reading file: {path}", action="read",
                             tool_call_metadata=meta,
                             args={"path": path, "start": 0, "end": -1, "thought": text,
                                   "security_risk": 0, "impl_source": "oh_aci",
                                   "view_range": c.args.get("view_range")})
                    ev(source="agent", message=f"I read the file {path}.", cause=act["id"],
                       observation="read", tool_call_metadata=meta, content=c.answer,
                       extras={"path": path, "impl_source": "oh_aci"})
                    continue
                cmd = c.args.get("command", "")
                act = ev(source="agent", message=f"Running command: {cmd}", action="run",
                         tool_call_metadata=meta,
                         args={"command": cmd, "is_input": False, "thought": text,
                               "blocking": False, "hidden": False,
                               "confirmation_state": "confirmed"})
                code = 128 if c.error else 0
                ev(source="agent", message=f"Command `{cmd}` executed with exit code {code}.",
                   cause=act["id"], observation="run", tool_call_metadata=meta,
                   content=c.answer, extras={"command": cmd, "metadata": {
                       "exit_code": code, "pid": -1, "username": "openhands",
                       "hostname": "7c1e0f3a9b2d", "working_dir": "/workspace",
                       "prefix": "", "suffix": f"\n[The command completed with exit code {code}.]"},
                       "hidden": False}, success=not c.error)
    ev(source="environment", message="", observation="agent_state_changed", content="",
       extras={"agent_state": "awaiting_user_input"})
    return out


def tau2_results(sims: list[tuple[Script, dict, dict[int, list[C]]]], *, agent_llm: str, domain: str) -> dict:
    """A tau2-bench results file (tau2.data_model.simulation.Results): `sims` are (script, the
    simulation's own fields, user-side calls by the index of the user event that makes them: the
    user simulator's own tools, telecom's phone actions)."""
    out = {"timestamp": sims[0][0].start, "info": {
        "git_commit": "3c2a9b1e0d4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b", "num_trials": 1, "max_steps": 200,
        "max_errors": 10, "user_info": {"implementation": "user_simulator", "llm": "gpt-4.1-2025-04-14",
                                        "llm_args": {"temperature": 0.0}},
        "agent_info": {"implementation": "llm_agent", "llm": agent_llm, "llm_args": {"temperature": 0.0}},
        "environment_info": {"domain_name": domain, "policy": f"# {domain.title()} agent policy",
                             "tool_defs": None}, "seed": 300},
        "tasks": [], "simulations": []}
    for script, fields, user_calls in sims:
        ids = Ids(script.name, script.start)
        msgs = tau2_messages(script, ids, user_calls)
        out["tasks"].append({"id": fields["task_id"]})
        out["simulations"].append({"id": ids.uuid(), **fields, "start_time": script.start,
                                   "messages": msgs, "seed": 626729})
    return out


def tau2_messages(script: Script, ids: Ids, user_calls: dict[int, list[C]]) -> list[dict]:
    """One simulation's `messages` (tau2.data_model.message): tool calls with dict arguments and a
    `requestor`, each answered by a `tool` message with its `error` flag. Times as tau2 writes them
    (`datetime.now().isoformat()`: no zone)."""
    msgs: list[dict] = []

    def at(seconds: float | None = None) -> str:
        return ids.tick(seconds).removesuffix("Z")

    def answer(tc: dict, c: C, who: str) -> None:
        msgs.append({"id": tc["id"], "role": "tool", "content": c.answer, "requestor": who,
                     "error": c.error, "turn_idx": len(msgs), "timestamp": at(0.2)})

    for n, ev in enumerate(script.events):
        if ev[0] == "user":
            tcs = [{"id": "call_" + ids.hex(24), "name": c.name, "arguments": c.args, "requestor": "user"}
                   for c in user_calls.get(n, [])]
            msgs.append({"role": "user", "content": ev[1] or None, "tool_calls": tcs or None,
                         "turn_idx": len(msgs), "timestamp": at()})
            for tc, c in zip(tcs, user_calls.get(n, []), strict=True):
                answer(tc, c, "user")
        elif ev[0] == "prose":
            msgs.append({"role": "assistant", "content": ev[1], "tool_calls": None,
                         "turn_idx": len(msgs), "timestamp": at()})
        else:
            _, text, calls = ev
            tcs = [{"id": "call_" + ids.hex(24), "name": c.name, "arguments": c.args,
                    "requestor": "assistant"} for c in calls]
            msgs.append({"role": "assistant", "content": text or None, "tool_calls": tcs,
                         "turn_idx": len(msgs), "timestamp": at(),
                         "usage": {"completion_tokens": 40, "prompt_tokens": 2100 + 90 * len(msgs)}})
            for tc, c in zip(tcs, calls, strict=True):
                answer(tc, c, "assistant")
    return msgs
