"""Server render time of each dashboard page (AppTest) on a 10k-session / 1M-call ledger, on
SQLite and on PostgreSQL (a team's shared ledger must meet the same page budget).

PostgreSQL: the server named by $LOOPLEDGER_BENCH_PG_URL (else $LOOPLEDGER_TEST_PG_URL); the
generated ledger is a database of its own (ll_bench_pages_…), kept between runs like the SQLite
file. Without a server the PostgreSQL table says so instead of a figure.

Baseline, same run: an AppTest script that takes the pages' cached read-only engine and shows
`SELECT 1` as a metric (the fixed cost of a Streamlit script run plus a connection). The ledger's
last session is a long one (BIG_SESSION calls): the Session page's worst case. Every sample
starts with st.cache_data cleared, so it is a first view, not a cache hit; the warm (cached) time
is reported beside it. The generated ledger is kept in bench/.cache/ between runs.
"""

from __future__ import annotations

import os
import re
import statistics
import time
from pathlib import Path

import sqlalchemy as sa
from loopledger.ledger.engine import make_engine

from bench.gen_ledger import generate

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(__file__).resolve().parent / ".cache"
MAIN = ROOT / "app" / "main.py"
BUDGET_S = 1.0
# The pages' own cached read-only engine, one trivial query, one element: what every page pays.
BASELINE = """
import sqlalchemy as sa
import streamlit as st
from loopledger.app import data
with data.connect() as conn:
    st.metric("one", conn.execute(sa.text("SELECT 1")).scalar())
"""
REPLAY = "views/replay.py"
COMPARE = "views/compare.py"
BIG_SESSION = 20_000  # calls in the ledger's last session: a long agent session
# "SESSIONS,CALLS" overrides the ledger's size (a loaded machine may not build 10k/1M in time);
# the section's text says which size it measured.
SIZE_ENV = "LOOPLEDGER_BENCH_PAGES_SIZE"
REPS_ENV = "LOOPLEDGER_BENCH_PAGES_REPS"  # samples per figure (a loaded machine may need the run shorter)


def _ledger(sessions: int, calls: int) -> str:
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"pages-{sessions}x{calls}-big{BIG_SESSION}-v2.sqlite"
    if not path.exists():
        tmp = path.with_suffix(".partial.sqlite")
        tmp.unlink(missing_ok=True)
        t0 = time.perf_counter()
        generate(f"sqlite:///{tmp}", sessions=sessions, calls=calls, seed=1, big=BIG_SESSION)
        print(f"[bench] generated {path.name} in {time.perf_counter() - t0:.0f}s", flush=True)
        tmp.rename(path)
    return f"sqlite:///{path}"


PG_ENV = ("LOOPLEDGER_BENCH_PG_URL", "LOOPLEDGER_TEST_PG_URL")


def _pg_ledger(server: str, sessions: int, calls: int) -> str:
    """A database on `server` holding the generated ledger (generated once, then reused)."""
    from sqlalchemy.engine import make_url

    name = f"ll_bench_pages_{sessions}x{calls}_big{BIG_SESSION}_v2"
    url = make_url(server).set(database=name).render_as_string(hide_password=False)
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            exists = conn.execute(sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).scalar()
            if exists:
                done = sa.create_engine(url)
                try:
                    with done.connect() as c:  # complete only if the generator's last step ran
                        ok = c.execute(sa.text("SELECT count(*) FROM sessions")).scalar() == sessions
                except sa.exc.SQLAlchemyError:
                    ok = False
                done.dispose()
                if ok:
                    return url
                conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    t0 = time.perf_counter()
    generate(url, sessions=sessions, calls=calls, seed=1, big=BIG_SESSION)
    eng = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with eng.connect() as conn:
        conn.execute(sa.text("VACUUM ANALYZE"))  # fresh statistics, as autovacuum would give a live ledger
    eng.dispose()
    print(f"[bench] generated PostgreSQL {name} in {time.perf_counter() - t0:.0f}s", flush=True)
    return url


