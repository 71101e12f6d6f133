"""Canonical tool arguments: the one definition of "same arguments" every detector shares.

Rules (design.md, "Detectors"):

- object keys sorted recursively (by code point), arrays kept in order, no whitespace;
- top-level `None` (missing or `null` arguments) is the same as `{}`; a nested `null` stays `null`;
- call ids are never part of a key (they are not arguments);
- numbers are kept as the transcript's JSON parser gave them, the way serde_json (the seeds'
  library) keeps them: the integer `1` and the float `1.0` are DIFFERENT arguments
  (`1` vs `1.0`); floats print in their shortest round-trip form (`1e+20`, `1e-7`, `-0.0`);
  NaN and ±Infinity, which JSON has no word for, print as `null`;
- tuples are arrays; non-string keys (only possible from Python callers) print as JSON scalars
  (`1`, `true`, `null`) turned into strings; a string orjson refuses (lone surrogates) is
  written with `\\uXXXX` escapes; any other object is serialized by orjson if it can
  (datetime, dataclass, UUID) and otherwise as the JSON string of its `repr`.

The fast path is `orjson.dumps(args, OPT_SORT_KEYS)`; whatever orjson refuses (nesting deeper
than 254, non-string keys, integers beyond 64 bits, lone surrogates) goes through an iterative
walk that writes every leaf with orjson too, so both paths print identical text for identical
values and nothing recurses: 10,000-deep nesting or a 10 MB string costs time linear in its
size, never a RecursionError.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

import orjson
import xxhash
from loopledger.events import Call

_SORT = orjson.OPT_SORT_KEYS
_dumps = orjson.dumps
_hash = xxhash.xxh3_128_hexdigest
_EMPTY = b"{}"


def canonical_bytes(args: Any) -> bytes:
    """Canonical JSON of `args` as UTF-8 bytes (top-level None ≡ {})."""
    if args is None:
        return _EMPTY
    try:
        return _dumps(args, option=_SORT)
    except TypeError:
        return _walk(args).encode("utf-8", "surrogatepass")


def fast_canonical(args: Any, _dumps: Any = _dumps, _opt: int = _SORT) -> bytes:
    """canonical_bytes with the common case first (the detectors' hot path inlines the same)."""
    try:
        return _dumps(args, option=_opt) if args is not None else _EMPTY
    except TypeError:
        return _walk(args).encode("utf-8", "surrogatepass")


def canonical_json(args: Any) -> str:
    """Canonical JSON of `args` as text: sorted keys, no whitespace, None ≡ {}."""
    return canonical_bytes(args).decode("utf-8", "surrogatepass")


def digest(data: bytes) -> str:
    """The digest used for argument keys and answer sets: xxh3-128, 32 hex digits."""
    return _hash(data)


def args_hash(args: Any) -> str:
    """Digest of the canonical arguments (what the ledger stores as calls.args_hash)."""
    return _hash(canonical_bytes(args))


def call_signature(name: str, args: Any) -> str:
    """Seed 000's per-call signature: `name:hash(canonical args)`; the call id plays no part."""
    return name + ":" + _hash(canonical_bytes(args))


_CALL_CACHE: dict[int, tuple[Any, bytes, str]] = {}
_CACHE_CALLS = 1024
_CACHE_MAX_BYTES = 64 * 1024


def call_key(call: Call) -> tuple[bytes, str]:
    """(canonical args, their digest) of an event's Call, computed once for all the policies a
    replay drives over it. Keyed by identity (events are immutable) and holding the call itself,
    so an id is never reused while cached; bounded in entries and in the size of what it keeps."""
    entry = _CALL_CACHE.get(id(call))
    if entry is not None and entry[0] is call:
        return entry[1], entry[2]
    canon = canonical_bytes(call.args)
    h = _hash(canon)
    if len(canon) <= _CACHE_MAX_BYTES:
        if len(_CALL_CACHE) >= _CACHE_CALLS:
            _CALL_CACHE.clear()
        _CALL_CACHE[id(call)] = (call, canon, h)
    return canon, h


# Arguments an agent writes beside the action for the person watching, not for the tool: what
# two calls differing only in them do is the same (Claude Code's and Gemini CLI's shell
# `description`, OpenHands' `thought`). progress keys a call on the rest (its rules are ours to
# pin); the seeds, cycle (design.md pins its key) and the peers' ports keep every argument.
COMMENTARY = frozenset({"thought", "thoughts", "reasoning", "explanation", "rationale"})
# ... and these only beside a command or a prompt (a ticket's `description` is its content)
BESIDE_COMMAND = frozenset({"description", "timeout", "timeout_ms"})
_COMMANDS = frozenset({"command", "cmd", "prompt"})
_ACTION_CACHE: dict[int, tuple[Any, Any, bytes, str]] = {}


# What a shell command line carries beside its action: a `cd DIR &&` before it, stderr joined,
# its output cut to a few lines, an exit status echoed after it. `docker compose down -v 2>&1 |
# tail -5` and `cd repo && docker compose down -v; echo "exit: $?"` do the same thing.
_DECORATION = re.compile(
    r"^\s*cd\s+(?:\"[^\"]*\"|'[^']*'|\S+)\s*&&\s*"          # a leading cd DIR &&
    r"|\s+2>&1(?=\s|$)"                                          # stderr joined
    r"|\s*\|\s*(?:tail|head)(?:\s+-n)?(?:\s+-?\d+)?\s*$"          # output cut: | tail -5
    r"|\s*(?:;|&&)\s*echo\s+(?:\"[^\"]*\"|'[^']*'|\S+)\s*$")      # ; echo "exit: $?"


def command_core(command: str) -> str:
    """A shell command line without its decoration (repeated until none is left)."""
    while True:
        core = _DECORATION.sub("", command).strip()
        if core == command or not core:
            return command if not core else core
        command = core


def action_args(args: Any) -> Any:
    """The arguments without commentary (the same object when there is none), a shell command
    line without its decoration (`command_core`)."""
    if type(args) is not dict:
        return args
    drop = COMMENTARY.intersection(args)
    if not _COMMANDS.isdisjoint(args):
        drop |= BESIDE_COMMAND.intersection(args)
    core = None
    for k in ("command", "cmd"):
        v = args.get(k)
        if type(v) is str:
            c = command_core(v)
            if c != v:
                core = (k, c)
            break
    if not drop and core is None:
        return args
    if drop and len(drop) == len(args):
        return args  # a note and nothing else (a `think` tool's thought): the note is what it does
    out = {k: v for k, v in args.items() if k not in drop}
    if core is not None:
        out[core[0]] = core[1]
    return out


def action_key(call: Call) -> tuple[Any, bytes, str]:
    """(arguments without commentary, their canonical form, its digest): what progress keys a
    call on. call_key's when there is no commentary; cached by the call's identity."""
    args = action_args(call.args)
    if args is call.args:
        canon, h = call_key(call)
        return args, canon, h
    entry = _ACTION_CACHE.get(id(call))
    if entry is not None and entry[0] is call:
        return entry[1], entry[2], entry[3]
    canon = canonical_bytes(args)
    h = _hash(canon)
    if len(_ACTION_CACHE) >= _CACHE_CALLS:
        _ACTION_CACHE.clear()
    _ACTION_CACHE[id(call)] = (call, args, canon, h)
    return args, canon, h


def remember_key(call: Call, canon: bytes, digest: str) -> None:
    """Give call_key the canonical form of a call rebuilt from it (the live paths store it beside
    the call), so rebuilding a session's state does not serialize and hash every call again."""
    if len(canon) <= _CACHE_MAX_BYTES:
        if len(_CALL_CACHE) >= _CACHE_CALLS:
            _CALL_CACHE.clear()
        _CALL_CACHE[id(call)] = (call, canon, digest)


def name_args(call: Any) -> tuple[str, Any]:
    """(name, args) of an `loopledger.events.Call`, a `(name, args)` pair, a `{"name", "args"}` (or
    `"arguments"`) dict, or any object with `.name` and `.args` or `.arguments` — seed 000's
    `ToolCall { id, name, arguments }` as a port of its tests writes it (a namedtuple too)."""
    if type(call) is Call:
        return call.name, call.args
    if isinstance(call, tuple) and not hasattr(call, "_fields"):
        return call[0], call[1]
    if isinstance(call, dict):
        return call["name"], call.get("args", call.get("arguments"))
    return call.name, (call.args if hasattr(call, "args") else getattr(call, "arguments", None))


def batch_signature(calls: Sequence[Any]) -> str:
    """Per-call signatures SORTED and joined with `|`: call order and ids ignored, duplicates
    kept, so `[a]` and `[a, a]` differ."""
    if len(calls) == 1:  # the common case, without sorting
        name, args = name_args(calls[0])
        return name + ":" + _hash(canonical_bytes(args))
    return "|".join(sorted(call_signature(*name_args(c)) for c in calls))


def answer_key(answer: Any) -> str | None:
    """What makes two answers equal: the full text's digest plus the error flag.

    Accepts an `loopledger.events.Answer` (its precomputed digest is used), a plain string, or None
    (unknown)."""
    if answer is None:
        return None
    if isinstance(answer, str):
        return _hash(answer.encode("utf-8", "surrogatepass"))
    return answer.digest + ("!" if answer.is_error else "")


def answers_hash(calls: Sequence[Any], answers: Sequence[Any],
                 signatures: Sequence[str] | None = None) -> str | None:
    """Seed 000's answers hash: pair each call with its own answer, sort the pairs, hash.

    None when any call is unanswered: unknown answers never rescue a run. `signatures` (the
    calls' `call_signature`s) saves recomputing them when the caller has them."""
    if len(answers) != len(calls):
        raise ValueError(f"answers_hash: {len(calls)} calls but {len(answers)} answers")
    pairs = []
    for i, answer in enumerate(answers):
        key = answer_key(answer)
        if key is None:
            return None
        sig = signatures[i] if signatures is not None else call_signature(*name_args(calls[i]))
        pairs.append(sig + "=" + key)
    pairs.sort()
    return _hash("\n".join(pairs).encode("utf-8", "surrogatepass"))


def _leaf(value: Any) -> str:
    if isinstance(value, str):
        try:
            return _dumps(value).decode()
        except TypeError:
            return json.dumps(value)  # lone surrogates: \uXXXX escapes, still deterministic
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return _dumps(value).decode()
        except TypeError:
            return str(value)  # beyond 64 bits: orjson refuses, JSON itself does not
    if isinstance(value, float) and not math.isfinite(value):
        return "null"
    try:
        return _dumps(value, option=_SORT).decode()
    except TypeError:
        return json.dumps(repr(value))


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return _leaf(key)
    return repr(key)


class _Lit(str):
    """A piece of output text on the walk's stack (told apart from a str value to serialize)."""


_OPEN_OBJ, _CLOSE_OBJ = _Lit("{"), _Lit("}")
_OPEN_ARR, _CLOSE_ARR = _Lit("["), _Lit("]")
_COMMA = _Lit(",")


def _walk(root: Any) -> str:
    """Iterative canonical writer for what orjson refuses; an explicit stack, no recursion."""
    out: list[str] = []
    stack: list[Any] = [root]
    push = stack.append
    while stack:
        item = stack.pop()
        if type(item) is _Lit:
            out.append(item)
        elif isinstance(item, dict):
            keyed = sorted(((_key_text(k), type(k).__name__), v) for k, v in item.items())
            push(_CLOSE_OBJ)
            for i in range(len(keyed) - 1, -1, -1):
                (ktext, _), v = keyed[i]
                push(v)
                push(_Lit(_leaf(ktext) + ":"))
                if i:
                    push(_COMMA)
            push(_OPEN_OBJ)
        elif isinstance(item, list | tuple):
            push(_CLOSE_ARR)
            for i in range(len(item) - 1, -1, -1):
                push(item[i])
                if i:
                    push(_COMMA)
            push(_OPEN_ARR)
        else:
            out.append(_leaf(item))
    return "".join(out)
