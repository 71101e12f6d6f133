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


def _prose_document(p: Path) -> bool:
    """A Markdown file of a folder that no reader recognises (SOURCES.md, NOTES.md): a document
    beside the transcripts, not one. Markdown is the one transcript suffix documents share, and
    its transcripts (aider's history, a Claude export) open with their own header; an empty one
    is kept (an agent creates its file first). A file named on the command line is always tried."""
    if p.suffix.lower() != ".md":
        return False
    try:
        if p.stat().st_size == 0:
            return False
        formats.sniff(p)
    except formats.UnknownFormat:
        return True
    except OSError:
        return False  # unreadable: said as such below
    return False


def discover(paths: Iterable[Path | str], unreadable: list[str] | None = None,
             skipped: list[str] | None = None) -> list[Path]:
    """Files named, plus transcript-looking files under folders (recursive), sorted, absolute;
    the files of a folder-as-session (a Cline task folder) as the one file standing for it.

    What a folder holds but cannot be read (a folder without permission, a dangling link, a pipe
    or socket named like a transcript) is left out and, when `unreadable` is given, described
    there ("path: why"), so the caller can say so instead of skipping it without a word. What a
    folder holds that is named like a transcript but is not one (README.md, SOURCES.md, a
    package.json) is left out alike, whatever its name, and its path added to `skipped`: the
    caller says so in one line, never as an error."""
    out: set[Path] = set()

    def skip(path: Path | str, why: str) -> None:
        if unreadable is not None:
            unreadable.append(f"{path}: {why}")

    for raw in paths:
        p = Path(raw).expanduser().absolute()
        if p.is_file():
            out.add(p)
        elif p.is_dir():
            for root, dirs, files in os.walk(p, onerror=lambda e: skip(e.filename, e.strerror or str(e))):
                dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
                for f in files:
                    fp = Path(root, f)
                    if fp.suffix.lower() not in TRANSCRIPT_SUFFIXES:
                        continue  # labels.csv, scripts, images: not named like a transcript at all
                    if not _looks_like_transcript(fp) or _prose_document(fp):
                        if skipped is not None:
                            skipped.append(str(fp))
                        continue
                    if not fp.is_file():
                        skip(fp, "a dangling link" if fp.is_symlink() and not fp.exists() else "not a regular file")
                    elif not os.access(fp, os.R_OK):
                        skip(fp, "permission denied")
                    else:
                        out.add(fp)
    return formats.units(out)


def default_watch_paths() -> list[Path]:
    defaults = [Path(d).expanduser() for d in DEFAULT_WATCH_DIRS] + formats.default_roots()
    return [p for p in defaults if p.exists()]  # folders, and a tool's one file (OpenCode's database)
