"""The real SWE-agent, OpenHands and Aider transcripts in ../shared/corpus, read by our readers
and checked against the independent counts in its README (episodes, calls, max run, ABAB).

Where our count differs by design, DIFFERS says what we count instead and why, and a test
shows that counting the README's way reproduces its number.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from loopledger.events import Batch, ReadError, SessionStart
from loopledger.formats import read, sniff

pytestmark = pytest.mark.corpus

FOLDERS = ("swe-agent-traj", "openhands", "aider-chat-history-md")
AIDER = "aider-chat-history-md/aider-website-example-complex-change.md"
PONYC = "openhands/multi-swe-bench-ponyc-output.jsonl"

# file → {column: (our value, why)}. Everything not listed must equal the README.
DIFFERS = {
    AIDER: {
        "max run": (1, "the README's script keys an Aider edit on its file path alone; we key it on "
                       "the path and the edit blocks, so the two consecutive replies that edit "
                       "aider/getinput.py with different hunks are not identical calls"),
        "ABAB": (0, "same reason: with the hunks in the arguments, getinput.py / main.py edits "
                    "never repeat exactly"),
    },
    PONYC: {
        "calls": (103, "the README counts the agent's action events; two replies the controller could "
                       "not turn into an action (an `error` observation with no cause) are one "
                       "harness_error call each: what the agent asked for and never ran"),
        "ABAB": (4, "same reason: one of the harness errors sits between two identical calls"),
    },
}


def readme_rows(corpus: Path) -> dict[str, dict[str, int]]:
    """file → {episodes, calls, max run, ABAB} from the README's table."""
    rows: dict[str, dict[str, int]] = {}
    for line in (corpus / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"`([^`]+)`", cells[0]) if cells else None
        if match and len(cells) >= 8 and all(c.isdigit() for c in cells[-4:]):
            episodes, calls, max_run, abab = (int(c) for c in cells[-4:])
            rows[match.group(1)] = {"episodes": episodes, "calls": calls, "max run": max_run,
                                    "ABAB": abab}
    return rows


def key(call) -> tuple[str, bytes]:
    return call.name, orjson.dumps(call.args if call.args is not None else {},
                                   option=orjson.OPT_SORT_KEYS)


def measure(path: Path, key_fn=key) -> dict[str, int]:
    sessions: list[list] = []
    for item in read(path):
        assert not isinstance(item, ReadError), item
        if isinstance(item, SessionStart):
            sessions.append([])
        elif isinstance(item, Batch):
            sessions[-1].extend(key_fn(c) for c in item.calls)
    max_run = 0
    for keys in sessions:
        run = 0
        for i, k in enumerate(keys):
            run = run + 1 if i and k == keys[i - 1] else 1
            max_run = max(max_run, run)
    abab = sum(1 for keys in sessions for i in range(2, len(keys))
               if keys[i] == keys[i - 2] != keys[i - 1])
    return {"episodes": len(sessions), "calls": sum(map(len, sessions)), "max run": max_run,
            "ABAB": abab}


def our_files(corpus: Path) -> list[str]:
    return sorted(str(p.relative_to(corpus)) for folder in FOLDERS
                  for p in (corpus / folder).glob("*") if p.is_file())


def test_every_file_of_ours_has_a_readme_row(corpus_dir):
    files = our_files(corpus_dir)
    assert files and set(files) <= set(readme_rows(corpus_dir))


@pytest.mark.parametrize("folder", FOLDERS)
def test_counts_match_the_readme(corpus_dir, folder):
    rows = readme_rows(corpus_dir)
    for name in our_files(corpus_dir):
        if not name.startswith(folder + "/"):
            continue
        expected = dict(rows[name])
        for column, (ours, why) in DIFFERS.get(name, {}).items():
            assert why and ours != expected[column]
            expected[column] = ours
        assert measure(corpus_dir / name) == expected, name


def test_openhands_counted_without_harness_errors_reproduces_it(corpus_dir):
    """Leaving the harness_error calls out gives the README's numbers for the OpenHands file:
    the difference is the refused replies, not a call we missed or invented."""
    path = corpus_dir / PONYC
    keys = [[]]
    for item in read(path):
        if isinstance(item, SessionStart):
            keys.append([])
        elif isinstance(item, Batch):
            keys[-1].extend(key(c) for c in item.calls if c.name != "harness_error")
    sessions = [k for k in keys[1:]]
    abab = sum(1 for ks in sessions for i in range(2, len(ks)) if ks[i] == ks[i - 2] != ks[i - 1])
    row = readme_rows(corpus_dir)[PONYC]
    assert (sum(map(len, sessions)), abab) == (row["calls"], row["ABAB"])


def test_aider_counted_the_readme_way_reproduces_it(corpus_dir):
    """Keying an edit on (tool, path) alone gives the README's numbers: the difference is the
    key, not a call we missed or invented."""
    by_path = measure(corpus_dir / AIDER, key_fn=lambda c: (c.name, c.args.get("path")))
    row = readme_rows(corpus_dir)[AIDER]
    assert by_path == row


def test_swe_agent_submit_loop_is_four_identical_calls(corpus_dir):
    """The README's note: the same `submit flag{…}` four times in a row, each 'Wrong flag!'."""
    items = list(read(corpus_dir / "swe-agent-traj" / "ctf-crypto-eps-submit-loop.traj"))
    batches = [i for i in items if isinstance(i, Batch)]
    commands = [b.calls[0].args["command"] for b in batches]
    assert commands[9:14] == ["submit flag{People always make the best exploits.}"] * 4 + [
        "submit 'flag{People always make the best exploits.}'"]
    answers = [i.answers[0] for i in items if type(i).__name__ == "Answers"]
    assert {a.text for a in answers[9:13]} == {"Wrong flag!"}  # identical answers: strikes
    assert len({a.digest for a in answers[9:13]}) == 1


def test_every_file_sniffs_as_its_format(corpus_dir):
    expected = {"swe-agent-traj": "swe-agent", "openhands": "openhands",
                "aider-chat-history-md": "aider"}
    for name in our_files(corpus_dir):
        assert sniff(corpus_dir / name) == expected[name.split("/")[0]], name


def test_submit_loop_through_the_replay_engine(corpus_dir):
    """Reader → replay: the id-less SWE-agent answers pair with their calls, so run-length sees
    two repeated answers and halts on the third identical submit (S = 2)."""
    from loopledger.replay import replay

    items = list(read(corpus_dir / "swe-agent-traj" / "ctf-crypto-eps-submit-loop.traj"))
    events = [i for i in items if not isinstance(i, (SessionStart, ReadError))]
    steps = [s for s in replay(events, "run-length") if isinstance(s.event, Batch)]
    commands = [s.event.calls[0].args["command"] for s in steps]
    third = next(i for i in range(2, len(commands)) if commands[i] == commands[i - 1] == commands[i - 2])
    verdicts = [s.checks[0].verdict for s in steps]
    assert verdicts.index("halt") == third
    assert set(verdicts[:third]) == {"allow"}
