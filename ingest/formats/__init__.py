"""Transcript readers: one module per format, chosen by sniffing the content.

Each reader module exposes:
    NAME: str                           the format's name (stored in the ledger, used by --format)
    DESCRIPTION: str                    one line for `--help` and error messages
    sniff(head: bytes) -> bool          True when the first bytes look like this format
    read(path: Path) -> Iterator[Item]  SessionStart, events…, ReadError anywhere; streaming
and, for a format whose session is a folder of files (Cline task folders):
    unit_of(path: Path) -> Path | None  the one file standing for the folder `path` belongs to
                                        (None: `path` is not a member of such a folder)
    default_roots() -> list[Path]       where the tool keeps its folders (for `watch`)
and, when the unit's own bytes are not all of the session (OpenCode storage: a session file,
message files, part files):
    members(unit: Path) -> list[Path]   every file whose change is a change of the session
Order matters in READER_MODULES: more specific formats are sniffed before general ones.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType

from loopledger.events import Checkpoint, Item
from loopledger.formats._portable import portable
from loopledger.printable import plain
from loopledger.redact import redact_text

READER_MODULES = (
    "claude_code",
    "codex",
    "copilot_cli",
    "gemini",
    "opencode",
    "atif",
    "otlp",
    "tau2",
    "swe_agent",
    "openhands_v1",
    "openhands",
    "cline",
    "openai_responses",
    "anthropic",
    "openai_chat",
    "claude_export",
    "aider",
)
SNIFF_BYTES = 64 * 1024
log = logging.getLogger("loopledger.formats")


class UnknownFormat(ValueError):
    """No reader recognised the file; the message says what was seen."""


_READERS: dict[str, ModuleType] = {}


def readers() -> dict[str, ModuleType]:
    """Format name → reader module, in sniffing order (modules not written yet are skipped).
    Imported once per process: every file of an ingest asks (sniffing, reader versions)."""
    if not _READERS:
        _READERS.update(_import_readers())
    return dict(_READERS)


def _import_readers() -> dict[str, ModuleType]:
    out: dict[str, ModuleType] = {}
    for name in READER_MODULES:
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{name}":
                continue
            raise
        out[mod.NAME] = mod
    return out


def _describe(head: bytes) -> str:
    if not head.strip():
        return "an empty file"
    # Redacted (the message is stored and printed) and inert: raw bytes never reach a terminal.
    text = plain(redact_text(head[:4096].decode("utf-8", "replace")), 80)
    return f"content starting '{text}'"


def _folder_unit(folder: Path) -> Path:
    """The unit file of a folder-as-session named itself (a Cline task folder, an OpenHands V1
    conversation folder)."""
    # the folder's own files, then those one level down (OpenHands keeps its events in events/)
    candidates = sorted(p for p in folder.iterdir() if p.is_file())
    candidates += sorted(p for d in sorted(folder.iterdir()) if d.is_dir() for p in d.iterdir() if p.is_file())
    for mod in readers().values():
        unit = getattr(mod, "unit_of", None)
        if unit is not None:
            for p in candidates:
                found = unit(p)
                if found is not None:
                    return found
    raise UnknownFormat(f"{folder}: a folder, not a transcript; name its files, or a task folder "
                        "of a format read as a folder")


def sniff(path: Path | str) -> str:
    path = Path(path)
    if path.is_dir():
        path = _folder_unit(path)
    with open(path, "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    for name, mod in readers().items():
        try:
            if mod.sniff(head):
                return name
        except Exception:  # a sniffer must never take the whole ingest down  # noqa: BLE001
            log.warning("%s: the %s sniffer failed; trying the next format", path, name, exc_info=True)
            continue
    known = ", ".join(readers())
    raise UnknownFormat(f"{path}: not a transcript format LoopLedger reads ({_describe(head)}); "
                        f"known formats: {known}; pass --format to force one")


def check_name(name: str | None) -> None:
    """A --format that names no reader: UnknownFormat listing the known names (None is fine)."""
    if name is not None and name not in readers():
        raise UnknownFormat(f"--format {name!r} is not a format LoopLedger reads; known formats: "
                            f"{', '.join(readers())}")


def unit_of(path: Path) -> Path:
    """What discovery hands the worker for `path`: the path itself, or, for any file of a
    folder-as-session format, the one file standing for its folder (so a Cline task folder is
    one source, not two or three)."""
    for mod in readers().values():
        unit = getattr(mod, "unit_of", None)
        if unit is not None:
            found = unit(path)
            if found is not None:
                return found
    return path


def members(unit: Path) -> list[Path]:
    """The files `unit` stands for, itself first: itself alone, except for a format whose
    session is spread over files that do not all change together (change detection reads them
    all, so a new part of an OpenCode session is a change of it)."""
    for mod in readers().values():
        hook = getattr(mod, "members", None)
        found = hook(unit) if hook is not None else [unit]
        if len(found) > 1:
            return found
    return [unit]


def units(paths: Iterable[Path]) -> list[Path]:
    """`paths` with each folder-as-session reduced to its one unit file (sorted, no duplicates)."""
    return sorted({unit_of(p) for p in paths})


def default_roots() -> list[Path]:
    """Folders each format's tool writes to by default (for `watch`), whether they exist or not."""
    out: list[Path] = []
    for mod in readers().values():
        roots = getattr(mod, "default_roots", None)
        if roots is not None:
            out.extend(roots())
    return out


def read(path: Path | str, format: str | None = None) -> Iterator[Item]:
    """Stream the items of one file; `format` overrides sniffing."""
    path = Path(path)
    if path.is_dir():
        path = _folder_unit(path)
    mods = readers()
    name = format or sniff(path)
    if name not in mods:
        raise UnknownFormat(f"unknown format {name!r}; known formats: {', '.join(mods)}")
    # Timestamps to ISO 8601 UTC, NUL characters out: the same values on every ledger backend.
    return portable(mods[name].read(path), path)


def resumable(format: str) -> bool:
    """Whether the format's reader can continue a file from a Checkpoint (an append then reads
    only the new bytes); the others are re-read whole."""
    mod = readers().get(format)
    return mod is not None and hasattr(mod, "read_from")


def read_from(path: Path | str, format: str, checkpoint: Checkpoint | None = None) -> Iterator[Item]:
    """Items of `path` for a resumable format: with `checkpoint` None, the whole file, a
    Checkpoint item just before the reader's end-of-file flush (when it can resume there);
    with one, only what follows it. Formats without `read_from` give `read(path)`."""
    mod = readers().get(format)
    if mod is None:
        raise UnknownFormat(f"unknown format {format!r}; known formats: {', '.join(readers())}")
    if not hasattr(mod, "read_from"):
        if checkpoint is not None:
            raise ValueError(f"{format}: the reader cannot resume")
        return portable(mod.read(Path(path)), Path(path))
    # The same normalization as `read`, so a continued read equals a whole one.
    return portable(mod.read_from(Path(path), checkpoint), Path(path))