def _targets(url: str) -> dict:
    eng = make_engine(url, readonly=True)
    with eng.connect() as conn:
        halted = conn.execute(sa.text("SELECT session_id FROM session_stats GROUP BY session_id "
                                      "ORDER BY sum(halts) DESC LIMIT 1")).scalar()
        biggest = conn.execute(sa.text("SELECT id FROM sessions ORDER BY n_calls DESC LIMIT 1")).scalar()
        n_calls = conn.execute(sa.text("SELECT max(n_calls) FROM sessions")).scalar()
        # The "~200-call Session page": the session nearest 200 calls.
        mid, mid_calls = conn.execute(sa.text("SELECT id, n_calls FROM sessions ORDER BY abs(n_calls - 200), id "
                                              "LIMIT 1")).first()
        # "Replay this run at the halt" from the most halted session: its first halt.
        first_halt = sa.text("SELECT run_idx, policy_id, halt_seq FROM run_outcomes WHERE session_id = :s "
                             "AND halt_seq IS NOT NULL ORDER BY halt_seq LIMIT 1")
        halt = conn.execute(first_halt, {"s": halted}).first()
        # The largest session halts nowhere in the generated ledger: its longest run's last step then.
        big_halt = conn.execute(first_halt, {"s": biggest}).first() or conn.execute(sa.text(
            "SELECT r.idx, (SELECT id FROM policies WHERE is_default ORDER BY label LIMIT 1), r.last_seq FROM runs r "
            "WHERE r.session_id = :s ORDER BY r.n_calls DESC LIMIT 1"), {"s": biggest}).first()
    eng.dispose()
    return {"halted": halted, "biggest": biggest, "biggest_calls": n_calls, "mid": mid, "mid_calls": mid_calls,
            "halt": halt, "big_halt": big_halt}


def _sample(page: str | None, params: dict, warm: bool, clicks: tuple[str, ...] = ()) -> float:
    """One server render of `page`; with `clicks`, the render that pressing the last of those
    buttons causes, the ones before it pressed first (what comes before the last press is not
    timed)."""
    import streamlit as st
    from loopledger.app import sweep_jobs
    from streamlit.testing.v1 import AppTest

    sweep_jobs.stop_all()  # Compare's background sweep of an earlier sample: not this sample's work
    at = AppTest.from_file(str(MAIN), default_timeout=300)
    if page:
        at.run()  # lands on Sessions; the timed run is the switch to `page`
        for k, v in params.items():
            at.query_params[k] = str(v)
        at.switch_page(page)
    if clicks:
        at.run()
        for key in clicks[:-1]:
            at.button(key=key).click().run()
    press = bool(clicks)
    if warm:
        if clicks:
            at.button(key=clicks[-1]).click()
        at.run()
        # A button the press hides: the warm view is a rerun.
        press = bool(clicks) and any(b.key == clicks[-1] for b in at.button)
    else:
        st.cache_data.clear()
        if page in (REPLAY, COMPARE):  # their replays are cache_resource: a first view replays from scratch
            st.cache_resource.clear()
    if press:
        at.button(key=clicks[-1]).click()
    t0 = time.perf_counter()
    at.run()
    dt = time.perf_counter() - t0
    if at.exception:
        raise RuntimeError(f"{page or 'sessions'} raised: {at.exception[0].value}")
    if at.error or not (at.metric or at.dataframe or at.table):  # a fast error page is not a fast page
        raise RuntimeError(f"{page or 'sessions'} did not render: {[e.value for e in at.error]}")
    return dt


def _baseline() -> float:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_string(BASELINE, default_timeout=60)
    t0 = time.perf_counter()
    at.run()
    return time.perf_counter() - t0


