"""Aider, every edit format: diff, diff-fenced, udiff, whole and architect mode (editor-diff /
editor-whole) give one `edit` call per file per reply, with aider's "Applied edit to F" lines as
the ground truth; "Running CMD" output answers `run` calls; rate-limit retries are Retry events."""

from __future__ import annotations

from pathlib import Path

from loopledger.events import Answers, Batch, Prose, Retry, UserTurn
from loopledger.formats import aider, sniff

HEAD = ("# aider chat started at 2026-03-02 10:00:00\n\n"
        "> aider --model sonnet --edit-format {fmt} src/app.py  \n> Aider v0.86.1  \n"
        "> Main model: anthropic/claude-sonnet-4-20250514 with {fmt} edit format  \n"
        "> Added src/app.py to the chat.  \n\n")


def read(tmp_path: Path, fmt: str, body: str) -> list:
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(HEAD.format(fmt=fmt) + body)
    assert sniff(path) == "aider"
    return list(aider.read(path))


def calls(items: list) -> list:
    return [c for i in items if isinstance(i, Batch) for c in i.calls]


def answers(items: list) -> dict:
    return {a.call_id: a for i in items if isinstance(i, Answers) for a in i.answers}


def test_diff_fenced_names_the_file_inside_the_fence(tmp_path):
    items = read(tmp_path, "diff-fenced", (
        "#### log the port on startup  \n\n"
        "```python\nsrc/app.py\n<<<<<<< SEARCH\napp.run()\n=======\nprint(PORT)\napp.run()\n>>>>>>> REPLACE\n```\n\n"
        "```python\nsrc/app.py\n<<<<<<< SEARCH\nimport os\n=======\nimport os\nPORT = 8080\n>>>>>>> REPLACE\n```\n\n"
        "> Tokens: 1.9k sent, 80 received.  \n> Applied edit to src/app.py  \n> Applied edit to src/app.py  \n"))
    (edit,) = calls(items)
    assert edit.name == "edit" and edit.args["path"] == "src/app.py" and len(edit.args["edits"]) == 2
    assert not answers(items)[edit.id].is_error


def test_udiff_one_call_per_file_with_its_hunks(tmp_path):
    items = read(tmp_path, "udiff", (
        "#### rename total to subtotal  \n\n"
        "```diff\n--- src/app.py\n+++ src/app.py\n@@ ... @@\n def checkout(cart):\n-    total = sum(cart)\n-    return total\n"
        "+    subtotal = sum(cart)\n+    return subtotal\n```\n\n"
        "```diff\n--- tests/test_app.py\n+++ tests/test_app.py\n@@ ... @@\n-    assert checkout([1]) == 1\n"
        "+    assert checkout([1, 2]) == 3\n@@ ... @@\n-from app import total\n+from app import checkout\n```\n\n"
        "> Tokens: 2.2k sent, 120 received.  \n> Applied edit to src/app.py  \n> Applied edit to tests/test_app.py  \n"))
    app, test = calls(items)
    assert app.args["path"] == "src/app.py" and app.args["edits"] == [
        ["def checkout(cart):\n    total = sum(cart)\n    return total",
         "def checkout(cart):\n    subtotal = sum(cart)\n    return subtotal"]]
    assert test.args["path"] == "tests/test_app.py" and len(test.args["edits"]) == 2
    assert [answers(items)[c.id].text for c in (app, test)] == [
        "Applied edit to src/app.py", "Applied edit to tests/test_app.py"]


def test_whole_file_listing_counts_where_aider_applied_it(tmp_path):
    items = read(tmp_path, "whole", (
        "#### add a /ping route  \n\nHere is the updated file:\n\n"
        "src/app.py\n```python\nfrom flask import Flask\n\napp = Flask(__name__)\n\n\n@app.get(\"/ping\")\n"
        "def ping():\n    return \"pong\"\n```\n\n"
        "And an example of calling it:\n\n```python\nrequests.get(\"http://localhost:8080/ping\")\n```\n\n"
        "> Tokens: 1.1k sent, 70 received.  \n> Applied edit to src/app.py  \n"))
    (edit,) = calls(items)  # the example snippet was not applied: not an edit
    assert edit.args["path"] == "src/app.py" and "def ping" in edit.args["content"]
    assert answers(items)[edit.id].text == "Applied edit to src/app.py"


