"""The consumer thread's loop skips only non-waiting polls, and only within POLL_EVERY of the last poll."""

from __future__ import annotations

import asyncio
import selectors
import socket

from hypothesis import given
from hypothesis import strategies as st

from streams.kafka.thread_loop import POLL_EVERY, CoalescingSelector, new_thread_loop


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ready_selector(clock: Clock) -> tuple[CoalescingSelector, socket.socket, socket.socket]:
    """A selector watching a socket that has a byte to read."""
    reader, writer = socket.socketpair()
    writer.send(b"x")
    selector = CoalescingSelector(clock=clock)
    selector.register(reader, selectors.EVENT_READ)
    return selector, reader, writer


def test_a_non_waiting_poll_right_after_a_poll_is_skipped_and_the_next_one_due_is_made() -> None:
    clock = Clock()
    selector, reader, writer = ready_selector(clock)
    try:
        assert len(selector.select(0)) == 1  # the first poll is made
        clock.now += POLL_EVERY / 2
        assert selector.select(0) == []  # skipped: the socket is read at the next poll due
        clock.now += POLL_EVERY / 2
        assert len(selector.select(0)) == 1
    finally:
        selector.close()
        reader.close()
        writer.close()


@given(since=st.floats(0, 2 * POLL_EVERY), timeout=st.one_of(st.none(), st.floats(1e-6, 0.01)))
def test_a_poll_that_may_wait_is_always_made(since: float, timeout: float | None) -> None:
    """Only a poll with no time to wait is skipped: a loop about to sleep always sees its ready sockets."""
    clock = Clock()
    selector, reader, writer = ready_selector(clock)
    try:
        selector.select(0)
        clock.now += since
        assert len(selector.select(timeout)) == 1
    finally:
        selector.close()
        reader.close()
        writer.close()


def test_the_thread_loop_runs_callbacks_and_reads_sockets() -> None:
    loop = new_thread_loop()
    try:

        async def echo() -> bytes:
            reader, writer = socket.socketpair()
            writer.send(b"ping")
            stream, _ = await asyncio.open_connection(sock=reader)
            try:
                return await asyncio.wait_for(stream.readexactly(4), 5)
            finally:
                _.close()
                writer.close()

        assert loop.run_until_complete(echo()) == b"ping"
        assert isinstance(getattr(loop, "_selector", None), CoalescingSelector)
    finally:
        loop.close()
