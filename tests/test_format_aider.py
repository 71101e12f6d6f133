"""Aider chat history markdown: #### user lines, replies, edit blocks and shell suggestions."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from loopledger.analysis.replay_table import sessions_of
from loopledger.events import Answers, Batch, ReadError, SessionStart, UserTurn
from loopledger.formats import aider
from reader_checks_b import (
    assert_fuzz,
    assert_growth_shows_past_the_old_end,
    calls,
    errors,
    kinds,
    ledger_sessions,
)

FIX = Path(__file__).parent / "fixtures" / "formats" / "aider" / ".aider.chat.history.md"


def test_sessions_turns_and_replies():
    items = list(aider.read(FIX))
    assert not errors(items)
    assert kinds(items) == ["SessionStart", "UserTurn", "Batch", "Answers", "UserTurn", "Batch",
                            "Answers", "SessionStart", "UserTurn", "Prose"]
    starts = [i for i in items if isinstance(i, SessionStart)]
    assert [(s.info.key, s.info.started_at, s.line) for s in starts] == [
        ("1", "2025-02-11 14:03:52", 2), ("2", "2025-02-12 09:10:00", 57)]
    # titled by the session's first user line (the start line comes before it)
    assert [s.info.title for s in starts] == ['add a /health endpoint that returns {"ok": true}',
                                              "what does the index route do?"]
    turns = [i for i in items if isinstance(i, UserTurn)]
    # consecutive #### lines are one message; the launch lines before it are not a turn
    assert [t.text for t in turns] == ['add a /health endpoint that returns {"ok": true}',
                                      "also make it report the version\nfrom VERSION",
                                      "what does the index route do?"]
    assert [t.line for t in turns] == [8, 41, 59]  # the last line of each message
    # a #### line inside a fenced block is the reply's text, not the person
    assert "#### not a user line" in items[-1].text


def test_edit_blocks_and_shell_suggestions_become_calls():
    items = list(aider.read(FIX))
    first = items[2]
    assert isinstance(first, Batch)
    edit, shell = first.calls
    assert edit.name == "edit" and edit.args["path"] == "app.py"
    assert edit.args["edits"][0][0] == '@app.route("/")\ndef index():'
    assert edit.args["edits"][0][1].startswith('@app.route("/health")')
    assert shell.name == "run" and shell.args == {"command": "curl -s localhost:5000/health"}
    assert first.text.startswith("I'll add the endpoint")
    answers = items[3]
    assert isinstance(answers, Answers)
    # the edit is answered by aider's "Applied edit" line; the suggestion is not answered
    assert [(a.call_id, a.text, a.is_error) for a in answers.answers] == [
        (edit.id, "Applied edit to app.py", False)]


def test_failed_edit_is_an_error_answer():
    items = list(aider.read(FIX))
    answer = items[6].answers[0]
    # aider's failed-to-match message (one line here) is the answer
    assert answer.is_error and answer.text == "# 1 SEARCH/REPLACE block failed to match!"
    assert answer.call_id == items[5].calls[0].id


def test_blocks_of_one_reply_group_per_file(tmp_path):
    path = tmp_path / "h.md"
    path.write_text("#### rename foo to bar everywhere\n\n"
                    "a.py\n```python\n<<<<<<< SEARCH\nfoo()\n=======\nbar()\n>>>>>>> REPLACE\n```\n\n"
                    "b.py\n```python\n<<<<<<< SEARCH\nimport foo\n=======\nimport bar\n>>>>>>> REPLACE\n```\n\n"
                    "a.py\n```python\n<<<<<<< SEARCH\ndef foo():\n=======\ndef bar():\n>>>>>>> REPLACE\n```\n\n"
                    "> Applied edit to b.py  \n> Applied edit to a.py  \n> Applied edit to a.py  \n")
    items = list(aider.read(path))
    assert [(c.args["path"], len(c.args["edits"])) for c in calls(items)] == [("a.py", 2), ("b.py", 1)]
    texts = {a.call_id: a.text for a in items[-1].answers}
    a_call, b_call = calls(items)
    assert texts[a_call.id] == "Applied edit to a.py\nApplied edit to a.py"
    assert texts[b_call.id] == "Applied edit to b.py"


def test_interrupted_reply_with_an_open_fence_does_not_swallow_the_next_turn(tmp_path):
    path = tmp_path / "h.md"
    path.write_text("#### write the parser  \n\nFirst, the tokenizer:\n\n```python\ndef tok(s):\n"
                    "\n> ^C KeyboardInterrupt  \n\n#### use a regex instead  \n\nOK.\n")
    items = list(aider.read(path))
    assert [i.text for i in items if isinstance(i, UserTurn)] == [
        "write the parser", "use a regex instead"]


def test_session_without_user_lines_still_starts(tmp_path):
    path = tmp_path / "h.md"
    path.write_text("# aider chat started at 2025-03-01 08:00:00\n\n> Aider v0.80.0  \n")
    assert kinds(list(aider.read(path))) == ["SessionStart"]


def test_reply_without_calls_is_prose(tmp_path):
    path = tmp_path / "h.md"
    path.write_text("#### hello\n\nHi! What should we work on?\n")
    assert [(type(i).__name__, getattr(i, "text", None)) for i in aider.read(path)][1:] == [
        ("UserTurn", "hello"), ("Prose", "Hi! What should we work on?")]


def test_bad_input_is_reported_and_reading_goes_on(tmp_path):
    path = tmp_path / "h.md"
    path.write_bytes(b"#### fix it\n\nsrc/x.py\n```python\n<<<<<<< SEARCH\nold\n```\n\n"
                     b"#### caf\xe9 latte\n\nsrc/y.py\n```python\n<<<<<<< SEARCH\na\n=======\nb\n"
                     b">>>>>>> REPLACE\n```\n")
    items = list(aider.read(path))
    errs = sorted(errors(items), key=lambda e: e.line)  # errors may come anywhere in the stream
    assert [e.line for e in errs] == [4, 9] and all(e.path == str(path) for e in errs)
    assert "not closed" in errs[0].message and "0xe9" in errs[1].message
    assert [i.text for i in items if isinstance(i, UserTurn)] == ["fix it", "caf\ufffd latte"]
    assert [c.args["path"] for c in calls(items)] == ["src/y.py"]
    # the reply whose only block was dropped is prose
    assert [type(i).__name__ for i in items if not isinstance(i, ReadError)][:4] == [
        "SessionStart", "UserTurn", "Prose", "UserTurn"]


def test_enormous_line_is_reported_not_held(tmp_path, monkeypatch):
    monkeypatch.setattr(aider, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "h.md"
    path.write_bytes(b"#### first  \n\nok\n" + b"y" * 5000 + b"\n#### second  \n\nfine\n")
    items = list(aider.read(path))
    (err,) = errors(items)
    assert err.line == 4 and "5001 bytes" in err.message
    turns = [i for i in items if isinstance(i, UserTurn)]
    assert [(t.text, t.line) for t in turns] == [("first", 1), ("second", 5)]


def test_sniff():
    assert aider.sniff(FIX.read_bytes())
    assert aider.sniff(b"# aider chat started at 2025-01-01 10:00:00\n")
    assert not aider.sniff(b"# Notes\n\n#### heading\n\nplain markdown\n")
    assert not aider.sniff(b'{"role": "user", "content": "#### hi\\n> quoted"}')
    # a source file quoting a transcript in a string literal is not one
    quoted = b'"""Generator."""\nTEXT = """\n#### add tests\n\n> Applied edit to t.py\n"""\n'
    assert not aider.sniff(quoted)
    assert aider.sniff(b"#### add tests\n\n> Applied edit to t.py\n")