def test_an_edit_shown_but_not_applied_is_an_error(tmp_path):
    items = read(tmp_path, "diff", (
        "#### fix both files  \n\n"
        "src/app.py\n```python\n<<<<<<< SEARCH\na = 1\n=======\na = 2\n>>>>>>> REPLACE\n```\n\n"
        "src/db.py\n```python\n<<<<<<< SEARCH\nb = 1\n=======\nb = 2\n>>>>>>> REPLACE\n```\n\n"
        "> Tokens: 1.5k sent, 60 received.  \n> Applied edit to src/app.py  \n"))
    app, db = calls(items)
    got = answers(items)
    assert not got[app.id].is_error
    assert got[db.id].is_error and "src/db.py" in got[db.id].text


def test_failure_naming_one_file_errors_that_file_only(tmp_path):
    items = read(tmp_path, "diff", (
        "#### fix both files  \n\n"
        "src/app.py\n```python\n<<<<<<< SEARCH\na = 1\n=======\na = 2\n>>>>>>> REPLACE\n```\n\n"
        "src/db.py\n```python\n<<<<<<< SEARCH\nb = 9\n=======\nb = 2\n>>>>>>> REPLACE\n```\n\n"
        "> Tokens: 1.5k sent, 60 received.  \n> # 1 SEARCH/REPLACE block failed to match!  \n>  \n"
        "> ## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in src/db.py  \n"
        "> # The other 1 SEARCH/REPLACE block were applied successfully.  \n> Applied edit to src/app.py  \n"))
    app, db = calls(items)
    got = answers(items)
    assert got[db.id].is_error and "SearchReplaceNoExactMatch" in got[db.id].text
    assert not got[app.id].is_error and got[app.id].text == "Applied edit to src/app.py"


def test_architect_mode_editor_reply_is_its_own_batch_not_a_person(tmp_path):
    plan = ("Change `greet` in src/app.py to take a `name` argument and use it in the message.")
    items = read(tmp_path, "architect", (
        "#### make the greeting configurable  \n\n" + plan + "\n\n"
        "> Tokens: 1.2k sent, 40 received.  \n> Edit the files? (Y)es/(N)o [Yes]: y  \n\n"
        "#### " + plan + "  \n\n"
        "src/app.py\n```python\n<<<<<<< SEARCH\ndef greet():\n    return \"hi\"\n=======\ndef greet(name):\n"
        "    return f\"hi {name}\"\n>>>>>>> REPLACE\n```\n\n"
        "> Tokens: 2.0k sent, 50 received.  \n> Applied edit to src/app.py  \n"
        "> Commit 5e1d2c3 feat: configurable greeting  \n"))
    assert [i.text for i in items if isinstance(i, UserTurn)] == ["make the greeting configurable"]
    assert isinstance(next(i for i in items if isinstance(i, Prose | Batch)), Prose)  # the architect's plan
    (edit,) = calls(items)
    assert edit.args["path"] == "src/app.py" and not answers(items)[edit.id].is_error


def test_architect_with_editor_whole(tmp_path):
    plan = "Replace the body of src/app.py with a main() that prints the version."
    items = read(tmp_path, "architect", (
        "#### print the version  \n\n" + plan + "\n\n> Tokens: 900 sent, 30 received.  \n\n"
        "#### " + plan + "  \n\nsrc/app.py\n```python\ndef main():\n    print(\"1.2.0\")\n```\n\n"
        "> Tokens: 1.0k sent, 20 received.  \n> Applied edit to src/app.py  \n"))
    (edit,) = calls(items)
    assert edit.args == {"path": "src/app.py", "content": "def main():\n    print(\"1.2.0\")"}
    assert [i.text for i in items if isinstance(i, UserTurn)] == ["print the version"]


