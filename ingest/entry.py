"""The `loopledger` console script. `loopledger hook claude-code|gemini-cli|codex` runs before every
tool call of a person's agent, so it is dispatched here, before the CLI (typer, rich) is
imported, and handed to the resident guard when one is running (loopledger.live.hook_client:
a Unix socket; the in-process path when there is none); everything else goes to
loopledger.cli.app."""

from __future__ import annotations

import os
import sys


def _keep_bytecode() -> None:
    """Under PYTHONDONTWRITEBYTECODE (usual in containers) a source tree without __pycache__ (an
    editable install) is compiled again by every hook process: a few tens of ms per tool call,
    more than the decision. The hook then keeps its bytecode in LoopLedger's own cache
    (`$XDG_CACHE_HOME/loopledger/pycache`), so the source tree stays as clean as asked."""
    if sys.dont_write_bytecode and sys.pycache_prefix is None:
        from loopledger.folders import cache_dir

        sys.pycache_prefix = cache_dir("pycache")
        sys.dont_write_bytecode = False


def _plain_hook_flags(args: list[str]) -> bool:
    from loopledger.live.hook_flags import parse_flags

    return parse_flags(args) is not None


def main() -> None:
    argv = sys.argv[1:]
    # The fast path takes only the plain shapes of the hook's flags (loopledger.live.hook_flags);
    # anything else (`--help`, a typo such as `--dbx`) is the CLI parser's to answer.
    if len(argv) >= 2 and argv[0] == "hook" and argv[1] in ("claude-code", "gemini-cli", "codex") \
            and _plain_hook_flags(argv[2:]):
        _keep_bytecode()
        from loopledger.live.hook_client import main as hook

        if argv[1] == "codex":  # who to interrupt at a halt (loopledger.live.codex); a resident cannot tell
            argv = [*argv, "--agent-pid", str(os.getppid())]

        main_file = getattr(sys.modules.get("__main__"), "__file__", None) or ""
        exits = os.path.basename(main_file) == "loopledger"  # the console script: a process per tool call
        code = hook(argv[1], argv[2:], exits=exits)
        if exits:
            # Skip the interpreter's teardown (freeing every module: ~10% of a hook's CPU). The
            # answer is flushed, the log file is closed, the ledger's transaction committed (its
            # connection left to the exit: loopledger.live.db.leave_open_at_exit).
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        raise SystemExit(code)
    from loopledger.cli.app import run as cli

    cli(argv)


if __name__ == "__main__":
    main()
