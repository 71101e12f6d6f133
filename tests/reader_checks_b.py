"""Checks shared by the Gemini / ATIF / SWE-agent / OpenHands / Aider reader tests.

`assert_survives(module, data)` is the fuzz property: whatever bytes a reader is given, read()
yields well-formed items (errors name the file and a positive line or None) and never raises.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from types import ModuleType

from loopledger.events import Answers, Batch, Prose, ReadError, SessionStart, UserTurn

ITEM_TYPES = (SessionStart, UserTurn, Prose, Batch, Answers, ReadError)


def kinds(items: list) -> list[str]:
    return [type(i).__name__ for i in items]


def calls(items: list) -> list:
    return [c for i in items if isinstance(i, Batch) for c in i.calls]


def errors(items: list) -> list[ReadError]:
    return [i for i in items if isinstance(i, ReadError)]


def assert_survives(module: ModuleType, data: bytes, suffix: str = ".json") -> list:
    fd, name = tempfile.mkstemp(suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        items = list(module.read(name))
    finally:
        os.unlink(name)
    for item in items:
        assert isinstance(item, ITEM_TYPES), item
        if isinstance(item, ReadError):
            assert item.path == name and item.message
            assert item.line is None or item.line >= 1
        if isinstance(item, Batch):
            assert item.calls and all(isinstance(c.name, str) for c in item.calls)
    return items


def assert_fuzz(module: ModuleType, original: bytes, cut: int, pos: int, junk: bytes, suffix: str = ".json",
                free_text: bool = False) -> list:
    """The fuzz property with teeth (a reader that yields nothing must fail it): whatever the
    damage, read() never raises and yields well-formed items; a damaged file that is not blank
    yields something (content, or a ReadError naming the damage), never silence; and an
    undamaged one reads exactly as the original does, calls included. (`free_text`: a markdown
    log whose every prefix is valid text may legitimately hold no session at all.)"""
    data = mutate(original, cut, pos, junk)
    items = assert_survives(module, data, suffix)
    if data.strip() and not free_text:
        assert items, "a non-blank file read as nothing, without a word"
    if data == original:
        assert kinds(items) == kinds(assert_survives(module, original, suffix))
        assert calls(items), "the fixture's calls were not read"
    return items


def mutate(data: bytes, cut: int, pos: int, junk: bytes) -> bytes:
    """Truncate at `cut`, then splice `junk` in at `pos` (both clamped)."""
    data = data[: max(0, min(cut, len(data)))]
    pos = max(0, min(pos, len(data)))
    return data[:pos] + junk + data[pos:]


JUNK_VALUES = (None, 0, -1, 1.5, True, "", "x", [], {}, [None], {"id": None}, [[]], {"": {}})


def replace_node(doc, k: int, value):
    """A copy of `doc` with its k-th node (pre-order, modulo the node count) replaced by `value`:
    the wrong-type fuzz (a list where an object was, a number for a string, …)."""
    nodes: list[tuple] = []

    def walk(node, parent, key):
        nodes.append((parent, key))
        if isinstance(node, dict):
            for kk, v in node.items():
                walk(v, node, kk)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, node, i)

    import copy

    doc = copy.deepcopy(doc)
    walk(doc, None, None)
    parent, key = nodes[k % len(nodes)]
    if parent is None:
        return value
    parent[key] = value
    return doc


def ledger_sessions(db_path, path, grow=None) -> dict[str, list]:
    """Ingest `path` into the SQLite ledger at `db_path` with the real worker; when `grow` is
    given, call it (it appends to the file) and ingest again. Session key → events as stored."""
    from loopledger import worker
    from loopledger.ledger import migrate, schema, store
    from loopledger.ledger.engine import make_engine
    from sqlalchemy import select

    engine = make_engine(f"sqlite:///{db_path}")
    try:
        migrate.upgrade(engine)
        worker.ingest_file(engine, path, worker.Options())
        if grow is not None:
            grow()
            report = worker.ingest_file(engine, path, worker.Options())
            assert report.action == "appended", report
        with engine.connect() as conn:
            rows = conn.execute(select(schema.sessions.c.id, schema.sessions.c.key)).all()
            return {key: store.load_events(conn, sid) for sid, key in rows}
    finally:
        engine.dispose()


def assert_growth_shows_past_the_old_end(module: ModuleType, data: bytes, tmp_dir, suffix: str) -> None:
    """For every prefix of `data` (cut at line ends) and every longer prefix: when a session's
    events differ, one of its items (SessionStart included) carries a line past the shorter
    prefix's end. The worker re-judges exactly such sessions when a file is appended to."""
    lines = data.splitlines(keepends=True)
    reads = []
    for cut in range(1, len(lines) + 1):
        path = Path(tmp_dir) / f"prefix-{cut}{suffix}"
        path.write_bytes(b"".join(lines[:cut]))
        sessions: dict[str, list] = {}
        tops: dict[str, int] = {}
        key = None
        for item in module.read(path):
            if isinstance(item, SessionStart):
                key = item.info.key
                sessions[key], tops[key] = [item.info], item.line or 0
            elif key is not None and not isinstance(item, ReadError):
                sessions[key].append(item)
                tops[key] = max(tops[key], item.line or 0)
        reads.append((sessions, tops))
    for old in range(len(lines)):
        for new in range(old + 1, len(lines)):
            for key, events in reads[old][0].items():
                if reads[new][0].get(key) != events:
                    assert reads[new][1].get(key, 0) > old + 1, (key, old + 1, new + 1)