def _measure(url: str, reps: int) -> tuple[list[str], float]:
    """One table row per page on the ledger at `url`, and the baseline it was measured against."""
    old = os.environ.get("LOOPLEDGER_DATABASE_URL")
    os.environ["LOOPLEDGER_DATABASE_URL"] = url
    try:
        tg = _targets(url)
        _baseline()  # imports and first connection outside the measurement
        base = statistics.median(_baseline() for _ in range(reps))
        rows = []
        drawn = _browser_times(url, tg, reps)
        try:
            background, cached, warm, n_whole = _compare_whole(reps)
            rows.append(f"| Compare: the whole selection ({n_whole} sessions), cold — Run sweep pressed → first pass "
                        f"drawn, the rest swept in the background → the whole drawn | "
                        f"{statistics.median(background) * 1000:.0f} ms | | {base * 1000:.0f} ms | "
                        f"{statistics.median(background) / base:.1f}× | first pass ≤ 1 s, then a progress bar | |")
            cm = statistics.median(cached)
            rows.append(f"| Compare: the whole selection ({n_whole} sessions) viewed again, from the server's tally "
                        f"cache (st.cache_data cleared) | {cm * 1000:.0f} ms | {statistics.median(warm) * 1000:.0f} ms | "
                        f"{base * 1000:.0f} ms | {cm / base:.1f}× | ≤ {BUDGET_S:.0f} s {'✅' if cm <= BUDGET_S else '❌'} | "
                        f"{drawn.get(COMPARE_FIRST, '')} |")
        except RuntimeError as exc:
            rows.append(f"| Compare: the whole selection | failed: {str(exc)[:160]} | | | | | |")
        for name, page, params, clicks, _nav in _pages(tg):
            try:
                _sample(page, params, warm=False, clicks=clicks)  # first touch of this page's tables, not counted
                cold = statistics.median(_sample(page, params, warm=False, clicks=clicks) for _ in range(reps))
                warm = statistics.median(_sample(page, params, warm=True, clicks=clicks) for _ in range(reps))
            except RuntimeError as exc:
                rows.append(f"| {name} | failed: {str(exc)[:160]} | | {base * 1000:.0f} ms | | ≤ {BUDGET_S:.0f} s ❌ | |")
                continue
            ok = "✅" if cold <= BUDGET_S else "❌"
            rows.append(f"| {name} | {cold * 1000:.0f} ms | {warm * 1000:.0f} ms | {base * 1000:.0f} ms | "
                        f"{cold / base:.1f}× | ≤ {BUDGET_S:.0f} s {ok} | {drawn.get(name, '')} |")
    finally:
        if old is None:
            os.environ.pop("LOOPLEDGER_DATABASE_URL", None)
        else:
            os.environ["LOOPLEDGER_DATABASE_URL"] = old
    return rows, base


def _pages(tg: dict) -> list[tuple[str, str | None, dict, tuple[str, ...], str | None]]:
    """(row name, page file, query parameters, buttons to press in turn, how a browser gets there:
    the sidebar link's title, or None for a URL with the query parameters)."""
    pages = [
        ("Sessions (home, all default policies)", None, {}, (), "Sessions"),
        (f"Session #{tg['halted']} (most halted)", "views/session.py", {"session": tg["halted"]}, (), None),
        (f"Session #{tg['biggest']} (largest, {tg['biggest_calls']} calls)", "views/session.py",
         {"session": tg["biggest"]}, (), None),
        (f"Session #{tg['mid']} ({tg['mid_calls']} calls)", "views/session.py", {"session": tg["mid"]}, (), None),
    ]
    for key, sid, what in (("halt", tg["halted"], "most halted"), ("big_halt", tg["biggest"], "largest")):
        if tg[key] is not None:
            run_idx, policy, seq = tg[key]
            pages.append((f"Replay of session #{sid} ({what}) at its halt or longest run", REPLAY,
                          {"session": sid, "run": run_idx, "policy": policy, "step": seq}, (), None))
    return pages + [
        (COMPARE_FIRST, COMPARE, {}, ("cp_run",), "Compare"),
        ("Guard leaderboard", "views/leaderboard.py", {}, (), "Guard leaderboard"),
        ("Ingest health", "views/health.py", {}, (), "Ingest health"),
    ]


