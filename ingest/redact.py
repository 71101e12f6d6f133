"""The one redaction point: everything LoopLedger stores, spools, logs or prints from outside
passes here first, so a new path has one function to call, not a pattern to remember.

Who calls it: ingest and replay (redact_event on every event and session, and on the reader
checkpoints stored for appends: file_ingest), the live paths (loopledger.live.session redacts
every call, answer and prompt the hooks, `guard` and LiveGuard report; the hook log redacts its
lines), and every excerpt of a bad line (`excerpt`). `redact_value` is for any JSON value from
outside (tool arguments, a payload, span attributes). It also bounds depth: a container nested
deeper than MAX_DEPTH becomes a marker naming its digest, so one odd value costs that value, not
the file; with --no-redact only that bound applies. Nothing here recurses.

Transcripts hold whatever the agent saw: API keys pasted into prompts, tokens echoed by `env`,
private keys read from disk. They are replaced by a fixed marker naming the kind of secret, so
the ledger never keeps them and a recheck from the ledger judges exactly what the ingest judged
(the same secret always becomes the same marker, so equal texts stay equal).

Linear time by construction: the patterns are compiled by RE2 (google-re2), an automaton that
never backtracks, so no text — a web page an attacker wrote, a 16 MiB span — costs more than a
constant per character (a backtracking engine spent 26 s on one 200 KB page of `a-a-a-…` after a
URL). RE2 has no look-around; the few places that wanted it are spelled as a consumed prefix.

Every form a secret travels in: plain, JSON-escaped once or many times (a JSON text inside a
JSON string, as OTLP's gen_ai.tool.call.arguments is: `\\n`, `\\"`, `\\u003c` and `\\/` in
front of or around it), percent-encoded separators (`Bearer%20…`), labels in quotes
(`"aws_secret_access_key":"…"`, `\\"aws_secret_access_key\\":\\"…\\"`), and any letter case of
`Bearer` and of the AWS label.

Patterns are deliberately specific (provider prefixes, PEM armour, `user:password@` in URLs):
a false positive rewrites an innocent answer and can change a verdict.
"""

from __future__ import annotations

from typing import Any

import orjson
import xxhash
from loopledger.events import Answer, Answers, Batch, Call, Prose, Retry, SessionInfo, UserTurn

# What may stand right before a key: a word boundary, or the end of an escape whose last
# character is a letter or digit (`\n`, `\t`, `\u003c`, `%3D`), where `\b` sees none.
_LEAD = r"(?:\\(?:u[0-9A-Fa-f]{4}|[ntrbf])|%[0-9A-Fa-f]{2}|\b)"
# A quote around a label or a value, escaped any number of times (`"`, `\"`, `\\\"`, `\u0022`).
_QUOTE = r"(?:\\*(?:[\"'`]|u0022|u0027))?"
# Space between a label and its value, also as JSON escapes (a pretty-printed JSON-in-JSON).
_GAP = r"(?:\s|\\+[ntr])*"


