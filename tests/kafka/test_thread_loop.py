"""The consumer thread's loop skips only non-waiting polls, and only within POLL_EVERY of the last poll."""

from __future__ import annotations

import asyncio
import contextlib
import selectors
import socket
from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from streams.kafka.thread_loop import POLL_EVERY, CoalescingSelector, new_thread_loop


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@contextlib.contextmanager
def ready_selector(clock: Clock) -> Iterator[CoalescingSelector]:
    """A selector watching a socket that has a byte to read."""
    reader, writer = socket.socketpair()
    selector = CoalescingSelector(clock=clock)
    try:
        writer.send(b"x")
        selector.register(reader, selectors.EVENT_READ)
        yield selector
    finally:
        selector.close()
        reader.close()
        writer.close()


def test_a_non_waiting_poll_right_after_a_poll_is_skipped_and_the_next_one_due_is_made() -> None:
    clock = Clock()
    with ready_selector(clock) as selector:
        assert len(selector.select(0)) == 1  # the first poll is made
        clock.now += POLL_EVERY / 2
        assert selector.select(0) == []  # skipped: the socket is read at the next poll due
        clock.now += POLL_EVERY / 2
        assert len(selector.select(0)) == 1


@given(since=st.floats(0, 2 * POLL_EVERY), timeout=st.one_of(st.none(), st.floats(1e-6, 0.01)))
def test_a_poll_that_may_wait_is_always_made(since: float, timeout: float | None) -> None:
    """Only a poll with no time to wait is skipped: a loop about to sleep always sees its ready sockets."""
    clock = Clock()
    with ready_selector(clock) as selector:
        selector.select(0)
        clock.now += since
        assert len(selector.select(timeout)) == 1


def test_the_thread_loop_runs_callbacks_and_reads_sockets() -> None:
    loop = new_thread_loop()
    try:

        async def echo() -> bytes:
            ours, theirs = socket.socketpair()
            theirs.send(b"ping")
            stream, transport = await asyncio.open_connection(sock=ours)
            try:
                return await asyncio.wait_for(stream.readexactly(4), 5)
            finally:
                transport.close()
                theirs.close()

        assert loop.run_until_complete(echo()) == b"ping"
        assert isinstance(getattr(loop, "_selector", None), CoalescingSelector)
    finally:
        loop.close()
