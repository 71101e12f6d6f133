"""`loopledger dashboard` for real: serves from any folder (a user's stray click.py cannot shadow
the real package), honours a relative --db, and binds to loopback only by default."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).with_name("loopledger")
ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dashboard_serves_from_a_foreign_folder_on_loopback(tmp_path):
    work = tmp_path / "somewhere"
    work.mkdir()
    # What a user's folder may hold: modules named like the dashboard's dependencies.
    (work / "click.py").write_text("raise ImportError('the user\\'s own click.py was imported')\n")
    (work / "pandas.py").write_text("raise ImportError('the user\\'s own pandas.py was imported')\n")
    ingest = subprocess.run([str(BIN), "ingest", str(ROOT / "sample_data" / "anthropic"), "--db", "mine.sqlite"],
                            cwd=work, capture_output=True, text=True, timeout=120)
    assert ingest.returncode == 0, ingest.stderr
    port = _free_port()
    log = tmp_path / "dashboard.log"
    with log.open("w") as out:
        proc = subprocess.Popen([str(BIN), "dashboard", "--db", "mine.sqlite", "--port", str(port)], cwd=work,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={k: v for k, v in os.environ.items() if not k.startswith("LOOPLEDGER_")})
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.3)
        text = log.read_text()
        assert str(work / "mine.sqlite") in text, "the relative --db is resolved against the user's folder"
        # Loopback only: the port is not open on any other local address.
        other = socket.gethostbyname(socket.gethostname())
        if not other.startswith("127."):
            with socket.socket() as s:
                s.settimeout(2)
                assert s.connect_ex((other, port)) != 0
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
