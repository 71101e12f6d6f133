"""The format-neutral session script every sample file is rendered from (C: a call with its answer;
Script: user turns, prose and batches), stable ids and clocks derived from a session's name (Ids),
and the JSON writers (so a rerun writes byte-identical files)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class C:
    """One tool call with the answer it got back."""

    name: str
    args: Any
    answer: str
    error: bool = False


@dataclass
class Script:
    """A format-neutral session: ("user", text) · ("prose", text) · ("batch", text, [C, ...])."""

    name: str
    start: str = "2026-03-02T09:14:05"
    events: list[tuple] = field(default_factory=list)

    def user(self, text: str) -> Script:
        self.events.append(("user", text))
        return self

    def say(self, text: str) -> Script:
        self.events.append(("prose", text))
        return self

    def calls(self, *calls: C, text: str = "") -> Script:
        self.events.append(("batch", text, list(calls)))
        return self


class Ids:
    """Stable ids and a clock for one session: the same name always gives the same file."""

    def __init__(self, name: str, start: str, step_s: float = 4.0):
        self.name = name
        self.n = 0
        self.t = datetime.fromisoformat(start).replace(tzinfo=UTC)
        self.step = timedelta(seconds=step_s)

    def hex(self, k: int = 24) -> str:
        self.n += 1
        return hashlib.sha256(f"{self.name}/{self.n}".encode()).hexdigest()[:k]

    def uuid(self) -> str:
        h = self.hex(32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"

    def tick(self, seconds: float | None = None) -> str:
        self.t += timedelta(seconds=seconds) if seconds is not None else self.step
        return self.t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.t.microsecond // 1000:03d}Z"


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def write_json(path: Path, obj: Any, indent: int | None = 1) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(obj, ensure_ascii=False, indent=indent,
                      separators=(",", ":") if indent is None else None)
    path.write_text(text + "\n", encoding="utf-8")


def write_jsonl(path: Path, rows: list[Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(dumps(r) + "\n" for r in rows), encoding="utf-8")
