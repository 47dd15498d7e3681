"""The consumer thread's event loop: it looks for ready sockets without waiting only every so often.

Faust runs aiokafka on a thread of its own, with its own asyncio loop, beside the worker's loop on the main
thread, and the two take turns at the GIL. An asyncio loop polls its sockets before every round of ready
callbacks, with a zero timeout when it will not wait, and every poll lets the GIL go. A thread that lets it go
while the main thread is applying a batch gets it back only when the main thread waits for I/O itself or has
held the GIL for a whole switch interval (5 ms), and CPython starts that interval again each time the holder
lets the GIL go, which the main loop's own polls do many times a second. So every round of the consumer's loop
could delay the fetched records by milliseconds: a fetch response is read, parsed, taken ahead and answered by
the next fetch over several rounds.

This loop skips a poll that would not wait when the last one was under :data:`POLL_EVERY` ago, so the consumer
thread runs the callbacks that are ready in one hold of the GIL. Sockets are still polled at least every
:data:`POLL_EVERY` while the thread has work, and whenever it would wait: nothing is read later than that, and
an idle consumer behaves as before (docs/performance.md, "The consumer thread's polls").
"""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Callable
from typing import Final

__all__ = ["POLL_EVERY", "CoalescingSelector", "new_thread_loop"]

#: Seconds a non-waiting poll may be skipped for after the last poll: well under the consumer's fetch round trip
#: and under the GIL's switch interval, so a fetch answer is never read later than this while the thread works.
POLL_EVERY: Final = 0.002


class CoalescingSelector(selectors.DefaultSelector):
    """The platform's selector, answering "nothing ready" without a system call to a non-waiting poll that
    comes within ``every`` seconds of the last real one."""

    def __init__(self, every: float = POLL_EVERY, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._every = every
        self._clock = clock
        self._polled = float("-inf")

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout <= 0 and self._clock() - self._polled < self._every:
            return []
        ready: list[tuple[selectors.SelectorKey, int]] = super().select(timeout)
        self._polled = self._clock()
        return ready


def new_thread_loop() -> asyncio.AbstractEventLoop:
    """A new event loop polling through a :class:`CoalescingSelector`, for a thread beside the main loop."""
    return asyncio.SelectorEventLoop(CoalescingSelector())