def _nocase(word: str) -> str:
    """`word` in any case of its ASCII letters, spelled out: RE2's (?i) folds Unicode too (`ſ` is
    an `s` to it), which the lower-case pre-check below could not follow."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in word)


# (kind, pattern); each pattern's group named "secret" is what is replaced (the rest, a label or
# the escape before a key, stays).
_PATTERNS: tuple[tuple[str, str], ...] = (
    ("private-key", r"(?P<secret>-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|.*\z))"),
    ("anthropic-key", _LEAD + r"(?P<secret>sk-ant-[A-Za-z0-9_\-]{20,})"),
    ("openai-key", _LEAD + r"(?P<secret>sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,})"),
    ("stripe-key", _LEAD + r"(?P<secret>[rs]k_(?:live|test)_[0-9A-Za-z]{16,})"),
    ("aws-key", _LEAD + r"(?P<secret>(?:AKIA|ASIA)[0-9A-Z]{16})\b"),
    ("aws-secret", _nocase("aws_secret_access_key") + _QUOTE + _GAP + "[:=]" + _GAP + _QUOTE
     + r"(?P<secret>(?:[A-Za-z0-9+=]|\\*/){40})"),
    ("github-token", _LEAD + r"(?P<secret>gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("google-key", _LEAD + r"(?P<secret>AIza[0-9A-Za-z_\-]{35})"),
    ("slack-token", _LEAD + r"(?P<secret>xox[abposr]-[A-Za-z0-9\-]{10,})"),
    ("bearer-token", _LEAD + _nocase("bearer") + r"(?:\s|\\+[ntr]|%20|\+)+(?P<secret>[A-Za-z0-9._~+/\-]{16,}=*)"),
    ("url-password", r"\b[a-zA-Z][a-zA-Z0-9+.\-]*:(?:\\*/){2}[^\s/:@\\]+:(?P<secret>[^\s/@]+)@"),
)
_SOURCE = "(?s)" + "|".join(f"(?P<k{i}>{p.replace('(?P<secret>', f'(?P<s{i}>')})" for i, (_, p) in enumerate(_PATTERNS))
_COMBINED: Any = None  # compiled on first need: a hook process seldom needs it (nor the import)
_KINDS = [kind for kind, _ in _PATTERNS]
_GROUP_OF: dict[int, tuple[int, int]] = {}  # group number of k<i> -> (i, group number of s<i>)
# Cheap substring tests that every pattern needs at least one of, on the text in lower case
# (ASCII letters fold the same way there as in the patterns): most texts hold none, and `in`
# scans far faster than any regex engine. Grouped under a gate, a character each of the group's
# markers holds, so a clean text costs one lower() and a few memchr scans. ":" is the URL's
# (`scheme://user:password@`, its slashes maybe escaped: `:\/\/`), and it needs an "@" too.
_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("_", ("k_live_", "k_test_", "aws_secret_access_key", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    ("a", ("private key", "akia", "asia", "aiza", "bearer")),
    ("-", ("sk-", "xox")),
    ("@", (":/", ":\\")),
)


# From this many characters one RE2 pass over the markers beats lower() and a dozen `in` scans
# (a 1.5 KB line: 4 µs against 13); short texts keep the scans and import no RE2 (a hook process
# whose event holds only short texts, the usual case, imports it only when one may hold a secret).
_LONG = 512
# The markers that do not hold their group's gate (`xox` without `-`, the URL's `:/` without `@`):
# the one pass below cannot see the gate, so these stay scans behind it.
_GATED = tuple((gate, tuple(mk for mk in markers if gate not in mk)) for gate, markers in _GROUPS
               if any(gate not in mk for mk in markers))
_UNGATED: Any = None


def _may_hold_secret(text: str) -> bool:
    """Whether some pattern could match `text` (when not, none can)."""
    if len(text) >= _LONG:
        try:
            if _ungated().search(text) is not None:
                return True
        except UnicodeEncodeError:  # a lone surrogate: RE2 reads UTF-8 only; the scans below do all
            pass
        else:
            low = text.lower()
            return any(gate in low and any(mk in low for mk in markers) for gate, markers in _GATED)
    low = text.lower()
    for gate, markers in _GROUPS:
        if gate in low:
            for mk in markers:
                if mk in low:
                    return True
    return False


def _ungated() -> Any:
    """One RE2 pass for every marker that holds its group's gate itself. RE2's (?i) folds at least
    what lower() does (and ſ, K beyond it): it may say yes where the scans say no, never the reverse."""
    global _UNGATED
    if _UNGATED is None:
        import re2

        _UNGATED = re2.compile("(?i)" + "|".join(re2.escape(mk) for gate, markers in _GROUPS
                                                    for mk in markers if gate in mk))
    return _UNGATED


def compiled() -> Any:
    """The combined pattern, compiled by RE2 (every pattern alternated, each in group k<i>)."""
    global _COMBINED
    if _COMBINED is None:
        import re2

        opts = re2.Options()
        opts.max_mem = 64 << 20  # the DFA's cache: enough that a long text never falls back to the NFA's slower pace
        combined = re2.compile(_SOURCE, opts)
        index = combined.groupindex
        _GROUP_OF.update({index[f"k{i}"]: (i, index[f"s{i}"]) for i in range(len(_PATTERNS))})
        _COMBINED = combined
    return _COMBINED


def _replace(m: Any) -> str:
    # The outer group k<i> ends where the match does and comes before its inner groups, so it is
    # the match's lastindex.
    i, secret = _GROUP_OF[m.lastindex]
    start, end = m.span(secret)
    whole = m.group(0)
    base = m.start()
    return whole[: start - base] + f"[REDACTED:{_KINDS[i]}]" + whole[end - base :]


def redact_text(text: str) -> str:
    """`text` with every secret replaced by `[REDACTED:<kind>]`; the same object when clean."""
    if not text or not _may_hold_secret(text):
        return text
    try:
        out = compiled().sub(_replace, text)
    except UnicodeEncodeError:  # a lone surrogate (text from stdlib json, a `\ud800` escape)
        out = _sub_around_surrogates(text)
    return out if out != text else text


_SURROGATES = dict.fromkeys(range(0xD800, 0xE000), "\ufffd")  # for str.translate


def _sub_around_surrogates(text: str) -> str:
    """redact_text of a text RE2 cannot take (it reads UTF-8, which has no lone surrogates): the
    patterns run on a copy with each surrogate as U+FFFD (one character for one, so every
    position holds), and what they match is replaced in the text itself."""
    safe = text.translate(_SURROGATES)
    out, pos = [], 0
    for m in compiled().finditer(safe):
        i, secret = _GROUP_OF[m.lastindex]
        start, end = m.span(secret)
        out.append(text[pos:start] + f"[REDACTED:{_KINDS[i]}]")
        pos = end
    out.append(text[pos:])
    return "".join(out)


# Containers nested deeper than this are replaced by a marker. No real tool call nests this deep;
# past it every recursive consumer downstream (orjson stops at 255, pickle, deepcopy, repr, the
# dashboard's JSON view) would be one RecursionError away, and one odd value must cost that value,
# never the file (design.md, "Live paths").
MAX_DEPTH = 128
TOO_DEEP = "[loopledger: nested deeper than"  # start of the marker (see _too_deep)
_CONTAINERS = (dict, list, tuple)


def redact_value(value: Any, *, secrets: bool = True, max_depth: int | None = MAX_DEPTH) -> Any:
    """A JSON value from outside (tool arguments, a hook's payload, a span's attributes), safe to
    store, judge, log or print: every string in it redacted (dict keys too: a map may be keyed by
    a token), and every container nested deeper than MAX_DEPTH replaced by a marker string that
    names its digest (so two different deep values stay different). `secrets=False` (--no-redact)
    only bounds the depth; `max_depth=None` only redacts (a reader's state, which must stay what
    the reader left). Events inside (a reader state holds some) are redacted as redact_event
    does. Iterative: no input raises RecursionError. The same object when nothing changed."""
    if isinstance(value, str):
        return redact_text(value) if secrets else value
    if isinstance(value, _EVENTS):
        return redact_event(value, secrets=secrets)
    if not isinstance(value, _CONTAINERS):
        return value
    limit = max_depth if max_depth is not None else 1 << 62
    try:
        flat = orjson.dumps(value)
    except TypeError:  # deeper than orjson goes (255), non-string keys, huge ints, lone surrogates
        flat = None
    if flat is not None and left_alone(flat, secrets, limit):
        return value
    return _walk(value, secrets, limit)


def left_alone(flat: bytes, secrets: bool = True, limit: int = MAX_DEPTH) -> bool:
    """Whether redact_value returns a value as it is, told from the value's `orjson.dumps`
    (for a caller that serializes the value anyway: the spool's lines). When False it may still
    be: a marker found in text the patterns then do not match."""
    # One C-speed serialization decides most values: no marker in it means no secret, and
    # fewer brackets than the limit (brackets inside strings only overcount) means not too deep.
    # (Searched as str: `in` on bytes costs a buffer acquisition per marker.)
    return (len(flat) <= limit or flat.count(b"{") + flat.count(b"[") <= limit) and (
        not secrets or not _may_hold_secret(flat.decode()))


def _walk(root: Any, secrets: bool, limit: int) -> Any:
    # An explicit stack of frames [source, children, results, changed, depth]; a frame is done
    # when it has a result for each child, and hands its (possibly new) container to its parent.
    frames: list[list[Any]] = [[root, list(root.values()) if isinstance(root, dict) else list(root), [], False, 1]]
    while True:
        frame = frames[-1]
        src, children, results, _, depth = frame
        if len(results) < len(children):
            child = children[len(results)]
            if isinstance(child, str):
                new = redact_text(child) if secrets else child
            elif isinstance(child, _EVENTS):
                new = redact_event(child, secrets=secrets)
            elif isinstance(child, _CONTAINERS):
                if depth >= limit:
                    new = _too_deep(child, secrets, limit)
                else:
                    frames.append([child, list(child.values()) if isinstance(child, dict) else list(child),
                                   [], False, depth + 1])
                    continue
            else:
                new = child
            results.append(new)
            if new is not child:
                frame[3] = True
            continue
        frames.pop()
        keys = None
        if isinstance(src, dict) and secrets:
            # Keys are redacted too: a tool's headers or env map may be keyed by a token.
            keys = [redact_text(k) if isinstance(k, str) else k for k in src]
            if any(k is not o for k, o in zip(keys, src, strict=True)):
                frame[3] = True
            else:
                keys = None
        if not frame[3]:
            out = src
        elif isinstance(src, dict):
            out = dict(zip(keys if keys is not None else src.keys(), results, strict=True))
        else:
            out = type(src)(results) if isinstance(src, tuple) else results
        if not frames:
            return out
        parent = frames[-1]
        parent[2].append(out)
        if out is not src:
            parent[3] = True


def _too_deep(value: Any, secrets: bool, limit: int) -> str:
    """The marker standing in for a container cut at MAX_DEPTH: what it was, how big, and a digest
    of its contents (iterative, keys sorted; secrets redacted first), so equal values get equal
    markers and different ones different markers."""
    h = xxhash.xxh3_128()
    n = 0
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        n += type(item) is not _Key
        if isinstance(item, dict):
            h.update(b"{%d" % len(item))
            for k, v in sorted(item.items(), key=lambda kv: repr(kv[0]), reverse=True):
                stack.append(v)
                stack.append(_Key(repr(k)))
        elif isinstance(item, list | tuple):
            h.update(b"[%d" % len(item))
            stack.extend(reversed(item))
        elif isinstance(item, _Key):
            h.update(b"k" + item.encode("utf-8", "surrogatepass") + b"\0")
        elif isinstance(item, str):
            text = redact_text(item) if secrets else item
            h.update(b"s%d:" % len(text) + text.encode("utf-8", "surrogatepass"))
        else:
            h.update(b"v" + repr(item).encode("utf-8", "surrogatepass") + b"\0")
    return f"{TOO_DEEP} {limit} levels: a {type(value).__name__} of {n} values, xxh3 {h.hexdigest()}]"


_EVENTS = (Call, Answer, Batch, Answers, UserTurn, Prose, Retry, SessionInfo)


class _Key(str):
    """A dict key on _too_deep's stack (told apart from a string value)."""


def _redact_call(call: Call, secrets: bool = True) -> Call:
    args = redact_value(call.args, secrets=secrets)
    return call if args is call.args else Call(call.id, call.name, args, call.args_malformed)


def redact_event(ev, *, secrets: bool = True):
    """One event (or SessionInfo) with its transcript text redacted and its values bounded in
    depth (redact_value); unchanged objects are reused. `secrets=False` (--no-redact) only bounds
    the depth: no event leaves here that a recursive consumer cannot take."""
    text_of = redact_text if secrets else _same
    if isinstance(ev, Call):
        return _redact_call(ev, secrets)
    if isinstance(ev, Answer):
        text = text_of(ev.text)
        return ev if text is ev.text else Answer(ev.call_id, text, ev.is_error, ev.ts)
    if isinstance(ev, Batch):
        calls = tuple(_redact_call(c, secrets) for c in ev.calls)
        text = text_of(ev.text)
        if text is ev.text and all(a is b for a, b in zip(calls, ev.calls, strict=True)):
            return ev
        return Batch(calls, text, ev.ts, ev.line, ev.usage)
    if isinstance(ev, Answers):
        if not secrets:
            return ev
        answers = []
        changed = False
        for a in ev.answers:
            text = redact_text(a.text)
            if text is a.text:
                answers.append(a)
            else:
                changed = True
                # The digest is recomputed from the redacted text: it is what gets stored.
                answers.append(Answer(a.call_id, text, a.is_error, a.ts))
        return Answers(tuple(answers), ev.line) if changed else ev
    if isinstance(ev, (UserTurn, Prose, Retry)):
        text = text_of(ev.text)
        if text is ev.text:
            return ev
        return Prose(text, ev.ts, ev.line, ev.usage) if isinstance(ev, Prose) else type(ev)(text, ev.ts, ev.line)
    if isinstance(ev, SessionInfo):
        title = text_of(ev.title)
        meta = redact_value(ev.meta, secrets=secrets)
        if title is ev.title and meta is ev.meta:
            return ev
        return SessionInfo(ev.key, ev.format, title, ev.agent, ev.model, ev.started_at, ev.parent_key, meta)
    return ev


def _same(text: str) -> str:
    return text


EXCERPT_CHARS = 200


EXCERPT_MARGIN = 4096  # characters read past the cut, so a secret straddling it is still recognised


def excerpt(raw: str | bytes, limit: int = EXCERPT_CHARS) -> str:
    """A short, printable slice of a bad line for an error message, secrets redacted.

    Always redacted (whatever --redact says): an excerpt is a diagnostic that is stored and shown,
    and a key in it helps nobody. Redacted before the cut, so a key split by it is still found."""
    if isinstance(raw, bytes):
        raw = raw[: limit * 4 + EXCERPT_MARGIN].decode("utf-8", "replace")
    else:
        raw = raw[: limit * 4 + EXCERPT_MARGIN]
    raw = redact_text(raw).replace("\n", "\\n")
    return raw if len(raw) <= limit else raw[:limit] + "…"
