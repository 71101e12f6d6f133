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

import pytest

BIN = Path(sys.executable).with_name("loopledger")
ROOT = Path(__file__).resolve().parent.parent


def _ledger(tmp_path: Path) -> str:
    """An (empty) ledger: the dashboard only opens one that exists."""
    from loopledger.ledger import migrate
    from loopledger.ledger.engine import make_engine

    path = tmp_path / "l.sqlite"
    eng = make_engine(f"sqlite:///{path}")
    migrate.upgrade(eng)
    eng.dispose()
    return str(path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> set[str]:
    """The local addresses of the sockets listening on `port` (from /proc/net/tcp and tcp6)."""
    import ipaddress

    found = set()
    for name, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        with open(name) as fh:
            next(fh)
            for line in fh:
                local, state = line.split()[1], line.split()[3]
                addr, hex_port = local.split(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A = LISTEN
                    raw = bytes.fromhex(addr)
                    # /proc prints each 32-bit word in host (little-endian) order.
                    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, width, 4))
                    found.add(str(ipaddress.ip_address(raw)))
    return found


def _start(args: list[str], log: Path, cwd: Path) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen([str(BIN), "dashboard", *args], cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                env={k: v for k, v in os.environ.items() if not k.startswith("LOOPLEDGER_")})


def _healthy(proc: subprocess.Popen, port: int, log: Path) -> None:
    deadline = time.monotonic() + 90
    while True:
        assert proc.poll() is None, log.read_text()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.3)


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        return [int(c) for c in fh.read().split()]


def _gone(pid: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().split(")")[-1].split()[0] == "Z":  # a zombie: ended, not yet reaped
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stopping_the_dashboard_stops_its_server(tmp_path, sig):
    port = _free_port()
    log = tmp_path / "dashboard.log"
    proc = _start(["--db", _ledger(tmp_path), "--port", str(port)], log, tmp_path)
    try:
        _healthy(proc, port, log)
        servers = _children(proc.pid)
        assert servers, "the dashboard runs Streamlit as its child"
        proc.send_signal(sig)  # to the command only, as a service manager or `kill PID` does
        assert proc.wait(timeout=60) == 128 + sig
        assert all(_gone(pid) for pid in servers), "the Streamlit server outlived the command"
        assert _listening(port) == set()
    finally:
        for pid in [proc.pid] + (_children(proc.pid) if proc.poll() is None else []):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_non_loopback_host_is_warned_about(tmp_path):
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: the server cannot bind and ends, and
    # nothing is exposed while the test runs; the warning comes before it starts.
    log = tmp_path / "dashboard.log"
    proc = _start(["--db", _ledger(tmp_path), "--host", "192.0.2.1", "--port", str(_free_port())],
                  log, tmp_path)
    try:
        proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "warning: --host 192.0.2.1" in log.read_text() and "no authentication" in log.read_text()


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
        # Loopback only: the kernel's table of listening sockets says which address holds the port
        # (asking another local address would prove nothing on a host whose only address is 127.x).
        assert _listening(port) == {"127.0.0.1"}
        assert "no authentication" not in text
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
