"""Restore a labelled set's transcripts, byte for byte, from the sources list beside its labels.

A labelled folder commits only `labels.csv`, `SOURCES.md`, its README and a `.gitignore`; the
transcripts come back from the repositories SOURCES.md names, through git snapshots already on
this machine (`/work/.mirror/OWNER+NAME/…`, as the `fetch` tool leaves them):

    python -m bench.restore_sources FOLDER [FOLDER ...] [--mirrors DIR]

For each row it writes `git show COMMIT:PATH` to the row's local name and checks the bytes
against the SHA-256 the list gives (the full digest of a `sha256sum` block, or the 16-digit
prefix of a `sha256` column). A file that is a subset of a JSON list (a table of "0-based
positions") is rebuilt the way the list says: those records, `json.dumps(indent=2)`. A file
already present with the right bytes is left alone; one whose bytes do not match is never
written. It prints one line per file and, last, the repositories whose snapshot is missing, so
they can be fetched and the command run again. Nothing here is committed data: the folders'
`.gitignore` keeps the restored files out of git.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MIRRORS = Path("/work/.mirror")
_CELL = re.compile(r"`([^`]*)`")
_SHA_LINE = re.compile(r"^([0-9a-f]{64})\s+\*?(\S.*)$")


@dataclass
class Row:
    name: str
    repo: str
    commit: str
    path: str
    sha: str  # full digest or a prefix
    positions: list[int] | None = None


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _first_code(cell: str) -> str:
    found = _CELL.findall(cell)
    return (found[0] if found else cell).strip()


def _repo(cell: str) -> str:
    text = cell.replace("`", "").strip()
    return re.split(r"\s|\(", text, maxsplit=1)[0].strip()


def table_rows(text: str) -> Iterator[dict[str, str]]:
    """Each body row of each markdown table in `text`, as {lower-cased header: cell}."""
    columns: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            columns = None
            continue
        cells = _cells(line)
        if columns is None:
            columns = [c.lower() for c in cells]
        elif not set(line) <= set("|-: "):
            yield dict(zip(columns, cells, strict=False))


def parse_sources(text: str) -> list[Row]:
    """Every file row of a SOURCES.md, with the digest and subset positions the list gives."""
    rows: dict[str, Row] = {}
    subsets: dict[str, list[int]] = {}
    full = {m.group(2).strip(): m.group(1) for m in map(_SHA_LINE.match, map(str.strip, text.splitlines())) if m}
    for row in table_rows(text):
        name = _first_code(row.get("file") or row.get("local name") or "")
        if not name:
            continue
        pos_col = next((c for c in row if "0-based positions" in c), None)
        if pos_col:
            subsets[name] = [int(x) for x in re.findall(r"\d+", row[pos_col])]
            continue
        if "repository" in row and "commit" in row and "path" in row:
            path = _first_code(row["path"])
            # "PATH (12 of its 115 records, whole, original order: list indices 5,6,7)"
            indices = re.search(r"list indices ([\d,\s]+)", path)
            if indices:
                subsets[name] = [int(x) for x in re.findall(r"\d+", indices.group(1))]
            rows[name] = Row(name, _repo(row["repository"]), _first_code(row["commit"]),
                             path.split(" (")[0], _first_code(row.get("sha256", "")))
    for name, row in rows.items():
        if name in full:
            row.sha = full[name]
        row.positions = subsets.get(name)
    return list(rows.values())


def git_dir(mirrors: Path, repo: str) -> Path | None:
    base = mirrors / repo.replace("/", "+")
    for candidate in (base / "repo" / ".git", base / "repo"):
        if (candidate / "HEAD").is_file():
            return candidate
    return None


def _matches(data: bytes, sha: str) -> bool:
    return bool(sha) and hashlib.sha256(data).hexdigest().startswith(sha.lower())


def candidates(row: Row, gd: Path) -> list[bytes]:
    """The bytes the row names; for a subset, both ways the lists re-serialise records (the
    sets' notes differ on `ensure_ascii`), and the digest tells which one was labelled."""
    data = subprocess.run(["git", "--git-dir", str(gd), "show", f"{row.commit}:{row.path}"],
                          check=True, capture_output=True).stdout
    if row.positions is None:
        return [data]
    records = json.loads(data)
    kept = [records[i] for i in row.positions]
    return [json.dumps(kept, indent=2, ensure_ascii=ascii).encode() for ascii in (False, True)]


def restore(folder: Path, mirrors: Path) -> tuple[int, int, set[str]]:
    """(files present and right, files that failed, repositories with no snapshot here)."""
    good = bad = 0
    missing: set[str] = set()
    for row in parse_sources((folder / "SOURCES.md").read_text(encoding="utf-8")):
        target = folder / row.name
        if target.is_file() and _matches(target.read_bytes(), row.sha):
            good += 1
            continue
        gd = git_dir(mirrors, row.repo)
        if gd is None:
            missing.add(row.repo)
            continue
        try:
            options = candidates(row, gd)
        except (subprocess.CalledProcessError, ValueError, IndexError) as e:
            print(f"{folder.name}/{row.name}: cannot rebuild from {row.repo}@{row.commit}: {e}")
            bad += 1
            continue
        data = next((d for d in options if _matches(d, row.sha)), None)
        if data is None:
            print(f"{folder.name}/{row.name}: bytes from {row.repo}@{row.commit} do not match "
                  f"sha256 {row.sha[:16]}: not written")
            bad += 1
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        good += 1
    return good, bad, missing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--mirrors", type=Path, default=MIRRORS)
    args = ap.parse_args(argv)
    missing_all: set[str] = set()
    failed = 0
    for folder in args.folders:
        good, bad, missing = restore(folder, args.mirrors)
        failed += bad
        missing_all |= missing
        print(f"{folder}: {good} files in place, {bad} failed, {len(missing)} repositories not fetched")
    for repo in sorted(missing_all):
        print(f"fetch: github:{repo}")
    return 1 if failed or missing_all else 0


if __name__ == "__main__":
    sys.exit(main())
