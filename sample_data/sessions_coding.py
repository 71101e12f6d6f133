"""The coding sessions, as Scripts: retry cycles, failing commands re-run, harness refusals,
prose stagnation, clean work, and the long refactor that gives the dashboard its scale."""

from __future__ import annotations

import random

from script import C, Script


def coding_period3() -> Script:
    """Edit → test → commit, and the pre-commit hook reverts the edit every time."""
    s = Script("cc-period3", "2026-03-06T10:03:00")
    s.user("The ledger flush test is flaky on CI. Fix it and commit.")
    s.calls(C("Task", {"description": "Find flush call sites",
                       "prompt": "Find every place that calls Ledger.flush() or writes to "
                                 "self._pending in src/, and report file:line with a one-line "
                                 "summary of each.",
                       "subagent_type": "Explore"},
              "Found 3 call sites:\n- src/ledger/store.py:88 flush() drains _pending under "
              "self._lock\n- src/ledger/store.py:131 close() calls flush() without the lock\n"
              "- src/worker.py:57 timer thread calls store.flush() every 2s"),
            text="Let me have a subagent map the flush call sites first.")
    s.calls(C("Read", {"file_path": "/home/dev/ledger/src/ledger/store.py", "offset": 120,
                       "limit": 20},
              "   120\t    def close(self) -> None:\n   131\t        self.flush()\n"
              "   132\t        self._conn.close()"))
    edit = {"file_path": "/home/dev/ledger/src/ledger/store.py",
            "old_string": "        self.flush()\n        self._conn.close()",
            "new_string": "        with self._lock:\n            self.flush()\n"
                          "        self._conn.close()"}
    test = {"command": "uv run pytest tests/test_store.py -q -x",
            "description": "Run the store tests"}
    commit = {"command": "git add -A && git commit -m \"Hold the lock while closing the ledger\"",
              "description": "Commit the fix"}
    test_out = ("F\n=================================== FAILURES ===================================\n"
                "___________________________ test_close_flushes_all ____________________________\n"
                "E   AssertionError: assert 41 == 42\n"
                "FAILED tests/test_store.py::test_close_flushes_all - AssertionError: assert 41 == 42\n"
                "1 failed, 17 passed in 0.84s")
    hook_out = ("ruff-format..............................................................Failed\n"
                "- hook id: ruff-format\n- files were modified by this hook\n\n"
                "1 file reformatted\nmypy.....................................................Passed")
    for _ in range(4):
        s.calls(C("Edit", edit, "The file /home/dev/ledger/src/ledger/store.py has been updated."),
                text="Wrapping the flush in close() with the lock.")
        s.calls(C("Bash", test, test_out, error=True))
        s.calls(C("Bash", commit, hook_out, error=True),
                text="The test still fails intermittently; committing the fix to see CI.")
    s.say("I'm going in circles: the ruff-format pre-commit hook rewrites store.py on every "
          "commit and the edit is lost, so the test keeps failing the same way. The real race is "
          "the 2-second timer in src/worker.py calling flush() concurrently; shall I fix that "
          "instead and run the hook before committing?")
    return s