@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.integers(0, 1500), pos=st.integers(0, 1500),
       junk=st.sampled_from([b"", b"\xff\xfe", b"```", b"\n#### x\n", b"\n<<<<<<< SEARCH\n",
                             b"\n=======\n", b"\n>>>>>>> REPLACE\n", b"\n> Applied edit to app.py\n",
                             b"\n# aider chat started at now\n", b"x" * 100_000]))
@example(cut=10**7, pos=0, junk=b"")
def test_fuzz_never_raises(cut, pos, junk):
    assert_fuzz(aider, FIX.read_bytes(), cut, pos, junk, ".md", free_text=True)


def test_appended_aider_output_reaches_the_ledger(tmp_path):
    """aider writes "Applied edit" after the reply: when those lines arrive after an ingest, the
    worker re-reads the session and the ledger matches a fresh ingest of the whole file."""
    live = tmp_path / ".aider.chat.history.md"
    live.write_text("# aider chat started at 2025-02-11 14:03:52\n\n#### add a /health endpoint  \n\napp.py\n```python\n<<<<<<< SEARCH\nA\n=======\n"
                    "B\n>>>>>>> REPLACE\n```\n\n")

    def grow():
        with open(live, "a") as fh:
            fh.write("> Applied edit to app.py  \n> Commit 1a2b3c4 feat: health  \n")

    grown = ledger_sessions(tmp_path / "a.sqlite", live, grow)
    fresh = ledger_sessions(tmp_path / "b.sqlite", live)
    assert grown == fresh
    (events,) = fresh.values()
    assert [type(e).__name__ for e in events] == ["UserTurn", "Batch", "Answers"]


