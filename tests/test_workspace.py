"""What a call does to the workspace, told from its arguments (loopledger.detectors.workspace):
reads only, changes files, or unknown; how long it sleeps; the program its last stage runs."""

from __future__ import annotations

import pytest
from loopledger.detectors.workspace import classify, classify_shell, last_program, reads_only, sleeps, writes


@pytest.mark.parametrize(("name", "args", "reads"), [
    ("str_replace_editor", {"command": "view", "path": "/w/parser.c"}, True),  # OpenHands
    ("str_replace_editor", {"command": "str_replace", "path": "/w/parser.c"}, False),
    ("execute_bash", {"command": 'grep -n "DEF(pattern);" /w/parser.c'}, True),  # ; inside quotes
    ("bash", {"command": "sed -n '220,260p' ./pvlib/pvsystem.py"}, True),
    ("bash", {"command": "sed -i 's/a/b/' x.py"}, False),
    ("bash", {"command": "cat > fix.py << 'EOF'\nprint(1)\nEOF"}, False),  # a write that starts with cat
    ("bash", {"command": "cat a.py && python a.py"}, False),
    ("bash", {"command": "grep -rn foo src | head -20"}, True),
    ("bash", {"command": "grep foo src 2>/dev/null"}, True),
    ("bash", {"command": "grep foo src > hits.txt"}, False),
    ("bash", {"command": "git diff -- a.py"}, True),
    ("bash", {"command": "git commit -am x"}, False),
    ("bash", {"command": "find . -name '*.pyc' -delete"}, False),
    ("bash", {"command": "tail -n 20 build.log"}, False),  # how agents poll a log
    ("shell", {"command": ["bash", "-lc", "cat setup.py"]}, True),  # Codex
    ("Read", {"file_path": "/w/a.py"}, False),  # a name alone does not say what it reads
    ("get_workflow_run", {"run_id": 1}, False),
    ("bash", {"command": "cat 'unbalanced"}, False),
])
def test_a_call_reads_only_when_its_arguments_say_so(name, args, reads):
    assert reads_only(name, args) is reads


@pytest.mark.parametrize("command", [
    "cat a >& out.txt",  # >& FILE sends both streams into a file
    "sed -n 'w out' a",  # sed's w command writes a file
    "sed -ni p a",  # -i inside a cluster of short options
    "find . -name x -fprintf out %p",
    "git diff --output=p",
    "git grep -Ovim foo",  # runs a pager program on the hits
    "rg --pre ./x.sh foo",  # runs ./x.sh on every file
    "tree -o listing.txt",
    "cat `ls *.py`",  # a command substitution runs something: not vouched for
    "cat $(find . -name x)",
    "cat a; rm a",  # chained
    "sed -n -i 1p a",
    "sed -n --in-place 1p a",
])
def test_a_reading_program_told_to_write_or_run_something_is_not_a_read(command):
    assert not reads_only("bash", {"command": command})


@pytest.mark.parametrize("command", ["cat a 2>&1", "sed -n '220,260p' a", "sed -n '/def f/p' a",
                                     "git diff HEAD~1", "rg -n foo src | head -5", "find . -name '*.py'"])
def test_reads_stay_reads(command):
    assert reads_only("bash", {"command": command})


@pytest.mark.parametrize("name,args,wrote", [
    ("bash", {"command": "cat > fix.py << 'EOF'\nx = 1\nEOF"}, True),
    ("bash", {"command": "sed -i 's/a/b/' src/x.py"}, True),
    ("bash", {"command": "cd /repo && git checkout -- src"}, True),
    ("bash", {"command": "cat a >& out.txt"}, True),
    ("Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y"}, True),
    ("str_replace_editor", {"command": "str_replace", "path": "a.py", "old_str": "x", "new_str": "y"}, True),
    ("Write", {"file_path": "a.py", "content": "x"}, True),
    ("bash", {"command": "pytest -q"}, False),
    ("bash", {"command": "npm start > /dev/null 2>&1 &"}, False),
    ("think", {"thought": "the amount does not add up"}, False),
    ("send_message", {"content": "hello"}, False),  # content without a path is not a file
])
def test_a_write_is_told_by_its_arguments(name, args, wrote):
    assert writes(name, args) is wrote