def coding_subagent() -> Script:
    s = Script("cc-subagent", "2026-03-06T10:03:20")
    s.user("Find every place that calls Ledger.flush() or writes to self._pending in src/, and "
           "report file:line with a one-line summary of each.")
    s.calls(C("Grep", {"pattern": "flush\\(", "path": "/home/dev/ledger/src", "output_mode":
                       "content", "-n": True},
              "/home/dev/ledger/src/ledger/store.py:88:    def flush(self) -> None:\n"
              "/home/dev/ledger/src/ledger/store.py:131:        self.flush()\n"
              "/home/dev/ledger/src/worker.py:57:            store.flush()"),
            C("Grep", {"pattern": "_pending", "path": "/home/dev/ledger/src", "output_mode":
                       "content", "-n": True},
              "/home/dev/ledger/src/ledger/store.py:41:        self._pending: list[Row] = []\n"
              "/home/dev/ledger/src/ledger/store.py:76:        self._pending.append(row)\n"
              "/home/dev/ledger/src/ledger/store.py:90:            rows, self._pending = "
              "self._pending, []"),
            text="I'll search for flush calls and _pending writes in parallel.")
    s.calls(C("Read", {"file_path": "/home/dev/ledger/src/ledger/store.py", "offset": 70,
                       "limit": 30},
              "    70\t    def write(self, row: Row) -> None:\n    76\t        self._pending.append(row)\n"
              "    88\t    def flush(self) -> None:\n    89\t        with self._lock:\n"
              "    90\t            rows, self._pending = self._pending, []"))
    s.calls(C("Read", {"file_path": "/home/dev/ledger/src/worker.py", "offset": 45, "limit": 20},
              "    52\t    def _tick(self) -> None:\n    57\t            store.flush()\n"
              "    58\t        self._timer = Timer(2.0, self._tick)"))
    s.say("Found 3 call sites:\n- src/ledger/store.py:88 flush() drains _pending under "
          "self._lock\n- src/ledger/store.py:131 close() calls flush() without the lock\n"
          "- src/worker.py:57 timer thread calls store.flush() every 2s")
    return s


def codex_migrate_halt() -> Script:
    s = Script("codex-migrate", "2026-03-07T13:22:10")
    s.user("Add a `due_date` column to invoices with a migration and expose it in the API.")
    s.calls(C("shell", {"command": ["bash", "-lc", "ls migrations && sed -n 1,40p "
                                    "src/models/invoice.ts"], "workdir": "/home/sam/invoicer"},
              "0001_init.sql\n0002_customers.sql\n0003_invoice_lines.sql\n"
              "export interface Invoice {\n  id: string;\n  customerId: string;\n"
              "  total: number;\n}"), text="Inspecting migrations and the invoice model")
    s.calls(C("apply_patch", {"patch": "*** Begin Patch\n*** Add File: migrations/0004_due_date.sql\n"
                              "+ALTER TABLE invoices ADD COLUMN due_date date;\n"
                              "+CREATE INDEX invoices_due_date_idx ON invoices (due_date);\n"
                              "*** End Patch"},
              "Success. Updated the following files:\nA migrations/0004_due_date.sql"),
            text="Adding the migration")
    migrate = {"command": ["bash", "-lc", "npm run db:migrate"], "workdir": "/home/sam/invoicer"}
    fail = ("> invoicer@1.4.0 db:migrate\n> node scripts/migrate.js\n\n"
            "applying 0004_due_date.sql\n"
            "error: relation \"invoices\" does not exist\n    at Parser.parseErrorMessage "
            "(node_modules/pg-protocol/dist/parser.js:287:98)\nmigration failed, rolled back")
    for _ in range(3):
        s.calls(C("shell", migrate, fail, error=True), text="Running the migration")
    s.calls(C("shell", {"command": ["bash", "-lc", "grep -n DATABASE_URL .env scripts/migrate.js"],
                        "workdir": "/home/sam/invoicer"},
              ".env:3:DATABASE_URL=postgres://localhost:5432/invoicer_test\n"
              "scripts/migrate.js:4:const url = process.env.DATABASE_URL"),
            text="Checking which database the migration targets")
    s.say("The migration fails because `.env` points DATABASE_URL at `invoicer_test`, which has "
          "no tables yet. Should I run `npm run db:reset` against the test database, or point "
          "the migration at your dev database?")
    s.user("Point it at invoicer_dev.")
    s.calls(C("shell", {"command": ["bash", "-lc", "DATABASE_URL=postgres://localhost:5432/"
                                    "invoicer_dev npm run db:migrate"],
                        "workdir": "/home/sam/invoicer"},
              "applying 0004_due_date.sql\nmigrated 1 file"), text="Migrating the dev database")
    s.calls(C("apply_patch", {"patch": "*** Begin Patch\n*** Update File: src/models/invoice.ts\n"
                              "@@\n   total: number;\n+  dueDate: string | null;\n }\n"
                              "*** End Patch"},
              "Success. Updated the following files:\nM src/models/invoice.ts"),
            text="Exposing dueDate on the model")
    s.calls(C("shell", {"command": ["bash", "-lc", "npm test -- invoices"],
                        "workdir": "/home/sam/invoicer"},
              "PASS tests/invoices.test.ts\nTests: 12 passed, 12 total"), text="Running tests")
    s.say("Done: migration 0004 adds `due_date` (indexed) and the API model exposes `dueDate`. "
          "Tests pass against invoicer_dev.")
    return s


