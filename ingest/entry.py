"""The `loopledger` console script. `loopledger hook claude-code|gemini-cli` runs before every
tool call of a person's agent, so it is dispatched here, before the CLI (typer, rich) is
imported; everything else goes to loopledger.cli.app."""

from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if len(argv) >= 2 and argv[0] == "hook" and argv[1] in ("claude-code", "gemini-cli") \
            and not {"--help", "-h"} & set(argv[2:]):
        from loopledger.live.hooks import run

        raise SystemExit(run(argv[1], argv[2:]))
    from loopledger.cli.app import run as cli

    cli(argv)


if __name__ == "__main__":
    main()
