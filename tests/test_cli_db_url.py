"""No command prints a database password: every one renders the ledger URL through
engine.display_url (a real process per command, a PostgreSQL URL with a password)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loopledger.ledger.engine import display_url

BIN = Path(sys.executable).with_name("loopledger")
SECRET = "S3cretPw"
# Port 9 (discard) refuses at once: every command fails to open the ledger and says where.
URL = f"postgresql+psycopg://alice:{SECRET}@127.0.0.1:9/ledger"


def test_display_url_hides_passwords():
    assert display_url(URL) == "postgresql+psycopg://alice:***@127.0.0.1:9/ledger"
    shown = display_url(f"postgresql+psycopg://alice@db/l?sslmode=require&password={SECRET}")
    assert SECRET not in shown and "sslmode=require" in shown and "alice@db" in shown
    assert display_url("sqlite:////tmp/a%20b/l.sqlite") == "/tmp/a b/l.sqlite"  # a file: its path
    assert SECRET not in display_url(f"not a url://bob:{SECRET}@host")


def _env():
    return {k: v for k, v in os.environ.items() if not k.startswith("LOOPLEDGER_")}


@pytest.mark.parametrize("args", [
    ["ingest", "{tmp}"], ["watch", "{tmp}"], ["recheck", "--policy", "window"], ["policies"],
    ["sweep", "--detector", "window", "--param", "threshold=2..3"], ["score"], ["labels", "export"],
    ["receive", "--port", "0", "--spool", "{tmp}"],
])
def test_commands_never_print_the_password(tmp_path, args):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    p = subprocess.run([str(BIN), *argv, "--db", URL], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path, env=_env())
    assert p.returncode == 1, p.stdout + p.stderr
    assert "alice:***@127.0.0.1:9/ledger" in p.stderr  # it does say which ledger
    assert SECRET not in p.stdout + p.stderr


def test_env_url_never_printed_either(tmp_path):
    p = subprocess.run([str(BIN), "policies"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env=dict(_env(), LOOPLEDGER_DATABASE_URL=URL))
    assert p.returncode == 1 and SECRET not in p.stdout + p.stderr


def test_dashboard_never_prints_the_password(tmp_path):
    log = tmp_path / "dashboard.log"
    with log.open("w") as out:
        proc = subprocess.Popen([str(BIN), "dashboard", "--db", URL, "--port", "1"], cwd=tmp_path, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, env=_env())
    try:
        deadline = time.monotonic() + 60
        while "LoopLedger dashboard" not in log.read_text() and proc.poll() is None:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    text = log.read_text()
    assert "alice:***@127.0.0.1:9/ledger" in text and SECRET not in text


def test_dashboard_page_never_shows_the_password():
    from app_support import MAIN, ledger_env, plain_texts
    from streamlit.testing.v1 import AppTest

    with ledger_env(URL):
        at = AppTest.from_file(str(MAIN), default_timeout=60).run()
    assert not at.exception, at.exception
    shown = " ".join(plain_texts(at)) + " ".join(str(e.value) for e in at.error)
    assert "127.0.0.1:9" in shown and SECRET not in shown
