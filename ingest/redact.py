"""Secret redaction, applied to transcript text before it is stored and before detectors see it.

Transcripts hold whatever the agent saw: API keys pasted into prompts, tokens echoed by `env`,
private keys read from disk. They are replaced by a fixed marker naming the kind of secret, so
the ledger never keeps them and a recheck from the ledger judges exactly what the ingest judged
(the same secret always becomes the same marker, so equal texts stay equal).

Patterns are deliberately specific (provider prefixes, PEM armour, `user:password@` in URLs):
a false positive rewrites an innocent answer and can change a verdict.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from loopledger.events import Answer, Answers, Batch, Call, Prose, Retry, SessionInfo, UserTurn

# (kind, pattern); the whole match is replaced unless the pattern has a group named "secret".
_PATTERNS: tuple[tuple[str, str], ...] = (
    ("private-key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|.*\Z)"),
    ("anthropic-key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
    ("openai-key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    ("stripe-key", r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}"),
    ("aws-key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("aws-secret", r"(?i:aws_secret_access_key)[\"']?\s*[:=]\s*[\"']?(?P<secret>[A-Za-z0-9/+=]{40})"),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("google-key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("bearer-token", r"\b[Bb](?i:earer)\s+(?P<secret>[A-Za-z0-9._~+/\-]{16,}=*)"),
    ("url-password", r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/:@]+:(?P<secret>[^\s/@]+)@"),
)
_COMBINED = re.compile("|".join(f"(?P<k{i}>{p.replace('(?P<secret>', f'(?P<s{i}>')})"
                                for i, (_, p) in enumerate(_PATTERNS)), re.DOTALL)
_KINDS = [kind for kind, _ in _PATTERNS]
# Cheap substring tests that every pattern needs at least one of: most texts hold none, and
# `in` scans far faster than the regex engine does.
_MARKERS = ("PRIVATE KEY", "sk-", "k_live_", "k_test_", "AKIA", "ASIA", "ws_secret_access_key",
            "WS_SECRET_ACCESS_KEY", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "AIza", "xox", "earer", "EARER", "://")


def _replace(m: re.Match[str]) -> str:
    # The outer group k<i> closes last, so it is the match's lastgroup.
    i = int(m.lastgroup[1:])
    marker = f"[REDACTED:{_KINDS[i]}]"
    secret = m.group(f"s{i}") if f"s{i}" in _COMBINED.groupindex else None
    if secret is None:
        return marker
    start, end = m.span(f"s{i}")
    whole = m.group(0)
    base = m.start()
    return whole[: start - base] + marker + whole[end - base :]


def _may_hold_secret(text: str) -> bool:
    # A plain loop: any() over a generator costs a frame switch per marker, per text.
    for mk in _MARKERS:
        if mk in text:
            return True
    return False


def redact_text(text: str) -> str:
    """`text` with every secret replaced by `[REDACTED:<kind>]`; the same object when clean."""
    if not text or not _may_hold_secret(text):
        return text
    return _COMBINED.sub(_replace, text)


def redact_value(value: Any) -> Any:
    """Redact every string inside a JSON value (dict keys are left alone: they name fields)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        out = {k: redact_value(v) for k, v in value.items()}
        return value if all(out[k] is value[k] for k in value) else out
    if isinstance(value, list):
        items = [redact_value(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def _redact_call(call: Call) -> Call:
    if isinstance(call.args, dict | list):
        try:
            # One scan of the serialized arguments instead of one per string inside them.
            flat = orjson.dumps(call.args).decode()
        except TypeError:
            flat = None
        if flat is not None and not _may_hold_secret(flat):
            return call
    args = redact_value(call.args)
    return call if args is call.args else Call(call.id, call.name, args, call.args_malformed)


def redact_event(ev):
    """One event (or SessionInfo) with its transcript text redacted; unchanged objects are reused."""
    if isinstance(ev, Batch):
        calls = tuple(_redact_call(c) for c in ev.calls)
        text = redact_text(ev.text)
        if text is ev.text and all(a is b for a, b in zip(calls, ev.calls, strict=True)):
            return ev
        return Batch(calls, text, ev.ts, ev.line)
    if isinstance(ev, Answers):
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
        text = redact_text(ev.text)
        return ev if text is ev.text else type(ev)(text, ev.ts, ev.line)
    if isinstance(ev, SessionInfo):
        title = redact_text(ev.title)
        if title is ev.title:
            return ev
        return SessionInfo(ev.key, ev.format, title, ev.agent, ev.model, ev.started_at, ev.parent_key, ev.meta)
    return ev


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
