"""Untrusted text made safe for a terminal or a one-line message: pure functions, no I/O.

Transcript text, file heads and error messages can hold control characters (ANSI escapes, raw
binary bytes): printed as they are they repaint or garble the terminal. `plain` shows each as a
visible escape, a newline as ⏎, and caps the length.
"""

from __future__ import annotations


def plain(text: str, limit: int = 70) -> str:
    """One line of inert text: control characters escaped, at most `limit` characters."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch == "\n":
            out.append("⏎")
        elif code < 0x20 or 0x7F <= code < 0xA0 or ch in "\u2028\u2029\ufeff" or 0xD800 <= code < 0xE000:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
        if len(out) > limit:
            break
    s = "".join(out)
    return s if len(s) <= limit else s[: limit - 1] + "…"