def opencode_invalid_edit() -> Script:
    """A harness error loop: OpenCode reroutes an `edit` without `oldString` to its `invalid`
    tool four times (nothing runs, the same refusal comes back), then the edit goes through."""
    s = Script("opencode-invalid-edit", "2026-03-10T10:20:00")
    s.user("Rename the config key `retries` to `max_retries` in src/config.ts and run the tests.")
    s.calls(C("read", {"filePath": "/home/dev/relay/src/config.ts"},
              "<file>\n00001| export const defaults = {\n00002|   retries: 3,\n00003|   timeoutMs: 5000,\n"
              "00004| };\n</file>"), text="Reading the config first.")
    refusal = ("The arguments provided to the tool are invalid: Invalid input for tool edit: "
               "oldString: Required")
    for _ in range(4):
        s.calls(C("invalid", {"tool": "edit", "error": "Invalid input for tool edit: oldString: Required"},
                  refusal), text="Renaming the key.")
    s.calls(C("edit", {"filePath": "/home/dev/relay/src/config.ts", "oldString": "  retries: 3,",
                       "newString": "  max_retries: 3,"}, ""), text="Renaming the key, with the old text.")
    s.calls(C("bash", {"command": "npm test --silent", "description": "Run the tests"},
              "Tests: 41 passed, 41 total"), text="Running the tests.")
    s.say("Renamed `retries` to `max_retries`; all 41 tests pass.")
    return s


def swe_abab() -> Script:
    s = Script("swe-abab", "2026-02-11T21:40:00")
    s.user("<uploaded_files>\n/testbed\n</uploaded_files>\nI've uploaded a python code "
           "repository in the directory /testbed. Consider the following issue:\n\n"
           "parse_date('2024-02-30') returns March 1 instead of raising ValueError.\n\n"
           "Can you help me implement the necessary changes so that the issue is resolved?")
    s.calls(C("find_file", {"command": "find_file core.py src"},
              "Found 1 matches for \"core.py\" in /testbed/src:\n/testbed/src/parsedate/core.py"),
            text="First, let's find where parse_date lives.")
    s.calls(C("create", {"command": "create reproduce.py"},
              "[File: /testbed/reproduce.py (1 lines total)]\n1:"),
            text="Let's create a reproduction script.")
    s.calls(C("edit", {"command": "edit 1:1\nfrom parsedate import parse_date\n"
                                  "print(parse_date('2024-02-30'))\nend_of_edit"},
              "[File: /testbed/reproduce.py (2 lines total)]\n1:from parsedate import parse_date\n"
              "2:print(parse_date('2024-02-30'))\nFile updated."))
    run = {"command": "python reproduce.py"}
    open_ = {"command": "open src/parsedate/core.py 58"}
    run_out = "2024-03-01 00:00:00"
    open_out = ("[File: /testbed/src/parsedate/core.py (140 lines total)]\n(47 more lines above)\n"
                "58:    day = min(day, 31)\n59:    base = datetime(year, month, 1)\n"
                "60:    return base + timedelta(days=day - 1)\n(80 more lines below)")
    thoughts = [("The output shows the bug. Let's run it again to be sure it's consistent.",
                 "Let's look at how the date is built."),
                ("Maybe the module is cached; let's rerun the reproduction.",
                 "Let's look at the day clamping again."),
                ("Let's verify the output once more.", "Let's re-open the function."),
                ("Let's run the script again.", "Let's look at line 58 once more.")]
    for t_run, t_open in thoughts:
        s.calls(C("python", run, run_out), text=t_run)
        s.calls(C("open", open_, open_out), text=t_open)
    s.calls(C("edit", {"command": "edit 58:60\n    if not 1 <= day <= monthrange(year, month)[1]:\n"
                                  "        raise ValueError(f\"day {day} out of range\")\n"
                                  "    return datetime(year, month, day)\nend_of_edit"},
              "[File: /testbed/src/parsedate/core.py (140 lines total)]\nFile updated."),
            text="Now let's validate the day against the month length instead of clamping.")
    s.calls(C("python", run, "Traceback (most recent call last):\n  File \"/testbed/reproduce.py\", "
                              "line 2, in <module>\nValueError: day 30 out of range"),
            text="Let's run the reproduction again.")
    s.calls(C("submit", {"command": "submit"}, "diff --git a/src/parsedate/core.py …"),
            text="The fix works; submitting.")
    return s