@pytest.mark.parametrize("command,reads,wrote", [
    ("sed -n -e 1,5p a", True, False),
    ("sed -n --expression=1,5p a", True, False),
    ("sed -nE '/x/p' a", True, False),
    ("sed -n -e 1p -e 'w x' a", False, False),
    ("sed 1,5p a", False, False),  # without -n sed prints every line: not vouched for
    ("sed -n -f script.sed a", False, False),
    ("sed -n", False, False),
    ("sed -n 's/a/b/p' a", False, False),  # only printing commands are vouched for
    ("sed -i.bak s/a/b/ f", False, True),
    ("perl -pi -e s/a/b/ f", False, True),
    ("perl -ne print f", False, False),
    ("tee out.txt", False, True),
    ("cp a b", False, True),
    ("/bin/rm -f a", False, True),
    ("git apply x.patch", False, True),
    ("git log --output=x", False, True),
    ("find . -name '*.pyc' -delete", False, True),
    ("git status", True, False),
    ("git", False, False),
    ("cat a > /dev/null", True, False),
    ("cat a >> out", False, True),
    ("cat a &> log", False, True),
    ("grep x a >&2", True, False),
    ("echo 'unbalanced", False, False),
    ("", False, False),
    ("ls -la", False, False),
    # SWE-agent's searches read; its viewer moves (open, goto, scroll) change what later commands answer
    ('search_file "withArray(String)"', True, False),
    ('search_dir "withObject(String)"\nsearch_dir "withArray(String)"', True, False),
    ('find_file "JsonNode.java"', True, False),
    ("open src/JsonNode.java", False, False),
    ("goto 1260", False, False),
    ("scroll_down", False, False),
])
def test_shell_commands_are_classified_by_what_they_do(command, reads, wrote):
    assert classify_shell(command) == (reads, wrote)


@pytest.mark.parametrize("args,expected", [
    ({"command": "view", "path": "a.py"}, (True, False)),
    ({"command": "create", "path": "a.py"}, (False, True)),
    ({"cmd": ["cat", "x"]}, (True, False)),
    ({"command": ["bash", "-lc", "cat x"]}, (True, False)),
    ({"command": ["bash", "-lc", "cat x > y"]}, (False, True)),
    ({"input": "*** Begin Patch\n*** Update File: a.py\n"}, (False, True)),
    ({"path": "a.py"}, (False, False)),
    (["cat", "x"], (False, False)),
    (None, (False, False)),
])
def test_a_call_is_classified_by_its_arguments(args, expected):
    assert classify("tool", args) == expected


@pytest.mark.parametrize("command,reads", [
    ("sed -n -e", False),  # -e without its script
    ("sed -n --expression='/a=b/p' f", True),  # the script is everything after the first =
    ("sed -n -e 1p -e '$p' f", True),
    ("/usr/bin/cat a", True),  # a program named by its path
    ("./bin/grep x a", True),
    ("find -exec grep x {} +", False),
    ("find . -execdir cat {} +", False),
    ("git grep --open-files-in-pager=vim foo", False),
    ("rg --pre=./x.sh foo", False),
])
def test_reads_are_told_by_every_option(command, reads):
    assert reads_only("bash", {"command": command}) is reads


@pytest.mark.parametrize("command", ["tree -o out.txt", "tree -oout.txt", "file -C -m magic",
                                     "file --compile -m magic", "git log --output=x",
                                     "find . -fprint0 out", "find . -fls out"])
def test_options_that_write_files_are_writes(command):
    assert classify_shell(command) == (False, True)


@pytest.mark.parametrize("command,reads", [
    ("sed 1p main.py", False),  # an "n" in a file name is not -n
    ("sed -E 1p a", False),  # another option is not -n
    ("sed --expression=1p a", False),  # a long option holding an n is not -n
    ("sed '1,5p' -n a", True),  # the script first, the option after
    ("sed -n -f p a", False),  # a script file, whatever its name
    ("sed -n --file=x p", False),
    ("cat a |", False),  # an empty stage
    ("cat a | python x.py", False),  # every stage must read
    ("cat a && cat b", False),  # chained
])
def test_sed_and_pipelines_edge_cases(command, reads):
    assert reads_only("bash", {"command": command}) is reads


