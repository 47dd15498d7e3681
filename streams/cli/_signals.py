"""SIGTERM turned into an exception for the length of a command, so it stops in order (as Ctrl-C does)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType


@contextlib.contextmanager
def sigterm_raises(exc: type[BaseException]) -> Iterator[None]:
    """Raise ``exc`` on SIGTERM inside the block, then put the previous handler back. Outside the main thread
    (a command run in-process) signals are not ours to handle, and nothing is installed."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise exc

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
