"""Loop positions a labelled set counted with its own reader (the released sets' stats.py),
moved onto our readers' calls by aligning the two call lists (bench.label_positions), and used by
bench.detection_scores.labelled_sessions where the set holds a stats.py."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from loopledger.events import Batch

from bench.detection_scores import labelled_sessions
from bench.label_positions import align, map_span
from tests.conftest import ROOT

RELEASED = next((p for p in (ROOT.parent / "shared" / "released", Path("/work/shared/released")) if p.is_dir()), None)


def k(name: str, arg: str = "") -> tuple[str, str]:
    return (name, f'{{"command": "{arg}"}}')


def test_the_same_calls_keep_their_positions():
    calls = [k("bash", "ls"), k("bash", "ls"), k("read", "a")]
    assert map_span(calls, list(calls), 2, 3) == (2, 3)


def test_calls_only_we_count_inside_a_loop_stay_inside_it():
    """Our reader adds a harness_error call where the harness refused a reply; stats.py does not."""
    theirs = [k("bash", "ls"), k("bash", "cd x"), k("bash", "cd x"), k("bash", "cd x"), k("bash", "pwd")]
    ours = [k("bash", "ls"), k("bash", "cd x"), ("harness_error", "{}"), k("bash", "cd x"),
            ("harness_error", "{}"), k("bash", "cd x"), k("bash", "pwd")]
    assert align(theirs, ours) == [0, 1, 3, 5, 6]
    assert map_span(theirs, ours, 2, 4) == (2, 6)
    assert map_span(theirs, ours, 5, 5) == (7, 7)


def test_calls_whose_arguments_we_read_otherwise_align_by_name():
    theirs = [("view", '{"path": "a"}'), ("edit", '{"path": "a"}'), ("bash", '{"command": "make"}')]
    ours = [("view", '{"path": "a", "range": null}'), ("edit", '{"path": "a", "edits": [["x", "y"]]}'),
            ("bash", '{"command": "make"}')]
    assert align(theirs, ours) == [0, 1, 2]
    assert map_span(theirs, ours, 2, 2) == (2, 2)


def test_a_loop_to_their_last_call_runs_to_ours_and_one_from_their_first_starts_at_ours():
    theirs = [k("bash", "exit"), k("bash", "exit")]
    ours = [("harness_error", "{}"), k("bash", "exit"), ("harness_error", "{}"), k("bash", "exit"),
            ("harness_error", "{}"), ("harness_error", "{}")]
    assert map_span(theirs, ours, 1, 2) == (1, 6)
    assert map_span(theirs, ours, 2, 2) == (4, 6)


def test_call_ids_both_readers_kept_anchor_calls_whose_name_and_arguments_all_match():
    """A tau-bench fork logs each call twice under its id: stats.py keeps one per id, our reader
    both. Twenty identical `think` calls say nothing about which is which; their ids do."""
    theirs = [k("think", "x")] * 4
    ours = [k("think", "x")] * 8
    ids = ["c1", "c2", "c3", "c4"]
    assert map_span(theirs, ours, 2, 3, ids, [i for i in ids for _ in (0, 1)]) == (3, 6)
    assert map_span(theirs, ours, 2, 3) == (2, 3)  # without ids: the first of ours


def test_a_call_of_theirs_we_do_not_have_maps_between_its_neighbours():
    theirs = [k("bash", "a"), k("bash", "b"), k("bash", "c"), k("bash", "d")]
    ours = [k("bash", "a"), k("grep", "x"), k("bash", "d")]
    # their b and c have no partner: the span starts after a's partner, ends before d's
    assert map_span(theirs, ours, 2, 3) == (2, 2)
    assert map_span(theirs, ours, 2, 4) == (2, 3)
    assert map_span(theirs, [], 1, 2) is None


STATS = '''
class S:
    def __init__(self, key, calls):
        self.key, self.calls = key, calls
def load(path):
    # what the released stats.py (corpus_ho1) reads in h.md, as `stats.py --calls h.md` prints it:
    # the edit aider applied, an "edit" of the failure message's heading line, the shell block
    return "aider", [S("1", [("edit", '{"path": "app.py"}'),
                             ("edit", '{"path": "## SearchReplaceNoExactMatch: This SEARCH block failed to exactly '
                                      'match lines in app.py"}'),
                             ("shell", '{"command": "pytest"}')])]
'''
FAILED = ("> # 1 SEARCH/REPLACE block failed to match!\n\n"
          "## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in app.py\n"
          "<<<<<<< SEARCH\ndef foo():\n=======\ndef bar():\n>>>>>>> REPLACE\n\n"
          "The SEARCH section must exactly match an existing block of lines including all white space, "
          "comments, indentation, docstrings, etc  \n")
ATTEMPT = "app.py\n```python\n<<<<<<< SEARCH\ndef foo():\n=======\ndef bar():\n>>>>>>> REPLACE\n```\n\n"


def test_labelled_sessions_moves_a_stats_py_span_onto_our_calls(tmp_path):
    """stats.py reads a block re-sent three times after failing to match as two edits; our aider
    reader as four attempts. The label 1-2 (stats.py's two) covers all four of ours, and the
    shell command after them (stats.py's `shell`, our `run`) stays out."""
    (tmp_path / "stats.py").write_text(STATS)
    (tmp_path / "h.md").write_text("# aider chat started at 2026-01-01 10:00:00\n\n#### rename foo  \n\n"
                                   + (ATTEMPT + FAILED) * 3 + ATTEMPT + "> Applied edit to app.py  \n\n"
                                   "#### run the tests  \n\n```bash\npytest\n```\n\n")
    with open(tmp_path / "labels.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["file", "session_key", "label", "loop_calls", "reason"])
        w.writerow(["h.md", "1", "loop", "1-2", "the same block re-sent"])
    (s,) = labelled_sessions(tmp_path)
    names = [c.name for e in s.events if isinstance(e, Batch) for c in e.calls]
    assert names == ["edit"] * 4 + ["run"]
    assert (s.key, s.first, s.last) == ("1", 1, 4)


def test_without_a_stats_py_positions_and_keys_are_as_written(tmp_path):
    (tmp_path / "h.md").write_text("#### go  \n\n" + ATTEMPT + "> Applied edit to app.py  \n")
    with open(tmp_path / "labels.csv", "w", newline="") as f:
        csv.writer(f).writerows([["file", "session_key", "label", "loop_calls", "reason"],
                                 ["h.md", "1", "loop", "1-1", "x"], ["h.md", "0", "normal", "", "x"]])
    got = [(s.key, s.first, s.last) for s in labelled_sessions(tmp_path)]
    assert got == [("1", 1, 1)]  # key "0" names no session of ours: no stats.py to say it is that one


def _released(name: str) -> Path:
    folder = (RELEASED or Path("/absent")) / name
    if not (folder / "stats.py").is_file():
        pytest.skip(f"{name} is not here (../shared/released)")
    return folder


def test_released_format_error_loop_runs_to_our_last_call():
    """corpus_ho4: gemma3 on astropy-12907, labelled 3-9 of stats.py's 9 bash calls; our reader
    reads the ~240 replies mini-swe-agent refused between and after them as harness_error calls,
    so the loop is ours from the same third call to our last."""
    folder = _released("corpus_ho4")
    rel = "mini-swe-agent-traj/gemma3-4b-astropy-12907-cd-exit-format-error-loop.traj.json"
    if not (folder / rel).is_file():
        pytest.skip(f"{rel} is not restored here")
    (s,) = [s for s in labelled_sessions(folder) if s.file == rel]
    calls = [c for e in s.events if isinstance(e, Batch) for c in e.calls]
    assert s.first == 3 and calls[2].args["command"].startswith("cd astropy/modeling/separable")
    assert s.last == len(calls) and calls[-1].name == "harness_error"


def test_released_single_session_files_keyed_0_are_found():
    """stats.py keys a Cline ui_messages.json or a single tau2 simulation "0"; our readers key
    them by the task (folder or file) and by task id: each is the one session of its file."""
    for name, rel in (("corpus_ho1", "cline/cline-xray-ui_messages.json"),
                      ("corpus_ho5", "tau2-bench-sim/codesque16-gpt41mini-task99-order-details-x4-loop.json")):
        folder = _released(name)
        if not (folder / rel).is_file():
            pytest.skip(f"{rel} is not restored here")
        (s,) = [s for s in labelled_sessions(folder) if s.file == rel]
        assert s.key == "0"
        assert sum(len(e.calls) for e in s.events if isinstance(e, Batch)) > 0


def test_released_sources_group_sessions_by_repository():
    """The released SOURCES.md name a file in a `local name` column (the other sets: `file`);
    cross-validation holds out a repository, not a file."""
    from bench.detection_scores import source_groups

    groups = source_groups(_released("corpus_ho1"))
    assert groups["claude-code-md-export/brain_explore-agent-bfa52189-bashoutput-poll.md"] == "goodsch/brain_explore"
    assert groups["cline/cline-xray-ui_messages.json"] == "CoreGems/Cline-Xray"


def e(path: str, edits: str = "") -> tuple[str, str]:
    """An edit as stats.py's aider reader writes it ({"path"}), or as ours does (with the edits)."""
    return ("edit", f'{{"path": "{path}"}}' if not edits else f'{{"edits": [["{edits}", "x"]], "path": "{path}"}}')


def test_edits_and_commands_compare_as_stats_py_writes_them():
    """stats.py writes an aider edit as {"path"}, a command as `shell`, and a reply's commands
    before its edits; ours keeps the edits, names the command `run` and lists a reply's edits
    first (aider applies them first). Its loop of three failing edits (2-4, after the reply's
    `npm install`) is our 1-4: the first reply's failing edit, its command, the two retries."""
    theirs = [("shell", '{"command": "npm install"}'), e("App.js"), e("App.js"), e("App.js")]
    ours = [e("App.js", "a"), ("run", '{"command": "npm install"}'), e("App.js", "b"), e("App.js", "c")]
    assert map_span(theirs, ours, 2, 4, None, None, [None, True, True, True], [True, None, True, True],
                    [0, 0, 1, 2]) == (1, 4)


def test_outcomes_keep_a_run_of_one_edit_from_sliding():
    """The same edit of one file four times, the first two applied, the last two failing: with
    one applied edit more on our side, their failing 2-3 are our failing 3-4 (name and path
    alone would align them with our first three)."""
    theirs = [e("a.py"), e("a.py"), e("a.py")]
    ours = [e("a.py", "1"), e("a.py", "2"), e("a.py", "3"), e("a.py", "3")]
    assert map_span(theirs, ours, 2, 3, None, None, [False, True, True], [False, False, True, True]) == (3, 4)
    assert map_span(theirs, ours, 2, 3)[0] == 2  # without outcomes: from our second, applied edit


STATS_BLANK_FIRST = '''
class S:
    def __init__(self, key, calls, results):
        self.key, self.calls, self.results = key, calls, results
def load(path):
    # the corpus_i stats.py on a history that starts with a blank line (as aider writes one):
    # the line before the first start line is a session "1" of its own, aider's two are "2", "3"
    edit = ("edit", '{"path": "app.py"}')
    failed = "failed: # 1 SEARCH/REPLACE block failed to match!"
    return "aider", [S("1", [], []), S("2", [edit], ["applied"]), S("3", [edit] * 4, [failed] * 3 + ["applied"])]
'''


def test_a_stats_py_key_one_past_aiders_names_the_session_aider_started(tmp_path):
    """corpus_i's stats.py keys the sessions of a history that begins with a blank line (aider
    writes one before each start line) from 2: its key 3 is aider's second session, ours "2"."""
    (tmp_path / "stats.py").write_text(STATS_BLANK_FIRST)
    (tmp_path / "h.md").write_text("\n# aider chat started at 2026-01-01 10:00:00\n\n#### rename foo  \n\n"
                                   + ATTEMPT + "> Applied edit to app.py  \n"
                                   "\n# aider chat started at 2026-01-01 11:00:00\n\n#### rename foo again  \n\n"
                                   + (ATTEMPT + FAILED) * 3 + ATTEMPT + "> Applied edit to app.py  \n")
    with open(tmp_path / "labels.csv", "w", newline="") as f:
        csv.writer(f).writerows([["file", "session_key", "label", "loop_calls", "reason"],
                                 ["h.md", "3", "loop", "1-3", "the same block re-sent"]])
    (s,) = labelled_sessions(tmp_path)
    assert (s.key, s.first, s.last) == ("3", 1, 3)
    assert [c.name for ev in s.events if isinstance(ev, Batch) for c in ev.calls] == ["edit"] * 4