COMPARE_FIRST = ("Compare: the default sweep (Run sweep pressed) — AppTest cold: its first pass; browser: the "
                 "whole selection, from the server's tally cache")
# The buttons the bench presses, by their text in a browser.
BUTTONS = {"cp_run": "Run sweep"}


def _compare_whole(reps: int) -> tuple[list[float], list[float], list[float], int]:
    """The default sweep's whole selection: (a) cold, from the press to the whole drawn — the first
    pass, the background job over the rest, the redraw its progress fragment asks for; (b) the same
    sweep viewed again (st.cache_data cleared, the server's tally cache kept): the whole selection
    from the cache, cold and warm. And how many sessions the selection holds."""
    import streamlit as st
    from loopledger.app import sweep_jobs
    from streamlit.testing.v1 import AppTest

    def opened() -> AppTest:
        at = AppTest.from_file(str(MAIN), default_timeout=300)
        at.run()
        at.switch_page(COMPARE)
        at.run()
        return at

    background, cached, warm = [], [], []
    n = 0
    for _ in range(reps):
        sweep_jobs.stop_all()
        st.cache_data.clear()
        st.cache_resource.clear()
        at = opened()
        at.button(key="cp_run").click()
        t0 = time.perf_counter()
        at.run()
        job = sweep_jobs.wait(at.session_state["cp_job"]) if at.session_state["cp_job"] else None
        at.run()  # what the page's progress fragment asks for once the job is done
        background.append(time.perf_counter() - t0)
        if at.exception or any("First pass" in w.value for w in at.warning) or (job and job.error):
            raise RuntimeError(f"Compare did not draw the whole selection: {at.exception or (job and job.error)}")
        n = next(int(m.group(1)) for c in [*at.caption, *at.text]
                 if (m := re.match(r"(\d+) session\(s\) selected", c.value)))
        st.cache_data.clear()
        at = opened()
        at.button(key="cp_run").click()
        t0 = time.perf_counter()
        at.run()
        cached.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        at.run()
        warm.append(time.perf_counter() - t0)
        if at.exception or any("First pass" in w.value for w in at.warning):
            raise RuntimeError("Compare did not draw the whole selection from its cache")
    return background, cached, warm, n
# A page is drawn when Streamlit is no longer running its script and nothing on it is stale.
_DRAWN_JS = """() => !document.querySelector('[data-testid="stStatusWidget"]')
    && document.querySelectorAll('[data-stale="true"]').length === 0
    && document.querySelectorAll('[data-testid="stMain"] [data-testid="stElementContainer"]').length > 0"""


def _browser_times(url: str, tg: dict, reps: int) -> dict[str, str]:
    """Chromium (Playwright) on a real `streamlit run`: from the click on a page's sidebar link
    (or, for the Session page, from following its URL) to the page drawn; median of `reps`.
    {} with a reason logged when there is no browser here."""
    import tempfile

    from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, start_server

    if not CHROMIUM.exists():
        print("[bench] pages: no /usr/bin/chromium, no browser times", flush=True)
        return {}
    from playwright.sync_api import sync_playwright

    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp, start_server(url, Path(tmp) / "server.log") as base, \
            sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        for name, file, params, clicks, nav in _pages(tg):
            times = []
            try:
                for _ in range(reps + 1):  # the first, the server's first touch, is not counted
                    if nav is None:
                        query = "&".join(f"{k}={v}" for k, v in params.items())
                        target = f"{base}/{Path(file or '').stem}?{query}"
                        page.goto(f"{base}/health")
                        page.wait_for_function(_DRAWN_JS, timeout=120_000)
                        t0 = time.perf_counter()
                        page.goto(target)
                    else:
                        page.goto(f"{base}/health" if nav != "Ingest health" else base)
                        page.wait_for_function(_DRAWN_JS, timeout=120_000)
                        t0 = time.perf_counter()
                        page.get_by_test_id("stSidebarNav").get_by_role("link", name=nav, exact=True).click()
                        for i, key in enumerate(clicks):  # Compare: the sweep runs on its button
                            page.wait_for_function(_DRAWN_JS, timeout=120_000)
                            if i and i == len(clicks) - 1:  # a press after the first view: timed from it
                                t0 = time.perf_counter()
                            page.get_by_role("button", name=BUTTONS[key]).click()
                    page.wait_for_timeout(50)  # let the click reach the server before testing "drawn"
                    page.wait_for_function(_DRAWN_JS, timeout=120_000)
                    times.append(time.perf_counter() - t0)
                out[name] = f"{statistics.median(times[1:]) * 1000:.0f} ms" + (" (URL)" if nav is None else "")
            except Exception as exc:  # noqa: BLE001 (a browser hiccup costs a cell, not the section)
                out[name] = f"not measured: {type(exc).__name__}"
        browser.close()
    return out


