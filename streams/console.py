"""The ``loopwatch`` console script: :func:`streams.cli.main`, and the half second before it runs.

Importing the command line takes about half a second, and a Ctrl-C then ended in a ``KeyboardInterrupt``
traceback, a SIGTERM in a kill by signal (143, a status the exit table does not have). Both now end with one line
and 130, as an interrupted command does. Once a command runs, its own handling applies (``streams.cli``), and
``exiting`` lets a command that finished its work keep its status through the interpreter's exit.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType

_INTERRUPTED = 130  # streams.errors.EXIT_INTERRUPTED, which a Ctrl-C may have left half imported


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> int:
    try:
        signal.signal(signal.SIGTERM, _terminated)
        try:
            from streams.cli import main as run
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        return run(exiting=True)
    except KeyboardInterrupt:
        sys.stderr.write("loopwatch: interrupted\n")
        return _INTERRUPTED


__all__ = ["main"]