def openhands_stagnation() -> Script:
    s = Script("oh-stagnation", "2026-02-27T11:00:00")
    s.user("Clone git@github.com:quayside/billing-etl.git into /workspace and run its test suite.")
    s.calls(C("execute_bash", {"command": "git clone git@github.com:quayside/billing-etl.git "
                               "/workspace/billing-etl"},
              "Cloning into '/workspace/billing-etl'...\ngit@github.com: Permission denied "
              "(publickey).\nfatal: Could not read from remote repository.", error=True),
            text="I'll clone the repository first.")
    s.calls(C("execute_bash", {"command": "ls -la ~/.ssh"},
              "ls: cannot access '/root/.ssh': No such file or directory", error=True),
            text="Let me check whether an SSH key is available.")
    stuck = ("I can't clone git@github.com:quayside/billing-etl.git: the sandbox has no SSH key "
             "for GitHub (Permission denied (publickey)). Please add a deploy key or give me an "
             "HTTPS URL with a token, and I'll continue.")
    for _ in range(8):
        s.say(stuck)
    return s


OH_FAKE_USER = ("Please continue working on the task on whatever approach you think is "
                "suitable.\nIf you think you have solved the task, please first send your answer "
                "to user through message and then finish the interaction.\nIMPORTANT: YOU SHOULD "
                "NEVER ASK FOR HUMAN HELP.\n")


def oh_prodded() -> Script:
    """An eval's stand-in user answers every message: each answer is a user turn, so the same
    prose never piles up in one run."""
    s = Script("oh-prodded", "2026-02-27T13:30:00")
    s.user("<uploaded_files>\n/workspace/tidewater__pgmeter__2.3\n</uploaded_files>\nI've "
           "uploaded a python code repository. Consider the following issue description:\n"
           "<issue_description>\n`pgmeter top --limit 0` shows every query instead of none.\n"
           "</issue_description>")
    s.calls(C("execute_bash", {"command": "grep -n \"limit\" /workspace/tidewater__pgmeter__2.3/"
                               "src/pgmeter/top.py"},
              "41:    if limit:\n42:        rows = rows[:limit]"),
            text="Let me find where the limit is applied.")
    s.calls(C("execute_bash", {"command": "cd /workspace/tidewater__pgmeter__2.3 && sed -i "
                               "'41s/if limit:/if limit is not None:/' src/pgmeter/top.py && "
                               "python -m pytest tests/test_top.py -q"},
              "......\n6 passed in 0.41s"),
            text="`if limit:` treats 0 as no limit. I'll compare with None instead.")
    done = ("I changed `if limit:` to `if limit is not None:` in src/pgmeter/top.py, so "
            "`--limit 0` now shows no rows; tests/test_top.py passes.")
    for _ in range(7):
        s.say(done)
        s.user(OH_FAKE_USER)
    s.say(done)
    return s


