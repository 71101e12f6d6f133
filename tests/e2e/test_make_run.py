"""The README's first command, for real: `make run` ingests sample_data and serves the dashboard on
127.0.0.1; a headless Chromium then sees every sample session listed on the Sessions page."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path

import sqlalchemy as sa
from loopledger.ledger.engine import make_engine
from playwright.sync_api import expect

from tests.e2e.conftest import _free_port, expect_metric

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 180


def _wait_for(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"make run exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"make run did not serve {url} in {START_TIMEOUT_S}s:\n{log.read_text()[-3000:]}")


def test_make_run_serves_the_sample_sessions(tmp_path, page, artifacts_dir):
    ledger = tmp_path / "make-run.sqlite"
    port = _free_port()
    log = tmp_path / "make-run.log"
    with log.open("w") as out:
        # Its own process group: make → loopledger dashboard → streamlit all stop together.
        proc = subprocess.Popen(["make", "run", f"LEDGER={ledger}", f"PORT={port}"], cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={k: v for k, v in os.environ.items() if not k.startswith("LOOPLEDGER_DATABASE")})
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for(base + "/_stcore/health", proc, log)
        text = log.read_text()
        assert str(ledger) in text, "make run prints the ledger path it uses"
        assert f"http://127.0.0.1:{port}/" in text, "make run prints the dashboard URL"

        eng = make_engine(f"sqlite:///{ledger}", readonly=True)
        with eng.connect() as conn:
            n = conn.execute(sa.text("SELECT count(*) FROM sessions")).scalar()
            formats = conn.execute(sa.text("SELECT count(DISTINCT format) FROM sessions")).scalar()
        eng.dispose()
        # sample_data/README.md: twenty-eight sessions, one or more in every format LoopLedger reads.
        from loopledger.formats import readers

        assert (n, formats) == (28, len(readers())), "make run ingested all of sample_data"

        page.goto(base + "/")
        expect_metric(page, "Sessions", str(n))
        page.locator("[data-testid=stDataFrame]:visible").first.wait_for(timeout=60_000)
        page.screenshot(path=str(artifacts_dir / "e2e-make-run.png"), full_page=True)

        # Issue 37: the first dashboard scores the guards: make run imported sample_data/labels.csv.
        with (ROOT / "sample_data" / "labels.csv").open(encoding="utf-8", newline="") as fh:
            want = Counter(row["label"] for row in csv.DictReader(fh))
        assert "labelled from" in log.read_text()
        page.goto(base + "/leaderboard")
        expect(page.get_by_test_id("stMetric").filter(has_text="Loop sessions")).to_contain_text(
            str(want["loop"]), timeout=60_000)
        expect_metric(page, "Normal sessions", str(want["normal"]))
        page.screenshot(path=str(artifacts_dir / "e2e-make-run-leaderboard.png"), full_page=True)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
