"""Ingest configuration: `Options` and the policies to judge with (defaults, loopledger.toml's
[[policy]] entries, --policy flags)."""

from __future__ import annotations

import os
import socket
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loopledger.detectors import registry
from loopledger.detectors.policy import DEFAULT_SPECS, PolicySpec
from loopledger.ledger import store

CONFIG_NAME = "loopledger.toml"


class ConfigFileError(ValueError):
    """A loopledger.toml that cannot be used; the message names the file and the entry."""


@dataclass
class Options:
    specs: Sequence[PolicySpec] = DEFAULT_SPECS
    default_ids: frozenset[str] = frozenset(sp.id for sp in DEFAULT_SPECS)
    format: str | None = None
    redact: bool = True
    max_text: int = store.DEFAULT_MAX_TEXT
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    # Watch mode: a last line without its newline is still being written, not malformed.
    defer_partial_tail: bool = False
    # Processes reading and replaying files ahead of the (single) writer; 1 = all in-process.
    jobs: int = 1


def load_config(path: Path) -> list[PolicySpec]:
    """The [[policy]] entries of a loopledger.toml (detector = "…", params = {…})."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: no such file") from None
    except OSError as exc:  # in words, not "[Errno 13] …"
        raise ConfigFileError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:  # TOML errors name line and column
        raise ConfigFileError(f"{path}: {exc}") from None
    entries = data.get("policy", [])
    if not isinstance(entries, list):
        raise ConfigFileError(f"{path}: 'policy' must be an array of tables ([[policy]])")
    out = []
    for i, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or "detector" not in entry:
            raise ConfigFileError(f"{path}: [[policy]] #{i} needs detector = \"…\"")
        params = entry.get("params", {})
        if not isinstance(params, dict):
            raise ConfigFileError(f"{path}: [[policy]] #{i}: params must be a table")
        try:
            detector = str(entry["detector"])
            if registry.is_factory_name(detector):  # the person's own file may name code to import
                registry.import_factory(detector)
            out.append(PolicySpec(detector, params))
        except ValueError as exc:
            raise ConfigFileError(f"{path}: [[policy]] #{i}: {exc}") from None
    return out


def policy_specs(spec_texts: Iterable[str] = (), config: Path | None = None,
                 cwd: Path | None = None) -> list[PolicySpec]:
    """Defaults, then loopledger.toml's policies (--config, else ./loopledger.toml), then --policy."""
    specs = list(DEFAULT_SPECS)
    if config is None:
        candidate = (cwd or Path.cwd()) / CONFIG_NAME
        config = candidate if candidate.is_file() else None
    if config is not None:
        specs += load_config(config)
    specs += [PolicySpec.parse(t, trusted=True) for t in spec_texts]
    seen: set[str] = set()
    return [sp for sp in specs if not (sp.id in seen or seen.add(sp.id))]
