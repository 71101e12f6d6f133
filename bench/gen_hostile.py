"""Hostile input for the redaction point and the live paths: texts built to make a backtracking
pattern rescan (long runs after `://`, `@`, `Bearer`, a key prefix, nested escapes), and every
kind of secret LoopLedger redacts in every form it travels in. Shared by the tests (outcomes:
the secret is gone, the path answers) and `make bench` (redaction MB/s on these texts).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable

# One realistic secret of each kind loopledger.redact names (docs/live.md, "Secrets and odd
# values"): the kind, the secret, and what must never reach the disk (a run of its body).
SECRETS: dict[str, str] = {
    "anthropic-key": "sk-ant-api03-" + "Xq7vR2mKp9LwZt4bN8cY1dF6gH3jS5aE0uI-oP_rT2yU7iO9pL4kJ6hG8fD1sA3zX5cV7bN9mQ2wE4rT6yAA",
    "openai-key": "sk-proj-" + "Tz8Kq3WmN5bV7cX9zL1aS3dF5gH7jK9lQ2wE4rT6yU8iO0pZxCvBnMaSdFgHjKl_-T3BlbkFJr4Nd0mK3y5",
    "stripe-key": "sk_live_" + "51HqLyjWDarjtT1zdp7dcQ4eC39",
    "aws-key": "AKIAQ3EGRSKXZP7V4N2M",
    "aws-secret": "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",
    "github-token": "ghp_" + "R8mK2pQ7vX4wZ9nB3cY6dF1gH5jL0aS9eU2i",
    "google-key": "AIzaSyD" + "8mK2pQ7vX4wZ9nB3cY6dF1gH5jL0aS9eU",
    "slack-token": "xoxb-" + "918273645012-7263541890123-Qm3vR8kP2xL7wZ9nB4cY6dF1",
    "bearer-token": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1MTIzNDUifQ.Zm9vYmFyYmF6cXV4cXV1eA",
    "private-key": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7Qm3vR8kP2xL7wZ9nB4cY6dF1gH5jL0aS",
    "url-password": "Hunter2-Qm3vR8kP2xL7wZ9n",
}


def bare(kind: str, secret: str) -> str:
    """The secret with only the label or armour its kind needs to be recognised."""
    if kind == "aws-secret":
        return f"aws_secret_access_key={secret}"
    if kind == "bearer-token":
        return f"Bearer {secret}"
    if kind == "private-key":
        return f"-----BEGIN PRIVATE KEY-----\n{secret}\n-----END PRIVATE KEY-----"
    if kind == "url-password":
        return f"postgresql://admin:{secret}@db.internal:5432/app"
    return secret


def plain(kind: str, secret: str) -> str:
    """The secret as a person or a tool writes it."""
    return {"aws-secret": f"aws_secret_access_key = {secret}", "bearer-token": f"Authorization: Bearer {secret}"
            }.get(kind) or (bare(kind, secret) if kind in ("private-key", "url-password") else f"export KEY={secret}")


def _escaped(text: str) -> str:
    """`text` inside a JSON string: quotes and backslashes escaped, non-ASCII as \\uXXXX."""
    return json.dumps(text)[1:-1]


# Each form: a function of (kind, secret) giving the text that carries it. Together: plain,
# JSON-escaped once (`\"`, `\\`, `\uXXXX`, `\n` right before the key), nested JSON-in-JSON (a
# JSON text inside a JSON string inside another), a quoted label (`"aws_secret_access_key":"…"`),
# and letter case (`bEaReR`, `AWS_SECRET_ACCESS_KEY`).
FORMS: dict[str, Callable[[str, str], str]] = {
    "plain": plain,
    "json-escaped": lambda k, s: _escaped(json.dumps({"note": "\u00a0" + bare(k, s) + "\n", "q": '"'})),
    "after-unicode-escape": lambda k, s: "echo {\\\"k\\\":\\\"\\u003c" + bare(k, s) + "\\\"}",
    "after-newline-escape": lambda k, s: "line one\\n" + bare(k, s) + "\\tdone",
    "nested-json": lambda k, s: json.dumps({"body": json.dumps({"inner": json.dumps({"v": "\u00a0" + bare(k, s)})})}),
    "quoted-label": lambda k, s: (json.dumps({"aws_secret_access_key": s}) if k == "aws-secret"
                                  else json.dumps({"Authorization": f"Bearer {s}"}) if k == "bearer-token"
                                  else json.dumps({"secret": plain(k, s)})),
    "escaped-quoted-label": lambda k, s: "printf " + _escaped(
        json.dumps({"aws_secret_access_key": s}) if k == "aws-secret" else json.dumps({"v": plain(k, s)})),
    "odd-case": lambda k, s: (f"authorization: bEaReR {s}" if k == "bearer-token"
                              else f'"AWS_Secret_Access_Key": "{s}"' if k == "aws-secret" else plain(k, s)),
}


def leaks(secret: str) -> tuple[str, ...]:
    """Runs of the secret's body that must appear nowhere: any 16 characters of it."""
    return tuple(secret[i:i + 16] for i in range(len(secret) - 16 + 1))