def test_a_grown_file_shows_every_changed_session_past_the_old_end(tmp_path):
    assert_growth_shows_past_the_old_end(aider, FIX.read_bytes(), tmp_path, ".md")


def test_a_reply_aider_could_not_parse_is_one_harness_error(tmp_path):
    """aider/coders/base_coder.py, apply_updates: when the coder's get_edits raises (a block
    without its ======= / >>>>>>> REPLACE, a listing without a file name) aider applies nothing,
    prints "The LLM did not conform to the edit format.", the troubleshooting link and the
    parser's reason, and sends that reason back. The reply ran nothing: one harness_error call
    answered by those lines (not an edit, not a malformed line of the file). A block that parsed
    but "failed to match" was tried: it stays an edit answered by an error (above)."""
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(
        "# aider chat started at 2026-03-01 10:00:00\n\n#### rename foo to bar in app.py  \n\n"
        "I'll rename it.\n\napp.py\n```python\n<<<<<<< SEARCH\ndef foo():\n=======\ndef bar():\n```\n\n"
        "> Tokens: 2.1k sent, 40 received.  \n"
        "> The LLM did not conform to the edit format.  \n"
        "> https://aider.chat/docs/troubleshooting/edit-errors.html  \n"
        "> Expected `>>>>>>> REPLACE` or `=======`  \n\n"
        "Sorry, here is the complete block.\n\napp.py\n```python\n<<<<<<< SEARCH\ndef foo():\n=======\n"
        "def bar():\n>>>>>>> REPLACE\n```\n\n> Applied edit to app.py  \n")
    items = list(aider.read(path))
    assert not errors(items)
    cs = calls(items)
    assert [(c.name, c.args.get("reason")) for c in cs] == [("harness_error", "malformed_edit"), ("edit", None)]
    answers = {a.call_id: a for i in items if isinstance(i, Answers) for a in i.answers}
    refused = answers[cs[0].id]
    assert refused.is_error and refused.text.splitlines() == [
        "The LLM did not conform to the edit format.",
        "https://aider.chat/docs/troubleshooting/edit-errors.html",
        "Expected `>>>>>>> REPLACE` or `=======`"]
    assert not answers[cs[1].id].is_error


# aider/coders/editblock_coder.py, apply_edits: the blocks that match are written; when any does
# not, aider logs "The LLM did not conform…", then one message whose first line is a `>` line
# ("# N SEARCH/REPLACE block(s) failed to match!") and whose other lines are bare (each failed
# block quoted, "Did you mean…" listings, "The SEARCH section must exactly match…", and with
# blocks that did apply "# The other N … were applied successfully. … Just reply with fixed
# versions…"), closed by a markdown line break "  ". aider sends that message back to the model
# (no `####` line), so the model's next text is a new attempt.
_FAILED = ("> Tokens: 2.1k sent, 40 received.  \n"
           "> The LLM did not conform to the edit format.  \n"
           "> https://aider.chat/docs/troubleshooting/edit-errors.html  \n"
           "> # 1 SEARCH/REPLACE block failed to match!\n\n"
           "## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in app.py\n"
           "<<<<<<< SEARCH\ndef foo():\n=======\ndef bar():\n>>>>>>> REPLACE\n\n"
           "Did you mean to match some of these actual lines from app.py?\n\n```\n#### def  foo():\n```\n\n"
           "The SEARCH section must exactly match an existing block of lines including all white space, "
           "comments, indentation, docstrings, etc  \n")
_ATTEMPT = "Here is the block.\n\napp.py\n```python\n<<<<<<< SEARCH\ndef foo():\n=======\ndef bar():\n>>>>>>> REPLACE\n```\n\n"