@pytest.mark.parametrize("command", ["find -fls out", "git stash"])
def test_short_writes(command):
    assert classify_shell(command) == (False, True)


def test_every_sed_script_given_by_a_long_expression_option_must_only_print():
    # `--expression S` is `-e S`: a later `-e p` does not make a script that writes a copy a read.
    assert classify_shell("sed -n --expression '1w copy.txt' -e p notes.txt")[0] is False
    assert classify_shell("sed -n --expression 1p -e 2p notes.txt") == (True, False)
    # one word to the shell, one script to sed: `1,3w` writes lines 1-3 to copy.txt, whatever
    # its first characters look like
    assert classify_shell("sed -n 1,3w copy.txt notes.txt")[0] is False


def test_a_quoted_command_substitution_runs_another_program_so_is_no_read():
    # shlex keeps "$(pwd)" as one word: it is still a program run, not an argument to vouch for.
    assert classify_shell('tree "$(pwd)"') == (False, False)
    assert classify_shell('cat "$(ls)"') == (False, False)


def test_an_input_redirect_and_a_quoted_angle_bracket_are_not_writes():
    assert classify_shell("cat < notes.txt") == (True, False)
    assert classify_shell('grep -n "<X>" page.xml') == (True, False)


def test_a_redirect_with_no_target_is_no_read():
    assert classify_shell("grep x a.py >")[0] is False


def test_closing_a_stream_is_not_a_write():
    assert classify_shell("grep x a.py 2>&-") == (True, False)


@pytest.mark.parametrize(("argv", "reads"), [
    (["bash", "-c", "cat x"], True),  # a shell given a script: the script is the command
    (["bash", "-c", "rm x"], False),
    (["cat", "a.txt", "b.txt"], True),  # three words without -c: an argv, not a script
])
def test_an_argv_is_a_shell_script_only_after_dash_c(argv, reads):
    assert reads_only("shell", {"command": argv}) is reads


def test_an_edit_is_a_write_and_never_a_read():
    assert classify("str_replace_based_edit_tool", {"path": "a.py", "old_str": "x", "new_str": "y"}) == (False, True)
    assert classify("Write", {"file_path": "a.py", "content": "x = 1\n"}) == (False, True)


def test_a_patch_is_a_write_even_after_leading_blank_lines():
    assert writes("apply_patch", {"input": "\n  *** Begin Patch\n*** Update File: a.py\n"})


@pytest.mark.parametrize(("command", "seconds"), [
    ("sleep 30 && gh run view 9876543 --json status,conclusion", 30.0),
    ("sleep 5; pg_isready -h localhost", 5.0),
    ("sleep 1.5", 1.5),
    ("sleep 2m; curl -s localhost:8080/health", 120.0),
    ("sleep 5; make check; sleep 5", 10.0),
    ("python -c 'import time; time.sleep(10)'", 10.0),
    ("pwsh -c Start-Sleep -Seconds 3", 3.0),
    ("pytest -k test_sleep_handling", 0.0),  # a word, not a sleep
    ("ls", 0.0),
])
def test_a_command_sleeps_as_long_as_it_says(command, seconds):
    assert sleeps({"command": command}) == seconds


def test_only_a_shell_command_sleeps():
    assert sleeps({"query": "sleep 30"}) == 0.0 and sleeps(["sleep", "5"]) == 0.0 and sleeps(None) == 0.0


@pytest.mark.parametrize(("args", "program"), [
    ({"command": "cd /repo && grep -rn foo src"}, "grep"),
    ({"command": "git grep -n foo"}, "git"),
    ({"command": "grep foo a | head -5"}, "head"),
    ({"command": "LC_ALL=C rg foo"}, "rg"),
    ({"cmd": ["bash", "-lc", "/usr/bin/rg x"]}, "rg"),
    ({"file_path": "a.py"}, None),
])
def test_the_program_a_command_ends_with(args, program):
    assert last_program(args) == program


def test_an_empty_or_blank_command_is_neither_read_nor_write():
    assert classify("bash", {"command": ""}) == (False, False)
    assert classify("bash", {"command": "  \n "}) == (False, False)
