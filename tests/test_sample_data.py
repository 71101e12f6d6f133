"""Golden test: the whole pipeline on sample_data/ must say what sample_data/README.md says.

The README's tables are the expectations (between `<!-- golden:… -->` markers); the pipeline
rows come from sample_data/golden.py (readers → replay with every built-in detector at its
defaults → tally) and from a real `ingest` into a fresh ledger (session_stats: the default set's
columns). A difference is a bug in a reader, a detector,
the replay engine or the worker — or a data change whose table was not regenerated and checked.
The first table is also checked against tests/oracle_detectors.py, written from design.md apart
from the pipeline, so a regression cannot be accepted by regenerating the table.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from loopledger import vocab
from loopledger.detectors.policy import DEFAULT_DETECTORS, DEFAULT_SPECS
from loopledger.events import Batch
from loopledger.formats import readers, sniff
from loopledger.ledger import migrate
from loopledger.ledger import schema as s
from loopledger.ledger.engine import make_engine
from sqlalchemy import select

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data"
README = SAMPLE / "README.md"

# Top folder → the format its files are in (sniffing must agree, from content alone).
FOLDER_FORMAT = {
    "aider": "aider", "anthropic": "anthropic", "atif": "atif", "claude_code": "claude-code",
    "codex": "codex", "gemini": "gemini-cli", "openai_chat": "openai-chat",
    "openai_responses": "openai-responses", "openhands": "openhands", "swe_agent": "swe-agent", "otlp": "otlp",
    "cline": "cline", "claude_export": "claude-export", "openhands_v1": "openhands-v1", "opencode": "opencode",
    "tau2": "tau2-bench", "copilot_cli": "copilot-cli",
}
CC_PARENT = "3f9c1e62-58a4-4d0b-9b7e-2a6d41c0e8f3"
CC_MAIN = f"claude_code/{CC_PARENT}.jsonl"
CC_SUB = f"claude_code/{CC_PARENT}/subagents/agent-b71d0c4.jsonl"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"sample_data_{name}", SAMPLE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


golden = _load("golden")
generate = _load("generate")


@pytest.fixture(scope="module")
def rows():
    return {(r.file, r.session): r for r in golden.pipeline_rows(SAMPLE)}


@pytest.fixture(scope="module")
def readme_where():
    return {(r["file"], r["session"]): r for r in golden.parse_table(README.read_text("utf-8"), "where")}


@pytest.fixture(scope="module")
def readme_counts():
    return {(r["file"], r["session"]): r
            for r in golden.parse_table(README.read_text("utf-8"), "counts")}


def _events(file: str, session: str) -> list:
    for info, events, _ in golden.sessions(SAMPLE / file):
        if info.key == session:
            return events
    raise AssertionError(f"{file}: no session {session!r}")


def _names(events: list) -> list[str]:
    return [c.name for e in events if isinstance(e, Batch) for c in e.calls]


# ── the README tables against the pipeline ───────────────────────────────────────────────────


def test_readme_lists_exactly_the_sessions_the_readers_find(rows, readme_where, readme_counts):
    assert set(readme_where) == set(rows), (
        f"only in README: {sorted(set(readme_where) - set(rows))}; "
        f"only in the data: {sorted(set(rows) - set(readme_where))}")
    assert set(readme_counts) == set(rows)
    assert len(rows) >= 14


def test_where_each_policy_warns_blocks_halts(rows, readme_where):
    dets = golden.detectors()
    diffs = []
    for key, row in sorted(rows.items()):
        want = readme_where[key]
        got = {"format": row.format, "calls": str(row.calls), "runs": str(row.runs), **row.where}
        for col in ("format", "calls", "runs", *dets):
            if want[col] != got[col]:
                diffs.append(f"{key[0]} [{key[1]}] {col}: README {want[col]!r}, pipeline {got[col]!r}")
    assert not diffs, "pipeline disagrees with sample_data/README.md:\n" + "\n".join(diffs)


def test_counts_per_policy(rows, readme_counts):
    diffs = [f"{key[0]} [{key[1]}] {d}: README {readme_counts[key][d]}, pipeline {row.counts[d]}"
             for key, row in sorted(rows.items()) for d in golden.detectors()
             if readme_counts[key][d] != row.counts[d]]
    assert not diffs, "\n".join(diffs)


def test_every_row_says_what_it_shows(readme_where):
    empty = [k for k, r in readme_where.items() if not r["shows"]]
    assert not empty


# ── the ledger: `ingest` into a fresh database, read session_stats ──────────────────────────


def _ingest(db_url: str, files: list[Path]):
    from loopledger import worker

    engine = make_engine(db_url)
    migrate.upgrade(engine)
    for f in files:
        report = worker.ingest_file(engine, f, worker.Options())
        assert report.action != "error", report.error
        assert report.quarantined == 0, f"{f}: {report.quarantined} lines quarantined"
    return engine


def test_ingested_ledger_matches_readme_counts(db_url, readme_where, readme_counts):
    engine = _ingest(db_url, golden.sample_files(SAMPLE))
    default_ids = {sp.id: sp.detector for sp in DEFAULT_SPECS}
    q = (select(s.sources.c.path, s.sessions.c.key, s.sessions.c.format, s.sessions.c.n_runs,
                s.sessions.c.n_calls, s.session_stats)
         .join(s.sessions, s.sessions.c.id == s.session_stats.c.session_id)
         .join(s.sources, s.sources.c.id == s.sessions.c.source_id))
    got: dict[tuple[str, str], dict] = {}
    with engine.connect() as conn:
        for r in conn.execute(q).mappings():
            if r["policy_id"] not in default_ids:
                continue
            key = (Path(r["path"]).resolve().relative_to(SAMPLE).as_posix(), r["key"])
            entry = got.setdefault(key, {"format": r["format"], "runs": str(r["n_runs"]),
                                         "calls": str(r["n_calls"])})
            entry[default_ids[r["policy_id"]]] = (
                f"{r['warnings']}/{r['blocks']}/{r['halts']}/{r['saved']}")
            assert r["runs"] == r["n_runs"] and r["calls"] == r["n_calls"]
    engine.dispose()
    assert set(got) == set(readme_counts)
    diffs = []
    for key, entry in sorted(got.items()):
        want = {**{c: readme_where[key][c] for c in ("format", "runs", "calls")},
                **{d: readme_counts[key][d] for d in golden.detectors() if d in DEFAULT_DETECTORS}}
        diffs += [f"{key[0]} [{key[1]}] {c}: README {want[c]!r}, ledger {entry.get(c)!r}"
                  for c in want if entry.get(c) != want[c]]
    assert not diffs, "\n".join(diffs)


def test_ingested_run_outcomes_match_readme(fresh_db, readme_where):
    """The ledger's per-run outcomes (worst verdict per run) are the runs the README lists."""
    engine = _ingest(fresh_db, golden.sample_files(SAMPLE))
    default_ids = {sp.id: sp.detector for sp in DEFAULT_SPECS}
    q = (select(s.sources.c.path, s.sessions.c.key, s.run_outcomes)
         .join(s.sessions, s.sessions.c.id == s.run_outcomes.c.session_id)
         .join(s.sources, s.sources.c.id == s.sessions.c.source_id)
         .where(s.run_outcomes.c.outcome != vocab.CLEAN))
    got: dict[tuple[str, str, str], dict[int, str]] = {}
    with engine.connect() as conn:
        for r in conn.execute(q).mappings():
            if r["policy_id"] in default_ids:
                key = (Path(r["path"]).resolve().relative_to(SAMPLE).as_posix(), r["key"],
                       default_ids[r["policy_id"]])
                got.setdefault(key, {})[r["run_idx"]] = r["outcome"]
    engine.dispose()
    diffs = []
    for (file, session), row in sorted(readme_where.items()):
        for det in (d for d in golden.detectors() if d in DEFAULT_DETECTORS):
            listed, more = golden.run_outcomes_of(row[det])
            have = got.get((file, session, det), {})
            shown = dict(sorted(have.items())[:len(listed)])
            if shown != listed or len(have) != len(listed) + more:
                diffs.append(f"{file} [{session}] {det}: README {row[det]!r}, ledger {have}")
    assert not diffs, "\n".join(diffs)