HEAD = ["| page | cold | warm | baseline | cold / baseline | budget | browser: click → drawn |",
        "|---|---|---|---|---|---|---|"]


def run(quick: bool) -> str:
    sessions, calls = (1_000, 100_000) if quick else (10_000, 1_000_000)
    if os.environ.get(SIZE_ENV):
        sessions, calls = (int(x) for x in os.environ[SIZE_ENV].split(","))
    reps = int(os.environ.get(REPS_ENV) or (3 if quick else 5))
    load_start = os.getloadavg()[0]
    sqlite_rows, _ = _measure(_ledger(sessions, calls), reps)
    load_sqlite = os.getloadavg()[0]
    server = next((os.environ[k] for k in PG_ENV if os.environ.get(k)), None)
    if server:
        from loopledger.ledger.engine import display_url

        pg_rows, _ = _measure(_pg_ledger(server, sessions, calls), reps)
        pg = [f"PostgreSQL ({sa.__name__} {sa.__version__}, psycopg 3; server {display_url(server)}), the same "
              "generated ledger, the same pages, read through the same read-only engine "
              "(default_transaction_read_only, statement_timeout):\n", *HEAD, *pg_rows]
    else:
        pg = ["PostgreSQL: not measured (set LOOPLEDGER_BENCH_PG_URL or LOOPLEDGER_TEST_PG_URL to a server).\n"]
    return "\n".join([
        "## Dashboard pages (server render time, AppTest)\n",
        f"Ledger: {sessions:,} sessions / {calls:,} tool calls, 5 default policies (bench/gen_ledger.py)"
        + ("" if (sessions, calls) == (10_000, 1_000_000) else " — **smaller than the 10k / 1M budget size**") + ". "
        f"Load average (1 min) at the start {load_start:.1f}, after SQLite {load_sqlite:.1f}, at the end "
        f"{os.getloadavg()[0]:.1f}, on {os.cpu_count()} cores. "
        f"Median of {reps} runs; cold = st.cache_data cleared before the run (a first view), warm = cached. "
        "Baseline: an AppTest script showing `SELECT 1` through the pages' cached read-only engine, on the "
        f"same backend. The largest session holds {BIG_SESSION:,} calls (its timeline is drawn one run at a time). "
        "Browser: Chromium (Playwright) on a real `streamlit run`, from the click on the page's sidebar link "
        "through the page's buttons (Compare: Run sweep) — or, marked (URL), "
        "from following the page's link — "
        "until Streamlit stops running and nothing on the page is stale; median of the visits after a first, "
        "uncounted one (so the server's st.cache_data is warm: compare with the warm column); server and "
        "browser share the machine. Compare's first view sweeps a bounded first pass (the labelled sessions, "
        "then the newest that fit in 36,000 event × setting steps; the page says so) and hands the rest of the "
        "selection to a background job behind a progress bar; what is swept is kept per session version and "
        "setting by the server (its tally cache), so the same sweep viewed again is drawn whole from it: both "
        "rows are measured, and the browser's Compare figure, taken after a first visit, is that cached view.\n",
        "SQLite:\n", *HEAD, *sqlite_rows, "", *pg, "",
    ])


if __name__ == "__main__":
    import sys

    print(run(quick="--quick" in sys.argv))
