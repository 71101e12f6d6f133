"""The compiled code of the methods `dataclasses` generates, kept between hook processes.

`@dataclass` writes each class's __init__, __repr__, __eq__, __hash__, __setattr__ and
__delattr__ as source text and compiles it with exec(): some 120 compiles for the event,
policy and ledger classes a hook imports (more than deciding the call). What this saves is
measured by `make bench` in the same run (bench_live.bench_departures: the in-process hook with
and without it): 284 M instructions against 346 M without it (a sixth of the path), 12% of
its CPU time (BENCHMARKS.md, the run on 3f98f4f) — the one departure from the standard library
the hook keeps. The text for a class is the same in every process, so the
code objects it compiles to are kept here, marshalled, beside the hook's bytecode
($XDG_CACHE_HOME/loopledger/pycache, loopledger.entry._keep_bytecode), and `dataclasses`'
exec is given the kept code for a text it has seen: the same code object compile() makes of it
(filename "<string>", no inherited flags: what exec() of a string compiles), run with the same
globals and locals. The classes are exactly the classes exec() of the text makes.

Only the one-shot hook process installs this (loopledger.live.hook_client), before it imports
any LoopLedger class; a text not in the file is compiled as exec() would, and the file is
rewritten once at the end with what this process used. Trust: like the bytecode cache beside it,
the file is this user's own (its folder 0700); a file of another interpreter version, or one
that does not load, is ignored.
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys
from types import CodeType
from typing import Any

from loopledger import folders

MAX_ENTRIES = 4096  # texts of older code versions are dropped past this
_HEADER = f"loopledger-dataclass-code/1\0{sys.version}\0".encode()

_kept: dict[str, CodeType] = {}
_used: dict[str, CodeType] = {}
_new = False
_path: str | None = None


def _file() -> str:
    return folders.cache_dir("pycache", f"dataclass-code.{sys.implementation.cache_tag}.marshal")


def _load(path: str) -> dict[str, CodeType]:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        if not data.startswith(_HEADER):
            return {}
        kept = marshal.loads(data[len(_HEADER):])
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(kept, dict):
        return {}
    return {k: v for k, v in kept.items() if isinstance(k, str) and isinstance(v, CodeType)}


def _exec(source: Any, namespace: Any = None, local: Any = None, /) -> None:
    """exec(), with a string compiled once per text across processes."""
    global _new
    if type(source) is str:
        code = _kept.get(source)
        if code is None:
            code = compile(source, "<string>", "exec", dont_inherit=True)
            _kept[source] = code
            _new = True
        _used[source] = code
        source = code
    builtins.exec(source, namespace, local)


def install() -> None:
    """From now on, `dataclasses` in this process compiles through the kept code."""
    global _path, _kept
    import dataclasses

    if getattr(dataclasses, "exec", None) is _exec:
        return
    _path = _file()
    _kept = _load(_path)
    dataclasses.exec = _exec  # a module global: it shadows the builtin for dataclasses alone


def save() -> None:
    """Write the kept code when this process compiled a text the file lacked."""
    if not _new or _path is None:
        return
    keep = {**_kept} if len(_kept) <= MAX_ENTRIES else dict(_used)
    tmp = f"{_path}.{os.getpid()}"
    try:
        os.makedirs(os.path.dirname(_path), mode=0o700, exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(_HEADER + marshal.dumps(keep))
        os.replace(tmp, _path)  # whole or not at all, for a hook reading it meanwhile
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