def test_a_block_re_sent_after_failing_to_match_is_a_failing_edit_each_time(tmp_path):
    path = tmp_path / ".aider.chat.history.md"
    path.write_text("# aider chat started at 2026-03-01 10:00:00\n\n#### rename foo to bar in app.py  \n\n"
                    + (_ATTEMPT + _FAILED) * 3
                    + "Sorry, the function is spelt with two spaces.\n\napp.py\n```python\n<<<<<<< SEARCH\n"
                      "def  foo():\n=======\ndef bar():\n>>>>>>> REPLACE\n```\n\n> Applied edit to app.py  \n")
    items = list(aider.read(path))
    assert not errors(items)
    cs = calls(items)
    # four replies, four calls: the same edit three times, then the fixed one
    assert [(c.name, c.args["edits"]) for c in cs] == [("edit", [["def foo():", "def bar():"]])] * 3 + [
        ("edit", [["def  foo():", "def bar():"]])]
    answers = {a.call_id: a for i in items if isinstance(i, Answers) for a in i.answers}
    failed = [answers[c.id] for c in cs[:3]]
    assert all(a.is_error for a in failed)
    # the answer is aider's failure message (the quoted block, the hint), not the model's words
    assert failed[0].text.splitlines()[0] == "# 1 SEARCH/REPLACE block failed to match!"
    assert "## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in app.py" in failed[0].text
    assert failed[0].text.endswith("docstrings, etc")
    assert failed[0].text == failed[1].text == failed[2].text
    assert (answers[cs[3].id].is_error, answers[cs[3].id].text) == (False, "Applied edit to app.py")
    # the "Did you mean" listing (a markdown file's "####" line in it) is aider's, not a user turn
    assert [t.text for t in items if isinstance(t, UserTurn)] == ["rename foo to bar in app.py"]
    assert [b.text.splitlines()[0] for b in items if isinstance(b, Batch)] == ["Here is the block."] * 3 + [
        "Sorry, the function is spelt with two spaces."]


def test_blocks_that_matched_beside_one_that_failed_are_applied(tmp_path):
    path = tmp_path / "h.md"
    path.write_text("#### rename foo to bar  \n\n"
                    "a.py\n```python\n<<<<<<< SEARCH\nfoo()\n=======\nbar()\n>>>>>>> REPLACE\n```\n\n"
                    "b.py\n```python\n<<<<<<< SEARCH\nimport foo\n=======\nimport bar\n>>>>>>> REPLACE\n```\n\n"
                    "> The LLM did not conform to the edit format.  \n"
                    "> # 1 SEARCH/REPLACE block failed to match!\n\n"
                    "## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in a.py\n"
                    "<<<<<<< SEARCH\nfoo()\n=======\nbar()\n>>>>>>> REPLACE\n\n"
                    "The SEARCH section must exactly match an existing block of lines including all white space, "
                    "comments, indentation, docstrings, etc\n\n"
                    "# The other 1 SEARCH/REPLACE block were applied successfully.\nDon't re-send them.\n"
                    "Just reply with fixed versions of the block above that failed to match.  \n"
                    "> Commit 1619e93 rename  \n")
    items = list(aider.read(path))
    a_call, b_call = calls(items)
    answers = {a.call_id: a for i in items if isinstance(i, Answers) for a in i.answers}
    assert answers[a_call.id].is_error and "lines in a.py" in answers[a_call.id].text
    assert "# The other 1" in answers[a_call.id].text
    assert (answers[b_call.id].is_error, answers[b_call.id].text) == (
        False, "The other 1 SEARCH/REPLACE block were applied successfully.")


def test_a_windows_path_aider_printed_is_the_edit_the_model_wrote(tmp_path):
    """aider names the file as the OS spells it (backslashes on Windows): the model's
    forward-slash edit is the one it applied, not a second edit beside a "not applied" one."""
    path = tmp_path / "h.md"
    path.write_text("#### add a line  \n\nsrc/app.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n"
                    ">>>>>>> REPLACE\n```\n\n> Applied edit to src\\app.py  \n")
    items = list(aider.read(path))
    (call,) = calls(items)
    assert call.args["path"] == "src/app.py"
    assert [(a.is_error, a.text) for a in items[-1].answers] == [(False, "Applied edit to src\\app.py")]


