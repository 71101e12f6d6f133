"""A team on one machine for the tests: the team's `loopledger receive` as a real process, and
members — each with a HOME of their own (their own ledger, settings, resident guard) — whose real
`loopledger hook` processes decide locally and forward in the background."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.real_clients import stop_residents

BIN = Path(sys.executable).with_name("loopledger")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(*args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=180, env=env)
    if check:
        assert proc.returncode == 0, f"loopledger {' '.join(args)}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def wait_for(predicate, timeout: float = 90.0, every: float = 0.25):
    """`predicate()`'s first truthy value within `timeout` seconds (None if it never is)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every)


def wait_http(url: str, proc: subprocess.Popen, log: Path, headers: dict | None = None, timeout: float = 120) -> None:
    """Wait until `url` answers 200 (a server `proc` started, writing to `log`); fail if it exits."""
    req = urllib.request.Request(url, headers=headers or {})

    def up():
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[:3]} exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(req, timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    assert wait_for(up, timeout), log.read_text()[-2000:]


def post(url: str, body: dict, token: str | None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
    req = urllib.request.Request(url + "/v1/live", data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


class Receiver:
    """`loopledger receive` on the team ledger at a fixed port (so a member's settings stay true
    across a restart); start / stop as often as a test needs."""

    def __init__(self, db: str, folder: Path, port: int | None = None, args: tuple[str, ...] = ()) -> None:
        self.db, self.folder, self.args = db, folder, args  # args: more `receive` flags (--max-body …)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = folder / "receive.log"

    def start(self, token: str) -> None:
        """Start and wait until /health answers `token` (the door is closed once tokens exist)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with self.log.open("a") as out:
            self.proc = subprocess.Popen([str(BIN), "receive", "--db", self.db, "--port", str(self.port),
                                          "--spool", str(self.folder / "spool"), *self.args],
                                         stdout=out, stderr=subprocess.STDOUT)
        wait_http(self.url + "/health", self.proc, self.log, {"Authorization": f"Bearer {token}"})

    def health(self, token: str) -> dict:
        req = urllib.request.Request(self.url + "/health", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


@dataclass
class Member:
    """A member's laptop: HOME (settings, ledger, resident guard) and an environment like an
    agent's, with the resident guard on (it forwards) and a short idle time."""

    email: str
    home: Path

    @property
    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH")}
        return keep | {"HOME": str(self.home), "LOOPLEDGER_HOOK_RESIDENT": "1",
                       "LOOPLEDGER_HOOK_RESIDENT_IDLE": "60", "LOOPLEDGER_HOOK_LOG": str(self.home / "hook.log")}

    @property
    def ledger(self) -> Path:
        return self.home / ".local" / "share" / "loopledger" / "ledger.sqlite"

    def hook(self, event: dict) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN), "hook", "claude-code", "--db", str(self.ledger)],
                              input=json.dumps(event).encode(), capture_output=True, timeout=120, env=self.env)

    def stop(self) -> None:
        stop_residents(self.home)
