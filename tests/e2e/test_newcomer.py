"""Issue 31 in a real browser at 1400×1000: what tripped a newcomer, walked as they would.

One ledger for the module: sample_data/ ingested through a path holding `..` (as `loopledger
ingest ../x` from a sibling folder stores it), and ../shared/corpus with its labels.csv (the
leaderboard and Compare score against labels). Tables are read from the data grid's accessible
table (the visible rows' cells), charts by their spec where a canvas draws them.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from loopledger.detectors.policy import DEFAULT_SPECS, PolicySpec, default_set_words
from loopledger.ledger.engine import make_engine
from loopledger.live import enforce
from playwright.sync_api import expect

from tests.e2e.conftest import ROOT, expect_run_over, start_server
from tests.e2e.conftest import sql as _sql
from tests.live_support import BIN

CORPUS = ROOT.parent / "shared" / "corpus"
WAIT = 120_000


@pytest.fixture(scope="module")
def newcomer_ledger(tmp_path_factory) -> str:
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is absent (fresh clone without shared/)")
    folder = tmp_path_factory.mktemp("newcomer")
    db = folder / "ledger.sqlite"
    roundabout = ROOT / "app" / ".." / "sample_data"  # stored as given: /…/app/../sample_data/…
    for args in (["ingest", str(roundabout), "--db", str(db)], ["ingest", str(CORPUS), "--db", str(db)],
                 ["labels", "import", str(CORPUS / "labels.csv"), "--db", str(db)]):
        done = subprocess.run([str(BIN), *args], capture_output=True, text=True, cwd=folder, timeout=600)
        assert done.returncode in (0, 3), done.stderr
    return f"sqlite:///{db}"


@pytest.fixture(scope="module")
def board(newcomer_ledger, tmp_path_factory) -> str:
    with start_server(newcomer_ledger, tmp_path_factory.mktemp("newcomer-log") / "server.log") as base:
        yield base


def _ran(page) -> None:
    """The run that drew what the caller has just seen is over (conftest.expect_run_over)."""
    expect_run_over(page, WAIT)


def _drawn(page) -> None:
    """The run over and what it drew laid out: the lazily loaded elements (a table, a chart) are
    mounted, not their placeholders, and every chart has drawn. A chart above a table draws after
    the run ends and pushes the table down by its height."""
    _ran(page)
    expect(page.get_by_test_id("stSkeleton")).to_have_count(0, timeout=WAIT)
    expect(page.get_by_test_id("stVegaLiteChart").filter(has_not=page.locator(".marks"))).to_have_count(
        0, timeout=WAIT)


def _grid(page, key: str):
    """A table on the page: by its widget key (a table one can click has one), else by one of its
    column titles (a plain table is known by what it shows)."""
    if key.startswith("th:"):
        title = key.removeprefix("th:")
        return page.get_by_test_id("stDataFrame").filter(
            has=page.locator("th", has_text=re.compile(rf"^\s*{re.escape(title)}\s*$"))).first
    return page.locator(f".st-key-{key}")


def _cells(page, key: str) -> list[str]:
    """The visible cells of a table (`_grid`), row after row (the grid's accessible table)."""
    table = _grid(page, key)
    table.locator("td").first.wait_for(state="attached", timeout=WAIT)
    return [t.strip() for t in table.locator("td").all_text_contents()]


def _headers(page, key: str) -> list[str]:
    table = _grid(page, key)
    table.locator("th").first.wait_for(state="attached", timeout=WAIT)
    return [t.strip() for t in table.locator("th").all_text_contents() if t.strip()]


def _chosen(page, label: str, scope=None) -> str:
    """What the selectbox labelled `label` shows (its input's value)."""
    box = (scope or page).get_by_test_id("stSelectbox").filter(has=page.get_by_text(label, exact=True)).first
    box.wait_for(timeout=WAIT)
    return box.locator("input").input_value()


def _pick(page, label: str, option: str, scope=None) -> None:
    """Choose `option` in the selectbox labelled `label` (in the sidebar when scope is given). The
    caller then waits for what the pick's run draws, and `_ran`."""
    where = scope or page
    where.get_by_label(label, exact=True).click()
    page.get_by_role("option", name=option, exact=True).click()
    box = where.get_by_test_id("stSelectbox").filter(has=page.get_by_text(label, exact=True)).first
    expect(box.locator("input")).to_have_value(option, timeout=WAIT)


def _text(page, pattern: str):
    el = page.get_by_text(re.compile(pattern)).first
    el.wait_for(timeout=WAIT)
    return el


# ── browsing ─────────────────────────────────────────────────────────────────────────────────


def test_a_click_on_any_cell_of_a_session_row_opens_it(board, page, artifacts_dir):
    page.goto(board + "/")
    table = page.locator(".st-key-sessions_table")
    table.locator("td").first.wait_for(state="attached", timeout=WAIT)
    _drawn(page)  # the chart above the table drawn: the table is where it stays
    first_id = _cells(page, "sessions_table")[0]
    # The title cell of the first row (not the checkbox column): header ~36 px, a row ~35 px. A
    # locator's click waits for the table to stand still and to be what is under that point.
    table.click(position={"x": 300, "y": 36 + 17})
    page.wait_for_url(re.compile(rf"/session\?session={first_id}\b"), timeout=WAIT)
    page.get_by_test_id("stHeading").filter(has_text=f"Session #{first_id}").first.wait_for(timeout=WAIT)
    page.screenshot(path=str(artifacts_dir / "e2e-newcomer-row-click.png"))


def _outcome_box(page, sidebar):
    return sidebar.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Outcome", exact=True)).first


def test_sidebar_filters_are_kept_across_pages_and_compare_sweeps_what_they_match(board, page, newcomer_ledger):
    page.goto(board + "/")
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_label("Outcome", exact=True).wait_for(timeout=WAIT)
    count = page.get_by_text(re.compile(r"^\d[\d,]* sessions · page")).first
    expect(count).to_be_visible(timeout=WAIT)
    every = count.inner_text().split()[0]
    _pick(page, "Outcome", "halted", sidebar)
    # The count is read once the page shows the filtered one (the ledger holds normal sessions too).
    expect(count).not_to_have_text(re.compile(rf"^{every} sessions"), timeout=WAIT)
    _ran(page)
    halted = count.inner_text().split()[0]
    # Another page, then back: the filter is still set.
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Ingest health").click()
    expect(page.get_by_test_id("stHeading").filter(has_text="Ingest health").first).to_be_visible(timeout=WAIT)
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Sessions").click()
    expect(_outcome_box(page, sidebar).locator("input")).to_have_value("halted", timeout=WAIT)
    expect(count).to_have_text(re.compile(rf"^{halted} sessions · page"), timeout=WAIT)
    # Compare sweeps exactly those sessions, and says which filter chose them.
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Compare").click()
    said = page.get_by_text(re.compile(r"session\(s\) selected: those the sidebar's filters match \(outcome halted\)"))
    expect(said.first).to_have_text(re.compile(rf"^{halted} session\(s\) selected"), timeout=WAIT)
    # And back: Compare drew the same filters, Sessions still has them.
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Sessions").click()
    expect(_outcome_box(page, sidebar).locator("input")).to_have_value("halted", timeout=WAIT)
    expect(count).to_have_text(re.compile(rf"^{halted} sessions · page"), timeout=WAIT)


def test_source_paths_are_shown_normalised(board, page, newcomer_ledger):
    (sid,) = _sql(newcomer_ledger, "SELECT s.id FROM sessions s JOIN sources r ON r.id = s.source_id "
                  "WHERE r.path LIKE '%/app/../sample_data/%' ORDER BY s.id LIMIT 1")[0]
    page.goto(f"{board}/session?session={sid}")
    cells = _cells(page, "th:source file")
    path = next(c for c in cells if "sample_data" in c)
    assert "/../" not in path and path.startswith(str(ROOT / "sample_data"))


def test_each_browser_tab_names_its_page_and_session(board, page, newcomer_ledger):
    (sid,) = _sql(newcomer_ledger, "SELECT min(id) FROM sessions")[0]
    for path, title in (("/", "Sessions · LoopLedger"), (f"/session?session={sid}", f"Session #{sid} · LoopLedger"),
                        (f"/replay?session={sid}&run=0", f"Replay #{sid} run #1 · LoopLedger"),
                        ("/compare", "Compare · LoopLedger"), ("/leaderboard", "Guard leaderboard · LoopLedger"),
                        ("/health", "Ingest health · LoopLedger")):
        page.goto(board + path)
        expect(page).to_have_title(title, timeout=WAIT)


def test_tables_show_no_raw_column_names(board, page):
    page.goto(board + "/health")
    assert "last ingest" in _headers(page, "th:last ingest")
    page.goto(board + "/leaderboard")
    heads = _headers(page, "th:loop sessions")
    assert "false halts" in heads and "loop sessions" in heads
    page.goto(board + "/compare")
    page.get_by_role("button", name="Run sweep").click()
    _text(page, "Precision and recall against labelled sessions")
    for key in ("th:sessions halted", "th:loop sessions"):  # the totals, the scores
        heads = _headers(page, key)
        assert not [h for h in heads if "_" in h or h in ("tp", "fp", "fn", "tn")], (key, heads)
    assert "halted runs" in _headers(page, "th:sessions halted")


# ── investigating ────────────────────────────────────────────────────────────────────────────


def test_a_json_document_names_its_positions_message_not_line(board, page, newcomer_ledger):
    (sid,) = _sql(newcomer_ledger, "SELECT s.id FROM sessions s JOIN sources r ON r.id = s.source_id "
                  "WHERE r.path LIKE '%helpdesk_resend_email.json'")[0]
    page.goto(f"{board}/session?session={sid}")
    # The Why names the call by its one number; the transcript, where a person opens the file, adds
    # where the file holds it: a message of the JSON document, never a line (issue 37: one number).
    why = _text(page, r"halted at call #\d+: ")
    assert not re.search(r"step|line|message", why.inner_text().split(":")[0])
    _text(page, r"^call #\d+ \(message \d+\): ")
    # A JSONL transcript keeps its lines.
    (jsonl,) = _sql(newcomer_ledger, "SELECT s.id FROM sessions s JOIN sources r ON r.id = s.source_id JOIN "
                    "run_outcomes o ON o.session_id = s.id WHERE r.path LIKE '%.jsonl' AND s.format = 'claude-code' "
                    "AND o.outcome = 'halted' ORDER BY s.id LIMIT 1")[0]
    page.goto(f"{board}/session?session={jsonl}")
    _text(page, r"^(▶ halted here · )?call #\d+ \(line \d+\): ")


def test_replay_forward_goes_call_to_call_and_opens_on_the_current_call(board, page, newcomer_ledger, artifacts_dir):
    (sid, run, first) = _sql(newcomer_ledger, "SELECT s.id, r.idx, r.first_seq FROM sessions s JOIN runs r ON "
                             "r.session_id = s.id JOIN sources src ON src.id = s.source_id WHERE src.path LIKE "
                             "'%helpdesk_resend_email.json'")[0]
    page.goto(f"{board}/replay?session={sid}&run={run}&step={first}")
    _text(page, "Detector state")
    _ran(page)
    seen = []
    heading = page.get_by_text(re.compile(r"^Transcript, run #\d+, at ")).first
    head = heading.inner_text()
    for _ in range(4):
        before = head
        page.get_by_role("button", name="Forward ▶").click()
        # The cursor's fragment redraws: its heading moves on (drawn first), then the rest of the
        # fragment (the verdict, the transcript boxes) is drawn by the time the run is over.
        expect(heading).to_have_text(re.compile(rf"^(?!{re.escape(before)}$)Transcript, run #\d+, at "), timeout=WAIT)
        _ran(page)
        head = heading.inner_text()
        # Every stop is a call the guard judged, never an answer ("no check").
        assert re.search(r"at call #\d+$", head), head  # one number per call, no step
        verdict = page.get_by_test_id("stMetric").filter(has_text="Verdict at this call")
        assert "no check" not in verdict.inner_text()
        seen.append(int(re.search(r"call #(\d+)", head).group(1)))
        # The cursor's call is the first thing the transcript panel shows, the run before it below.
        box = page.get_by_text("▶ at the cursor").bounding_box()
        earlier = page.get_by_text("Before it in this run, the most recent first:")
        assert earlier.count() == 0 or earlier.bounding_box()["y"] > box["y"]
    assert seen == list(range(seen[0], seen[0] + 4)), seen  # one call per press
    code = page.get_by_test_id("stCode").filter(has_text="call #").first.inner_text()
    assert not re.search(r"^\[\d+\]|\(step \d+\)", code, re.M)  # call #N, never a step
    assert re.search(r"^call #\d+: ", code, re.M)
    page.screenshot(path=str(artifacts_dir / "e2e-newcomer-replay-forward.png"))


def test_runs_are_counted_from_one_like_calls(board, page, newcomer_ledger):
    (sid, run) = _sql(newcomer_ledger, "SELECT session_id, min(run_idx) FROM run_outcomes WHERE outcome = 'halted' "
                      "GROUP BY session_id ORDER BY session_id LIMIT 1")[0]
    page.goto(f"{board}/session?session={sid}&run={run}")
    page.get_by_test_id("stHeading").filter(has_text=f"Why run #{run + 1} halted").first.wait_for(timeout=WAIT)
    page.get_by_test_id("stHeading").filter(has_text=f"Run #{run + 1}: transcript").first.wait_for(timeout=WAIT)
    assert f"#{run + 1}" in _cells(page, "outcomes")


# ── comparing and enforcing ──────────────────────────────────────────────────────────────────


def _score_row(page, key: str, name: str, width: int) -> list[str]:
    """A policy's (or setting's) row of a score table; a count that links to its sessions reads as its number."""
    cells = _cells(page, key)
    i = cells.index(name)
    return [re.sub(r"^\./leaderboard\?.*[?&]n=(\d+)$", r"\1", c) for c in cells[i:i + width]]


def test_compare_and_the_leaderboard_count_sessions_and_agree(board, page, artifacts_dir):
    page.goto(board + "/compare")
    assert _chosen(page, "Detector") == DEFAULT_SPECS[0].detector  # the default set's first, not run-length
    page.get_by_role("button", name="Run sweep").click()
    _text(page, "Precision and recall against labelled sessions")  # drawn only once a sweep is asked for
    _ran(page)  # and the scores table below it drawn
    default = PolicySpec(DEFAULT_SPECS[0].detector)
    param = "halt_at" if "halt_at" in default.params else next(iter(default.params))
    here = _score_row(page, "th:recall 95% CI", f"{param}={default.params[param]}", 11)
    page.screenshot(path=str(artifacts_dir / "e2e-newcomer-compare-scores.png"))
    page.goto(board + "/leaderboard")
    cells = _cells(page, "th:loop sessions")
    label = next(c for c in cells if c.startswith(default.label[:40]))
    there = _score_row(page, "th:loop sessions", label, 11)
    # loops, caught, early, missed, normal, false halts, precision, its CI, recall, its CI: the same numbers.
    assert here[1:11] == there[1:11], (here, there)


def test_enforce_adds_to_the_default_set_and_can_replace_it(tmp_path, page, newcomer_ledger,
                                                                   artifacts_dir):
    db = tmp_path / "own.sqlite"  # its own copy: this test changes what is enforced
    db.write_bytes(Path(newcomer_ledger.removeprefix("sqlite:///")).read_bytes())
    url = f"sqlite:///{db}"
    with start_server(url, tmp_path / "server.log") as base:
        page.goto(base + "/compare")
        page.get_by_role("button", name="Run sweep").wait_for(timeout=WAIT)
        page.get_by_role("button", name="Run sweep").click()
        _text(page, "Enforce on live agents")  # the sweep's page, drawn to its last section
        _ran(page)
        picker = page.get_by_label("Setting to enforce", exact=True)
        picker.scroll_into_view_if_needed()
        picker.click()
        expect(page.get_by_role("option").first).to_be_visible(timeout=WAIT)
        options = [o.strip() for o in page.get_by_role("option").all_inner_texts()]
        # Best first (the labels rank them), each saying what it does, in sessions.
        assert all(re.search(r"halts [\d,]+ of [\d,]+ swept sessions", o) for o in options), options
        assert options[0].startswith(f"{'halt_at' if DEFAULT_SPECS[0].detector == 'progress' else ''}")
        assert not options[0].startswith("strikes=0")
        second = options[1]
        page.get_by_role("option", name=second, exact=True).click()
        expect(picker).to_have_value(second, timeout=WAIT)
        name = second.split(" — ")[0]
        # Adding to what is enforced now is the default; replacing it is the second choice.
        _text(page, re.escape(f"Enforcing adds {name} to the default set ({default_set_words()})"))
        _ran(page)  # the pick's run, the sentence and the button below it drawn
        page.get_by_text("replace what is enforced now with it alone").click()
        _text(page, re.escape(f"Enforcing replaces the default set ({default_set_words()}) with {name} alone"))
        page.get_by_text("add it to what is enforced now").click()
        _text(page, re.escape(f"Enforcing adds {name} to the default set ({default_set_words()})"))
        page.screenshot(path=str(artifacts_dir / "e2e-newcomer-enforce-add.png"))
        page.get_by_role("button", name=re.compile(r"^Add it to the enforced set: ")).click()
        expect(page.get_by_text("Enforced: live agents are judged by it")).to_be_visible(timeout=WAIT)
        # Right after the press, no reload: the sentence above the button reads the new set.
        expect(page.get_by_text(re.compile("^" + re.escape(f"{name} is enforced already (the enforced set: ")))
               ).to_be_visible(timeout=WAIT)
        expect(page.get_by_text(re.compile(r"^Enforced now: .* \+ "))).to_be_visible(timeout=WAIT)
        eng = make_engine(url, readonly=True)
        with eng.connect() as conn:
            now = enforce.enforced_specs(conn)
        eng.dispose()
        assert now[:len(DEFAULT_SPECS)] == tuple(DEFAULT_SPECS) and len(now) == len(DEFAULT_SPECS) + 1
        assert now[-1].detector == DEFAULT_SPECS[0].detector


def test_no_flat_zero_chart_and_the_saved_table_is_wide(board, page, newcomer_ledger):
    page.goto(board + "/compare")
    _pick(page, "Detector", "window")
    # What the pick's run draws: window's own parameter to sweep.
    expect(page.get_by_role("combobox", name="Parameter", exact=True)).to_have_value("threshold", timeout=WAIT)
    _ran(page)
    page.get_by_role("button", name="Run sweep").click()
    _text(page, r"No chart of warnings: 0 under every setting")  # window never warns: said, not drawn
    (sid,) = _sql(newcomer_ledger, "SELECT session_id FROM turn_usage GROUP BY session_id ORDER BY count(*) DESC "
                  "LIMIT 1")[0]
    page.goto(f"{board}/session?session={sid}")
    table = _grid(page, "th:time in loops")
    table.locator("td").first.wait_for(state="attached", timeout=WAIT)
    assert table.bounding_box()["width"] > 800  # the whole content width, not half of it