def test_watch_mode_requests_start_replies_of_their_own(tmp_path):
    """aider --watch-files: an AI comment is a request logged as "> Processing your request...",
    with no `####` line; the model's reply to it is its own batch."""
    path = tmp_path / "h.md"
    path.write_text("#### fix it  \n\na.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```\n\n"
                    "> Applied edit to a.py  \n> Processing your request...  \n\n"
                    "a.py\n```python\n<<<<<<< SEARCH\nx = 2\n=======\nx = 3\n>>>>>>> REPLACE\n```\n\n"
                    "> Applied edit to a.py  \n")
    items = list(aider.read(path))
    assert [len(b.calls) for b in items if isinstance(b, Batch)] == [1, 1]
    assert [c.args["edits"] for c in calls(items)] == [[["x = 1", "x = 2"]], [["x = 2", "x = 3"]]]


def _answers(items) -> dict:
    return {a.call_id: a for i in items if isinstance(i, Answers) for a in i.answers}


def test_a_failure_message_quoted_line_by_line_ends_at_the_models_next_reply(tmp_path):
    """aider 0.50 quotes every line of its failed-to-match message (`> `, no closing line
    break): the model's retry after it is a reply of its own, not more of the message, and the
    person's next line (written without the line break) is theirs again."""
    path = tmp_path / "h.md"
    path.write_text("# aider chat started at 2024-08-20 14:08:19\n\n#### make it purple\n\n"
                    "app.css\n```css\n<<<<<<< SEARCH\n:root { --a: red; }\n=======\n:root { --a: purple; }\n"
                    ">>>>>>> REPLACE\n```\n\n"
                    "> Tokens: 10,332 sent, 439 received.  \n"
                    "> The LLM did not conform to the edit format.  \n"
                    "> # 1 SEARCH/REPLACE block failed to match!\n>\n"
                    "> ## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in app.css\n"
                    "> <<<<<<< SEARCH  \n> :root { --a: red; }  \n> =======  \n> :root { --a: purple; }  \n"
                    "> > > > > > > > REPLACE\n>\n"
                    "> The SEARCH section must exactly match an existing block of lines including all white space, "
                    "comments, indentation, docstrings, etc\n\n"
                    "Sorry, the file has other variables.\n\n"
                    "app.css\n```css\n<<<<<<< SEARCH\n:root {\n  --b: 1px;\n}\n=======\n:root {\n  --a: purple;\n}\n"
                    ">>>>>>> REPLACE\n```\n\n"
                    "> Tokens: 7,919 sent, 413 received.  \n> Applied edit to app.css\n\n#### next step\n")
    items = list(aider.read(path))
    assert not errors(items)
    first, second = calls(items)
    answers = _answers(items)
    assert answers[first.id].is_error
    assert answers[first.id].text.splitlines()[0] == "# 1 SEARCH/REPLACE block failed to match!"
    assert "lines in app.css" in answers[first.id].text
    assert second.args["edits"] == [[":root {\n  --b: 1px;\n}", ":root {\n  --a: purple;\n}"]]
    assert (answers[second.id].is_error, answers[second.id].text) == (False, "Applied edit to app.css")
    assert [t.text for t in items if isinstance(t, UserTurn)] == ["make it purple", "next step"]


_LINT = ("> Applied edit to {f}  \n> Commit 761ec31 fix: import Memgraph  \n>  \n"
         "> # Fix any errors below, if possible.  \n>  \n"
         "> ## Running: python3 -m flake8 --select=E9,F821 --show-source --isolated {f}  \n>  \n"
         "> {f}:30:16: F821 undefined name 'Memgraph'  \n> except Memgraph.ClientError as e:  \n>  \n"
         "> ## See relevant line below marked with █.  \n>  \n> {f}:  \n> ...⋮...  \n"
         "> 30█        except Memgraph.ClientError as e:  \n>  \n"
         "> Attempt to fix lint errors? (Y)es/(N)o [Yes]: {yes}  \n")
_WHOLE = "store.py\n```\nimport json\nfrom memgraph import Memgraph\n```\n\n> Tokens: 12k sent, 349 received.  \n"


