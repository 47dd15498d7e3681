"""SIGTERM turned into an exception for the length of a command, so it stops in order (as Ctrl-C does)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any


def _asyncio_sigint() -> Callable[[int, FrameType | None], Any] | None:
    """The SIGINT handler of the ``asyncio.run`` running now in this thread, if any: it cancels the main task,
    which then stops its clients in order, and raises ``KeyboardInterrupt`` once that task has ended."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return None
    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler) or handler is signal.default_int_handler:
        return None  # no runner handler (SIGINT ignored: a script's background job): raise as before
    return handler


@contextlib.contextmanager
def sigterm_raises(exc: type[BaseException]) -> Iterator[None]:
    """Raise ``exc`` on SIGTERM inside the block, then put the previous handler back. Outside the main thread
    (a command run in-process) signals are not ours to handle, and nothing is installed.

    Inside ``asyncio.run`` SIGTERM does what Ctrl-C does there: an exception raised in the handler broke out of
    the event loop, which then cancelled every task at once, aiokafka's sender among them, so that the producer's
    stop left its ``MessageAccumulator.close()`` pending ("Task was destroyed but it is pending!"). The
    ``KeyboardInterrupt`` the runner raises at the end becomes ``exc``."""
    terminated = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal terminated
        terminated = True
        sigint = _asyncio_sigint()
        if sigint is None:
            raise exc
        sigint(signal.SIGINT, frame)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:
        yield
        return
    try:
        yield
    except KeyboardInterrupt:
        if terminated and not issubclass(exc, KeyboardInterrupt):
            raise exc from None
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


_SETTLED = (signal.SIGINT, signal.SIGTERM)


def settle() -> None:
    """The command's effect is complete (a publish's records are confirmed): a Ctrl-C or SIGTERM from here changes
    nothing, so both are ignored until :func:`restored` puts the handlers back. A publish interrupted just after
    its summary ended with 130 or a traceback, and looked undone."""
    if threading.current_thread() is threading.main_thread():
        for signum in _SETTLED:
            signal.signal(signum, signal.SIG_IGN)


@contextlib.contextmanager
def restored() -> Iterator[None]:
    """Put back the handlers :func:`settle` replaced, for a caller that runs a command in-process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = [(signum, signal.getsignal(signum)) for signum in _SETTLED]
    try:
        yield
    finally:
        for signum, handler in saved:
            if handler is not None:
                signal.signal(signum, handler)