def test_subagent_session_is_linked_to_its_parent_whatever_the_order(fresh_db):
    # The sidechain file is ingested first: its parent arrives later, from another file.
    engine = _ingest(fresh_db, [SAMPLE / CC_SUB, SAMPLE / CC_MAIN])
    with engine.connect() as conn:
        rows = {r.key: r for r in conn.execute(
            select(s.sessions.c.id, s.sessions.c.key, s.sessions.c.parent_id))}
    engine.dispose()
    assert rows["b71d0c4"].parent_id == rows[CC_PARENT].id


# ── coverage of the set ──────────────────────────────────────────────────────────────────────


def test_every_format_loopledger_reads_is_in_sample_data(rows):
    assert set(readers()) <= {r.format for r in rows.values()}


@pytest.mark.parametrize("path", golden.sample_files(SAMPLE), ids=lambda p: p.relative_to(SAMPLE).as_posix())
def test_sniffing_picks_the_right_format(path):
    assert sniff(path) == FOLDER_FORMAT[path.relative_to(SAMPLE).parts[0]]


def test_long_session_has_dashboard_scale(rows):
    assert max(r.calls for r in rows.values()) >= 2000


def _has(cell: str, *verdicts: str) -> bool:
    return all(v in cell for v in verdicts)


def test_every_loop_kind_is_shown(rows, readme_where):
    w = {k: r.where for k, r in rows.items()}
    by_file = {k[0]: k for k in rows if k[0] != "openai_chat/tau_airline_results.json"}
    tau = ("openai_chat/tau_airline_results.json", "task-17.trial-0")
    clean = [k for k, cells in w.items() if all(c == "—" for c in cells.values())]
    assert len(clean) >= 3, clean

    codex = by_file["codex/rollout-2026-03-07T13-22-10-0199c2a4-7e31-7b52-9d0e-5b8f2c1a6e47.jsonl"]
    assert _has(w[codex]["run-length"], "halt")
    assert "read" not in " ".join(_names(_events(*codex))[2:5]).lower()  # mutating: `shell`

    changing = by_file["gemini/session-2026-03-08T08-29-6d2b9e40.jsonl"]
    assert w[changing]["run-length"] == "—" and rows[changing].calls > 16
    assert _has(w[by_file["atif/browser_ticket_queue.trajectory.json"]]["run-length"], "halt")
    assert _names(_events(*by_file["atif/browser_ticket_queue.trajectory.json"])).count(
        "browser_navigate") > 16

    quiet = by_file["gemini/session-2026-02-20T17-05-a41f03c9.json"]
    assert w[quiet]["run-length"].startswith("halt c16 ")

    ladder = by_file["anthropic/helpdesk_resend_email.json"]
    assert _has(w[ladder]["ladder"], "warn", "block", "halt") and w[ladder]["run-length"] == "—"

    dup = by_file["openai_chat/support_duplicate_refund.json"]
    batches = [e for e in _events(*dup) if isinstance(e, Batch)]
    assert any(len({(c.name, repr(c.args)) for c in b.calls}) < len(b.calls) for b in batches)
    assert _has(w[dup]["ladder"], "warn")

    seqs = {"swe_agent/parsedate__parsedate-212.traj": ["python", "open"] * 4,
            "openai_responses/oncall_restart_cycle.json":
                ["get_deployment_status", "get_deployment_status", "restart_deployment"] * 4,
            CC_MAIN: ["Edit", "Bash", "Bash"] * 4}
    for file, pattern in seqs.items():
        names = _names(_events(*by_file[file]))
        assert any(names[i:i + len(pattern)] == pattern for i in range(len(names))), file
        assert _has(w[by_file[file]]["cycle"], "warn", "halt"), file

    assert _has(w[by_file["openhands/clone_no_ssh_key.json"]]["stagnation"], "halt")

    assert rows[tau].runs >= 3
    assert w[tau]["run-length"].count("halt") == 1 and w[tau]["run-length"].startswith("r")

    for key in (codex, changing, quiet, ladder, dup, tau, clean[0]):
        assert readme_where[key]["shows"]


