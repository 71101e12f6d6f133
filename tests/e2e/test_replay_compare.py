"""In a real browser, on a ledger the real ingest pipeline filled from sample_data:
Session page → "Replay this run at the halt" → Replay lands on the halt → step away and back →
loosen the threshold → the halt moves; then Compare: run a sweep, open a flipped run in Replay.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlparse

import pytest
from loopledger import vocab, worker
from loopledger.detectors.policy import INT, PARAMS, PolicySpec
from loopledger.events import Batch
from loopledger.ledger import read, store
from loopledger.ledger.engine import make_engine
from loopledger.ledger.migrate import upgrade
from loopledger.replay import replay, tally
from playwright.sync_api import expect

from tests.e2e.conftest import start_server

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pipeline_server(tmp_path_factory):
    """A dashboard on a ledger filled by the ingest worker (live replays then agree with it)."""
    tmp = tmp_path_factory.mktemp("e2e_replay")
    url = f"sqlite:///{tmp / 'ledger.sqlite'}"
    eng = make_engine(url)
    upgrade(eng)
    worker.ingest_paths(eng, [ROOT / "sample_data"], worker.Options())
    eng.dispose()
    with start_server(url, tmp / "server.log") as base:
        yield base, url


def _halts(spec: PolicySpec, events: list, first: int, last: int) -> list[int]:
    return [s.seq for s in replay(events, spec)
            if first <= s.seq <= last and any(c.verdict == vocab.HALT for c in s.checks)]


def _case(url: str):
    """A halted run, the policy the Session page links it with, and a loosened parameter that
    takes the halt off that step: (sid, run, policy, halt seq, param, value, the session's next
    halt under it or None)."""
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        pol = {p["id"]: p for p in store.stored_policies(conn)}
        for sid in store.session_ids(conn):
            halts = read.halts(conn, sid)
            events = store.load_events(conn, sid)
            for run in sorted(set(halts["run_idx"])):
                h = halts[halts["run_idx"] == run].iloc[0]  # what the Session page's link uses
                first, last = read.run_bounds(conn, sid, int(run))
                p = pol[h["policy_id"]]
                spec = PolicySpec(p["detector"], json.loads(p["params"]))
                seq = int(h["halt_seq"])
                for param in (q for q in PARAMS[spec.detector] if q.kind == INT):
                    try:
                        looser = spec.with_params(**{param.name: spec.params[param.name] + 1})
                    except ValueError:
                        continue
                    moved = _halts(looser, events, first, last)
                    if seq not in moved:
                        # "Next halt" goes across every run of the session, not this run's only.
                        nxt = next((s for s in _halts(looser, events, 0, len(events) - 1) if s > seq), None)
                        eng.dispose()
                        return sid, int(run), spec, seq, param.name, looser.params[param.name], nxt
    eng.dispose()
    pytest.fail("no sample run whose halt moves when one threshold is loosened by one")


def _metric(page, label: str):
    """The value of the st.metric labelled exactly `label`, as a locator to `expect` on."""
    label_el = page.get_by_test_id("stMetricLabel").get_by_text(label, exact=True)
    return page.get_by_test_id("stMetric").filter(has=label_el).first.get_by_test_id("stMetricValue")


def _wait_metric(page, label: str, value: str) -> None:
    expect(_metric(page, label)).to_have_text(value, timeout=60_000)


def _step(url: str) -> int:
    return int(parse_qs(urlparse(url).query)["step"][0])


def _at_stop_before(page, url: str, sid: int, run: int, spec: PolicySpec, seq: int, step: int) -> None:
    """`step` is where Back from `seq` belongs: the stop before it in the run — a batch of calls,
    or a step the policy judged (a prose turn, for stagnation), never an answer or a user turn.
    Then waits until the transcript's heading names that step: the page has drawn that cursor
    (the URL changes first)."""
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        events = store.load_events(conn, sid)
        first, _ = read.run_bounds(conn, sid, run)
    eng.dispose()
    judged = {s.seq for s in replay(events, spec) if s.checks}
    stops = [s for s in range(first, seq) if isinstance(events[s], Batch) or s in judged]
    assert step == stops[-1]
    before = sum(len(e.calls) for e in events[:step] if isinstance(e, Batch))
    if isinstance(events[step], Batch):
        heading = re.compile(rf"^Transcript, run #\d+, at call #{before + 1}( \(step {step}\))?$")
    else:  # "at the assistant reply after call #12"
        heading = re.compile(rf"^Transcript, run #\d+, at the [a-z ]+ after call #{before}$")
    expect(page.get_by_text(heading)).to_be_visible(timeout=60_000)


def test_session_to_replay_step_to_halt_and_move_it(pipeline_server, page, artifacts_dir):
    base, url = pipeline_server
    sid, run, spec, seq, param, value, nxt = _case(url)
    page.goto(f"{base}/session?session={sid}&run={run}")
    link = page.get_by_role("link", name="Replay this run at the halt")
    expect(link).to_be_visible(timeout=60_000)
    href = link.get_attribute("href")
    q = {k: v[0] for k, v in parse_qs(urlparse(href).query).items()}
    assert (q["session"], q["run"], q["step"]) == (str(sid), str(run), str(seq))
    link.click()  # Replay opens in this tab (the app's own navigation), not in a new one
    rp = page
    rp.wait_for_url(re.compile(rf"/replay\?.*step={seq}(&|$)"), timeout=60_000)
    assert len(page.context.pages) == 1
    expect(rp.get_by_test_id("stMetric").first).to_be_visible(timeout=60_000)
    _wait_metric(rp, "Verdict at this call", vocab.HALT)
    expect(rp.get_by_text("▶ at the cursor")).to_be_visible(timeout=30_000)
    rp.screenshot(path=str(artifacts_dir / "e2e-replay-at-halt.png"), full_page=True)

    # Step away and come back with "Next halt": the cursor walks, the URL follows.
    rp.get_by_role("button", name="◀ Back").click()
    # Back goes stop to stop: to the previous call (or judged step) of the run, never to the
    # answer just before.
    rp.wait_for_url(lambda u: parse_qs(urlparse(u).query).get("step") != [str(seq)], timeout=30_000)
    back = _step(rp.url)
    assert back < seq
    _at_stop_before(rp, url, sid, run, spec, seq, back)
    rp.get_by_role("button", name="Next halt").click()
    rp.wait_for_url(re.compile(rf"step={seq}(&|$)"), timeout=30_000)
    _wait_metric(rp, "Verdict at this call", vocab.HALT)

    # Loosen the threshold: this step no longer halts, the next halt (if any) is later.
    box = rp.get_by_label(param, exact=True)
    box.fill(str(value))
    rp.get_by_role("button", name="Apply parameters").click()
    # Applied: the page's policy line names the new value as that parameter's own (not as the
    # tail of another's: `ok_halt_at=4` is on the page before Apply of `halt_at=4`).
    applied = re.compile(rf"^(Live policy|Replaying): .*(?<![\w]){re.escape(param)}={value}(?![\w]).*$")
    expect(rp.get_by_text(applied)).to_be_visible(timeout=60_000)
    expect(_metric(rp, "Verdict at this call")).not_to_have_text(vocab.HALT, timeout=60_000)
    assert f"step={seq}" in rp.url
    next_halt = rp.get_by_role("button", name="Next halt")
    if nxt is None:
        expect(next_halt).to_be_disabled(timeout=60_000)
    else:
        next_halt.click()
        rp.wait_for_url(re.compile(rf"step={nxt}(&|$)"), timeout=30_000)
        _wait_metric(rp, "Verdict at this call", vocab.HALT)
    assert not rp.get_by_test_id("stException").count()
    rp.screenshot(path=str(artifacts_dir / "e2e-replay-halt-moved.png"), full_page=True)


def test_compare_sweep_then_open_a_flipped_run(pipeline_server, page, artifacts_dir):
    base, url = pipeline_server
    page.goto(f"{base}/compare")
    page.get_by_role("button", name="Run sweep").click()
    expect(page.get_by_text("Runs whose outcome flips between two settings")).to_be_visible(timeout=120_000)
    expect(page.get_by_test_id("stVegaLiteChart").first).to_be_visible(timeout=60_000)
    open_b = page.get_by_role("link", name="Replay under B")
    expect(open_b).to_be_visible(timeout=60_000)
    page.screenshot(path=str(artifacts_dir / "e2e-compare.png"), full_page=True)
    href = open_b.get_attribute("href")
    q = {k: v[0] for k, v in parse_qs(urlparse(href).query).items()}
    spec = PolicySpec.parse(q["policy"])
    sid, run = int(q["session"]), int(q["run"])
    # The run really flips: settings A and B (first and last of the sweep) disagree on it.
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        events = store.load_events(conn, sid)
    eng.dispose()
    href_a = page.get_by_role("link", name="Replay under A").get_attribute("href")
    spec_a = PolicySpec.parse(parse_qs(urlparse(href_a).query)["policy"][0])
    outcome = {sp: next(r.outcome for r in tally(replay(events, sp)).runs if r.run == run) for sp in (spec, spec_a)}
    assert outcome[spec] != outcome[spec_a]
    open_b.click()  # in this tab
    rp = page
    rp.wait_for_url(re.compile(r"/replay\?"), timeout=60_000)
    assert len(page.context.pages) == 1
    expect(rp.get_by_test_id("stMetric").first).to_be_visible(timeout=60_000)
    assert urljoin(base + "/", href).split("?")[0].endswith("/replay")
    expect(rp.get_by_text(f"Replaying: {spec.label}").first).to_be_visible(timeout=30_000)
    # The link lands on B's halt, or, where B lets the run pass, on A's: there B does not halt.
    # A run neither setting halts (warned under one, clean under the other) has no halt to land on.
    assert bool(q.get("step")) == (vocab.HALTED in (outcome[spec], outcome[spec_a]))
    if outcome[spec] == vocab.HALTED:
        _wait_metric(rp, "Verdict at this call", vocab.HALT)
    else:
        expect(rp.get_by_text("▶ at the cursor")).to_be_visible(timeout=30_000)
        expect(_metric(rp, "Verdict at this call")).not_to_have_text(vocab.HALT, timeout=60_000)
    assert not rp.get_by_test_id("stException").count()
    rp.screenshot(path=str(artifacts_dir / "e2e-compare-flipped-run.png"), full_page=True)
