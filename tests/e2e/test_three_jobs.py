"""Issue 19's points 1-3 in a real browser at 1400×1000, on the ledger `make run` builds
(`loopledger ingest sample_data`) and on one built from ../shared/corpus (skipped only when absent):

1. Replay keeps its place on a second Apply and on Enter-then-Apply, and says the halted-run
   counts a replay from the start gives;
2. enforcing needs a person to pick a row, the button says what it halts before it is pressed,
   and "Enforced now" reads the new setting after;
3. the Session page names the halting call as call #N (1-based over the session, as labels and
   the leaderboard count) and links every call the verdict rests on, in whatever run it is.

Expected values come from SQL on the ledger and from replaying its events, never from the pages.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlparse

import pytest
from loopledger import vocab
from loopledger.detectors.policy import PolicySpec
from loopledger.events import Batch
from loopledger.ledger import store
from loopledger.ledger.engine import make_engine
from loopledger.replay import replay
from playwright.sync_api import expect
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from tests.conftest import CORPUS
from tests.e2e.conftest import expect_run_over, start_server
from tests.e2e.conftest import sql as _sql
from tests.e2e.test_why_e2e import _ingest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60_000


@pytest.fixture(scope="module", params=["sample_data", "corpus"])
def ledger_server(request, tmp_path_factory):
    if request.param == "corpus" and not CORPUS.is_dir():
        pytest.skip("../shared/corpus is absent (a fresh clone)")
    tmp = tmp_path_factory.mktemp(f"jobs-{request.param}")
    url = _ingest(ROOT / "sample_data" if request.param == "sample_data" else CORPUS, tmp / "ledger.sqlite")
    with start_server(url, tmp / "server.log") as base:
        yield request.param, url, base


def _events(url: str, sid: int) -> list:
    eng = make_engine(url, readonly=True)
    try:
        with eng.connect() as conn:
            return store.load_events(conn, sid)
    finally:
        eng.dispose()


def _halted_runs(events: list, spec: PolicySpec) -> int:
    return len({s.run for s in replay(events, spec) if any(c.verdict == vocab.HALT for c in s.checks)})


def _ran(page) -> None:
    """The run that drew what the caller has just seen is over (conftest.expect_run_over)."""
    expect_run_over(page, TIMEOUT)


class _Socket:
    """The page's websocket to the app's server, where Streamlit says when a run starts and ends.
    Registered before the page opens the app."""

    def __init__(self, page) -> None:
        self.ws = None
        page.on("websocket", self._opened)

    def _opened(self, ws) -> None:
        self.ws = ws

    def press(self, action: Callable[[], None]) -> None:
        """Do `action` and wait for the end of the last whole-page run it causes, as the server
        reports it: a run that calls st.rerun() ends FINISHED_EARLY_FOR_RERUN and another starts;
        the last ends FINISHED_SUCCESSFULLY. For a press after which the page reads as before (an
        Apply of what is applied already): nothing drawn can tell that its runs are over."""
        started: set[str] = set()

        def last_run_ended(payload) -> bool:
            if isinstance(payload, str):
                return False
            msg = ForwardMsg.FromString(payload)
            kind = msg.WhichOneof("type")
            if kind == "new_session":
                started.add(msg.metadata.run.script_run_id)
            return (kind == "script_finished" and msg.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY
                    and msg.metadata.run.script_run_id in started)

        with self.ws.expect_event("framereceived", predicate=last_run_ended, timeout=TIMEOUT):
            action()


def _no_exception(page) -> None:
    assert page.get_by_test_id("stException").count() == 0


def _run_picker_text(page) -> str:
    return page.get_by_role("combobox", name="Run", exact=True).input_value()


def _call_no(events, seq: int) -> int:
    """The first call of the batch at `seq`, numbered over the session (counted here)."""
    return 1 + sum(len(e.calls) for e in events[:seq] if isinstance(e, Batch))


def _where(page) -> tuple[str, str]:
    q = parse_qs(urlparse(page.url).query)
    return q["run"][0], q["step"][0]


def test_replay_keeps_its_place_on_a_second_apply(ledger_server, page, artifacts_dir):
    name, url, base = ledger_server
    # The run with the most calls that window (at its defaults) halts: a place worth keeping.
    sid, run, first, last = _sql(url, "SELECT r.session_id, r.idx, r.first_seq, r.last_seq FROM runs r "
                                      "ORDER BY r.n_calls DESC, r.session_id, r.idx LIMIT 1")[0]
    step = (first + last) // 2
    base_spec, looser, loosest = (PolicySpec("window"), PolicySpec("window", {"threshold": 4}),
                                  PolicySpec("window", {"threshold": 5}))
    events = _events(url, sid)
    counts = {s.id: _halted_runs(events, s) for s in (base_spec, looser, loosest)}

    socket = _Socket(page)
    page.goto(f"{base}/replay?session={sid}&run={run}&policy={base_spec.text}&step={step}")
    page.get_by_test_id("stMetric").filter(has_text="Verdict at this call").wait_for(timeout=TIMEOUT)
    _ran(page)
    assert _where(page) == (str(run), str(step))
    field = page.get_by_label("threshold", exact=True)
    apply = page.get_by_role("button", name="Apply parameters")
    replaying = page.get_by_text(re.compile(r"^Replaying: ")).first

    def said(a: int, b: int) -> None:
        # Waits for the line (a rerun may still be drawing): a wrong count never appears and fails.
        page.get_by_test_id("stAlertContentInfo").filter(
            has_text=f"Halted runs in this session: {a} → {b}.").wait_for(timeout=TIMEOUT)
        _ran(page)  # the Apply's own rerun (st.rerun after the form) done before the next look or click

    def applied(action: Callable[[], None], spec: PolicySpec, a: int, b: int) -> None:
        # The form's run ends in st.rerun(); the run after it draws the line and what it replays.
        socket.press(action)
        expect(replaying).to_have_text(re.compile(rf"^Replaying: {re.escape(spec.label)} "), timeout=TIMEOUT)
        said(a, b)

    field.fill("4")
    applied(apply.click, looser, counts[base_spec.id], counts[looser.id])
    # Not stale: the run picker reads where the halt is now (the "still read step 183").
    halt = next((st.seq for st in replay(events, looser) if st.run == run
                 and any(c.verdict == vocab.HALT for c in st.checks)), None)
    picked = _run_picker_text(page)
    assert (f"halts at call #{_call_no(events, halt)}:" in picked) if halt is not None else ("halts at" not in picked), \
        picked
    # The issue: the second Apply jumped to run 0, step 0 and said "0 → 0".
    applied(apply.click, looser, counts[base_spec.id], counts[looser.id])
    # Issue 37: the Apply after the one that applied (Enter) says what that one said, never "unchanged".
    assert "unchanged" not in page.get_by_test_id("stAlertContentInfo").first.inner_text()
    assert _where(page) == (str(run), str(step))
    assert _run_picker_text(page).startswith(f"run #{run + 1}")  # runs counted from 1, like calls
    field.fill("5")
    applied(lambda: field.press("Enter"), loosest, counts[looser.id], counts[loosest.id])  # Enter submits the form
    applied(apply.click, loosest, counts[looser.id], counts[loosest.id])  # then Apply once more
    # Issue 37: the Apply after Enter keeps saying what Enter applied, never "halt unchanged".
    assert "unchanged" not in page.get_by_test_id("stAlertContentInfo").first.inner_text()
    assert _where(page) == (str(run), str(step))
    assert _run_picker_text(page).startswith(f"run #{run + 1}")  # runs counted from 1, like calls
    _no_exception(page)
    page.screenshot(path=str(artifacts_dir / f"e2e-jobs-{name}-replay-apply.png"))


def _most_halted(url: str) -> tuple[int, int]:
    return tuple(_sql(url, "SELECT session_id, run_idx FROM run_outcomes WHERE outcome = 'halted' "
                           "GROUP BY session_id, run_idx ORDER BY count(*) DESC, session_id, run_idx LIMIT 1")[0])


def _multi_turn_halt(url: str) -> tuple[int, int, int, int, str] | None:
    """A progress halt that counted a retry whose earlier attempts sit in earlier runs (a retry
    kept across user turns): (session, run, halt seq, count, tool), or None."""
    rows = _sql(url, "SELECT o.session_id, o.run_idx, o.halt_seq, k.count, c.tool FROM run_outcomes o "
                     "JOIN policies p ON p.id = o.policy_id JOIN checks k ON k.session_id = o.session_id AND "
                     "k.policy_id = o.policy_id AND k.seq = o.halt_seq AND k.idx = o.halt_idx "
                     "JOIN calls c ON c.session_id = k.session_id AND c.seq = k.seq AND c.idx = k.idx "
                     "WHERE p.detector = 'progress' AND o.outcome = 'halted' AND k.reason LIKE '%retried%' "
                     "ORDER BY o.session_id, o.run_idx")
    for sid, run, seq, count, tool in rows:
        earlier = _sql(url, "SELECT run_idx FROM calls WHERE session_id = :s AND seq <= :q AND tool = :t "
                            "ORDER BY seq DESC, idx DESC LIMIT :n", s=sid, q=seq, t=tool, n=count)
        if len({r for (r,) in earlier}) > 1:
            return sid, run, seq, count, tool
    return None


def _call_number(url: str, sid: int, seq: int, idx: int) -> int:
    """1-based over the session: the calls before this step, plus the call's place in its batch."""
    before = _sql(url, "SELECT count(*) FROM calls WHERE session_id = :s AND seq < :q", s=sid, q=seq)[0][0]
    return before + max(idx, 0) + 1