def test_a_lint_report_after_an_edit_is_that_edits_failure_and_the_fix_a_reply_of_its_own(tmp_path):
    """aider lints each file it edited; errors are reported ("# Fix any errors below") and,
    when the person agrees, sent back to the model, whose fix (no `####` line) is a reply of
    its own. Each edit is answered by aider's "Applied edit" line and the lint report naming its
    file, as an error; a file the report does not name is applied."""
    path = tmp_path / "h.md"
    path.write_text("#### fix the import  \n\nHere it is.\n\n" + _WHOLE.replace("> Tokens", "config.py\n```\nX = 1\n```\n\n> Tokens")
                    + "> Applied edit to config.py  \n" + _LINT.format(f="store.py", yes="y")
                    + "\nThe import was missing.\n\n" + _WHOLE + _LINT.format(f="store.py", yes="y")
                    + "\nTry again.\n\n" + _WHOLE + _LINT.format(f="store.py", yes="n")
                    + "> You can use /undo to undo and discard each aider commit.  \n\n#### thanks  \n")
    items = list(aider.read(path))
    assert not errors(items)
    batches = [b for b in items if isinstance(b, Batch)]
    assert [[c.args["path"] for c in b.calls] for b in batches] == [["store.py", "config.py"], ["store.py"], ["store.py"]]
    assert [b.text.splitlines()[0] for b in batches] == ["Here it is.", "The import was missing.", "Try again."]
    answers = _answers(items)
    stores = [b.calls[0] for b in batches]
    for call in stores:
        a = answers[call.id]
        assert a.is_error and "Applied edit to store.py" in a.text
        assert "store.py:30:16: F821 undefined name 'Memgraph'" in a.text
    config = answers[batches[0].calls[1].id]
    assert (config.is_error, config.text) == (False, "Applied edit to config.py")
    assert [t.text for t in items if isinstance(t, UserTurn)] == ["fix the import", "thanks"]


def test_failed_tests_after_an_edit_are_its_failure(tmp_path):
    """--auto-test: aider runs the tests after applying the edits; their output goes to the
    terminal, the history keeps aider's words, and the model's fix is a reply of its own."""
    path = tmp_path / "h.md"
    path.write_text("#### add bar  \n\na.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```\n\n"
                    "> Tokens: 1k sent, 50 received.  \n> Applied edit to a.py  \n> Commit 1a2b3c4 feat: bar  \n"
                    "> Added 12 lines of output to the chat.  \n> Attempt to fix test errors? (Y)es/(N)o [Yes]: y  \n\n"
                    "The test expects 3.\n\na.py\n```python\n<<<<<<< SEARCH\nx = 2\n=======\nx = 3\n>>>>>>> REPLACE\n```\n\n"
                    "> Tokens: 1k sent, 40 received.  \n> Applied edit to a.py  \n")
    items = list(aider.read(path))
    first, second = calls(items)
    answers = _answers(items)
    assert answers[first.id].is_error and "Attempt to fix test errors?" in answers[first.id].text
    assert "Added 12 lines of output to the chat." in answers[first.id].text
    assert (answers[second.id].is_error, answers[second.id].text) == (False, "Applied edit to a.py")


def test_the_models_reply_after_files_it_asked_for_is_a_reply_of_its_own(tmp_path):
    """The model names files it needs; aider asks to add them ("Add file to the chat? y") and
    sends the model its request again with them: the edit that follows is a second reply."""
    path = tmp_path / "h.md"
    path.write_text("#### fix the bug  \n\nI need to see a.py.\n\n> Tokens: 1k sent, 20 received.  \n> a.py  \n"
                    "> Add file to the chat? (Y)es/(N)o/(D)on't ask again [Yes]: y  \n\n"
                    "Now I can fix it.\n\na.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```\n\n"
                    "> Tokens: 2k sent, 40 received.  \n> Applied edit to a.py  \n")
    items = list(aider.read(path))
    assert [type(i).__name__ for i in items if not isinstance(i, SessionStart)] == ["UserTurn", "Prose", "Batch", "Answers"]
    assert items[-2].text.startswith("Now I can fix it.")


def test_a_commit_message_of_several_lines_is_aiders_not_a_reply(tmp_path):
    """A weak model's commit message can run over many lines (a code fence in it); aider quotes
    its first line and writes the rest bare up to a line ended by "  ". It is neither the
    model's next reply nor does its fence swallow the lint report after it."""
    path = tmp_path / "h.md"
    path.write_text("#### fix it  \n\n" + _WHOLE.replace("12k", "17k")
                    + _LINT.format(f="store.py", yes="y").replace(
                        "> Commit 761ec31 fix: import Memgraph  \n",
                        '> Commit 4461fd3 ```json\n{\n  "response": "I can\'t assist with that request."\n}\n```  \n')
                    + "\nThe import was missing.\n\n" + _WHOLE + "> Applied edit to store.py  \n")
    items = list(aider.read(path))
    assert not errors(items)
    assert [type(i).__name__ for i in items if not isinstance(i, SessionStart)] == [
        "UserTurn", "Batch", "Answers", "Batch", "Answers"]
    first, second = calls(items)
    answers = _answers(items)
    assert answers[first.id].is_error and "F821" in answers[first.id].text
    assert not answers[second.id].is_error


