"""`loopledger receive`: an OTLP/HTTP trace receiver that writes into the ledger as `ingest` does.

What an acknowledgement means: a request answered 200 has every new span of it (a span already
received — same trace and span id — is dropped, so a client's retry adds nothing) written to
the spool, redacted, and fsync'd. From there it reaches the ledger exactly once, whatever
happens in between: a busy ledger (retried at the next flush, never dropped), the receiver
killed mid-flush or restarted (the ledger's stored spool offset says what it holds; the rest
is written at the next start). The answer never waits on the ledger.

- spool.py: the day's file of received spans, one per line, 0600 in a 0700 folder, redacted
  and depth-capped before it is written; appends are fsync'd before the answer.
- flush.py: spool → ledger from a stored offset: only new bytes read, only touched sessions
  written (continued from their resume snapshot when the new spans come after the old).
- http.py: decoding (400/413/415 for what is not an OTLP request), the bearer-token door, the
  writer and flusher threads, `serve`.

The same reader (formats/otlp.py), redaction, replay and ledger writes as `loopledger ingest`
of a spool file, so a received session and that file ingested give the same rows. A
conversation that runs across midnight UTC is two sessions (one per day's file). Spool files
of days before the last `keep_days` (default 1) are deleted once every span in them is in the
ledger; today's file grows by about the received spans' JSON size.
"""

from loopledger.receive.http import (
    DEFAULT_HOST,
    DEFAULT_KEEP_DAYS,
    DEFAULT_MAX_BODY,
    DEFAULT_PORT,
    JSON,
    PROTOBUF,
    TOKEN_ENV,
    BadRequest,
    Receiver,
    Stats,
    authorized,
    decode,
    default_spool,
    door_problem,
    is_loopback,
    make_app,
    prepare,
    serve,
)

__all__ = ["DEFAULT_HOST", "DEFAULT_KEEP_DAYS", "DEFAULT_MAX_BODY", "DEFAULT_PORT", "JSON", "PROTOBUF", "TOKEN_ENV",
           "BadRequest", "Receiver", "Stats", "authorized", "decode", "default_spool", "door_problem", "is_loopback",
           "make_app", "prepare", "serve"]
