"""A PostgreSQL server of a test's own, to stop and start under a running receiver (the shared
server other tests and people use is never stopped): initdb in a temporary folder, trust auth on
127.0.0.1 at a free port; as user `postgres` when the tests run as root (the server refuses
root). Removed when the test ends."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.team_support import free_port


def _bindir() -> Path | None:
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        return None
    return Path(out) if out and (Path(out) / "initdb").exists() else None


class Cluster:
    def __init__(self) -> None:
        bindir = _bindir()
        if bindir is None:
            pytest.skip("no PostgreSQL server binaries (pg_config --bindir with initdb)")
        self.bin = bindir
        self.as_postgres = os.geteuid() == 0
        self.folder = Path(tempfile.mkdtemp(prefix="loopledger-pg-"))
        self.data = self.folder / "data"
        self.port = free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        self.running = False
        if self.as_postgres:
            shutil.chown(self.folder, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self.bin / tool), *args]
        if self.as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=self.folder)
        assert proc.returncode == 0, f"{tool}: {proc.stdout}\n{proc.stderr}"

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"), "-w", "-t", "60",
                  "-o", f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder} -c fsync=off", "start")
        self.running = True

    def stop(self) -> None:
        """As an administrator stopping it: connections are ended, new ones refused."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")
        self.running = False

    def remove(self) -> None:
        if self.running:
            self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def cluster():
    c = Cluster()
    c.start()
    try:
        yield c
    finally:
        c.remove()