def oh_view_loop() -> Script:
    """One tool name for reading and writing: a repeated view looks like a repeated write."""
    s = Script("oh-view-loop", "2026-02-27T14:10:00")
    s.user("<uploaded_files>\n/workspace/tidewater__pgmeter__2.3\n</uploaded_files>\nI've "
           "uploaded a python code repository. Consider the following issue description:\n"
           "<issue_description>\n`pgmeter export --format csv` writes the header twice when "
           "the output file already exists.\n</issue_description>")
    view = {"command": "view", "path": "/workspace/tidewater__pgmeter__2.3/src/pgmeter/export.py",
            "view_range": [60, 90]}
    body = ("Here's the result of running `cat -n` on /workspace/tidewater__pgmeter__2.3/src/"
            "pgmeter/export.py:\n    60\tdef write_csv(path, rows, append=False):\n"
            "    61\t    mode = \"a\" if append else \"w\"\n    62\t    with open(path, mode, "
            "newline=\"\") as fh:\n    63\t        w = csv.writer(fh)\n    64\t        "
            "w.writerow(HEADER)\n    65\t        w.writerows(rows)")
    thoughts = ["Let me look at the CSV writer.", "Let me look at the CSV writer again.",
                "Let me re-check how the header is written.",
                "Let me view the function once more to be sure.",
                "Let me view lines 60-90 again."]
    for t in thoughts:
        s.calls(C("str_replace_editor", view, body), text=t)
    s.calls(C("str_replace_editor", {"command": "str_replace",
                                     "path": view["path"],
                                     "old_str": "        w.writerow(HEADER)",
                                     "new_str": "        if not append or fh.tell() == 0:\n"
                                                "            w.writerow(HEADER)"},
              "The file /workspace/tidewater__pgmeter__2.3/src/pgmeter/export.py has been "
              "edited."), text="Write the header only when the file is new or empty.")
    s.say("The header is now written only for a new or empty file, so appending keeps one header.")
    return s


def coding_clean() -> Script:
    s = Script("coding-clean", "2026-03-01T11:20:00")
    s.user("Add a --dry-run flag to `pgmeter vacuum` that prints the tables it would vacuum.")
    s.calls(C("search_code", {"pattern": "def vacuum", "path": "src/pgmeter"},
              "src/pgmeter/cli.py:88:def vacuum(ctx, tables, full):"),
            C("read_file", {"path": "tests/test_cli.py", "start": 1, "end": 40},
              "import pytest\nfrom click.testing import CliRunner\nfrom pgmeter.cli import main\n"
              "\n\ndef test_vacuum_all(db):\n    r = CliRunner().invoke(main, [\"vacuum\"])\n"
              "    assert r.exit_code == 0"),
            text="Let me find the vacuum command and its tests.")
    s.calls(C("read_file", {"path": "src/pgmeter/cli.py", "start": 80, "end": 110},
              "80  @main.command()\n81  @click.argument(\"tables\", nargs=-1)\n"
              "82  @click.option(\"--full\", is_flag=True)\n88  def vacuum(ctx, tables, full):\n"
              "89      for t in tables or ctx.obj.db.list_tables():\n"
              "90          ctx.obj.db.vacuum(t, full=full)\n"))
    s.calls(C("edit_file", {"path": "src/pgmeter/cli.py", "line": 82,
                            "new": "@click.option(\"--full\", is_flag=True)\n"
                                   "@click.option(\"--dry-run\", is_flag=True, help=\"Print the "
                                   "tables instead of vacuuming them.\")"}, "ok"),
            C("edit_file", {"path": "src/pgmeter/cli.py", "line": 89,
                            "new": "    for t in tables or ctx.obj.db.list_tables():\n"
                                   "        if dry_run:\n            click.echo(t)\n"
                                   "            continue"}, "ok"))
    s.calls(C("edit_file", {"path": "tests/test_cli.py", "line": 9,
                            "new": "\n\ndef test_vacuum_dry_run(db):\n    r = CliRunner()."
                                   "invoke(main, [\"vacuum\", \"--dry-run\"])\n"
                                   "    assert \"events\" in r.output\n"}, "ok"))
    s.calls(C("run_tests", {"target": "tests/test_cli.py"},
              "FAILED tests/test_cli.py::test_vacuum_dry_run - TypeError: vacuum() got an "
              "unexpected keyword argument 'dry_run'\n1 failed, 6 passed", error=True))
    s.calls(C("edit_file", {"path": "src/pgmeter/cli.py", "line": 88,
                            "new": "def vacuum(ctx, tables, full, dry_run):"}, "ok"),
            text="The function signature needs the new parameter.")
    s.calls(C("run_tests", {"target": "tests/test_cli.py"}, "7 passed in 1.92s"))
    s.say("Added `--dry-run` to `pgmeter vacuum`: it prints each table it would vacuum and "
          "skips the work. New test `test_vacuum_dry_run` passes with the rest of tests/test_cli.py.")
    return s


