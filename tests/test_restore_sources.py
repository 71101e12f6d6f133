"""bench/restore_sources: a labelled set's transcripts back from its SOURCES.md, byte for byte.

Real git repositories made here stand in for fetched snapshots (the layout `fetch` leaves:
MIRRORS/OWNER+NAME/repo/.git); the digests are computed by hashlib from the bytes committed."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from bench.restore_sources import parse_sources, restore, table_rows


def _repo(mirrors: Path, name: str, files: dict[str, bytes]) -> str:
    work = mirrors / name.replace("/", "+") / "repo"
    work.mkdir(parents=True)
    for rel, data in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_bytes(data)
    run = lambda *a: subprocess.run(["git", "-C", str(work), *a], check=True, capture_output=True, text=True)  # noqa: E731
    run("init", "-q")
    run("add", "-A")
    run("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x")
    return run("rev-parse", "HEAD").stdout.strip()


def test_files_and_subsets_come_back_checked_and_a_wrong_digest_is_never_written(tmp_path):
    records = [{"task_id": i, "traj": [{"role": "user", "content": f"é {i}"}]} for i in range(5)]
    blob = b'{"type": "session"}\n'
    source = json.dumps(records, indent=4).encode()
    commit = _repo(tmp_path / "mirrors", "someone/agent-runs", {"logs/s.jsonl": blob, "runs/all.json": source})
    subset = json.dumps([records[3], records[1]], indent=2).encode()  # ensure_ascii: the sets' notes differ
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "SOURCES.md").write_text(f"""# Sources

| file | repository | commit | path | licence | bytes | sha256 |
|---|---|---|---|---|---:|---|
| `claude/s.jsonl` | someone/agent-runs | `{commit[:12]}` | `logs/s.jsonl` | MIT | {len(blob)} | `{hashlib.sha256(blob).hexdigest()[:16]}` |
| `tau/sub.json` | someone/agent-runs | `{commit[:12]}` | `runs/all.json (2 of its 5 records, whole: list indices 3, 1)` | MIT | 1 | `{hashlib.sha256(subset).hexdigest()[:16]}` |
| `tau/wrong.json` | someone/agent-runs | `{commit[:12]}` | `logs/s.jsonl` | MIT | 1 | `{"0" * 16}` |
| `gone/x.md` | nobody/not-fetched | `{commit[:12]}` | `x.md` | MIT | 1 | `{"1" * 16}` |
""", encoding="utf-8")
    good, bad, missing = restore(folder, tmp_path / "mirrors")
    assert (good, bad, missing) == (2, 1, {"nobody/not-fetched"})
    assert (folder / "claude/s.jsonl").read_bytes() == blob
    assert (folder / "tau/sub.json").read_bytes() == subset
    assert not (folder / "tau/wrong.json").exists()
    assert restore(folder, tmp_path / "mirrors")[0] == 2  # in place: left alone, counted


def test_a_full_digest_list_and_a_positions_table_are_read():
    rows = parse_sources("""| local name | repository | path | commit |
|---|---|---|---|
| `a/b.json` | `o/r` | `p/q.json` | `abc123` |

| local name | records kept | 0-based positions in the source list, in the order written | in this folder |
|---|---|---|---|
| `a/b.json` | SUBSET | 4, 2 | no |

```
""" + "f" * 64 + """  a/b.json
```
""")
    (row,) = rows
    assert (row.repo, row.commit, row.path, row.sha, row.positions) == ("o/r", "abc123", "p/q.json", "f" * 64, [4, 2])
    assert list(table_rows("| A | B |\n|---|---|\n| 1 | 2 |\ntext\n| C |\n|---|\n| 3 |")) == [
        {"a": "1", "b": "2"}, {"c": "3"}]
