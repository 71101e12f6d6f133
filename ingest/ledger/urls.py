"""Where the ledger is: `--db`, the environment, or ./ledger.sqlite. Stdlib only, so the live
hook can find its ledger without importing SQLAlchemy (see loopledger.live.db)."""

from __future__ import annotations

import os

# What urllib.parse.quote(…, safe="/") leaves as it is: a path of these alone needs no quoting
# and urllib.parse (with ipaddress, a few ms of a hook process) is not imported for it.
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")
DEFAULT_SQLITE_PATH = "ledger.sqlite"
ENV_URL = "LOOPLEDGER_DATABASE_URL"
ENV_PATH = "LOOPLEDGER_DB"
# How long a PostgreSQL server may take to accept a connection ($LOOPLEDGER_CONNECT_TIMEOUT,
# seconds; libpq counts whole seconds, psycopg at least 2): a server that takes the TCP
# connection and never answers must not hang a command, nor a hook, forever.
CONNECT_TIMEOUT_S = float(os.environ.get("LOOPLEDGER_CONNECT_TIMEOUT", "10"))


def resolve_url(db: str | None = None) -> str:
    """`--db` wins, then LOOPLEDGER_DATABASE_URL, then LOOPLEDGER_DB (a path), then ./ledger.sqlite.

    A plain path means a SQLite file; anything with `://` is a SQLAlchemy URL
    (`postgresql+psycopg://user:pw@host/db`; a bare `postgresql://` gets the psycopg 3 driver).
    """
    value = db or os.environ.get(ENV_URL) or os.environ.get(ENV_PATH) or DEFAULT_SQLITE_PATH
    if "://" not in value:
        return sqlite_url(os.path.realpath(os.path.expanduser(value)))
    if value.startswith("postgresql://") or value.startswith("postgres://"):
        value = "postgresql+psycopg://" + value.split("://", 1)[1]
    return value


def has_password(url: str) -> bool:
    """Whether a ledger URL carries a password: its userinfo's, or a query parameter naming one
    (what engine.display_url hides)."""
    if "://" not in url:
        return False
    import urllib.parse

    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except ValueError:  # a port that is not a number, …: a userinfo with a colon is enough to say yes
        return ":" in url.split("://", 1)[1].split("/", 1)[0].rpartition("@")[0]
    keys = [k.lower() for k, _ in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)]
    return bool(password) or any("password" in k or k in ("pass", "pwd") for k in keys)


def sqlite_url(path: str | os.PathLike) -> str:
    """The URL of a SQLite file, percent-quoted: a `#`, `?`, `%`, space or non-ASCII letter in the
    path survives the round trip through SQLAlchemy's make_url (which unquotes the database part;
    a bare f"sqlite:///{path}" loses what follows `#` or `?` and decodes a literal `%20`)."""
    path = os.fspath(path)
    if _PLAIN.issuperset(path):
        return "sqlite:///" + path
    import urllib.parse

    return "sqlite:///" + urllib.parse.quote(path, safe="/")


def sqlite_file(url: str) -> str | None:
    """The file of a `sqlite:///PATH` URL (None for other databases and in-memory SQLite),
    unquoted as make_url unquotes it."""
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///"):].split("?", 1)[0]
    if "%" in path:
        import urllib.parse

        path = urllib.parse.unquote(path)
    return path if path and path != ":memory:" else None