def mini_swe_scattered() -> Script:
    """The same failing reproduction between two different edits: only a window sees it."""
    s = Script("mini-swe-scattered", "2026-02-14T10:05:00")
    s.user("<pr_description>\nConsider the following PR description:\nQuerySet.bulk_update() "
           "raises TypeError when a JSONField is set to None on some objects and to a dict on "
           "others.\n</pr_description>\n\n<instructions>\nYour task is to make changes to "
           "non-test files in the current directory to fix the issue.\n</instructions>")

    def bash(cmd: str, out: str, code: int = 0) -> C:
        return C("bash", {"command": cmd},
                 f"<returncode>{code}</returncode>\n<output>\n{out}\n</output>", error=code != 0)

    crash = ("Traceback (most recent call last):\n  File \"/testbed/reproduce.py\", line 14, in "
             "<module>\n    Item.objects.bulk_update(items, [\"data\"])\n  File \"/testbed/django/"
             "db/models/query.py\", line 712, in bulk_update\n    attr = Value(attr, "
             "output_field=field)\nTypeError: Object of type NoneType is not JSON serializable")
    s.calls(bash("grep -n \"def bulk_update\" -A40 django/db/models/query.py | sed -n 20,40p",
                 "700:            for obj in batch_objs:\n701:                attr = getattr(obj, "
                 "field.attname)\n702:                if not hasattr(attr, \"resolve_expression\"):"
                 "\n703:                    attr = Value(attr, output_field=field)"),
            text="Let me look at how bulk_update builds its CASE expressions.")
    s.calls(bash("cat > reproduce.py <<'EOF'\nimport django\n# minimal settings + Item(JSONField)\n"
                 "...\nItem.objects.bulk_update(items, [\"data\"])\nprint(\"OK\")\nEOF", ""),
            text="I'll write a reproduction script.")
    s.calls(bash("python reproduce.py", crash, 1))
    s.calls(bash("sed -i '703s/Value(attr, output_field=field)/Value(attr or {}, output_field=field)/' "
                 "django/db/models/query.py", ""),
            text="Treat None as an empty object when building the Value.")
    s.calls(bash("python reproduce.py", crash, 1))
    s.calls(bash("sed -i '703s/Value(attr or {}, output_field=field)/Value(attr, output_field=field)"
                 " if attr is not None else Value(None)/' django/db/models/query.py", ""),
            text="Maybe None needs a bare Value instead.")
    s.calls(bash("python reproduce.py", crash, 1))
    s.calls(bash("grep -n \"def get_db_prep_save\\|def get_prep_value\" "
                 "django/db/models/fields/json.py", "93:    def get_prep_value(self, value):\n"
                 "94:        if value is None:\n95:            return value"),
            text="The traceback is older than my edits: line 712 — the module may be stale. "
                 "Let me check how JSONField prepares values.")
    s.calls(bash("find . -name '*.pyc' -path '*models*' -delete && sed -i '703s/.*/                    "
                 "attr = Value(attr, output_field=field) if attr is not None else Value(None, "
                 "output_field=field)/' django/db/models/query.py && python reproduce.py", "OK"))
    s.calls(bash("python tests/runtests.py queries.test_bulk_update -v 1",
                 "Ran 41 tests in 0.612s\n\nOK"))
    s.calls(bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached",
                 "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\ndiff --git a/django/db/models/query.py "
                 "b/django/db/models/query.py"))
    return s


