"""Text caps: transcript text is stored cut to a size, ending in a marker that names the full
length and digest, so two capped texts are equal exactly when the full texts were. Stdlib and
xxhash only (the live hook writes capped text without importing SQLAlchemy)."""

from __future__ import annotations

from loopledger.events import TRUNCATED, is_capped, text_digest  # noqa: F401 (the marker lives with the events)

DEFAULT_MAX_TEXT = 64 * 1024


def cap_text(text: str, max_bytes: int, digest: str | None = None) -> str:
    """`text` cut to at most `max_bytes` UTF-8 bytes, plus a marker naming the full length and digest.

    The digest in the marker keeps equality exact for the detectors that compare text (stagnation).
    """
    if len(text) * 4 <= max_bytes:  # cannot exceed the cap even at 4 bytes per character
        return text
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text
    head = raw[:max_bytes].decode("utf-8", "ignore")
    return f"{head}{TRUNCATED}{len(raw)} bytes, digest {digest or text_digest(text)}]"