def test_a_command_aider_quotes_over_two_lines_is_not_a_reply(tmp_path):
    """aider asks to run a reply's commands, quoting the first line of a two-line block and
    writing the second bare: the commands are the reply's, answered by their "Running" output,
    not a reply of their own."""
    path = tmp_path / "h.md"
    path.write_text("#### commit it  \n\nRun:\n\n```bash\ngit add a.py\ngit commit -m x\n```\n\n"
                    "> Tokens: 4.7k sent, 81 received.  \n> git add a.py \ngit commit -m x  \n"
                    "> Run shell commands? (Y)es/(N)o/(D)on't ask again [Yes]: y  \n"
                    "> Running git add a.py  \n> Running git commit -m x  \n"
                    "> Add command output to the chat? (Y)es/(N)o/(D)on't ask again [Yes]: n  \n")
    items = list(aider.read(path))
    assert [type(i).__name__ for i in items if not isinstance(i, SessionStart)] == ["UserTurn", "Batch", "Answers"]
    assert [c.args["command"] for c in calls(items)] == ["git add a.py", "git commit -m x"]


# Real histories (corpus_e, byte for byte as its SOURCES.md pins them; read where present):
# AFI-Protocol/afi-core (MIT) and Aquaticat/Monochromatic (Apache-2.0), `.aider.chat.history.md`.
_CORPUS_E = next((p for p in (Path(__file__).resolve().parent.parent.parent / "shared" / "corpus_e",
                              Path("/work/shared/corpus_e")) if p.is_dir()), None)


def _real(name: str) -> Path:
    path = (_CORPUS_E or Path("/absent")) / "aider-chat-history-md" / name
    if not path.is_file():
        pytest.skip(f"{name} is not here (../shared/corpus_e holds it where the lead placed it)")
    return path


def _edits_by_session(path: Path) -> dict[str, list[tuple[str, bool, str]]]:
    out: dict[str, list[tuple[str, bool, str]]] = {}
    for info, events, _ in sessions_of(aider.read(path), path):
        answers = {a.call_id: a for e in events if isinstance(e, Answers) for a in e.answers}
        out[info.key] = [(c.args["path"], answers[c.id].is_error, answers[c.id].text.splitlines()[0])
                         for e in events if isinstance(e, Batch) for c in e.calls if c.name == "edit"]
    return out


def test_real_failed_edits_are_failing_edit_calls_one_per_attempt():
    mono = _real("monochromatic.aider.chat.history.md")
    text = mono.read_text(encoding="utf-8")
    # counted with grep, not by the reader: 7 blocks failed to match in this history
    assert len(re.findall(r"(?m)^## SearchReplaceNoExactMatch", text)) == 7
    sessions = _edits_by_session(mono)
    failed = [e for s in sessions.values() for e in s if e[2] == "# 1 SEARCH/REPLACE block failed to match!"]
    assert len(failed) == 7 and all(is_error for _, is_error, _ in failed)
    # session 19: the CONVENTIONS.md block failed, the model re-sent it fixed, it failed again
    assert sessions["19"][:2] == [("CONVENTIONS.md", True, "# 1 SEARCH/REPLACE block failed to match!")] * 2
    # session 16: iterable.filter.ts failed twice, then its third attempt applied
    filt = [e for e in sessions["16"] if e[0].endswith("iterable.filter.ts")]
    assert [e[1] for e in filt[:3]] == [True, True, False]
    assert filt[2][2] == "Applied edit to packages\\module\\es\\src\\iterable.filter.ts"


def test_real_partial_failure_answers_each_file_for_itself():
    afi = _real("afi-core.aider.chat.history.md")
    edits = _edits_by_session(afi)["6"]
    # the reply at line 1019: validator_invoker.ts failed, the test file's two blocks applied;
    # the fixed block is the next reply's own call, applied
    at = edits.index(("cli_hooks/validator_invoker.ts", True, "# 1 SEARCH/REPLACE block failed to match!"))
    assert edits[at + 1] == ("tests/poi_validator.test.ts", False,
                             "The other 2 SEARCH/REPLACE blocks were applied successfully.")
    assert edits[at + 2] == ("cli_hooks/validator_invoker.ts", False, "Applied edit to cli_hooks/validator_invoker.ts")