def cline_test_rerun() -> Script:
    """Cline re-runs the same failing test command without changing anything in between."""
    s = Script("cline-rerun", "2026-03-10T14:02:00")
    s.user("The invoice PDF test fails since the font upgrade. Make it pass.")
    s.calls(C("read_file", {"path": "src/pdf/render.ts"},
              "import { registerFont } from './fonts'\n\nexport function render(inv: Invoice) {\n"
              "  registerFont('Inter', 'fonts/Inter-Regular.ttf')\n  return layout(inv)\n}\n"),
            text="I'll look at the renderer first.")
    s.calls(C("replace_in_file", {"path": "src/pdf/render.ts", "diff": "------- SEARCH\n"
              "  registerFont('Inter', 'fonts/Inter-Regular.ttf')\n=======\n"
              "  registerFont('Inter', 'fonts/Inter-4.0-Regular.ttf')\n+++++++ REPLACE"},
              "The content was successfully saved to src/pdf/render.ts."),
            text="The font file was renamed in the upgrade.")
    failing = ("FAIL test/pdf.test.ts\n  ● invoice PDF › matches the snapshot\n\n"
               "    expect(received).toMatchSnapshot()\n    Snapshot name: `invoice PDF matches the snapshot 1`\n"
               "    - Snapshot  - 1\n    + Received  + 1\n\nTests: 1 failed, 11 passed, 12 total")
    for note in ("Let me run the PDF tests.", "Running the tests again to confirm.",
                 "Let me run it once more.", "Re-running the test suite."):
        s.calls(C("execute_command", {"command": "npm test -- test/pdf.test.ts", "requires_approval": "false"},
                  failing), text=note)
    s.user("It's a snapshot test: update the snapshot after checking the diff is only the font.")
    s.calls(C("execute_command", {"command": "npm test -- test/pdf.test.ts -u", "requires_approval": "false"},
              "PASS test/pdf.test.ts\n › 1 snapshot updated.\nTests: 12 passed, 12 total"))
    s.say("The renderer now loads the renamed Inter 4.0 font file and the invoice snapshot is "
          "updated; the only change in it is the font.")
    return s


def oh_v1_migration_retry() -> Script:
    """The same failing migration, run again and again after reading the same log."""
    s = Script("oh-v1-migrate", "2026-03-12T16:20:00")
    s.user("`alembic upgrade head` fails on the staging copy. Get the schema current.")
    err = ("sqlalchemy.exc.ProgrammingError: (psycopg.errors.DuplicateColumn) column \"currency\" of "
           "relation \"orders\" already exists\n[SQL: ALTER TABLE orders ADD COLUMN currency VARCHAR(3)]")
    s.calls(C("terminal", {"command": "alembic current"}, "0041_add_refunds (head is 0042_order_currency)"),
            C("file_editor", {"command": "view", "path": "/workspace/project/migrations/versions/0042_order_currency.py"},
              "     1\tdef upgrade():\n     2\t    op.add_column('orders', sa.Column('currency', sa.String(3)))"),
            text="Let me see where the schema is and what the next migration does.")
    for _ in range(3):
        s.calls(C("terminal", {"command": "alembic upgrade head"}, err, error=True))
        s.calls(C("terminal", {"command": "tail -n 5 logs/migrate.log"}, err, error=False))
    s.say("The `currency` column was added by hand on staging before 0042 ran; the migration "
          "needs to skip an existing column (or the column has to be dropped first).")
    return s


