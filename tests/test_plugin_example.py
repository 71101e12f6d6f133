"""Bring your own guard: the example plugin package (tests/fixtures/plugin_example) is installed
for real with pip, then runs through `loopledger ingest` (entry point and `module:factory`), the
Replay page and the Compare page.

Its rule (`same-tool`): calls of one tool in a row, whatever the arguments; warn at `warn_at`,
halt at `halt_at`. The transcript below calls `read_file` five times with five different paths,
so by hand, with warn_at=2, halt_at=3: call 1 allow, 2 warn, 3 halt, 4 and 5 after the halt."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from app_support import ledger_env, metrics
from loopledger.detectors import registry
from loopledger.detectors.errors import ConfigError
from loopledger.detectors.policy import DEFAULT_SPECS, PolicySpec
from loopledger.ledger import schema
from loopledger.ledger.engine import make_engine
from replay_support import open_page
from sqlalchemy import select

from tests.test_worker import call_msg, chat_line, tool_msg

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "plugin_example"
LOOPLEDGER = Path(sys.executable).parent / "loopledger"
FACTORY = "loopledger_same_tool:make_detector"
# seq of each call's batch: user turn 0, then batch/answers pairs
CALL_SEQS = [1, 3, 5, 7, 9]


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """The plugin package, built and installed by pip into its own folder (offline: no deps,
    no build isolation, no index)."""
    base = tmp_path_factory.mktemp("plugin")
    src = base / "src"
    shutil.copytree(FIXTURE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = base / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(site), str(src)], check=True, capture_output=True, timeout=600)
    return site


@pytest.fixture
def plugin_loaded(plugin_site):
    """The installed plugin visible in this process too (the pages run in-process in AppTest)."""
    sys.path.insert(0, str(plugin_site))
    added = registry.rescan()
    try:
        yield added
    finally:
        sys.path.remove(str(plugin_site))
        for name in (*added, FACTORY):
            registry.unregister(name)
        sys.modules.pop("loopledger_same_tool", None)


@pytest.fixture(scope="module")
def transcript(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("t") / "reads.jsonl"
    path.write_bytes(chat_line(role="user", content="read the five config files") + b"".join(
        call_msg(f"c{i}", "read_file", {"path": f"conf/{name}.toml"}) + tool_msg(f"c{i}", f"[{name}]\nok = true")
        for i, name in enumerate("abcde")))
    return path


def _cli(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([str(LOOPLEDGER), *args], env=env, capture_output=True, text=True, timeout=600)


def _verdicts(url: str, detector: str) -> list[tuple[int, str]]:
    eng = make_engine(url, readonly=True)
    try:
        with eng.connect() as conn:
            rows = conn.execute(
                select(schema.checks.c.seq, schema.checks.c.verdict)
                .join(schema.policies, schema.policies.c.id == schema.checks.c.policy_id)
                .where(schema.policies.c.detector == detector).order_by(schema.checks.c.seq)).all()
    finally:
        eng.dispose()
    return [tuple(r) for r in rows]


@pytest.fixture(scope="module")
def plugin_ledger(plugin_site, transcript, tmp_path_factory) -> str:
    """A ledger ingested by the real CLI in a subprocess that sees the installed plugin, with the
    plugin named by its entry point and by `module:factory`."""
    url = f"sqlite:///{tmp_path_factory.mktemp('ledger') / 'ledger.sqlite'}"
    res = _cli(plugin_site, "ingest", str(transcript), "--db", url,
               "--policy", "same-tool:warn_at=2,halt_at=3", "--policy", f"{FACTORY}:warn_at=2,halt_at=4")
    assert res.returncode == 0, res.stdout + res.stderr
    return url


def test_pip_installed_the_entry_point(plugin_site):
    (dist,) = plugin_site.glob("loopledger_same_tool-*.dist-info")
    entry_points = (dist / "entry_points.txt").read_text()
    assert "[loopledger.detectors]" in entry_points and "same-tool = loopledger_same_tool:DETECTOR" in entry_points


def test_ingest_stores_the_plugins_checks(plugin_ledger):
    assert _verdicts(plugin_ledger, "same-tool") == list(zip(CALL_SEQS, ["allow", "warn", "halt", "after_halt",
                                                                          "after_halt"], strict=True))


def test_module_factory_form_from_the_command_line(plugin_ledger):
    # warn_at=2, halt_at=4: allow, warn, warn, halt, after_halt; stored under the import path
    assert _verdicts(plugin_ledger, FACTORY) == list(zip(CALL_SEQS, ["allow", "warn", "warn", "halt",
                                                                      "after_halt"], strict=True))


def test_an_installed_plugin_is_offered_not_run_by_default(plugin_site, transcript, tmp_path):
    url = f"sqlite:///{tmp_path / 'default.sqlite'}"
    res = _cli(plugin_site, "ingest", str(transcript), "--db", url)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _verdicts(url, "same-tool") == []
    listed = _cli(plugin_site, "replay", str(transcript), "--policy", "same-tool", "--param", "halt_at=4")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "halt" in listed.stdout


def test_bad_plugin_parameters_are_one_line_errors(plugin_site, transcript, tmp_path):
    res = _cli(plugin_site, "ingest", str(transcript), "--db", f"sqlite:///{tmp_path / 'x.sqlite'}",
               "--policy", "same-tool:warn_at=4,halt_at=3")
    assert res.returncode == 2
    assert "halt_at" in res.stderr + res.stdout and "Traceback" not in res.stderr


def test_plugin_in_process(plugin_loaded):
    assert "same-tool" in plugin_loaded and "same-tool" in registry.names()
    assert "same-tool" not in {s.detector for s in DEFAULT_SPECS}
    assert PolicySpec("same-tool").params == {"warn_at": 3, "halt_at": 5}
    with pytest.raises(ConfigError) as info:
        PolicySpec.parse("same-tool:halt_at=2")
    assert info.value.field == "halt_at"
    assert PolicySpec.parse(f"{FACTORY}:halt_at=4", trusted=True).detector == FACTORY


def test_replay_page_steps_the_plugin(plugin_ledger, plugin_loaded):
    with ledger_env(plugin_ledger):
        at = open_page("views/replay.py")
        assert not at.exception, at.exception
        options = at.selectbox(key="rp_detector").options
        # The stored import-path plugin is not offered: a ledger row is looked up, never imported.
        assert "same-tool" in options and FACTORY not in options
        at.selectbox(key="rp_detector").set_value("same-tool").run()
        assert not at.exception, at.exception
        assert at.session_state["rp_spec"] == PolicySpec("same-tool")
        at.button(key="rp_next_halt").click().run()  # defaults warn 3, halt 5: the 5th call halts
        # The slider moves in calls, numbered from 1 as every page numbers them.
        assert at.session_state["rp_step"] == CALL_SEQS[4] and at.slider(key="rp_call").value == 5
        assert metrics(at)["Verdict at this call"] == "halt"
        # Its parameters are a form like any detector's: halt_at=4 moves the halt to the 4th call.
        spec = at.session_state["rp_spec"]
        at.number_input(key=f"rp_p_same-tool_halt_at_{spec.id}").set_value(4)
        next(b for b in at.button if b.label == "Apply parameters").click().run()
        assert not at.exception, at.exception
        at.slider(key="rp_call").set_value(1).run()
        assert at.session_state["rp_step"] == CALL_SEQS[0]
        at.button(key="rp_next_halt").click().run()
        assert at.session_state["rp_step"] == CALL_SEQS[3] and at.slider(key="rp_call").value == 4


def test_compare_page_sweeps_the_plugin(plugin_ledger, plugin_loaded):
    with ledger_env(plugin_ledger):
        at = open_page("views/compare.py")
        assert not at.exception, at.exception
        assert "same-tool" in at.selectbox(key="cp_detector").options
        at.selectbox(key="cp_detector").set_value("same-tool").run()
        at.selectbox(key="cp_param_same-tool").set_value("halt_at").run()
        at.text_input(key="cp_range_same-tool_halt_at").input("3..6").run()
        at.button(key="cp_run").click().run()
        assert not at.exception, at.exception
        totals = next(d.value for d in at.dataframe if "halts" in d.value.columns)
        by_halt_at = {int(r["halt_at"]): r for _, r in totals.iterrows()}
        # warn_at stays 3: halt_at=3 breaks halt_at > warn_at and is skipped, named
        assert by_halt_at[3]["error"] and "halt_at" in by_halt_at[3]["error"]
        # five read_file calls in a row: halt_at 4 and 5 halt once (saving 1 and 0 calls), 6 never
        assert [(int(by_halt_at[h]["halts"]), int(by_halt_at[h]["saved"])) for h in (4, 5, 6)] == [(1, 1), (1, 0), (0, 0)]


def test_policies_lists_the_plugin_and_names_a_broken_one(plugin_site, plugin_ledger, tmp_path):
    # a second distribution whose entry point cannot load: reported, the others still work
    broken = tmp_path / "broken"
    dist = broken / "broken_guard-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-guard\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[loopledger.detectors]\nbroken = no_such_module_here:DETECTOR\n")
    env = {**os.environ, "COLUMNS": "300", "PYTHONPATH": os.pathsep.join([str(plugin_site), str(broken)])}
    res = subprocess.run([str(LOOPLEDGER), "policies", "--db", plugin_ledger], env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    detectors = res.stdout.split("Detectors (")[1]
    row = next(line for line in detectors.splitlines() if "same-tool " in line)
    assert "plugin" in row and "warn_at=3" in row
    assert FACTORY in res.stdout  # the stored policy of the import-path form
    assert "'broken'" in res.stderr and "no_such_module_here" in res.stderr
