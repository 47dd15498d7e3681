"""The ``loopwatch`` console script: :func:`streams.cli.main`, and the moments before it runs and after it returns.

Importing the command line takes about half a second, and a Ctrl-C then ended in a ``KeyboardInterrupt``
traceback. After a command had returned, a Ctrl-C during the interpreter's exit raised in an exit hook (another
traceback) or killed the process (status 130 for a command that had finished: a ``publish`` looked undone and
might be run twice). Once the command has its status, both signals are ignored: the interpreter keeps an ignored
signal ignored through its exit, where it resets its own handlers to the system's default.
"""

from __future__ import annotations

import signal
import sys

_INTERRUPTED = 130  # streams.errors.EXIT_INTERRUPTED, which a Ctrl-C may have left half imported


def main() -> int:
    try:
        from streams.cli import main as run

        code = run()
    except KeyboardInterrupt:
        sys.stderr.write("loopwatch: interrupted\n")
        code = _INTERRUPTED
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    return code


__all__ = ["main"]
