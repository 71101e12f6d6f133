"""The hook command's flags, read before anything else is imported (every hook process reads
them): only their plain shapes. The CLI's `hook claude-code|gemini-cli` command declares the
same options (tests/test_live_hostile.py keeps the two equal), and anything these plain shapes
do not cover — `--help`, a typo such as `--dbx` — is the CLI parser's to answer
(loopledger.entry hands such a command to it)."""

from __future__ import annotations

FLAGS = ("--db", "--log")  # each takes one value


def parse_flags(argv: list[str]) -> dict[str, str | None] | None:
    """The flags as {"db", "log"} when `argv` holds only their plain shapes (`--db X`, `--db=X`),
    else None."""
    opts: dict[str, str | None] = {"db": None, "log": None}
    args = list(argv)
    while args:
        name, eq, value = args.pop(0).partition("=")
        if name not in FLAGS or not (eq or args):
            return None
        opts[name[2:]] = value if eq else args.pop(0)
    return opts