def every_form() -> list[tuple[str, str, str, str]]:
    """(kind, form, secret, text) for each kind of secret in each form."""
    return [(kind, form, secret, make(kind, secret)) for kind, secret in SECRETS.items() for form, make in FORMS.items()]


# ── adversarial text: long runs where a backtracking pattern restarts at every position ─────────

def adversarial(n: int) -> dict[str, str]:
    """Texts of about `n` characters, each aimed at one pattern's worst case (named for it); two
    are the reproductions of issue 27 (`url-dots`: 4 s at 80k characters before; `web-page`: a
    200 KB page that took 26 s)."""
    k = max(1, n // 2)
    return {
        "url-dots": "see https://x@y " + "a." * k,
        "web-page": "contact admin@example.com or visit https://example.com\n" + "a-" * k,
        "url-after-scheme": "a://" + "b" * n + "@",
        "at-signs": "http://u:" + "@" * n,
        "colons-after-scheme": "x://" + ":" * n,
        "bearer-spaces": "Bearer " + " " * n + "!",
        "bearer-runs": "bearer " * (n // 7),
        "key-prefixes": "sk-" * (n // 3),
        "short-keys": ("sk-ant-" + "a" * 19 + " ") * (n // 27),
        "github-prefixes": "ghp_" * (n // 4),
        "aws-labels": "aws_secret_access_key=" * (n // 22),
        "aws-quotes": "aws_secret_access_key" + '\\"' * k,
        "nested-escapes": "\\" * n + "u003csk-ant-",
        "unicode-escapes": "\\u00a0" * (n // 6),
        "pem-unterminated": "-----BEGIN PRIVATE KEY-----" * (n // 27),
        "pem-armour": "-----BEGIN " + "RSA " * (n // 4) + "PRIVATE",
        "percent-escapes": "%20" * (n // 3) + "Bearer",
    }


def ordinary(n: int) -> str:
    """About `n` characters of what tools usually return: shell output, code, JSON, a URL or two."""
    block = ("$ npm test\n> shop@1.4.0 test\n> jest\n\nFAIL src/cart.test.js\n  ● total › adds tax\n"
             "    expect(received).toBe(expected)\n    Expected: 10.8\n    Received: 10\n"
             '{"name": "cart", "version": "1.4.0", "scripts": {"test": "jest"}, "deps": ["react", "lodash"]}\n'
             "See https://jestjs.io/docs/getting-started for help; mail dev@example.com.\n"
             "def total(items):\n    return sum(i.price * (1 + i.tax) for i in items)\n")
    return (block * (n // len(block) + 1))[:n]


# ── a hostile peer ────────────────────────────────────────────────────────────────────────────

@contextlib.contextmanager
def silent_server():
    """The port of a socket on 127.0.0.1 that accepts every connection and never sends a byte
    (a PostgreSQL server gone silent, as issue 27 reproduced it)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        t.join(5)
        for c in held:
            c.close()
        srv.close()
