"""Write sample_data/ deterministically: realistic sessions in every format LoopLedger reads.

    python sample_data/generate.py            rewrite the transcript files
    python sample_data/generate.py --table    print the README tables computed by the real pipeline
    python sample_data/generate.py --readme   …and write them into README.md (between the markers)

Each session is written once as a format-neutral script (user turns, prose, batches of calls with
their answers) and rendered into the on-disk shape of one agent's format, copied from real files
(../shared/corpus) or the format's public source. Ids and timestamps derive from the session name,
so a rerun writes byte-identical files.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # its sibling modules, also when a test loads this file by its path

from aider_history import AIDER_HISTORY  # noqa: E402
from render_agents import (  # noqa: E402
    claude_code_lines,
    claude_export_md,
    codex_legacy_lines,
    codex_lines,
    copilot_events,
    gemini_legacy,
    gemini_records,
    opencode_export,
)
from render_harnesses import (  # noqa: E402
    atif_trajectory,
    cline_task,
    openhands_events,
    openhands_v1_conversation,
    swe_agent_traj,
    tau2_results,
)
from render_logs import anthropic_request, openai_chat_messages, openai_responses_items, otlp_requests  # noqa: E402
from script import C, write_json, write_jsonl  # noqa: E402
from sessions_coding import (  # noqa: E402
    cline_test_rerun,
    codex_migrate_halt,
    coding_clean,
    coding_period3,
    coding_subagent,
    copilot_denied_push,
    long_refactor,
    mini_swe_scattered,
    oh_prodded,
    oh_v1_migration_retry,
    oh_view_loop,
    opencode_invalid_edit,
    openhands_stagnation,
    swe_abab,
)
from sessions_polling import (  # noqa: E402
    browser_navigate_poll,
    codex_backfill_watch,
    export_quiet_poll,
    gemini_ci_poll,
    gemini_quiet_poll,
    gemini_rewound,
    ops_aab_cycle,
    otel_rollout_poll,
)
from sessions_support import (  # noqa: E402
    RETAIL_SYSTEM,
    support_clean,
    support_duplicate_batch,
    support_ladder,
    tau2_unpaid_line,
    tau_multirun,
    tau_short,
)

CODER_SYSTEM = ("You are a careful software engineer working in a local repository. Use the "
                "tools to read, search and edit files and to run tests; keep changes minimal.")


SWE_SYSTEM = ("SETTING: You are an autonomous programmer, and you're working directly in the "
              "command line with a special interface.\n\nThe special interface consists of a "
              "file editor that shows you 100 lines of a file at a time.")


AIRLINE_SYSTEM = ("# Airline Agent Policy\n\nThe current time is 2024-05-15 15:00:00 EST.\n\nAs "
                  "an airline agent, you can help users book, modify, or cancel flight "
                  "reservations. Before updating the booking database you must list the action "
                  "details and obtain explicit user confirmation (yes) to proceed.")


CC_PARENT = "3f9c1e62-58a4-4d0b-9b7e-2a6d41c0e8f3"


class _Files:
    """Writes files under `root` and lists them, in the order written."""

    def __init__(self, root: Path) -> None:
        self.root, self.written = root, []

    def put(self, rel: str, obj: Any, kind: str = "json", indent: int | None = 1) -> None:
        path = self.root / rel
        if kind == "jsonl":
            write_jsonl(path, obj)
        else:
            write_json(path, obj, indent)
        self.written.append(path)

    def text(self, rel: str, text: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        self.written.append(path)


def write_all(root: Path = HERE) -> list[Path]:
    f = _Files(root)
    _api_logs(f)
    _agent_files(f)
    _harness_files(f)
    return f.written


def _api_logs(f: _Files) -> None:
    """Request logs of chat APIs and traces: OTLP, OpenAI chat (and tau-bench, mini-swe-agent
    records of it), OpenAI Responses, Anthropic Messages."""
    put = f.put
    put("otlp/otel-collector-traces.jsonl", otlp_requests(
        otel_rollout_poll(), conversation="conv_5f1c9a2e", service="deploy-bot", agent="deployer",
        model="gpt-4.1-2025-04-14"), "jsonl")
    put("openai_chat/support_order_clean.json",
        openai_chat_messages(support_clean(), RETAIL_SYSTEM))
    put("openai_chat/support_duplicate_refund.json",
        {"model": "gpt-4.1-2025-04-14",
         "messages": openai_chat_messages(support_duplicate_batch(), RETAIL_SYSTEM)})
    put("openai_chat/cli_flag_clean.jsonl",
        openai_chat_messages(coding_clean(), CODER_SYSTEM), "jsonl")
    put("openai_chat/tau_airline_results.json", [
        {"task_id": 17, "reward": 0.0, "info": {"user_id": "omar_haddad_4410"},
         "traj": openai_chat_messages(tau_multirun(), AIRLINE_SYSTEM), "trial": 0},
        {"task_id": 23, "reward": 1.0, "info": {"user_id": "ana_lima_2203"},
         "traj": openai_chat_messages(tau_short(), AIRLINE_SYSTEM), "trial": 0}])
    mini = openai_chat_messages(mini_swe_scattered(), "You are a helpful assistant that can "
                                "interact with a computer shell to solve programming tasks.")
    put("openai_chat/django__django-15022.traj.json", {
        "info": {"model_stats": {"instance_cost": 0.0412, "api_calls": 11},
                 "config": {"agent": {"step_limit": 250, "cost_limit": 3.0},
                            "model": {"model_name": "deepseek/deepseek-chat"}},
                 "mini_version": "2.2.7", "exit_status": "Submitted",
                 "submission": "diff --git a/django/db/models/query.py b/django/db/models/query.py"},
        "messages": mini + [{"role": "exit", "content": "diff --git a/django/db/models/query.py "
                                                        "b/django/db/models/query.py"}],
        "trajectory_format": "mini-swe-agent-1.1", "instance_id": "django__django-15022"})
    put("tau2/telecom_results.json", tau2_results(
        [(tau2_unpaid_line(), {"task_id": "[mobile_data_issue]unpaid_bill", "trial": 0,
                               "termination_reason": "user_stop", "reward_info": {"reward": 0.0}},
          {3: [C("toggle_airplane_mode", {}, "Airplane Mode: OFF")]})],
        agent_llm="gpt-4.1-2025-04-14", domain="telecom"), indent=2)
    put("openai_responses/oncall_restart_cycle.json", openai_responses_items(ops_aab_cycle()))
    put("anthropic/helpdesk_resend_email.json",
        anthropic_request(support_ladder(), "You are Halcyon Helpdesk's support assistant. "
                          "Use the tools to look up customers and send templated emails.",
                          "claude-sonnet-4-5-20250929"))


def _agent_files(f: _Files) -> None:
    """Coding agents' own session files: OpenCode, Aider, Claude Code (and its markdown export),
    Codex CLI, Gemini CLI."""
    put = f.put
    put(OPENCODE_FILE, opencode_export(
        opencode_invalid_edit(), session_id=OPENCODE_SESSION, project_id="5c1e9b7a3d2f4e6a8b0c1d2e3f4a5b6c7d8e9f0a",
        directory="/home/dev/relay", provider="anthropic", model="claude-sonnet-4-5"), indent=2)
    f.text("aider/.aider.chat.history.md", AIDER_HISTORY)
    cc_kw = {"session_id": CC_PARENT, "cwd": "/home/dev/ledger", "branch": "fix/flaky-flush"}
    put(f"claude_code/{CC_PARENT}.jsonl",
        claude_code_lines(coding_period3(), model="claude-opus-4-6", **cc_kw), "jsonl")
    put(f"claude_code/{CC_PARENT}/subagents/agent-b71d0c4.jsonl",
        claude_code_lines(coding_subagent(), model="claude-haiku-4-5-20251001",
                          agent_id="b71d0c4", **cc_kw), "jsonl")
    put("codex/rollout-2026-03-07T13-22-10-0199c2a4-7e31-7b52-9d0e-5b8f2c1a6e47.jsonl",
        codex_lines(codex_migrate_halt(), session_id="0199c2a4-7e31-7b52-9d0e-5b8f2c1a6e47",
                    cwd="/home/sam/invoicer", model="gpt-5.1-codex"), "jsonl")
    put("codex/rollout-2025-08-14T16-02-00-5b0e7c1d-2f84-4a39-9e61-d03c8b7a4f25.jsonl",
        codex_legacy_lines(codex_backfill_watch(), session_id="5b0e7c1d-2f84-4a39-9e61-d03c8b7a4f25",
                           cwd="/home/ana/billing"), "jsonl")
    put("gemini/session-2026-03-08T08-29-6d2b9e40.jsonl",
        gemini_records(gemini_ci_poll(), session_id="6d2b9e40-1a7c-4f3e-8b25-c09a7d14e6f1",
                       project_hash=hashlib.sha256(b"/home/ines/pgmeter").hexdigest(),
                       model="gemini-2.5-pro", rewind=(1, gemini_rewound())), "jsonl")
    put("gemini/session-2026-02-20T17-05-a41f03c9.json",
        gemini_legacy(gemini_quiet_poll(), session_id="a41f03c9-55e2-4b1d-9e07-3c8f6a2d1b90",
                      project_hash=hashlib.sha256(b"/srv/exporter").hexdigest(),
                      model="gemini-2.5-flash"), indent=2)
    put(COPILOT_FILE, copilot_events(copilot_denied_push(), session_id=COPILOT_SESSION, cwd="/home/dev/shop",
                                     model="claude-sonnet-4.5"), "jsonl")
    f.text("claude_export/staging-deploy-export.md",
           claude_export_md(export_quiet_poll(), session_id=EXPORT_SESSION, project="/home/dev/platform/deploy"))


def _harness_files(f: _Files) -> None:
    """IDE extensions' and agent harnesses' files: ATIF, SWE-agent, OpenHands (both), Cline."""
    put = f.put
    put("atif/browser_ticket_queue.trajectory.json",
        atif_trajectory(browser_navigate_poll(), session_id="b3c1d2e4-0f5a-4e6b-8c7d-9a1b2c3d4e5f",
                        agent="browser-use", version="0.7.2", model="gpt-4.1-mini"))
    put("atif/refactor_long.trajectory.json",
        atif_trajectory(long_refactor(), session_id="7e0d5c3b-2a19-4f86-b1e4-d8c6a9f02b37",
                        agent="terminus-2", version="1.3.0", model="gpt-5-mini",
                        metrics=False), indent=None)
    put("swe_agent/parsedate__parsedate-212.traj",
        swe_agent_traj(swe_abab(), system=SWE_SYSTEM, instance="parsedate__parsedate-212"))
    oh_meta = {"agent_class": "CodeActAgent", "model_name": "claude-sonnet-4-5-20250929",
               "max_iterations": 100, "dataset": "tidewater-bench", "eval_note": "v0.59"}
    put("openhands/output.jsonl", [
        {"instance_id": iid, "instruction": sc.events[0][1], "metadata": oh_meta,
         "history": openhands_events(sc, model="claude-sonnet-4-5-20250929"),
         "test_result": {"git_patch": "diff --git a/src/pgmeter/…"}, "error": None,
         "metrics": {"accumulated_cost": cost}}
        for iid, sc, cost in (("tidewater__pgmeter-481", oh_prodded(), 0.31),
                              ("tidewater__pgmeter-502", oh_view_loop(), 0.27))], "jsonl")
    put("openhands/clone_no_ssh_key.json",
        openhands_events(openhands_stagnation(), model="claude-sonnet-4-5-20250929"))
    api, ui, meta = cline_task(cline_test_rerun(), model="claude-sonnet-4-5-20250929",
                               retries_before={4: 3})
    task = f"cline/saoudrizwan.claude-dev/tasks/{CLINE_TASK}"
    put(f"{task}/api_conversation_history.json", api, indent=None)
    put(f"{task}/ui_messages.json", ui, indent=None)
    put(f"{task}/task_metadata.json", meta, indent=None)
    state, events = openhands_v1_conversation(oh_v1_migration_retry(), conversation_id=OH_V1_ID,
                                              model="litellm_proxy/claude-sonnet-4-5-20250929")
    conv = f"openhands_v1/{OH_V1_ID.replace('-', '')}"
    put(f"{conv}/base_state.json", state, indent=2)
    for i, ev in enumerate(events):
        put(f"{conv}/events/event-{i:05d}-{ev['id']}.json", ev, indent=2)


COPILOT_SESSION = "c8d1f2a3-4b5e-4c6d-9e7f-0a1b2c3d4e5f"


COPILOT_FILE = f"copilot_cli/{COPILOT_SESSION}/events.jsonl"


OPENCODE_SESSION = "ses_3a9f0c1d2e4bQm7Lx2Vt8Rk5Wd"


OPENCODE_FILE = f"opencode/{OPENCODE_SESSION}.json"


CLINE_TASK = "1773151320000"


OH_V1_ID = "9a4e7c21-3b5d-4f86-a0c9-1e2d3f4a5b6c"


OH_V1_FILE = f"openhands_v1/{OH_V1_ID.replace('-', '')}/base_state.json"


EXPORT_SESSION = "4e2b7a90-1c3d-4f5e-8a6b-7c8d9e0f1a2b"


CLINE_FILE = f"cline/saoudrizwan.claude-dev/tasks/{CLINE_TASK}/ui_messages.json"


CC_FILE = f"claude_code/{CC_PARENT}.jsonl"


CC_SUB = f"claude_code/{CC_PARENT}/subagents/agent-b71d0c4.jsonl"


SHOWS: dict[tuple[str, str], str] = {
    (OPENCODE_FILE, OPENCODE_SESSION):
        "harness errors: OpenCode reroutes an `edit` without `oldString` to its `invalid` tool "
        "4×, nothing runs and the same refusal comes back (`opencode export` JSON)",
    (COPILOT_FILE, COPILOT_SESSION):
        "identical failing call: a preToolUse hook denies `git push --force` and the agent sends "
        "the same push 4× (GitHub Copilot CLI session events)",
    ("aider/.aider.chat.history.md", "1"):
        "clean: coding agent, 3 runs (edit blocks, a `/run`, a changelog edit)",
    ("anthropic/helpdesk_resend_email.json", "0"):
        "ladder warn → block → halt: support agent re-sends the same email, each send 'works'",
    ("atif/browser_ticket_queue.trajectory.json", "b3c1d2e4-0f5a-4e6b-8c7d-9a1b2c3d4e5f"):
        "costly poll: browser agent reloads a waiting room with `browser_navigate`; the page "
        "changes every time, the ceiling still halts it",
    ("atif/refactor_long.trajectory.json", "7e0d5c3b-2a19-4f86-b1e4-d8c6a9f02b37"):
        "long session (2,053 calls, 166 runs) for the dashboard's scale; a failing test retried "
        "every 11th run, a test/diff bounce every 17th",
    (CC_SUB, "b71d0c4"):
        "clean: the Explore subagent's sidechain (parallel Grep batch), linked to its parent",
    (CC_FILE, CC_PARENT):
        "period-3 retry cycle: Edit → pytest → git commit, a pre-commit hook reverts the edit",
    ("codex/rollout-2026-03-07T13-22-10-0199c2a4-7e31-7b52-9d0e-5b8f2c1a6e47.jsonl",
     "0199c2a4-7e31-7b52-9d0e-5b8f2c1a6e47"):
        "run-length halt on a mutating tool: `npm run db:migrate` fails the same way 3×; "
        "run 1, after the user answers, is clean",
    ("codex/rollout-2025-08-14T16-02-00-5b0e7c1d-2f84-4a39-9e61-d03c8b7a4f25.jsonl",
     "5b0e7c1d-2f84-4a39-9e61-d03c8b7a4f25"):
        "A→B→A→B with progress: job status / job logs while a backfill runs, answers change "
        "every time, so no cycle; only the answer-blind window halts (legacy bare-item rollout)",
    ("gemini/session-2026-02-20T17-05-a41f03c9.json", "a41f03c9-55e2-4b1d-9e07-3c8f6a2d1b90"):
        "quiet poll: `read_file` of a log that never changes, 18×, reaches the observation "
        "allowance (older single-JSON file)",
    ("gemini/session-2026-03-08T08-29-6d2b9e40.jsonl", "6d2b9e40-1a7c-4f3e-8b25-c09a7d14e6f1"):
        "read-only poll whose answer keeps changing (CI run progress), 22×: no run-length halt; "
        "a `$rewindTo` drops 3 failed pushes the user rewound",
    ("openai_chat/cli_flag_clean.jsonl", "0"):
        "clean: coding agent adds a CLI flag (JSONL of messages), one failing test then a fix",
    ("openai_chat/support_duplicate_refund.json", "0"):
        "identical calls inside one batch: the same `issue_refund` twice in one parallel batch "
        "({\"messages\"} document)",
    ("openai_chat/support_order_clean.json", "0"):
        "clean: retail support agent, 5 runs (JSON list of messages)",
    ("openai_chat/tau_airline_results.json", "task-17.trial-0"):
        "user turns break runs: 5 runs (0–4); the same lookup across a user turn is not a "
        "repeat; "
        "run 3 halts on a declined booking retried 3× (tau-bench results list)",
    ("openai_chat/tau_airline_results.json", "task-23.trial-0"):
        "clean: the second record of the same tau-bench file",
    ("openai_chat/django__django-15022.traj.json", "django__django-15022"):
        "scattered repeats: the same failing `python reproduce.py` between two different edits; "
        "the window and progress see it (mini-swe-agent trajectory)",
    ("tau2/telecom_results.json", "task-[mobile_data_issue]unpaid_bill.trial-0"):
        "identical failing call: `resume_line` refused 3× (`error: true` on tau2's tool message); "
        "the user's own `toggle_airplane_mode` is the person's turn, not an agent call "
        "(tau2-bench results file)",
    ("openai_responses/oncall_restart_cycle.json", "0"):
        "A→A→B cycle: status, status, restart — the pod crash-loops the same way each time",
    ("openhands/output.jsonl", "tidewater__pgmeter-481"):
        "a loop no default policy flags: the eval's stand-in user answers each identical "
        "'done' message, and every user turn clears stagnation (output.jsonl, one instance "
        "per line)",
    ("openhands/output.jsonl", "tidewater__pgmeter-502"):
        "a read that looks like a write: `str_replace_editor` view of the same lines 5×; the "
        "name is not read-only, so the mutating thresholds apply",
    ("openhands/clone_no_ssh_key.json", "0"):
        "prose stagnation: the agent repeats the same 'cannot clone' message 8× without a tool",
    (CLINE_FILE, CLINE_TASK):
        "run-length halt: Cline re-runs the same failing `npm test` 4× without changing anything "
        "(XML tool tags in the API history; 3 provider retries are events, not calls); run 1, "
        "after the person's feedback, is clean",
    ("claude_export/staging-deploy-export.md", EXPORT_SESSION):
        "quiet poll: `BashOutput` of a background deploy answers 'running' 9× (Claude markdown "
        "export, one section per transcript line)",
    (OH_V1_FILE, OH_V1_ID):
        "A→B→A→B: `alembic upgrade head` fails, the agent reads the same log, and runs it again "
        "(OpenHands V1 conversation folder, one event per file)",
    ("otlp/otel-collector-traces.jsonl", "conv_5f1c9a2e"):
        "quiet poll over OpenTelemetry: `kubectl rollout status` 7× with the same timeout "
        "(OTLP JSON from the Collector's file exporter, spans out of order)",
    ("swe_agent/parsedate__parsedate-212.traj", "0"):
        "A→B→A→B cycle: `python reproduce.py` / `open core.py 58`, same answers, 4×",
}


def main(argv: list[str]) -> int:
    if "--table" in argv or "--readme" in argv:
        import golden  # the pipeline is needed only here, not to write the files

        tables = golden.render_tables(golden.pipeline_rows(HERE), SHOWS)
        if "--readme" in argv:
            # Rewrites only the marked tables; check every changed cell against design.md.
            readme = HERE / "README.md"
            readme.write_text(golden.splice_tables(readme.read_text("utf-8"), tables), "utf-8")
        else:
            print(tables)
        return 0
    for p in write_all():
        print(f"{p.relative_to(HERE)}  {p.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
