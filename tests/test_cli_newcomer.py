"""Issue 31, CLI: what a newcomer's first mistakes do. A mistyped --db for `recheck` or `enforce`
is an error naming the path (nothing created); `ingest` of a file that is no transcript says
only why (no ledger file, no table of zeros); `hook install` says what it starts and what it
depends on. Each walked as a person types it: the installed console script in a scratch folder."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from loopledger.detectors.policy import DEFAULT_SPECS, default_set_words

from tests.live_support import BIN

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data" / "anthropic" / "helpdesk_resend_email.json"


def _run(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=180)


@pytest.fixture
def ledger(tmp_path) -> Path:
    db = tmp_path / "demo.sqlite"
    proc = _run("ingest", str(SAMPLE), "--db", str(db), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return db


@pytest.mark.parametrize("cmd", [["recheck", "--policy", "window:threshold=4"], ["enforce", "cycle:warn_repeats=2"],
                                 ["enforce", "--default"]])
def test_a_mistyped_db_is_an_error_naming_the_path_and_creates_nothing(cmd, tmp_path, ledger):
    typo = tmp_path / "demo.sqlit"  # the person meant demo.sqlite
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = _run(*cmd, "--db", str(typo), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"no ledger at {typo}" in " ".join(proc.stderr.split())
    assert "ENFORCED" not in proc.stdout and "Recheck" not in proc.stdout  # no claim about a ledger nobody reads
    assert not typo.exists() and sorted(p.name for p in tmp_path.iterdir()) == before
    # The same command on the ledger that exists works.
    ok = _run(*cmd, "--db", str(ledger), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr


def test_enforce_into_the_real_ledger_still_says_what_is_enforced(tmp_path, ledger):
    proc = _run("enforce", "cycle:warn_repeats=2", "--db", str(ledger), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ENFORCED on live agents: cycle")


def test_ingest_of_a_file_that_is_no_transcript_prints_only_its_error(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("meeting notes: ship the dashboard on friday\n")
    db = tmp_path / "demo.sqlite"
    proc = _run("ingest", str(notes), "--db", str(db), cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout == ""  # no "Ingest summary" of zeros
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(" ".join(lines).split("error:")) == 2, proc.stderr  # exactly one error
    assert f"{notes}: not a transcript format LoopLedger reads" in " ".join(proc.stderr.split())
    assert not db.exists()


def test_ingest_of_two_files_one_a_transcript_reads_it_and_names_the_other(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a transcript\n")
    db = tmp_path / "demo.sqlite"
    proc = _run("ingest", str(SAMPLE), str(notes), "--db", str(db), cwd=tmp_path)
    assert proc.returncode == 1  # some file could not be read
    assert "Ingest summary" in proc.stdout and db.exists()
    assert f"{notes}: not a transcript format" in " ".join(proc.stderr.split())


def test_an_empty_file_is_not_refused_up_front(tmp_path):
    empty = tmp_path / "session.jsonl"
    empty.write_text("")  # an agent creates its file first: not an error
    proc = _run("ingest", str(empty), "--db", str(tmp_path / "l.sqlite"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Ingest summary" in proc.stdout


def test_hook_install_says_it_starts_a_resident_guard_and_names_this_virtualenv(tmp_path, ledger):
    project = tmp_path / "shop"
    project.mkdir()
    env = {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    proc = _run("hook", "install", "claude-code", "--project", str(project), "--db", str(ledger), cwd=project,
                env=env)
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stdout.split())
    assert "starts a resident guard" in said and "LOOPLEDGER_HOOK_RESIDENT=0" in said
    # The command the agent runs is this installation's script, and the note says moving it breaks it.
    doc = json.loads((project / ".claude" / "settings.json").read_text())
    command = doc["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    exe = command.split()[0]
    assert Path(exe).parent == Path(sys.executable).parent
    if sys.prefix != sys.base_prefix:
        assert f"names this virtualenv's loopledger ({exe})" in said and f"move or delete {sys.prefix}" in said
    assert "run `loopledger hook install` again" in said
    shutil.rmtree(project / ".claude")


def test_help_describes_the_default_set_from_the_code(tmp_path):
    words = default_set_words()
    assert words.split(", ")[0].split()[0] == DEFAULT_SPECS[0].detector
    assert [w.split()[0] for w in words.split(", ")] == [sp.detector for sp in DEFAULT_SPECS]
    for cmd in (["ingest", "--help"], ["enforce", "--help"], ["--help"]):
        out = " ".join(_run(*cmd, cwd=tmp_path).stdout.split())
        assert words in out, (cmd, out)


def test_the_manual_names_the_default_sets_members_in_one_place_only():
    """docs/detection.md says which detectors the default set holds and why; every other page
    points there (or at `loopledger policies`), so a change of the set is one edit."""
    import re

    from loopledger.detectors.policy import DETECTORS

    names = "|".join(re.escape(d) for d in DETECTORS)
    listing = re.compile(rf"default (?:policy )?set[^.]{{0,160}}?`({names})`[^.]{{0,40}}?`({names})`", re.S)
    pages = [ROOT / "README.md", ROOT / "sample_data" / "README.md",
             *[p for p in (ROOT / "docs").glob("*.md") if p.name not in ("detection.md", "cli.md")]]
    offenders = {p.name: m.group(0) for p in pages for m in [listing.search(p.read_text("utf-8"))] if m}
    assert not offenders, offenders


def test_a_folders_documents_are_skipped_alike_in_one_line_never_as_errors(tmp_path):
    """Issue 37, friction 8: SOURCES.md beside the transcripts was an error (exit 1, a source
    marked error) while README.md and labels.csv were skipped silently."""
    import sqlite3

    folder = tmp_path / "corpus"
    folder.mkdir()
    shutil.copy(SAMPLE, folder / SAMPLE.name)
    (folder / "SOURCES.md").write_text("# Sources\n\nWhere these transcripts came from: a public repo.\n")
    (folder / "README.md").write_text("# A corpus\n")
    (folder / "labels.csv").write_text("file,session_key,label,loop_calls,reason\n")
    db = tmp_path / "demo.sqlite"
    proc = _run("ingest", str(folder), "--db", str(db), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "error" not in proc.stderr.lower(), proc.stderr
    said = " ".join(proc.stderr.split())
    assert "skipped 2 file(s) of the folder(s) that are not transcripts: README.md, SOURCES.md" in said, said
    with sqlite3.connect(db) as conn:
        sources = conn.execute("SELECT path, status FROM sources").fetchall()
    assert [(Path(p).name, s) for p, s in sources] == [(SAMPLE.name, "ok")]
    # Named on the command line, the same document is still refused with its reason.
    proc = _run("ingest", str(folder / "SOURCES.md"), "--db", str(db), cwd=tmp_path)
    assert proc.returncode == 1 and "not a transcript format" in proc.stderr


def test_the_sample_labels_import_whole_and_export_again(tmp_path):
    """Issue 37, friction 7: the sample data had no labels, so `labels export` wrote 0 rows and the
    leaderboard was empty on a first run. Every row of sample_data/labels.csv labels a session."""
    import csv

    sample = ROOT / "sample_data"
    db = tmp_path / "demo.sqlite"
    assert _run("ingest", str(sample), "--db", str(db), cwd=tmp_path).returncode in (0, 3)
    with (sample / "labels.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    proc = _run("labels", "import", str(sample / "labels.csv"), "--db", str(db), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"{len(rows)} session(s) labelled from {len(rows)} row(s)" in proc.stdout
    out = tmp_path / "labels.csv"
    assert _run("labels", "export", str(out), "--db", str(db), cwd=tmp_path).returncode == 0
    with out.open(encoding="utf-8", newline="") as fh:
        back = list(csv.DictReader(fh))
    key = lambda r: (r["file"], r["session_key"])  # noqa: E731
    assert sorted((key(r), r["label"], r["loop_calls"]) for r in back) == \
        sorted((key(r), r["label"], r["loop_calls"]) for r in rows)
    score = _run("score", "--db", str(db), cwd=tmp_path)
    n = {lb: sum(r["label"] == lb for r in rows) for lb in ("loop", "normal")}
    assert score.returncode == 0
    assert f"Guard leaderboard over {n['loop']} loop and {n['normal']} normal" in " ".join(score.stdout.split())
