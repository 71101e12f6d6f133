"""Which files are transcripts: the files named, and transcript-looking files under folders.

`discover(paths)` is the one entry point (the worker, `watch` and --jobs use it); a format whose
sessions are folders rather than files extends it here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from loopledger import formats

# Extensions transcripts come in; anything else inside a folder is not tried (files named on
# the command line always are).
TRANSCRIPT_SUFFIXES = {".jsonl", ".ndjson", ".json", ".traj", ".md"}
NOT_TRANSCRIPTS = ("readme", "changelog", "license", "contributing", "package.json", "package-lock.json",
                   "tsconfig.json", "settings.json", "projects.json")
SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".mypy_cache",
             ".pytest_cache", ".ruff_cache"}
DEFAULT_WATCH_DIRS = ("~/.claude/projects", "~/.codex/sessions", "~/.gemini/tmp")


def _looks_like_transcript(p: Path) -> bool:
    name = p.name.lower()
    return p.suffix.lower() in TRANSCRIPT_SUFFIXES and not name.startswith(NOT_TRANSCRIPTS)


def discover(paths: Iterable[Path | str]) -> list[Path]:
    """Files named, plus transcript-looking files under folders (recursive), sorted, absolute;
    the files of a folder-as-session (a Cline task folder) as the one file standing for it."""
    out: set[Path] = set()
    for raw in paths:
        p = Path(raw).expanduser().absolute()
        if p.is_file():
            out.add(p)
        elif p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
                for f in files:
                    fp = Path(root, f)
                    if _looks_like_transcript(fp):
                        out.add(fp)
    return formats.units(out)


def default_watch_paths() -> list[Path]:
    defaults = [Path(d).expanduser() for d in DEFAULT_WATCH_DIRS] + formats.default_roots()
    return [p for p in defaults if p.is_dir()]