def long_refactor(target_calls: int = 2050) -> Script:
    """A long coding session (dashboard scale): many runs, mostly productive, a few loops.

    Edits go out as parallel batches, as they do from a model that plans a whole file's changes
    at once; that also keeps the file compact.
    """
    rng = random.Random(20260310)
    s = Script("long-refactor", "2026-03-10T08:00:00")
    modules = [f"{pkg}/{mod}.py" for pkg in ("billing", "ingest", "reports", "auth", "api")
               for mod in ("models", "service", "views", "tasks", "utils", "schemas", "errors",
                           "client", "cache")]
    calls = 0
    run = 0
    while calls < target_calls:
        mod = modules[run % len(modules)]
        run += 1
        path = f"src/{mod}"
        s.user(f"Port {path} to structured logging (event names, logger.bind).")
        uses = rng.randint(4, 12)
        s.calls(C("search_code", {"pattern": "log\\.(info|warning)\\(", "path": path},
                  f"{uses} matches"),
                C("read_file", {"path": path}, f"<{180 + run} lines>"))
        lines = [20 + 17 * k for k in range(uses)]
        s.calls(*[C("edit_file", {"path": path, "line": ln, "new": f"log.info(\"{mod[:-3]}.{k}\")"},
                    "ok") for k, ln in enumerate(lines)])
        calls += 2 + uses
        test = {"target": "tests/" + mod.replace("/", "/test_")}
        if run % 11 == 0:
            # A missing fixture: the same test run fails the same way three times.
            for _ in range(3):
                s.calls(C("run_tests", test, "1 failed: fixture 'frozen_clock' not found",
                          error=True))
            s.calls(C("search_code", {"pattern": "def frozen_clock", "path": "tests"},
                      "tests/conftest.py:41"))
            calls += 4
        elif run % 17 == 0:
            # Bounces between the test and the diff without changing anything.
            for _ in range(4):
                s.calls(C("run_tests", test, "2 failed: KeyError 'event'"))
                s.calls(C("git_diff", {"path": path}, f"<diff of {path}>"))
            calls += 8
        else:
            s.calls(C("run_tests", test, f"{rng.randint(8, 40)} passed"))
            calls += 1
        s.calls(C("git_commit", {"message": f"Structured logging in {mod}"},
                  f"[main {rng.getrandbits(28):07x}]"))
        calls += 1
        s.say(f"Ported {path}: {uses} log calls now use event names.")
    return s


def copilot_denied_push() -> Script:
    """The repository's preToolUse hook denies a force push; the agent sends the same push again."""
    s = Script("copilot-denied-push", "2026-03-09T15:40:12")
    s.user("Squash my last three commits on fix-cart-total into one and push the branch.")
    s.calls(C("bash", {"command": "git log --oneline -4", "description": "recent commits"},
              "9c1e2d4 fix rounding in cart total\n7b3a9f0 wip\n41d08c2 wip tests\n"
              "e5f6a71 Merge pull request #212 from shop/catalog-cache\n<exited with exit code 0>"),
            C("bash", {"command": "git status --short --branch", "description": "branch state"},
              "## fix-cart-total...origin/fix-cart-total [ahead 0, behind 0]\n<exited with exit code 0>"),
            text="Looking at the branch first.")
    s.calls(C("bash", {"command": "git reset --soft HEAD~3 && git commit -m \"Fix rounding in cart total\"",
                       "description": "squash three commits"},
              "[fix-cart-total 3fe81b6] Fix rounding in cart total\n 3 files changed, 41 insertions(+), "
              "9 deletions(-)\n<exited with exit code 0>"),
            text="Squashing the three commits.")
    push = {"command": "git push --force origin fix-cart-total", "description": "push the squashed branch"}
    denied = "Denied by preToolUse hook: force pushes are blocked in this repository (.github/hooks/guard.json)"
    for text in ("Pushing the rewritten branch.", "The push was denied; trying it again.",
                 "Retrying the push.", "One more attempt at the push."):
        s.calls(C("bash", push, denied, error=True), text=text)
    s.say("I squashed the three commits locally into `3fe81b6`, but the repository's hook blocks "
          "force pushes, so the branch on origin still has the old commits. Push it yourself with "
          "`git push --force-with-lease` if you are allowed to, or open a new branch.")
    return s