def test_the_why_names_call_numbers_and_links_every_call_it_rests_on(ledger_server, page, artifacts_dir):
    name, url, base = ledger_server
    multi = _multi_turn_halt(url)
    if multi is not None:
        sid, run, seq, count, tool = multi
    else:
        sid, run = _most_halted(url)
    halts = _sql(url, "SELECT p.detector, o.halt_seq, o.halt_idx FROM run_outcomes o JOIN policies p ON "
                      "p.id = o.policy_id WHERE o.session_id = :s AND o.run_idx = :r AND o.outcome = 'halted' "
                      "ORDER BY o.halt_seq, p.label", s=sid, r=run)
    page.goto(f"{base}/session?session={sid}&run={run}")
    page.get_by_test_id("stHeading").filter(has_text=f"Why run #{run + 1} halted").wait_for(timeout=TIMEOUT)
    why = page.locator(".st-key-why_box")
    # The box is drawn before its text: wait for each halt's sentence, then read the whole.
    for detector, hseq, hidx in halts:
        n = _call_number(url, sid, hseq, hidx)
        expect(why).to_contain_text(f"{detector} halted at call #{n}: ", timeout=TIMEOUT)  # one number, no step
    text = why.inner_text()
    assert "`" not in text and "None" not in text and "-1" not in text

    links = why.get_by_role("link", name=re.compile(r"^call #\d+"))
    assert links.count() >= 2
    seen = []
    for i in range(links.count()):
        a = links.nth(i)
        label, href = a.inner_text(), a.get_attribute("href")
        q = {k: int(v[0]) for k, v in parse_qs(urlparse(href).query).items()}
        n = int(re.match(r"call #(\d+)", label).group(1))
        # The call with that number (the n-th of the session, counted in SQL) is at the linked step and run.
        (cseq, crun), = _sql(url, "SELECT seq, run_idx FROM calls WHERE session_id = :s ORDER BY seq, idx "
                                  "LIMIT 1 OFFSET :o", s=sid, o=n - 1)
        assert q == {"session": sid, "run": crun, "step": cseq}, (label, href)
        assert (f"(run #{crun + 1})" in label) == (crun != run), label  # another run says which (from 1)
        seen.append((n, crun, cseq))
    if multi is not None:
        # "retried N times": the earlier attempts, in earlier runs, are listed and linked.
        attempts = _sql(url, "SELECT seq, run_idx FROM calls WHERE session_id = :s AND seq <= :q AND tool = :t "
                             "ORDER BY seq DESC, idx DESC LIMIT :n", s=sid, q=seq, t=tool, n=count)
        assert {(s, r) for s, r in attempts} <= {(s, r) for _, r, s in seen}
        assert len({r for _, r in attempts}) > 1
    _no_exception(page)
    page.screenshot(path=str(artifacts_dir / f"e2e-jobs-{name}-why-links.png"))

    # Follow the first link: that call's run opens, and its transcript names the call by its number.
    n, crun, _ = seen[0]
    page.goto(urljoin(page.url, links.nth(0).get_attribute("href")))
    page.get_by_text(re.compile(rf"^(▶ halted here · )?call #{n}\b")).first.wait_for(timeout=TIMEOUT)
    assert parse_qs(urlparse(page.url).query)["run"] == [str(crun)]
    _no_exception(page)