def test_generator_writes_the_committed_files(tmp_path):
    written = generate.write_all(tmp_path)
    committed = {p.relative_to(SAMPLE) for p in golden.all_files(SAMPLE)}
    assert {p.relative_to(tmp_path) for p in written} == committed
    changed = [str(p.relative_to(tmp_path)) for p in written
               if p.read_bytes() != (SAMPLE / p.relative_to(tmp_path)).read_bytes()]
    assert not changed, f"regenerate sample_data (python sample_data/generate.py): {changed}"


def test_sample_data_stays_small():
    total = sum(p.stat().st_size for p in golden.sample_files(SAMPLE))
    assert total < 1_000_000, f"sample_data is {total:,} bytes"


# ── the README's table against an independent oracle (not the pipeline it checks) ───────────


def test_every_where_cell_agrees_with_the_design_oracle(readme_where):
    """tests/oracle_detectors.py re-implements each detector at its defaults from design.md, apart
    from loopledger.detectors and loopledger.replay: regenerating the table from a regressed
    pipeline cannot make this pass. Checked per detector at its defaults, whatever the default set."""
    import oracle_detectors as oracle
    from loopledger.detectors.policy import BUILTIN_SPECS, PolicySpec

    # The table's columns are the built-in detectors, each at its defaults (whatever the default
    # set is): check every column the oracle knows.
    at_defaults = {sp.detector for sp in BUILTIN_SPECS if sp == PolicySpec(sp.detector)}
    checked = sorted(set(oracle.ORACLES) & at_defaults)
    assert set(oracle.ORACLES) <= at_defaults, "a detector the oracle knows is no longer a column at its defaults"
    wrong = []
    for (file, session), row in readme_where.items():
        events = _events(file, session)
        for det in checked:
            if det in row and row[det] != oracle.where_cell(events, det):
                wrong.append(f"{file} {session} {det}: README {row[det]!r}, oracle {oracle.where_cell(events, det)!r}")
    assert not wrong, "\n".join(wrong)
