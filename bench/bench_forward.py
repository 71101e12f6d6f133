"""A team member's hook while forwarding: the same `loopledger hook claude-code` PreToolUse as
bench_live's resident path, with the member's forwarding on (the resident's thread sending every
event to a running `loopledger receive`) beside the same hook with it off, in the same run.

Forwarding must add no network round trip to the hook: the resident answers, then its thread
sends. So the two medians should be alike; what forwarding can cost the hook is the forwarder
thread's share of the resident's interpreter. Also recorded: how far behind the team ledger is
when the last hook answers (events not yet acknowledged), and how long until it has them all.
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from loopledger.ledger import migrate, team
from loopledger.ledger.engine import make_engine

from bench.bench_live import BIN, _p95, bench_hook, hook_env, stop_residents


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _team(tmp: Path) -> tuple[str, str]:
    url = f"sqlite:///{tmp / 'team.sqlite'}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    with engine.begin() as conn:
        team.set_member(conn, "member@example.com", team.VIEWER)
        _, token = team.create_token(conn, "member@example.com")
    engine.dispose()
    return url, token


def _receiver(url: str, token: str, tmp: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([str(BIN), "receive", "--db", url, "--port", str(port), "--spool", str(tmp / "spool")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    req = urllib.request.Request(base + "/health", headers={"Authorization": f"Bearer {token}"})
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(req, timeout=2):
                return proc, base
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the receiver did not start")


def _live_count(url: str) -> int:
    with sqlite3.connect(url.split("///", 1)[1]) as conn:
        return conn.execute("SELECT COUNT(*) FROM live_events").fetchone()[0]


def _drain(tmp: Path, base: str, token: str, team_url: str, reads: int) -> tuple[float, int, int, int]:
    """A laptop back after a day offline: `reads` file reads of ~60 KB (a call and its answer
    each) stored by `loopledger guard` with no team settings, then `loopledger forward --once`
    timed. (seconds, backlog bytes as posted, batches, live events the team ledger holds)."""
    db = tmp / "offline.sqlite"
    migrate.upgrade(f"sqlite:///{db}")
    cfg = tmp / "config-offline"
    (cfg / "loopledger").mkdir(parents=True)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp / "config-none")}
    line = "    return compute(value, other) if ready else wait()\n"
    events = "".join(json.dumps(e) + "\n" for i in range(reads) for e in (
        {"session": "offline", "event": "call", "id": f"r{i}", "tool": "Read", "args": {"file_path": f"src/m{i}.py"}},
        {"session": "offline", "event": "answer", "id": f"r{i}", "text": f"{i}" + line * (60_000 // len(line))}))
    subprocess.run([str(BIN), "guard", "--db", str(db)], input=events, text=True, capture_output=True, check=True,
                   env=env)
    (cfg / "loopledger" / "team.json").write_text(json.dumps({"url": base, "token": token, "ledger": str(db)}))
    os.chmod(cfg / "loopledger" / "team.json", 0o600)
    before = _health(base, token)["forwarded_batches"]
    t0 = time.perf_counter()
    subprocess.run([str(BIN), "forward", "--once"], capture_output=True, check=True,
                   env={**os.environ, "XDG_CONFIG_HOME": str(cfg)})
    took = time.perf_counter() - t0
    size = len(json.dumps(events))  # about what was posted (the same texts, JSON-escaped)
    return took, size, _health(base, token)["forwarded_batches"] - before, _live_count(team_url)


def _health(base: str, token: str) -> dict:
    req = urllib.request.Request(base + "/health", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def run(quick: bool) -> str:
    runs = 15 if quick else 60
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        db = str(tmp / "member.sqlite")
        migrate.upgrade("sqlite:///" + db)
        team_url, token = _team(tmp)
        proc, base = _receiver(team_url, token, tmp)
        off, on = tmp / "config-off", tmp / "config-on"
        (on / "loopledger").mkdir(parents=True)
        off.mkdir()
        (on / "loopledger" / "team.json").write_text(json.dumps({"url": base, "token": token, "ledger": db}))
        os.chmod(on / "loopledger" / "team.json", 0o600)
        envs = {name: {**hook_env(tmp, True), "XDG_CONFIG_HOME": str(folder)}
                for name, folder in (("off", off), ("on", on))}
        try:
            results = {}
            for name in ("off", "on", "off ", "on "):  # twice each, interleaved: load drifts hit both
                results.setdefault(name.strip(), []).append(
                    bench_hook(db, runs, session=f"bench-fwd-{name.strip()}-{len(results)}", env=envs[name.strip()]))
            local = sqlite3.connect(db).execute("SELECT COUNT(*) FROM live_events").fetchone()[0]
            behind = local - _live_count(team_url)
            t0 = time.perf_counter()
            while _live_count(team_url) < local and time.perf_counter() - t0 < 120:
                time.sleep(0.05)
            caught_up = time.perf_counter() - t0
            arrived = _live_count(team_url)
            reads = 60 if quick else 300
            drain_s, drain_bytes, drain_batches, team_after = _drain(tmp, base, token, team_url, reads)
        finally:
            for env in envs.values():
                stop_residents(env)
            proc.terminate()
            proc.wait(30)
    rows = []
    for name in ("off", "on"):
        hook = [x for r in results[name] for x in r[0]]
        bare = [x for r in results[name] for x in r[1]]
        rows.append(f"| resident, forwarding {name} | {statistics.median(hook):.1f} ms | {_p95(hook):.1f} ms | "
                    f"{statistics.median(bare):.1f} ms | {statistics.median(hook) / statistics.median(bare):.2f}× |")
    return "\n".join([
        "## Live: a team member's hook while forwarding\n",
        f"{2 * runs} PreToolUse hooks per row on a 1,000-call session (bench_live's), answered by the resident "
        "guard; `on`: the member forwards to a running `loopledger receive` (the resident's thread sends each "
        "event after the answer), `off`: no team settings. Baseline: a bare `python -c pass` of the same "
        "interpreter, alternating with each hook.\n",
        "| path | median | p95 | bare python median | median ÷ bare |", "|---|---|---|---|---|", *rows,
        f"\nWhen the last hook answered, {behind} of {local} live events were not yet in the team ledger; "
        f"it held {arrived} of them {caught_up:.2f} s later.\n",
        f"A laptop back after a day offline: {reads} reads of ~60 KB ({drain_bytes / 1e6:.1f} MB of JSON, "
        f"{2 * reads} live events) drained by `loopledger forward --once` in {drain_s:.1f} s "
        f"({drain_bytes / 1e6 / drain_s:.1f} MB/s) as {drain_batches} batch(es) under the receiver's 16 MiB limit; "
        f"the team ledger then held {team_after - arrived} of them.\n"])


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