def test_enforcing_needs_a_pick_and_says_what_it_halts(ledger_server, page, artifacts_dir):
    name, url, base = ledger_server
    page.goto(base + "/compare")
    detector = page.get_by_role("combobox", name="Detector", exact=True)
    detector.wait_for(timeout=TIMEOUT)
    _ran(page)
    detector.click()
    page.get_by_role("option", name="run-length", exact=True).click()
    expect(detector).to_have_value("run-length", timeout=TIMEOUT)
    # What the pick's run draws: run-length's own parameter to sweep.
    expect(page.get_by_role("combobox", name="Parameter", exact=True)).to_have_value("max_strikes", timeout=TIMEOUT)
    _ran(page)
    page.get_by_role("button", name="Run sweep").click()
    page.get_by_text("Enforce on live agents").wait_for(timeout=120_000)  # the sweep's page, to its last section
    _ran(page)
    button = page.get_by_role("button", name=re.compile(r"^Enforce"))
    # Nothing preselected: the button cannot enforce, and says so.
    assert button.inner_text().strip() == "Enforce (pick a setting first)" and button.is_disabled()
    pick = page.get_by_role("combobox", name="Setting to enforce", exact=True)
    assert pick.input_value() == ""
    pick.scroll_into_view_if_needed()
    pick.click()
    expect(page.get_by_role("option").first).to_be_visible(timeout=TIMEOUT)
    options = [o.strip() for o in page.get_by_role("option").all_inner_texts()]
    # The footgun, the sweep's first row, is no longer the list's first: its default is.
    assert options[0].startswith("strikes=2 — ") and options.index(next(o for o in options
                                                                        if o.startswith("strikes=0 — "))) > 0
    page.get_by_role("option", name=re.compile(r"^strikes=0 — ")).click()
    expect(pick).to_have_value(re.compile(r"^strikes=0 — "), timeout=TIMEOUT)
    # What the pick's run draws: the sentence, then the button below it.
    expect(page.get_by_text(re.compile(r"^Enforcing adds strikes=0 to "))).to_be_visible(timeout=TIMEOUT)
    _ran(page)
    spec = PolicySpec("run-length", {"max_strikes": 0})
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        ids = store.session_ids(conn)
        per = [list(replay(store.load_events(conn, sid), spec)) for sid in ids]
    eng.dispose()
    # Sessions, the unit the leaderboard and Compare count.
    halted = sum(1 for steps in per if any(c.verdict == vocab.HALT for s in steps for c in s.checks))
    # Added to what is enforced now (the default set), the form's default.
    button = page.get_by_role("button", name=re.compile(r"^Add it to the enforced set: "))
    assert button.inner_text().strip().startswith(
        f"Add it to the enforced set: halts {halted:,} of {len(ids):,} swept sessions")
    page.get_by_text(re.compile(r"^Enforcing adds strikes=0 to the default set \(")).wait_for(timeout=TIMEOUT)
    page.screenshot(path=str(artifacts_dir / f"e2e-jobs-{name}-enforce-before.png"))
    button.click()
    # Drawn only by the run the press's st.rerun() starts, at the form's end.
    page.get_by_test_id("stAlertContentSuccess").filter(has_text="Enforced: live agents").wait_for(timeout=TIMEOUT)
    _ran(page)
    now = page.get_by_text(re.compile(r"^Enforced now: ")).first.inner_text()
    assert "max_strikes=0" in now and "the default set" not in now, now
    _no_exception(page)
    page.screenshot(path=str(artifacts_dir / f"e2e-jobs-{name}-enforce-after.png"))