def test_running_commands_are_run_calls_with_their_output(tmp_path):
    items = read(tmp_path, "diff", (
        "#### run the tests  \n\nRun them with:\n\n```bash\npytest -q\nruff check .\n```\n\n"
        "> Tokens: 800 sent, 20 received.  \n> pytest -q  \n> ruff check .  \n"
        "> Run shell commands? (Y)es/(N)o/(D)on't ask again [Yes]: y  \n>  \n> Running pytest -q  \n"
        "> F.                                                                       [100%]  \n"
        "> FAILED tests/test_app.py::test_ping - AssertionError  \n>  \n> Running ruff check .  \n"
        "> All checks passed!  \n> Add command output to the chat? (Y)es/(N)o/(D)on't ask again [Yes]: n  \n"))
    pytest_call, ruff_call = calls(items)
    assert (pytest_call.name, pytest_call.args) == ("run", {"command": "pytest -q"})
    assert ruff_call.args == {"command": "ruff check ."}
    got = answers(items)
    assert "FAILED tests/test_app.py::test_ping" in got[pytest_call.id].text
    assert got[ruff_call.id].text == "All checks passed!"


def test_rate_limit_retries_are_events_not_calls(tmp_path):
    items = read(tmp_path, "diff", (
        "#### add a docstring  \n\n"
        "> litellm.RateLimitError: AnthropicException - rate_limit_error: Number of request tokens has exceeded your per-minute rate limit  \n"
        "> The API provider has rate limited you. Try again later or check your quotas.  \n"
        "> Retrying in 0.2 seconds...  \n"
        "> litellm.RateLimitError: AnthropicException - rate_limit_error  \n"
        "> The API provider has rate limited you. Try again later or check your quotas.  \n"
        "> Retrying in 0.5 seconds...  \n\n"
        "src/app.py\n```python\n<<<<<<< SEARCH\ndef ping():\n=======\ndef ping():\n    \"\"\"Health check.\"\"\"\n>>>>>>> REPLACE\n```\n\n"
        "> Tokens: 1.0k sent, 30 received.  \n> Applied edit to src/app.py  \n"))
    kinds = [type(i).__name__ for i in items]
    assert kinds == ["SessionStart", "UserTurn", "Retry", "Retry", "Batch", "Answers"]
    retries = [i for i in items if isinstance(i, Retry)]
    assert retries[0].text.startswith("The API provider has rate limited you") or "RateLimitError" in retries[0].text
    assert retries[0].text.endswith("Retrying in 0.2 seconds...")
    assert [c.name for c in calls(items)] == ["edit"]


def test_architect_plan_written_as_diffs_is_not_an_edit(tmp_path):
    """An architect that writes its plan as diffs: aider hands them to the editor model, which
    writes the edits aider applies. The plan's diffs are not edits (nor failed ones); the
    editor's are, one per file."""
    plan = ("Change the greeting:\n\n```diff\n--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1 @@\n"
            "-print('hi')\n+print('hello')\n```")
    items = read(tmp_path, "architect", (
        "#### make the greeting longer  \n\n" + plan + "\n\n"
        "> Tokens: 1.2k sent, 40 received.  \n> Edit the files? (Y)es/(N)o [Yes]: y  \n\n"
        + "".join(f"#### {line}  \n" for line in plan.splitlines()) + "\n"
        "src/app.py\n```python\n<<<<<<< SEARCH\nprint('hi')\n=======\nprint('hello')\n>>>>>>> REPLACE\n```\n\n"
        "> Tokens: 1.5k sent, 30 received.  \n> Applied edit to src/app.py  \n"))
    (edit,) = calls(items)
    assert edit.args == {"path": "src/app.py", "edits": [["print('hi')", "print('hello')"]]}
    assert not answers(items)[edit.id].is_error