# Real histories (corpus_i, labelled for issue 35; its README lists them with repository, commit and
# sha256; the repositories carry no licence, so the files are restored locally and never committed).
_CORPUS_I = Path(__file__).resolve().parent.parent / "corpus_i" / "aider-chat-history-md"


def _labelled(name: str) -> Path:
    path = _CORPUS_I / name
    if not path.is_file():
        pytest.skip(f"{name} is not here (corpus_i/SOURCES.md says how to restore it)")
    return path


def _session(path: Path, key: str) -> list[tuple[str, str, bool | None, str]]:
    """(tool, path or command, answered as an error, the answer) of each call of session `key`."""
    for info, events, _ in sessions_of(aider.read(path), path):
        if info.key == key:
            answers = {a.call_id: a for e in events if isinstance(e, Answers) for a in e.answers}
            return [(c.name, c.args.get("path") or c.args.get("command") or "",
                     answers[c.id].is_error if c.id in answers else None,
                     answers[c.id].text if c.id in answers else "")
                    for e in events if isinstance(e, Batch) for c in e.calls]
    raise AssertionError(f"no session {key} in {path.name}")


def test_real_sessions_are_keyed_as_aider_starts_them():
    """aider writes a blank line before each "# aider chat started at" line, so a history file
    begins with one: session N is the one its Nth start line opens."""
    for name in ("inversity-snapswap.aider.chat.history.md", "pdf-ingestion.aider.chat.history.md"):
        path = _labelled(name)
        text = path.read_text(encoding="utf-8")
        assert text.startswith("\n")
        starts = [n for n, line in enumerate(text.splitlines(), 1) if line.startswith("# aider chat started at ")]
        got = [(i.info.key, i.line) for i in aider.read(path) if isinstance(i, SessionStart)]
        assert got == [(str(k), line) for k, line in enumerate(starts, 1)]


def test_real_re_sent_blocks_are_one_failing_edit_per_attempt():
    """inversity-snapswap, aider's 36th session (labels.csv: stats.py's 37, loop 8-10): the
    119-line block for client/src/App.js fails to match three times, once per reply."""
    path = _labelled("inversity-snapswap.aider.chat.history.md")
    text = path.read_text(encoding="utf-8").splitlines()
    starts = [n for n, line in enumerate(text) if line.startswith("# aider chat started at ")]
    session = text[starts[35]:starts[36]]
    assert sum(line.startswith("> # 1 SEARCH/REPLACE block failed to match!") for line in session) == 3
    edits = [c for c in _session(path, "36") if c[0] == "edit"]
    failing = [c for c in edits if c[2]]
    assert [(c[1], c[3].splitlines()[0]) for c in failing] == [
        ("client/src/App.js", "# 1 SEARCH/REPLACE block failed to match!")] * 3
    assert edits[-3:] == failing


def test_real_quoted_failure_message_does_not_swallow_the_session():
    """brejlator (aider 0.50) quotes its failure message line by line: the model's retry is an
    edit of its own, and the session goes on (its 21 replies with edits, counted by hand)."""
    path = _labelled("brejlator.aider.chat.history.md")
    calls = _session(path, "1")
    assert calls[0][:3] == ("edit", "app/styles/app.css", True)
    assert calls[1][:3] == ("edit", "app/styles/app.css", False)
    assert len([c for c in calls if c[0] == "edit"]) >= 21


def test_real_lint_reflections_are_failing_edits_each():
    """pdf-ingestion, aider's 30th session (labels.csv: stats.py's 31, loop 3-5): after each of
    three edits of store.py flake8 reports the same undefined name; each reply is an edit
    answered by that report as an error; config.py, which the report does not name, applied."""
    path = _labelled("pdf-ingestion.aider.chat.history.md")
    calls = _session(path, "30")
    assert [(c[0], c[1], c[2]) for c in calls] == [("edit", "src/pdf_ingestion/store.py", True),
                                                    ("edit", "src/core/config.py", False)] + [
        ("edit", "src/pdf_ingestion/store.py", True)] * 3
    assert all("F821 undefined name 'Memgraph'" in c[3] for c in calls if c[2])
