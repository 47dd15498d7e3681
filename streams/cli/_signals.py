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
        if not _state.settled:  # a settled command keeps its handler (settle) until main ends
            signal.signal(signal.SIGTERM, previous)


_SETTLED = (signal.SIGINT, signal.SIGTERM)


class _State:
    settled = False  # the running command called settle()


_state = _State()


def _swallow_once(signum: int, frame: FrameType | None) -> None:
    """The first Ctrl-C or SIGTERM after :func:`settle` changes nothing; a second one ends the process at once
    (the system's default), so a command stuck after its work (a blocked stdout) can still be stopped."""
    signal.signal(signum, signal.SIG_DFL)


def settle() -> None:
    """The command's effect is complete (a publish's records are confirmed): a Ctrl-C or SIGTERM from here does
    not turn it into an interrupted one. A publish interrupted just after its summary ended with 130, a
    traceback from an exit hook or a kill by signal, and looked undone. The first such signal is swallowed, a
    second one still ends the process (:func:`_swallow_once`); :func:`restored` decides what remains after."""
    if threading.current_thread() is threading.main_thread():
        _state.settled = True
        for signum in _SETTLED:
            signal.signal(signum, _swallow_once)


@contextlib.contextmanager
def restored(*, exiting: bool) -> Iterator[None]:
    """Around one command: put back the handlers it changed (:func:`settle`), for a caller that runs commands
    in-process. With ``exiting`` (the console script, which exits next) a settled command's signals are ignored
    instead: the interpreter resets its own handlers to the system's default as it exits, where a signal would
    kill the finished command, but it keeps an ignored signal ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = [(signum, signal.getsignal(signum)) for signum in _SETTLED]
    _state.settled = False
    try:
        yield
    finally:
        keep = exiting and _state.settled
        _state.settled = False
        for signum, handler in saved:
            if keep:
                signal.signal(signum, signal.SIG_IGN)
            elif handler is not None:
                signal.signal(signum, handler)
